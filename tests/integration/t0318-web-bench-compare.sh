#!/bin/bash
# t0318-web-bench-compare.sh -- the farm comparison and the farm sort in a
# browser: farm runs seeded through the worker routes (tests/lib/
# farm_bench.sh), then tests/web/bench_compare.mjs checks the kernel page's
# "Compare on the farm" table (1366x900, 390x844, with and without
# JavaScript, its form) and /kernels?sort=bench in Debian's chromium.
# Screenshots go to tests/web/artifacts/ (git-ignored).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP $CHROMIUM not installed (apt-get install chromium)"; exit 0; }
WEB_DIR="$KHUB_SRC/tests/web"
[ -d "$WEB_DIR/node_modules/playwright-core" ] || { echo "1..0 # SKIP playwright-core not installed in $WEB_DIR"; exit 0; }

khub_setup
V1=torch211-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json
khub_accounts
FB_WORKER=$(khub admin worker add bench1 2>>"$TEST_DIR/setup.log" | tail -n 1)
khub_start
. "$KHUB_SRC/tests/lib/farm_bench.sh"

fb_api "$FB_WORKER" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":8,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
fb_kernel acme/relu "$ALICE"; C1=$FB_SHA
fb_api "$ALICE" POST /api/kernels/acme/relu/branch/v1 "{\"startingPoint\":\"$C1\"}"
fb_commit acme/relu "$ALICE" $'import time\nimport torch\n\ndef relu(x):\n    time.sleep(0.0005)\n    return torch.relu(x)\n'; C2=$FB_SHA
fb_api "$ALICE" POST /api/kernels/acme/relu/branch/v2 "{\"startingPoint\":\"$C2\"}"
fb_job acme/relu "$C1" "$FB_WORKER" "$V1"; J1=$FB_JOB
fb_job acme/relu "$C2" "$FB_WORKER" "$V1"; J2=$FB_JOB
fb_run "$J1" "$C1" cpu "Relu.big 1.00 0.05; Relu.small 1.00 0.05; Relu.noisy 1.00 0.40"
fb_run "$J1" "$C1" cpu "Relu.big 1.02 0.05; Relu.small 1.02 0.05; Relu.noisy 1.02 0.40"
fb_run "$J1" "$C1" "NVIDIA H200" "Relu.big 0.10 0.01"
fb_run "$J2" "$C2" cpu "Relu.big 1.50 0.05; Relu.small 1.04 0.05; Relu.noisy 1.30 0.40"
fb_run "$J2" "$C2" "NVIDIA H200" "Relu.big 0.08 0.01"
fb_kernel acme/gelu "$ALICE"; G1=$FB_SHA
fb_job acme/gelu "$G1" "$FB_WORKER" "$V1"
fb_run "$FB_JOB" "$G1" "NVIDIA H200" "Relu.big 0.20 0.01"
is "$ST" 200 "farm runs of acme/relu v1 and v2 and acme/gelu seeded through the worker routes"

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" \
	timeout 300 node tests/web/bench_compare.mjs 2>&1)
tap_relay "$out" "$?"
khub_stop
done_testing
