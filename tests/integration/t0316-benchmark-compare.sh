#!/bin/bash
# t0316-benchmark-compare.sh -- comparing two versions (v1 against v2) or
# two variants per device and workload from the farm's runs: GET
# …/benchmarks/compare gives both medians, min–max, q1–q3, the spread and
# the change in %, marks regressions by the rule of …/regressions (same
# rows, same threshold setting), leaves users' runs out unless asked, and
# answers 404 for a private repo to whoever may not read it; the kernel
# page shows the same comparison as a server-rendered table.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
V1=torch211-cxx11-cpu-x86_64-linux
V0=torch210-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s", "%s"]}}\n' "$V1" "$V0" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json
log=$TEST_DIR/setup.log
khub_accounts	# alice, admin of acme, $ALICE
khub admin user create bob >>"$log" 2>&1
BOB=$(khub admin token create bob --scope read 2>>"$log" | tail -n 1)
FB_WORKER=$(khub admin worker add bench1 2>>"$log" | tail -n 1)
PRIV=$(khub admin worker add priv --org acme --private 2>>"$log" | tail -n 1)
khub_start
. "$KHUB_SRC/tests/lib/farm_bench.sh"

fb_kernel acme/relu "$ALICE"
is "$ST" 200 "acme/relu created"
C1=$FB_SHA
fb_commit acme/relu "$ALICE" $'import time\nimport torch\n\ndef relu(x):\n    time.sleep(0.0005)\n    return torch.relu(x)\n'
C2=$FB_SHA
like "$C1 $C2" '^[0-9a-f]{40} [0-9a-f]{40}$' "two commits (the second one sleeps)"
fb_api "$ALICE" POST /api/kernels/acme/relu/branch/v1 "{\"startingPoint\":\"$C1\"}"
is "$ST" 200 "branch v1 at the first commit"
fb_api "$ALICE" POST /api/kernels/acme/relu/branch/v2 "{\"startingPoint\":\"$C2\"}"
is "$ST" 200 "branch v2 at the second"

fb_api "$FB_WORKER" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":4,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\",\"$V0\"]}]}"
is "$ST" 200 "the worker registers"
fb_job acme/relu "$C1" "$FB_WORKER" "$V1"; J1=$FB_JOB
fb_job acme/relu "$C2" "$FB_WORKER" "$V1"; J2=$FB_JOB
like "$J1 $J2" '^[0-9]+ [0-9]+$' "the worker holds a job of each commit"

fb_run "$J1" "$C1" cpu "Relu.big 1.00 0.05; Relu.small 1.00 0.05; Relu.noisy 1.00 0.40"
is "$ST" 200 "v1's first farm run"
fb_run "$J1" "$C1" cpu "Relu.big 1.02 0.05; Relu.small 1.02 0.05; Relu.noisy 1.02 0.40"
is "$ST" 200 "v1's second farm run"
fb_run "$J1" "$C1" "NVIDIA H200" "Relu.big 0.10 0.01"
is "$ST" 200 "v1 on the H200"
fb_run "$J2" "$C2" cpu "Relu.big 1.50 0.05; Relu.small 1.04 0.05; Relu.noisy 1.30 0.40"
is "$ST" 200 "v2 on the cpu: Relu.big 48.5 % slower"
fb_run "$J2" "$C2" "NVIDIA H200" "Relu.big 0.08 0.01"
is "$ST" 200 "v2 on the H200: faster"
fb_api "$ALICE" POST /api/kernels/acme/relu/benchmarks "$(fb_payload "$C1" cpu "Relu.big 9.00 0.05")"
is "$ST" 200 "alice's own run of v1, far slower, is no farm run"

CMP=/api/kernels/acme/relu/benchmarks/compare
fb_api "" GET "$CMP?base=v1&head=v2"
is "$ST" 200 "GET …/compare?base=v1&head=v2 answers"
is "$(jq -c '[.base.revision, .base.commit == "'"$C1"'", .head.revision, .head.commit == "'"$C2"'", .source, .thresholdPct]' "$FB_BODY")" \
	'["v1",true,"v2",true,"farm",5]' "the sides named as versions, with their commits; farm runs; the 5 % default"
