#!/bin/bash
# t0297-web-build-log-live.sh -- a build's log page follows the build live
# (docs/build-farm.md, "Live logs"): the build of a private kernel claimed
# by a worker driven by hand, then tests/web/build_log_live.mjs drives
# Debian's chromium (playwright-core): alice's session opens the log page
# while the build runs, the worker's chunks appear as it posts them (a
# <script> in a line shown as text, never run), the page stops following
# and shows the status when the build fails, and holds what the log route
# answers; without JavaScript the page shows the stored log. Screenshots
# go to tests/web/artifacts/.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP $CHROMIUM not installed (apt-get install chromium)"; exit 0; }
WEB_DIR="$KHUB_SRC/tests/web"
[ -d "$WEB_DIR/node_modules/playwright-core" ] || { echo "1..0 # SKIP no playwright-core in $WEB_DIR (npm ci)"; exit 0; }

khub_setup
log=$TEST_DIR/setup.log
for cmd in "org create acme" "user create alice" "member set acme alice write"; do
	khub admin $cmd >>"$log" 2>&1 || bail "khub admin $cmd failed"
done
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
W=$(khub admin worker add w1 --private 2>>"$log" | tail -n 1)
SECRET_SHA=$(khub import "$KHUB_SRC/examples/relu" --repo acme/secret --type kernel --private 2>>"$log")
[[ "$SECRET_SHA" =~ ^[0-9a-f]{40}$ ]] || bail "khub import failed"
khub_start

B=$TEST_DIR/b
CPU=torch211-cxx11-cpu-x86_64-linux
api POST /api/workers/register -H "Authorization: Bearer $W" --json "{\"name\":\"w1\",\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$CPU\"]}]}"
st1=$STATUS
api POST /api/kernels/acme/secret/builds -H "Authorization: Bearer $ALICE" --json "{\"variants\":[\"$CPU\"]}"
st2=$STATUS
api POST /api/workers/claim -H "Authorization: Bearer $W" --json "{\"variants\":[\"$CPU\"],\"wait_seconds\":0}"
JOB=$(jq -r .build.id "$B")
is "$st1 $st2 $STATUS $(jq -r .build.repo "$B")" "200 202 200 acme/secret" "w1 registers and claims acme/secret's $CPU build ($JOB)"

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" ALICE_TOKEN="$ALICE" WORKER_TOKEN="$W" JOB_ID="$JOB" \
	CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" timeout 600 node tests/web/build_log_live.mjs 2>&1)
tap_relay "$out" $?
khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
