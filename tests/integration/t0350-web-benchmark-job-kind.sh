#!/bin/bash
# t0350-web-benchmark-job-kind.sh -- benchmark jobs are labelled, never a
# variant's build state (docs/build-farm.md, "The build matrix", "Benchmark
# jobs"): a private kernel with benchmarks/ gets a variant published by the
# farm (the real worker routes, a made-up output), then two benchmark jobs of
# that commit and variant are queued by hand (POST …/benchmarks/run), one on a
# device whose name holds markup. GET …/builds?commit= keeps them out of
# `variants` (the variant stays `published`) and lists them in `benchmarks`
# with their kind and device; GET …/builds gives every job its `kind`. Through
# a session (curl with a real cookie): the builds page, the commit's page, the
# benchmark job's log page and /admin#builds show a "benchmark" label with the
# device (escaped), the variant's row stays published; anonymous callers get
# the private repo's pages as 404.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/campaign.sh"	# api, build_it (w1's claim and made-up output), state_of, $V1
khub_setup
B=$TEST_DIR/b
export KHUB_ABI_POLICY=warn
log=$TEST_DIR/setup.log
khub_accounts	# alice, admin of acme, $ALICE
khub admin user create root --site-admin >>"$log" 2>&1 || bail "no site admin"
ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
W1=$(khub admin worker add w1 --private 2>>"$log" | tail -n 1)
khub_start
b64s() { printf '%s' "$1" | base64 -w0; }

