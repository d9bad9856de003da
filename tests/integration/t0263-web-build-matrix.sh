#!/bin/bash
# t0263-web-build-matrix.sh -- the build matrix in a browser (docs/build-farm.md,
# "The build matrix"): two toolchains registered (cpu, CUDA 13.0), the
# default builds of a public (acme/relu) and a private (acme/secret) kernel
# queued, one failed by its worker with a log that holds <script>; then
# tests/web/build_matrix.mjs drives Debian's chromium (playwright-core):
# the builds page and the kernel page against GET .../builds?commit= for a
# writer and a read member, the writer's cancel, retry and Build missing
# buttons, the escaped log. Screenshots go to tests/web/artifacts/.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP $CHROMIUM not installed (apt-get install chromium)"; exit 0; }
WEB_DIR="$KHUB_SRC/tests/web"
[ -d "$WEB_DIR/node_modules/playwright-core" ] || { echo "1..0 # SKIP no playwright-core in $WEB_DIR (npm ci)"; exit 0; }

khub_setup
log=$TEST_DIR/setup.log
for cmd in "org create acme" "user create alice" "user create bob" "member set acme alice write" "member set acme bob read"; do
	khub admin $cmd >>"$log" 2>&1 || bail "khub admin $cmd failed"
done
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
BOB=$(khub admin token create bob --scope read 2>>"$log" | tail -n 1)
W1=$(khub admin worker add w1 2>>"$log" | tail -n 1)
W2=$(khub admin worker add w2 2>>"$log" | tail -n 1)
RELU_SHA=$(khub import "$KHUB_SRC/examples/relu" --repo acme/relu --type kernel 2>>"$log")
SECRET_SHA=$(khub import "$KHUB_SRC/examples/relu" --repo acme/secret --type kernel --private 2>>"$log")
[[ "$RELU_SHA $SECRET_SHA" =~ ^[0-9a-f]{40}\ [0-9a-f]{40}$ ]] || bail "khub import failed"
khub_start

B=$TEST_DIR/b
CU=torch211-cxx11-cu130-x86_64-linux
CPU=torch211-cxx11-cpu-x86_64-linux
api POST /api/workers/register -H "Authorization: Bearer $W1" --json "{\"name\":\"w1\",\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$CPU\"]}]}"
st1=$STATUS
api POST /api/workers/register -H "Authorization: Bearer $W2" --json "{\"name\":\"w2\",\"toolchains\":[{\"name\":\"cuda13\",\"variants\":[\"$CU\"]}]}"
is "$st1 $STATUS" "200 200" "two toolchains registered: $CPU and $CU"
api POST /api/kernels/acme/relu/builds -H "Authorization: Bearer $ALICE" --json '{}'
st1=$STATUS
api POST /api/kernels/acme/secret/builds -H "Authorization: Bearer $ALICE" --json '{}'
is "$st1 $STATUS $(jq -r '.queued | length' "$B")" "202 202 2" "the default builds of acme/relu and acme/secret (private) queued"
api POST /api/workers/claim -H "Authorization: Bearer $W1" --json "{\"variants\":[\"$CPU\"],\"wait_seconds\":0}"
FAILED=$(jq -r .build.id "$B")
ATT=$(jq -r .build.attempt "$B")
is "$STATUS $(jq -r .build.repo "$B")" "200 acme/relu" "w1 claims acme/relu's $CPU build ($FAILED)"
printf 'compiling\n<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">\n' >"$TEST_DIR/hostile.log"
STATUS=$(curl -s -o "$B" -w '%{http_code}' -X POST -H "Authorization: Bearer $W1" --data-binary "@$TEST_DIR/hostile.log" \
	"$KHUB_URL/api/builds/$FAILED/log?offset=0&attempt=$ATT")
st1=$STATUS
api POST "/api/builds/$FAILED/fail" -H "Authorization: Bearer $W1" --json '{"error":"compile error","retry":false}'
is "$st1 $STATUS" "200 200" "… writes a log holding <script> and fails it"

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" ALICE_TOKEN="$ALICE" BOB_TOKEN="$BOB" RELU_SHA="$RELU_SHA" \
	SECRET_SHA="$SECRET_SHA" FAILED_ID="$FAILED" CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" \
	timeout 600 node tests/web/build_matrix.mjs 2>&1)
rc=$?
tap_relay "$out" "$rc"
khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