is "$(jq -c '[.results[] | [.device, .workload, .base.medianMs, .head.medianMs, .changePct, .change, .regression]] | sort' "$FB_BODY")" \
	'[["NVIDIA H200","Relu.big",0.1,0.08,-20,"faster",false],["cpu","Relu.big",1.01,1.5,48.5,"slower",true],["cpu","Relu.noisy",1.01,1.3,28.7,"slower",false],["cpu","Relu.small",1.01,1.04,3,"slower",false]]' \
	"per device and workload: both medians and the change; 48.5 % slower is a regression, 3 % is under the threshold, 28.7 % is within the spread"
is "$(jq -c '.results[] | select(.device == "cpu" and .workload == "Relu.big") | [.base.runs, .base.minMs, .base.maxMs, .base.q1Ms, .base.q3Ms, .base.spreadMs, .head.runs] | map(. * 1000 | round)' "$FB_BODY")" \
	'[2000,1000,1020,1005,1015,50,1000]' "the base's spread: runs, min–max and q1–q3 of the runs' means, the spread (largest std)"
jq -c '[.results[] | select(.regression) | [.device, .workload]]' "$FB_BODY" >"$TEST_DIR/cmp_regs"
fb_api "" GET "/api/kernels/acme/relu/benchmarks/regressions?revision=$C2"
is "$(cat "$TEST_DIR/cmp_regs")" "$(jq -c '[.regressions[] | [.device, .workload]]' "$FB_BODY")" \
	"the comparison's regressions are …/regressions' for v2 (one rule)"

fb_api "" GET "$CMP?base=v1&head=v2&gpu=h200"
is "$(jq -c '[.results[] | .device]' "$FB_BODY")" '["NVIDIA H200"]' "?gpu= keeps one device"
fb_api "" GET "$CMP?base=v1&head=v2&variant=$V1&source=maintainer"
is "$(jq -c '[.source, [.results[] | [.workload, .base.medianMs, .head]]]' "$FB_BODY")" '["maintainer",[["Relu.big",9,null]]]' \
	"?source=maintainer: alice's run alone (the farm's are not mixed in); the head has none"
fb_api "" GET "$CMP?head=v2"
is "$ST" 400 "no base: 400"
fb_api "" GET "$CMP?base=v9&head=v2"
is "$ST $(jq -r .error "$FB_BODY" | grep -c v9)" "404 1" "a base that names nothing: 404 naming it"
fb_api "" GET "$CMP?base=v1&head=v2&variant=nonsense"
is "$ST" 400 "a variant that is none: 400"
fb_api "" GET "$CMP?base=v1&head=v2&source=everyone"
is "$ST" 400 "a source that is none: 400"

# ---- the kernel page ---------------------------------------------------------------------------
curl -s "$KHUB_URL/kernels/acme/relu" | tr -d '\n' >"$TEST_DIR/page.html"
SECTION=$(grep -o '<section aria-labelledby="cmp-h" id="compare">.*' "$TEST_DIR/page.html" | sed 's|</section>.*||')
like "$SECTION" '<option value="v1" selected>v1</option>' "the page compares the two newest versions by default: v1 …"
like "$SECTION" '<select id="cmp-head" name="head"><option value="v2" selected>' "… against v2, named as versions"
like "$SECTION" '<tr class="regressed"><td>cpu</td><td>Relu.big</td><td class="bench-change bench-slower bench-regression">\+48.5% slower <strong>\(regression\)</strong></td><td class="num">1.01</td><td class="num"[^>]*>1–1.02</td><td class="num">1.5</td><td class="num"[^>]*>1.5–1.5</td>' \
	"the server-rendered table: Relu.big on the cpu, medians, min–max, +48.5 % slower, a regression"
like "$SECTION" '<td>NVIDIA H200</td><td>Relu.big</td><td class="bench-change bench-faster">-20.0% faster</td><td class="num">0.1</td>' "the H200 is 20 % faster"
curl -s "$KHUB_URL/kernels/acme/relu?base=v7" | tr -d '\n' >"$TEST_DIR/page3.html"
like "$(grep -o '<section aria-labelledby="cmp-h".*' "$TEST_DIR/page3.html" | head -c 3000)" 'role="alert">v7 names no revision' \
	"a revision that names nothing is said so on the page"

