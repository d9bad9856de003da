#!/bin/bash
# t0217-demo-kernel.sh -- what a new user's first page shows: the
# quickstart's demo kernel, seeded by the functions deploy/quickstart.sh
# runs (deploy/demo-seed.sh), has valid metadata in every variant, is
# compliant with the required build list (a Python-only kernel), and has
# its seeded downloads counted; a kernel page whose metadata is invalid
# says why, and why the revision is not compliant.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v jq >/dev/null 2>&1 || { echo "1..0 # SKIP jq not installed"; exit 0; }
khub_setup
. "$KHUB_SRC/deploy/demo-seed.sh"

log=$TEST_DIR/setup.log
check "demo_import: khub-demo/relu imported (main, v1) and its org trusted, as the quickstart does it" -- \
	demo_import "$KHUB_BIN"
khub admin user create admin --site-admin >>"$log" 2>&1
khub admin member set khub-demo admin admin >>"$log" 2>&1
TOKEN=$(khub admin token create admin --scope admin --token-name quickstart 2>>"$log" | tail -n 1)
khub_start --download-stats-flush-ms 200
check "demo_seed: benchmark runs and downloads through the API" -- demo_seed "$KHUB_URL" "$TOKEN"

B=$TEST_DIR/body
get() { ST=$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL$1"); }
j() { jq -r "$1" "$B" 2>/dev/null; }

for rev in v1 main; do
	get "/api/kernels/khub-demo/relu/variants?revision=$rev"
	is "$ST $(j '[.variants[] | "\(.name)=\(.metadata.status)"] | sort | join(" ")')" \
		"200 torch-cpu=ok torch-cuda=ok" "$rev: both variants' metadata.json are valid"
	is "$(j '[.variants[] | .metadata.id] | sort | join(" ")')" "_relu_cpu_demo _relu_cuda_demo" \
		"$rev: each has its own module id, as kernel-builder writes it"
	get "/api/kernels/khub-demo/relu/compliance?revision=$rev"
	is "$ST $(j '.versions[0].compliant') $(j '.versions[0].pythonOnly.present | join(" ")')" \
		"200 true torch-cpu torch-cuda" "$rev: compliant with the required build list, as a Python-only kernel"
done

get /api/kernels/khub-demo/relu/downloads
for _ in $(seq 1 600); do	# flushed every 200 ms; a bound on polls, not a timing margin
	[ "$(j .total)" = 2 ] && break
	sleep 0.2
	get /api/kernels/khub-demo/relu/downloads
done
is "$ST $(j .total)" "200 2" "the seeded downloads are counted (one per variant: one client, one hour)"
get /api/kernels/khub-demo/relu/benchmarks
is "$ST $(j 'length')" "200 4" "the four seeded benchmark runs are there"

curl -s -o "$TEST_DIR/page" "$KHUB_URL/kernels/khub-demo/relu"
like "$(grep -o 'id="compliance-summary">[^.]*' "$TEST_DIR/page")" '"badge ok">compliant<' "the demo's page says compliant"
is "$(grep -c 'metadata invalid' "$TEST_DIR/page")" 0 "… and no variant's metadata is invalid"

# ---- a kernel with the demo's old metadata.json ------------------------------------------------------
BROKEN=$TEST_DIR/broken
mkdir -p "$BROKEN/build/torch-cpu"
cp "$DEMO_KERNEL_DIR/build/torch-cpu/__init__.py" "$BROKEN/build/torch-cpu/"
printf '{"id": "acme/relu", "name": "relu", "version": 1, "license": "mit", "python-depends": [], "backend": {"type": "cpu"}}\n' \
	>"$BROKEN/build/torch-cpu/metadata.json"
khub import "$BROKEN" --repo acme/relu --branch main --message "broken" >>"$log" 2>&1
get "/api/kernels/acme/relu/variants?revision=main"
is "$(j '.variants[0].metadata.status') $(j '.variants[0].metadata.error')" \
	'invalid "id" must be a valid Python module name' "an id that is not a module name: the API says why"
curl -s -o "$TEST_DIR/page" "$KHUB_URL/kernels/acme/relu"
like "$(grep -o 'metadata invalid</span> <span class="why metadata-error">[^<]*' "$TEST_DIR/page" | head -1)" \
	'id(&quot;|")? must be a valid Python module name$' "the page shows that reason beside 'metadata invalid'"
like "$(grep -o 'id="compliance-summary">.*</p>' "$TEST_DIR/page")" \
	'not compliant</span> with the required build list: no system has all of its required variants with valid metadata, and there is no Python-only variant \(torch-cpu[^)]*\) with valid metadata\.' \
	"and says why the kernel is not compliant"
done_testing
