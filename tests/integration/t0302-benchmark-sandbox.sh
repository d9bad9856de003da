#!/bin/bash
# t0302-benchmark-sandbox.sh -- khub-worker benchmark runs a kernel's
# benchmarks/benchmark*.py (the author's code) against its built variant
# as `kernels benchmark` does, inside the builds' bubblewrap sandbox, on
# the CPU (Debian's python3-torch): the payload (machineInfo.gpu "cpu")
# is submitted by the worker as a farm run of its job and listed; a
# script that reads the worker's token file, opens a connection to the
# internet or to the worker's own hub URL fails each time, the log says
# so, and the token appears nowhere. A toolchain with "benchmarks": true
# has its device probed (torch.cuda.get_device_name, else "cpu"): --check
# says it and the daemon registers it.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/bench_kernel.sh"
bench_needs	# $WORKER_BIN, $PY, or a skip
khub_setup
V1=torch211-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json
khub_accounts	# alice, admin of acme, $ALICE
khub admin user create root --site-admin >>"$TEST_DIR/setup.log" 2>&1
ROOT=$(khub admin token create root --scope write 2>>"$TEST_DIR/setup.log" | tail -n 1)
W=$TEST_DIR/worker
mkdir -p "$W"
khub admin worker add bench1 2>>"$TEST_DIR/setup.log" | tail -n 1 >"$W/token"
chmod 600 "$W/token"
TOKEN=$(cat "$W/token")
khub_start
HUB_PORT=${KHUB_URL##*:}
HUB_PORT=${HUB_PORT%%/*}

B=$TEST_DIR/b
api() {
	local args=(-s -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}

# ---- the kernel: a variant and its benchmarks ------------------------------------------------
K=$TEST_DIR/kernel
mkdir -p "$K/src/benchmarks" "$K/variant"
printf 'import torch\n\ndef relu(x):\n    return torch.relu(x)\n' >"$K/variant/__init__.py"
bench_relu_script "$K/src/benchmarks/benchmark_relu.py" 128 big verify
bench_attack_script "$K/src/benchmarks/benchmark_attack.py" "$W/token" "$HUB_PORT" hub-url
worker_toolchain "$W/toolchains.json"
chmod -R a+rX "$K"

# ---- a job of the kernel's commit held by the worker -----------------------------------------
printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' >"$TEST_DIR/build.toml"
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[{\"path\":\"build.toml\",\"content\":\"$(base64 -w0 "$TEST_DIR/build.toml")\",\"encoding\":\"base64\"}]}"
C1=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/relu.git" rev-parse main)
api "$TOKEN" POST /api/workers/register "{\"version\":\"0.1\",\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
api "$ALICE" POST /api/kernels/acme/relu/builds "{\"revision\":\"main\",\"variants\":[\"$V1\"]}"
api "$TOKEN" POST /api/workers/claim "{\"variants\":[\"$V1\"]}"
JOB=$(jq -r .build.id "$B")
is "$ST $(jq -r .build.commit "$B")" "200 $C1" "the worker holds a job of the kernel's commit"

# ---- the run ---------------------------------------------------------------------------------
(cd "$W" && "$WORKER_BIN" benchmark --toolchains "$W/toolchains.json" --source "$K/src" --variant-dir "$K/variant" \
	--commit "$C1" --device cpu --iterations 5 --warmup 1 --output "$W/payloads.json") >"$W/log" 2>&1
is "$?" 1 "khub-worker benchmark exits 1: a script failed"
like "$(cat "$W/log")" "sandbox bubblewrap, device cpu" "the log says the scripts ran in bubblewrap on the CPU"
for what in token-file network hub-url; do
	like "$(grep "attack refused $what:" "$W/log")" "attack refused $what: [A-Za-z]*Error" "the script's $what attempt failed, and the log says so"
done
like "$(cat "$W/log")" "benchmarks/benchmark_attack.py failed:.*" "the log names the failed script"
grep -q "ATTACK SUCCEEDED" "$W/log"
is "$?" 1 "no attempt succeeded"
grep -qF "$TOKEN" "$W/log" "$W/payloads.json"
is "$?" 1 "the worker's token is in neither the log nor the payloads"
is "$(jq -c '[.[] | .benchmarkScriptPath, .machineInfo.gpu, .machineInfo.backend, (.results | map(.workload, .verified))]' "$W/payloads.json")" \
	'["benchmarks/benchmark_relu.py","cpu","CPU",["ReluBenchmark.big",true]]' \
	"the good script's payload: the kernels shape, measured on the cpu, verified"
is "$(jq '.[0].results[0].timingResults | .iterations == 5 and .min_ms <= .mean_ms and .mean_ms <= .max_ms' "$W/payloads.json")" \
	true "timed 5 times (min <= mean <= max)"

api "$TOKEN" POST "/api/builds/$JOB/benchmark" "$(jq -c '.[0]' "$W/payloads.json")"
is "$ST $(jq -r .source "$B")" "200 farm" "the worker submits it: a farm run"
api "" GET "/api/kernels/acme/relu/benchmarks?source=farm"
is "$(jq -c '[.[] | .machineInfo.gpu, .commit, .results[0].workload]' "$B")" "[\"cpu\",\"$C1\",\"ReluBenchmark.big\"]" \
	"the farm run is listed with its device model"

# ---- a benchmark toolchain: its device probed and registered ---------------------------------
printf '{"toolchains": [{"name": "cpu-bench", "python": "%s", "cxx": "g++", "benchmarks": true}]}\n' "$PY" \
	>"$W/bench-toolchains.json"
"$WORKER_BIN" --check --toolchains "$W/bench-toolchains.json" >"$W/check.out" 2>&1
like "$(cat "$W/check.out")" "benchmarks on cpu" "khub-worker --check: the toolchain runs benchmarks on the cpu"
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/token" --toolchains "$W/bench-toolchains.json" --name bench1 \
	--work-dir "$W/work" --poll-seconds 1 2>>"$W/daemon.log" &
DPID=$!
for _ in $(seq 1 600); do
	api "$ROOT" GET /api/admin/workers
	[ -n "$(jq -r '.. | objects | select(.benchmarks? == true) | .device' "$B" 2>/dev/null)" ] && break
	kill -0 "$DPID" 2>/dev/null || break
	sleep 0.5
done
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
is "$(jq -c '[.. | objects | select(.benchmarks? == true) | .name, .device, .driver]' "$B")" '["cpu-bench","cpu",""]' \
	"the daemon registers the toolchain as a benchmark one, with its device (cpu) and driver (none)"

done_testing
