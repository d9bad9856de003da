#!/bin/bash
# t0312-benchmark-job-sandbox.sh -- a benchmark JOB runs the author's
# scripts in the builds' sandbox: a script of benchmarks/ that reads the
# worker's token file, opens a connection to the internet or to the hub's
# own port fails each time inside the job the daemon claimed; the job
# fails for good (a script failed), its log says each attempt was refused
# and holds no token, and the other script's farm run is still submitted.
# A worker whose toolchains run no benchmarks, or run them on another
# device model, never claims the job.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/bench_kernel.sh"
bench_needs	# $WORKER_BIN, $PY, or a skip
khub_setup
khub_accounts	# alice, admin of acme, $ALICE
W=$TEST_DIR/worker
mkdir -p "$W/work"
for w in bench1 plain gpu; do
	khub admin worker add "$w" 2>>"$TEST_DIR/setup.log" | tail -n 1 >"$W/$w.token"
done
chmod 600 "$W"/*.token
TOKEN=$(cat "$W/bench1.token")
printf '{"toolchains": [{"name": "cpu-bench", "python": "%s", "cxx": "g++", "benchmarks": true}]}\n' "$PY" \
	>"$W/toolchains.json"
khub_start
HUB_PORT=${KHUB_URL##*:}

B=$TEST_DIR/b
call() {	# call TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
daemon_once() {	# the benchmark worker, until the queue is empty
	"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/bench1.token" --toolchains "$W/toolchains.json" --name bench1 \
		--work-dir "$W/work" --once 2>>"$W/daemon.log"
}

# ---- the kernel: a good script and an attacking one ----------------------------------------------
call "$ALICE" POST /api/repos/create '{"name":"relu","organization":"acme","type":"kernel"}'
is "$ST" 200 "acme/relu created"
K=$TEST_DIR/relu
git clone -q "http://x:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu" "$K" 2>>"$TEST_DIR/setup.log"
bench_noarch_tree "$K"
bench_relu_script "$K/benchmarks/benchmark_relu.py" 64 small
bench_attack_script "$K/benchmarks/benchmark_attack.py" "$W/bench1.token" "$HUB_PORT" hub-port
git -C "$K" add -A && git -C "$K" -c user.name=a -c user.email=a@x commit -qm "relu with benchmarks"
git -C "$K" push -q origin main 2>>"$TEST_DIR/setup.log"
is "$?" 0 "git push of the kernel with benchmarks/"
C1=$(git -C "$K" rev-parse HEAD)

# ---- built and published by the daemon (benchmarkAfterPublish is off) --------------------------------
call "$TOKEN" POST /api/workers/register "{\"name\":\"bench1\",\"toolchains\":[{\"name\":\"cpu-bench\",\"variants\":[\"torch-cpu\"],\"benchmarks\":true,\"device\":\"cpu\",\"driver\":\"\"}]}"
call "$ALICE" POST /api/kernels/acme/relu/builds '{"revision":"main","variants":["torch-cpu"]}'
like "$ST" "^20[012]$" "torch-cpu of the pushed commit is queued"
daemon_once
call "$ALICE" GET "/api/kernels/acme/relu/builds?limit=1000"
is "$(jq -r '[.builds[] | select(.variant == "torch-cpu") | .kind + " " + .state] | join(",")' "$B")" "build succeeded" \
	"the daemon built and published torch-cpu, and queued no benchmark (the setting is off)"

# ---- queued by hand; the other workers never claim it --------------------------------------------
call "$ALICE" POST /api/kernels/acme/relu/benchmarks/run ''
JOB=$(jq -r '.jobs[0].id' "$B")
is "$ST $(jq -c '[.jobs[] | .device, .queued]' "$B")" '200 ["cpu",true]' "a benchmark job on the cpu is queued"
call "$(cat "$W/plain.token")" POST /api/workers/register '{"name":"plain","toolchains":[{"name":"cpu","variants":["torch-cpu"]}]}'
call "$(cat "$W/plain.token")" POST /api/workers/claim '{"variants":["torch-cpu"],"wait_seconds":0}'
is "$ST" 204 "a worker that builds torch-cpu but runs no benchmarks claims nothing"
call "$(cat "$W/gpu.token")" POST /api/workers/register \
	'{"name":"gpu","toolchains":[{"name":"cu","variants":["torch-cpu"],"benchmarks":true,"device":"NVIDIA H100","driver":"570"}]}'
call "$(cat "$W/gpu.token")" POST /api/workers/claim '{"variants":["torch-cpu"],"wait_seconds":0}'
is "$ST" 204 "a benchmark worker of another device model claims nothing"
call "$ALICE" GET "/api/builds/$JOB"
is "$(jq -r '.state + " " + .kind' "$B")" "queued benchmark" "the job is still queued"

# ---- the attack, inside the job -------------------------------------------------------------------
daemon_once
call "$ALICE" GET "/api/builds/$JOB"
is "$(jq -r '.state + " " + (.attempt | tostring) + " " + .worker' "$B")" "failed 1 bench1" \
	"the job failed for good, on its first attempt, on bench1"
like "$(jq -r .error "$B")" "^benchmark failed: a benchmarks/ script failed" "its error says a script failed"
call "" GET "/api/builds/$JOB/log"
cp "$B" "$TEST_DIR/job.log"
like "$(cat "$TEST_DIR/job.log")" "sandbox bubblewrap, device cpu" "the job's log: the scripts ran in bubblewrap"
for what in token-file network hub-port; do
	like "$(grep "attack refused $what:" "$TEST_DIR/job.log")" "attack refused $what: [A-Za-z]*Error" \
		"inside the job, the script's $what attempt failed, and the log says so"
done
grep -q "ATTACK SUCCEEDED" "$TEST_DIR/job.log"
is "$?" 1 "no attempt succeeded"
grep -qF "$TOKEN" "$TEST_DIR/job.log" "$W/daemon.log"
is "$?" 1 "the worker's token is in neither the job's log nor the daemon's"
call "" GET "/api/kernels/acme/relu/benchmarks?source=farm"
is "$(jq -c '[.[] | .benchmarkScriptPath, .build, .commit]' "$B")" "[\"benchmarks/benchmark_relu.py\",$JOB,\"$C1\"]" \
	"the good script's farm run was submitted all the same"

done_testing