# ---- two variants of one version -------------------------------------------------------------
fb_run "$J2" "$C2" cpu "Relu.big 0.70 0.02" 2.10.0
is "$ST" 200 "v2 on the cpu under torch 2.10 (the other variant)"
fb_api "" GET "$CMP?base=v2&baseVariant=$V0&headVariant=$V1&workload=Relu.big&gpu=cpu"
is "$(jq -c '[.base.revision, .base.variant, .head.revision, .head.variant, [.results[] | [.base.medianMs, .head.medianMs, .changePct, .regression]]]' "$FB_BODY")" \
	"[\"v2\",\"$V0\",\"v2\",\"$V1\",[[0.7,1.5,114.3,true]]]" "two variants of v2: torch 2.10 against torch 2.11 on the cpu"
curl -s "$KHUB_URL/kernels/acme/relu?base=v2&baseVariant=$V0&headVariant=$V1&head=v2" | tr -d '\n' >"$TEST_DIR/page2.html"
like "$(grep -o '<table class="bench-compare-farm">.*</table>' "$TEST_DIR/page2.html")" "<caption>v2 \\($V0\\) against v2 \\($V1\\).*<th>Base median</th>.*<td>cpu</td><td>Relu.big</td><td[^>]*>\\+114.3% slower <strong>\\(regression\\)</strong></td><td class=\"num\">0.7</td>" \
	"the page's form compares two variants too"
fb_api "" GET "$CMP?base=v1&head=v2&variant=$V1&gpu=cpu&workload=Relu.big"
is "$(jq -c '[.results[] | [.base.medianMs, .head.medianMs, .changePct, .regression]]' "$FB_BODY")" '[[1.01,1.5,48.5,true]]' \
	"?variant= keeps both sides to torch 2.11: v2 is 48.5 % slower there"

# ---- a private repo: 404 to outsiders ---------------------------------------------------------
fb_kernel acme/secret "$ALICE" private
is "$ST" 200 "a private kernel acme/secret"
S1=$FB_SHA
fb_api "$ALICE" POST /api/kernels/acme/secret/branch/v1 "{\"startingPoint\":\"$S1\"}"
fb_api "$PRIV" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":4,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
fb_job acme/secret "$S1" "$PRIV" "$V1"
FB_WORKER=$PRIV fb_run "$FB_JOB" "$S1" "NVIDIA H200" "Secret.run 0.5 0.01"
is "$ST" 200 "a farm run of the private kernel"
fb_api "$ALICE" GET "/api/kernels/acme/secret/benchmarks/compare?base=v1"
is "$ST $(jq -c '[.results[] | .workload]' "$FB_BODY")" '200 ["Secret.run"]' "its member alice compares it"
fb_api "" GET "/api/kernels/acme/secret/benchmarks"
LIST_ST=$ST
fb_api "" GET "/api/kernels/acme/secret/benchmarks/compare?base=v1"
is "$ST $(grep -c Secret "$FB_BODY")" "$LIST_ST 0" "anonymous: refused as …/benchmarks refuses ($LIST_ST), nothing of it"
like "$ST" '^40[14]$' "anonymous: 401 or 404, the Hub's repo-not-found"
fb_api "$BOB" GET "/api/kernels/acme/secret/benchmarks/compare?base=v1"
is "$ST $(grep -c Secret "$FB_BODY")" "404 0" "bob, no member: 404, nothing of it"

# ---- the threshold is the regressions' setting ---------------------------------------------------
khub_stop
export KHUB_BENCHMARK_REGRESSION_PCT=60
khub_start
fb_api "" GET "$CMP?base=v1&head=v2&variant=$V1&gpu=cpu&workload=Relu.big"
is "$(jq -c '[.thresholdPct, [.results[] | [.changePct, .regression]]]' "$FB_BODY")" "[60,[[48.5,false]]]" \
	"benchmark_regression_pct = 60: 48.5 % slower is no regression"

done_testing
