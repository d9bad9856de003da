#!/bin/bash
# t0301-benchmark-regressions.sh -- farm benchmark regressions: a worker
# submits farm runs (POST /api/builds/{id}/benchmark) for v1 and for a
# second commit whose Python wrapper sleeps; a workload whose median is
# more than benchmark_regression_pct slower than the previous version's on
# the same device, by more than both runs' spread, is a regression in
# GET …/benchmarks/regressions, on the kernel page and in the builds
# matrix (API and page), and a signed repo.benchmark webhook is delivered;
# a slowdown under the threshold, one within the spread, another device
# and the users' own runs are not regressions.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/farm_hooks.sh"
V1=torch211-cxx11-cpu-x86_64-linux
farm_hooks_hub bench1 1h "$V1"	# $ALICE, worker bench1 ($W1), the receiver ($RECV_PORT)
api() {	# api TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
farm_hooks_kernel $'import torch\n\ndef relu(x):\n    return torch.relu(x)\n'	# acme/relu at $C1
is "$CREATE_STATUS" 200 "acme/relu created"
GD=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
# the second commit: the wrapper sleeps before each call
printf 'import time\nimport torch\n\ndef relu(x):\n    time.sleep(0.0005)\n    return torch.relu(x)\n' >"$TEST_DIR/init2.py"
api "$ALICE" POST /api/kernels/acme/relu/commit/main "$(printf '{"key":"header","value":{"summary":"slower"}}\n{"key":"file","value":{"content":"%s","path":"torch-ext/relu/__init__.py","encoding":"base64"}}\n' "$(b64 "$TEST_DIR/init2.py")")"
C2=$(git --git-dir="$GD" rev-parse main)
isnt_same() { [ "$C1" != "$C2" ]; }
check "a second commit (a sleep in the wrapper)" -- isnt_same
SECRET=bench-hook-secret-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)
api "$ALICE" POST /api/kernels/acme/relu/webhooks "{\"url\":\"http://127.0.0.1:$RECV_PORT/bench\",\"secret\":\"$SECRET\",\"scopes\":[\"repo.benchmark\"]}"
is "$ST $(jq -c .webhook.scopes "$B")" '201 ["repo.benchmark"]' "a repo.benchmark hook to the receiver"

api "$W1" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":4,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
is "$ST" 200 "the worker registers"
job_of() {	# job_of SHA -> $JOB: a job of SHA claimed by the worker
	api "$ALICE" POST /api/kernels/acme/relu/builds "{\"revision\":\"$1\",\"variants\":[\"$V1\"]}"
	JOB=
	for _ in 1 2 3; do
		api "$W1" POST /api/workers/claim "{\"variants\":[\"$V1\"]}"
		[ "$ST" = 200 ] || break
		[ "$(jq -r .build.commit "$B")" = "$1" ] && { JOB=$(jq -r .build.id "$B"); break; }
	done
}
job_of "$C1"; J1=$JOB
job_of "$C2"; J2=$JOB
like "$J1 $J2" '^[0-9]+ [0-9]+$' "the worker holds a job of each commit"

# farm SHA DEVICE "WORKLOAD MEAN STD; ..." -> the kernels payload
payload() {
	jq -n --arg sha "${1:0:7}" --arg dev "$2" --arg spec "$3" '
	  {results: [$spec | split(";")[] | ltrimstr(" ") | split(" ") | {workload: .[0],
	     timingResults: {mean_ms: (.[1] | tonumber), std_ms: (.[2] | tonumber),
	       min_ms: ((.[1] | tonumber) - (.[2] | tonumber)), max_ms: ((.[1] | tonumber) + (.[2] | tonumber)),
	       q1_ms: 0, q3_ms: 0, iqr_ms: 0, outliers: 0, iterations: 100}, verified: true}],
	   machineInfo: {gpu: $dev, backend: "CPU", pytorchVersion: "2.11.0", os: "Linux", cpu: "x86_64"},
	   kernelCommitSha: $sha, benchmarkScriptPath: "benchmarks/benchmark_relu.py"}'
}
farm() { api "$W1" POST "/api/builds/$1/benchmark" "$(payload "$2" "$3" "$4")"; }
REG=/api/kernels/acme/relu/benchmarks/regressions

