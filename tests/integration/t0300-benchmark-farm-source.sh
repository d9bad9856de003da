#!/bin/bash
# t0300-benchmark-farm-source.sh -- a third source of benchmark runs, "farm"
# (measured by the hub on a worker's known device): a worker holding a
# job's lease submits the kernels payload through POST /api/builds/{id}/
# benchmark and a farm run of the job's commit appears with its device;
# listings and the aggregate keep farm runs apart (asked with
# ?source=farm); the kernel page shows them; a user's token claiming the
# farm source is refused, on the upload route and on the worker route.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
V1=torch211-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json
FIXTURE=$(cd "$(dirname "$0")" && pwd)/fixtures/benchmark-result.json
log=$TEST_DIR/setup.log
khub admin org create acme >>"$log" 2>&1
khub admin user create alice >>"$log" 2>&1
khub admin member set acme alice admin >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
W1=$(khub admin worker add bench1 2>>"$log" | tail -n 1)
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
api() {
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' >"$TEST_DIR/build.toml"
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[{\"path\":\"build.toml\",\"content\":\"$(base64 -w0 "$TEST_DIR/build.toml")\",\"encoding\":\"base64\"}]}"
is "$ST" 200 "acme/relu created"
C1=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/relu.git" rev-parse main)
api "$W1" POST /api/workers/register "{\"name\":\"bench1\",\"version\":\"0.1\",\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"],\"torch\":\"2.11\",\"cxx11_abi\":true,\"python\":\"3.11\"}]}"
is "$ST" 200 "the worker registers"
# the push may have queued it already (build_on_push): the claim names the job
api "$ALICE" POST /api/kernels/acme/relu/builds "{\"revision\":\"main\",\"variants\":[\"$V1\"]}"
api "$W1" POST /api/workers/claim "{\"variants\":[\"$V1\"]}"
JOB=$(jq -r '.build.id' "$B")
is "$ST $(jq -r '.build.commit' "$B")" "200 $C1" "the worker claims the job of main"

# The payload `kernels benchmark` builds, measured on the worker's CPU.
jq --arg sha "${C1:0:7}" '.kernelCommitSha = $sha | .machineInfo.gpu = "cpu" | .machineInfo.backend = "CPU"' \
	"$FIXTURE" >"$TEST_DIR/farm.json"
BENCH=/api/kernels/acme/relu/benchmarks

# ---- a user's token never makes a farm run --------------------------------------------------
api "$ALICE" POST "/api/builds/$JOB/benchmark" "$(cat "$TEST_DIR/farm.json")"
is "$ST" 403 "a user's (write) token × the worker's farm route → 403"
api "$ALICE" POST "$BENCH" "$(jq '.source = "farm"' "$TEST_DIR/farm.json")"
is "$ST" 403 "a user's token claiming source farm on the upload route → 403"
like "$(jq -r .error "$B")" "worker" "the error says only a worker submits farm runs"
api "$W1" POST "$BENCH" "$(cat "$TEST_DIR/farm.json")"
is "$ST" 403 "a worker token × the users' upload route → 403"
api "" GET "$BENCH?source=all"
is "$(jq length "$B")" 0 "nothing was stored by the refused uploads"

# ---- the worker's farm run ------------------------------------------------------------------
api "$W1" POST "/api/builds/$JOB/benchmark" "$(jq --arg sha "$(printf '%040d' 0)" '.kernelCommitSha = $sha' "$TEST_DIR/farm.json")"
is "$ST" 400 "a farm run must measure the job's commit (another sha → 400)"
api "$W1" POST "/api/builds/$JOB/benchmark" "$(cat "$TEST_DIR/farm.json")"
is "$ST $(jq -r '.source, .commit' "$B" | tr '\n' ' ')" "200 farm $C1 " "the lease holder submits: a farm run of the job's commit"
api "$ALICE" POST "$BENCH" "$(cat "$TEST_DIR/farm.json")"
is "$ST $(jq -r .source "$B")" "200 maintainer" "alice's own upload of the same payload: a maintainer run"

api "" GET "$BENCH"
is "$(jq -c '[.[].source]' "$B")" '["maintainer"]' "the default listing: maintainer runs only"
api "" GET "$BENCH?source=farm"
is "$(jq -c '[.[] | .source, .submitter, .machineInfo.gpu, .commit]' "$B")" "[\"farm\",\"bench1\",\"cpu\",\"$C1\"]" \
	"?source=farm: the farm run, by the worker, with its device"
api "" GET "$BENCH?source=all"
is "$(jq -c '[.[].source] | sort' "$B")" '["farm","maintainer"]' "?source=all lists both, each saying its source"
api "" GET "$BENCH/aggregate?source=all"
is "$(jq -c '[.results[] | select(.gpu == "cpu") | .count] | unique' "$B")" '[1]' \
	"the aggregate never mixes farm runs with users' runs (source=all: the users' one run per workload)"
api "" GET "$BENCH/aggregate?source=farm"
is "$(jq -c '[.results[] | .gpu, .count] | unique' "$B")" '[1,"cpu"]' "?source=farm aggregates the farm runs alone"

# ---- the kernel page ------------------------------------------------------------------------
curl -s "$KHUB_URL/kernels/acme/relu" >"$TEST_DIR/page.html"
like "$(tr -d '\n' <"$TEST_DIR/page.html" | grep -o '<section[^>]*id="farm-benchmarks".*</section>' | head -c 3000)" \
	"<td class=\"farm-device\">cpu</td><td><code>${C1:0:12}</code></td><td>SiluWorkloads.large</td>" \
	"the kernel page shows the farm run: device, commit, workload"

done_testing
