#!/bin/bash
# t0317-kernels-sort-bench.sh -- the kernel listing sorted by a workload's
# farm result: GET /api/kernels?sort=bench&workload=W[&device=D] and
# /kernels?sort=bench&workload=W order kernels by the median of the farm
# runs' means on W (of the newest commit the farm measured), fastest first;
# kernels without a farm result for W come last; users' runs never count;
# without sort=bench the listing's items are as before (no "benchmark").
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
V1=torch211-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json
log=$TEST_DIR/setup.log
khub_accounts	# alice, admin of acme, $ALICE
FB_WORKER=$(khub admin worker add bench1 2>>"$log" | tail -n 1)
khub_start
. "$KHUB_SRC/tests/lib/farm_bench.sh"

fb_api "$FB_WORKER" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":8,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
is "$ST" 200 "the worker registers"
# relu: measured at 0.1 ms first, 0.5 ms at its newest commit (that counts)
fb_kernel acme/relu "$ALICE"; R1=$FB_SHA
fb_job acme/relu "$R1" "$FB_WORKER" "$V1"; JR1=$FB_JOB
fb_run "$JR1" "$R1" "NVIDIA H100" "Act.big 0.10 0.01"
is "$ST" 200 "relu's first commit: 0.1 ms on the H100"
fb_commit acme/relu "$ALICE" $'import torch\n\ndef relu(x):\n    return torch.relu(x) * 1\n'; R2=$FB_SHA
fb_job acme/relu "$R2" "$FB_WORKER" "$V1"; JR2=$FB_JOB
fb_run "$JR2" "$R2" "NVIDIA H100" "Act.big 0.50 0.01; Act.small 0.05 0.01"
is "$ST" 200 "relu's newest commit: 0.5 ms on the H100"
# gelu: 0.2 ms on the L4 only
fb_kernel acme/gelu "$ALICE"; G1=$FB_SHA
fb_job acme/gelu "$G1" "$FB_WORKER" "$V1"
fb_run "$FB_JOB" "$G1" "NVIDIA L4" "Act.big 0.20 0.01"
is "$ST" 200 "gelu: 0.2 ms on the L4"
# silu: a farm result of another workload only, and alice's own (fast) run of Act.big
fb_kernel acme/silu "$ALICE"; S1=$FB_SHA
fb_job acme/silu "$S1" "$FB_WORKER" "$V1"
fb_run "$FB_JOB" "$S1" "NVIDIA H100" "Act.small 0.01 0.001"
is "$ST" 200 "silu: a farm result of Act.small only"
fb_api "$ALICE" POST /api/kernels/acme/silu/benchmarks "$(fb_payload "$S1" "NVIDIA H100" "Act.big 0.01 0.001")"
is "$ST" 200 "alice's own run of silu's Act.big (no farm run)"

order() { jq -c '[.[] | [.id, .benchmark.medianMs]]' "$FB_BODY"; }
fb_api "" GET "/api/kernels?sort=bench&workload=Act.big"
is "$ST $(order)" '200 [["acme/gelu",0.2],["acme/relu",0.5],["acme/silu",null]]' \
	"sort=bench&workload=Act.big: gelu (0.2 ms) before relu (its newest commit's 0.5 ms), silu (no farm result) last"
is "$(jq -c '.[0].benchmark' "$FB_BODY")" '{"workload":"Act.big","device":null,"medianMs":0.2}' "each item says what it was sorted by"
fb_api "" GET "/api/kernels?sort=bench&workload=Act.big&direction=-1"
is "$(order)" '[["acme/relu",0.5],["acme/gelu",0.2],["acme/silu",null]]' "direction=-1: slowest first, still none last"
fb_api "" GET "/api/kernels?sort=bench&workload=Act.big&device=h100"
is "$(jq -c '[.[] | .benchmark.medianMs]' "$FB_BODY") $(jq -r '.[0].id' "$FB_BODY")" '[0.5,null,null] acme/relu' \
	"device=h100: relu alone has a result there (gelu ran on the L4)"
fb_api "" GET "/api/kernels?sort=bench&workload=Act.small"
is "$(order)" '[["acme/silu",0.01],["acme/relu",0.05],["acme/gelu",null]]' "another workload, another order"
fb_api "" GET "/api/kernels?sort=bench&workload=Act.big&limit=1"
curl -s -D "$TEST_DIR/h" -o /dev/null "$KHUB_URL/api/kernels?sort=bench&workload=Act.big&limit=1"
like "$(grep -i '^link:' "$TEST_DIR/h")" 'sort=bench&workload=Act.big&limit=1&cursor=1' "the next page's Link keeps the workload"
fb_api "" GET "/api/kernels?sort=bench"
is "$ST" 400 "sort=bench without workload=: 400"
fb_api "" GET "/api/kernels"
is "$ST $(jq -c '[.[] | has("benchmark")] | any' "$FB_BODY")" "200 false" "without sort=bench the items are as before"

curl -s "$KHUB_URL/kernels?sort=bench&workload=Act.big" | tr -d '\n' >"$TEST_DIR/page.html"
is "$(grep -o '<tr data-id="[^"]*"' "$TEST_DIR/page.html" | cut -d'"' -f2 | tr '\n' ' ')" "acme/gelu acme/relu acme/silu " \
	"/kernels?sort=bench&workload=Act.big: the same order"
like "$(cat "$TEST_DIR/page.html")" '<option value="bench" selected>' "the form keeps sort=bench"
like "$(cat "$TEST_DIR/page.html")" 'Act.big: <strong>0.2 ms</strong> median on the farm' "the page shows each kernel's result"
like "$(cat "$TEST_DIR/page.html")" 'Act.big: no farm result' "… and says when there is none"

done_testing