farm "$J1" "$C1" cpu "Relu.big 1.00 0.05; Relu.small 1.00 0.05; Relu.noisy 1.00 0.40"
is "$ST" 200 "v1's first farm run"
farm "$J1" "$C1" cpu "Relu.big 1.02 0.05; Relu.small 1.02 0.05; Relu.noisy 1.02 0.40"
is "$ST" 200 "v1's second farm run (the median of two)"
farm "$J1" "$C1" "NVIDIA H200" "Relu.big 0.10 0.01"
is "$ST" 200 "v1 on another device"
api "" GET "$REG"
is "$ST $(jq -c .regressions "$B")" "200 []" "nothing to compare v1 with: no regression"

# the users' own upload of a slower C2 never counts
api "$ALICE" POST /api/kernels/acme/relu/benchmarks "$(payload "$C2" cpu "Relu.big 9.00 0.05")"
is "$ST" 200 "alice's maintainer run of the second commit, far slower"
api "" GET "$REG"
is "$(jq -c .regressions "$B")" "[]" "a user's run is no farm regression"
is "$(recv_count)" 0 "no webhook so far"

farm "$J2" "$C2" cpu "Relu.big 1.50 0.05; Relu.small 1.04 0.05; Relu.noisy 1.30 0.40"
is "$ST" 200 "the second commit's farm run"
api "" GET "$REG"
is "$(jq -c '[.thresholdPct, (.regressions | length)]' "$B")" "[5,1]" \
	"one regression at the default 5 %: 3 % slower is under it, 30 % within the runs' spread is noise"
is "$(jq -c '.regressions[0] | [.commit, .previousCommit, .device, .workload, .medianMs, .previousMedianMs, .slowerPct]' "$B")" \
	"[\"$C2\",\"$C1\",\"cpu\",\"Relu.big\",1.5,1.01,48.5]" \
	"Relu.big on cpu: median 1.5 ms against v1's 1.01 ms, 48.5 % slower"
api "" GET "$REG?revision=$C1"
is "$(jq -c '.regressions | length' "$B")" 0 "?revision= of v1: none"

# ---- the webhook ----------------------------------------------------------------------------
recv_wait 1
ok $? "the receiver got a delivery"
recv_signed 1 "$SECRET"
ok $? "signed with the hook's secret"
is "$(jq -c '[.event.scope, .repo.name, .benchmark.commit, .benchmark.source, (.benchmark.regressions | map(.workload))]' "$RECV/body.1")" \
	"[\"repo.benchmark\",\"acme/relu\",\"$C2\",\"farm\",[\"Relu.big\"]]" "a repo.benchmark delivery naming the commit and the regression"
is "$(recv_get 1 '.headers["x-khub-event"]')" "repo.benchmark.update" "X-Khub-Event: repo.benchmark.update"

# ---- the kernel page and the builds matrix ---------------------------------------------------
curl -s "$KHUB_URL/kernels/acme/relu" | tr -d '\n' >"$TEST_DIR/page.html"
like "$(grep -o '<section[^>]*id="farm-benchmarks".*' "$TEST_DIR/page.html" | head -c 4000)" \
	"<li class=\"bench-regression\">Relu.big on cpu at <code>${C2:0:12}</code>: 48.5% slower than <code>${C1:0:12}</code>" \
	"the kernel page's Farm benchmarks section says so"
api "" GET "/api/kernels/acme/relu/builds?commit=$C2"
is "$(jq -c '[.benchmark_regressions[] | .workload, .slowerPct]' "$B")" '["Relu.big",48.5]' \
	"the builds matrix of the second commit (API) lists the regression"
api "" GET "/api/kernels/acme/relu/builds?commit=$C1"
is "$(jq -c 'has("benchmark_regressions")' "$B")" false "v1's matrix has none"
curl -s "$KHUB_URL/kernels/acme/relu/builds?commit=$C2" | tr -d '\n' >"$TEST_DIR/builds.html"
like "$(grep -o '<ul class="bench-regressions">.*</ul>' "$TEST_DIR/builds.html" | head -c 2000)" "Relu.big on cpu" \
	"the builds page of the second commit says so"

# ---- the threshold is configuration ---------------------------------------------------------
khub_stop
export KHUB_BENCHMARK_REGRESSION_PCT=60
khub_start
api "" GET "$REG"
is "$(jq -c '[.thresholdPct, (.regressions | length)]' "$B")" "[60,0]" "benchmark_regression_pct = 60: 48.5 % is under it"

done_testing