# ---- a private kernel with benchmarks/, v1 published by the farm ------------------------------
TOML=$(printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n')
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":true,\"files\":[{\"path\":\"build.toml\",\"content\":\"$(b64s "$TOML")\",\"encoding\":\"base64\"},{\"path\":\"torch-ext/relu/__init__.py\",\"content\":\"$(b64s 'from ._ops import ops')\",\"encoding\":\"base64\"},{\"path\":\"benchmarks/benchmark_relu.py\",\"content\":\"$(b64s 'import torch')\",\"encoding\":\"base64\"}]}"
is "$ST" 200 "acme/relu (private, with benchmarks/) created"
C1=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/relu.git" rev-parse main)
api "$W1" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
is "$ST" 200 "w1 registers $V1"
api "$ALICE" POST /api/kernels/acme/relu/builds "{\"revision\":\"$C1\",\"variants\":[\"$V1\"]}"
like "$ST" "^20[02]$" "$V1 of $C1 queued (by this request or by the push)"
api "$ALICE" GET "/api/kernels/acme/relu/builds?state=queued"
J=$(jq -r --arg v "$V1" '[.builds[] | select(.variant == $v and .kind == "build")][0].id' "$B")
build_it
is "$(state_of "$J")" succeeded "build #$J is published"

# ---- two benchmark jobs of the same commit and variant ------------------------------------------
DEV1="NVIDIA H100 80GB HBM3"
DEV2='<b id="pwn">MI300X</b>'
api "$ALICE" POST /api/kernels/acme/relu/benchmarks/run "$(jq -nc --arg d "$DEV1" --arg c "$C1" '{commit: $c, device: $d}')"
BJ1=$(jq -r '.jobs[0].id' "$B")
is "$ST $(jq -r '.jobs | length' "$B")" "200 1" "a benchmark job of $V1 on $DEV1 queued (#$BJ1)"
api "$ALICE" POST /api/kernels/acme/relu/benchmarks/run "$(jq -nc --arg d "$DEV2" --arg c "$C1" '{commit: $c, device: $d}')"
BJ2=$(jq -r '.jobs[0].id' "$B")
is "$ST" 200 "a second one on a device named with markup (#$BJ2)"

# ---- the API ---------------------------------------------------------------------------------------
api "$ALICE" GET "/api/kernels/acme/relu/builds?commit=$C1"
is "$ST $(jq -c '[.variants[] | [.id, .variant, .kind, .status]]' "$B")" "200 [[$J,\"$V1\",\"build\",\"published\"]]" \
	"GET …/builds?commit=: variants holds the build only, still published (no benchmark job is its state)"
is "$(jq -c '[.benchmarks[] | [.id, .kind, .variant, .device, .status]]' "$B")" \
	"$(jq -nc --argjson a "$BJ1" --argjson b "$BJ2" --arg v "$V1" --arg d1 "$DEV1" --arg d2 "$DEV2" \
		'[[$b, "benchmark", $v, $d2, "queued"], [$a, "benchmark", $v, $d1, "queued"]]')" \
	"… benchmarks lists both jobs with kind, variant and device"
api "$ALICE" GET "/api/kernels/acme/relu/builds"
is "$(jq -c '[.builds[] | [.id, .kind]] | sort' "$B")" "[[$J,\"build\"],[$BJ1,\"benchmark\"],[$BJ2,\"benchmark\"]]" \
	"GET …/builds: every job has its kind"
is "$(jq -c '[.matrices[0].variants[].id, (.matrices[0].benchmarks | length)]' "$B")" "[$J,2]" \
	"… the newest matrix: the build as the variant's cell, the two benchmark jobs apart"

# ---- the pages, through a session --------------------------------------------------------------------
login() {	# login NAME TOKEN: a session in $TEST_DIR/NAME.jar
	local jar=$TEST_DIR/$1.jar csrf
	curl -s -c "$jar" -o "$TEST_DIR/login.html" "$KHUB_URL/login"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/login.html" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$2" "$KHUB_URL/login"
}
page() { curl -s -b "$TEST_DIR/$1.jar" -o "$B" -w '%{http_code}' "$KHUB_URL$2"; }	# page NAME PATH -> body in $B
login alice "$ALICE"
ESC2='&lt;b id=&quot;pwn&quot;&gt;MI300X&lt;/b&gt;'
for path in /kernels/acme/relu/builds "/kernels/acme/relu/builds?commit=$C1"; do
	is "$(page alice "$path")" 200 "alice's $path"
	grep -q "<tr data-variant=\"$V1\" data-build=\"$J\">.*data-status=\"published\"" "$B"
	ok $? "… the variant's row is build #$J, published"
	grep -o '<span class="badge build-kind" data-kind="benchmark">benchmark</span>' "$B" | wc -l | grep -qx 2
	ok $? "… two rows labelled benchmark"
	grep -q "<tr data-kind=\"benchmark\" data-variant=\"$V1\" data-device=\"$DEV1\" data-build=\"$BJ1\">.*benchmark</span> on <span class=\"build-device\">$DEV1</span>" "$B"
	ok $? "… job #$BJ1: $V1 on $DEV1"
	grep -q "<span class=\"build-device\">$ESC2</span>" "$B" && ! grep -q '<b id="pwn">' "$B"
	ok $? "… job #$BJ2's device is shown escaped"
done
is "$(page alice "/kernels/acme/relu/builds/$BJ1/log")" 200 "alice's log page of benchmark job #$BJ1"
grep -q "<h2>Benchmark job $BJ1: <span class=\"mono\">$V1</span> <span class=\"badge build-kind\" data-kind=\"benchmark\">benchmark</span> on <span class=\"build-device\">$DEV1</span></h2>" "$B"
ok $? "… headed Benchmark job, labelled, with its device"
page alice "/kernels/acme/relu/builds/$J/log" >/dev/null
grep -q "<h2>Build $J: <span class=\"mono\">$V1</span> </h2>" "$B" && ! grep -q 'build-kind' "$B"
ok $? "the build's log page has no benchmark label"
login root "$ROOT"
is "$(page root /admin)" 200 "/admin for the site admin"
grep -q "<tr data-kind=\"benchmark\"><th scope=\"row\" class=\"num\"><a class=\"build-log\" href=\"/kernels/acme/relu/builds/$BJ1/log\">$BJ1</a>.*<td>$V1 <span class=\"badge build-kind\" data-kind=\"benchmark\">benchmark</span> on <span class=\"build-device\">$DEV1</span></td>" "$B"
ok $? "/admin#builds: job #$BJ1 labelled benchmark with its device"
grep -q "<tr data-kind=\"build\"><th scope=\"row\" class=\"num\"><a class=\"build-log\" href=\"/kernels/acme/relu/builds/$J/log\">$J</a>.*<td>$V1</td>" "$B"
ok $? "… build #$J is a build, unlabelled"
ST=$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/kernels/acme/relu/builds/$BJ1/log")
is "$ST" 404 "anonymous: the private repo's benchmark log page is a 404"
khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
