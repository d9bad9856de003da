#!/bin/bash
# t0311-benchmark-jobs.sh -- the farm runs benchmarks (docs/build-farm.md,
# "Benchmark jobs"): a noarch kernel with benchmarks/ pushed with git is
# built and published by the daemon; with benchmarkAfterPublish on, the
# publication queues a benchmark job for the device model the daemon's
# benchmark toolchain registered ("cpu"); the same daemon claims it, runs
# the scripts in the sandbox against the published build/torch-cpu/, and a
# farm run of the commit appears in GET …/benchmarks with the device and
# the job's id; the job succeeds and published nothing. By hand, POST
# …/benchmarks/run answers the same job (one per commit, variant and
# device, however often asked); a device no worker has gets a job of its
# own that the daemon never claims.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/bench_kernel.sh"
bench_needs	# $WORKER_BIN, $PY, or a skip
khub_setup
khub_accounts	# alice, admin of acme, $ALICE
W=$TEST_DIR/worker
mkdir -p "$W/work"
khub admin worker add bench1 2>>"$TEST_DIR/setup.log" | tail -n 1 >"$W/token"
chmod 600 "$W/token"
printf '{"toolchains": [{"name": "cpu-bench", "python": "%s", "cxx": "g++", "benchmarks": true}]}\n' "$PY" \
	>"$W/toolchains.json"
khub_start

B=$TEST_DIR/b
call() {	# call TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
bench_jobs() {	# the repo's benchmark jobs as "device state" lines
	call "$ALICE" GET "/api/kernels/acme/relu/builds?limit=1000"
	jq -r '[.builds[] | select(.kind == "benchmark")] | sort_by(.id) | .[] | "\(.device) \(.state)"' "$B"
}

# ---- the kernel: noarch, with benchmarks/ ----------------------------------------------------
call "$ALICE" POST /api/repos/create '{"name":"relu","organization":"acme","type":"kernel"}'
is "$ST" 200 "acme/relu created"
call "$ALICE" PUT /api/kernels/acme/relu/settings '{"benchmarkAfterPublish": true}'
is "$ST $(jq -r .benchmarkAfterPublish "$B")" "200 true" "benchmarkAfterPublish is on"
K=$TEST_DIR/relu
git clone -q "http://x:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu" "$K" 2>>"$TEST_DIR/setup.log"
bench_noarch_tree "$K"
bench_relu_script "$K/benchmarks/benchmark_relu.py" 64 small verify

# ---- the daemon: builds, publishes, benchmarks ------------------------------------------------
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/token" --toolchains "$W/toolchains.json" --name bench1 \
	--work-dir "$W/work" --poll-seconds 1 2>>"$W/daemon.log" &
DPID=$!
for _ in $(seq 1 600); do
	grep -q "registered with" "$W/daemon.log" && break
	kill -0 "$DPID" 2>/dev/null || break
	sleep 0.2
done
git -C "$K" add -A && git -C "$K" -c user.name=a -c user.email=a@x commit -qm "relu with benchmarks"
git -C "$K" push -q origin main 2>>"$TEST_DIR/setup.log"
is "$?" 0 "git push of the kernel with benchmarks/"
C1=$(git -C "$K" rev-parse HEAD)
call "$ALICE" POST /api/kernels/acme/relu/builds '{"revision":"main","variants":["torch-cpu"]}'
like "$ST" "^20[012]$" "torch-cpu of the pushed commit is queued (or was, by the push)"
built_polls=0
for _ in $(seq 1 900); do
	jobs=$(bench_jobs)
	[ "$jobs" = "cpu succeeded" ] && break
	case "$jobs" in *failed*|*canceled*) break ;; esac
	# published, and still no benchmark job a minute later: none is coming
	jq -e '.builds[] | select(.variant == "torch-cpu" and .state == "succeeded")' "$B" >/dev/null &&
		[ -z "$jobs" ] && built_polls=$((built_polls + 1))
	[ "$built_polls" -ge 120 ] && break
	kill -0 "$DPID" 2>/dev/null || break
	sleep 0.5
done
call "$ALICE" GET "/api/kernels/acme/relu/builds?limit=1000"
BUILD=$(jq -r '[.builds[] | select(.kind == "build" and .variant == "torch-cpu")][0]' "$B")
is "$(jq -r '.state + " " + .published.branch' <<<"$BUILD")" "succeeded v1" "the build of torch-cpu is published on v1"
VC=$(jq -r .published.commit <<<"$BUILD")
JOBJ=$(jq -c '[.builds[] | select(.kind == "benchmark")]' "$B")
is "$(jq -r 'length' <<<"$JOBJ")" 1 "the publication queued one benchmark job"
is "$(jq -r '.[0] | [.commit, .variant, .device, .variant_commit, .requested_by, .state] | join(" ")' <<<"$JOBJ")" \
	"$C1 torch-cpu cpu $VC benchmarkAfterPublish succeeded" \
	"… of the pushed commit, torch-cpu, on the cpu, from the published tree; it succeeded" ||
	{ sed 's/^/#   /' "$W/daemon.log" | tail -30; }
JOB=$(jq -r '.[0].id' <<<"$JOBJ")
is "$(jq -r '.[0].published' <<<"$JOBJ")" null "the benchmark job published nothing"
call "" GET "/api/kernels/acme/relu/benchmarks?source=farm"
is "$(jq -c '[.[] | .source, .machineInfo.gpu, .commit, .build, .submitter, (.results | map(.workload, .verified))]' "$B")" \
	"[\"farm\",\"cpu\",\"$C1\",$JOB,\"bench1\",[\"ReluBenchmark.small\",true]]" \
	"GET …/benchmarks?source=farm: the farm run of the commit on cpu, by the job, verified"
call "" GET "/api/builds/$JOB/log"
like "$(cat "$B")" "sandbox bubblewrap, device cpu" "the job's log: the scripts ran in bubblewrap on the cpu"
like "$(cat "$B")" "1 farm run\\(s\\) submitted" "the job's log counts the runs submitted"

# ---- by hand: one job per (commit, variant, device) ----------------------------------------------
call "$ALICE" POST /api/kernels/acme/relu/benchmarks/run ''
is "$ST $(jq -c '[.jobs[] | .id, .commit, .variant, .device, .queued]' "$B")" \
	"200 [$JOB,\"$C1\",\"torch-cpu\",\"cpu\",false]" \
	"POST …/benchmarks/run (defaults): the existing job of the newest published commit, not queued again"
call "$ALICE" POST /api/kernels/acme/relu/benchmarks/run "{\"commit\":\"$C1\",\"variant\":\"torch-cpu\",\"device\":\"NVIDIA H100\"}"
H100=$(jq -r '.jobs[0].id' "$B")
is "$ST $(jq -c '[.jobs[] | .device, .queued]' "$B")" '200 ["NVIDIA H100",true]' "a device asked by name gets a job of its own"
call "$ALICE" POST /api/kernels/acme/relu/benchmarks/run "{\"commit\":\"main\",\"device\":\"NVIDIA H100\"}"
is "$ST $(jq -c '[.jobs[] | .id, .queued]' "$B")" "200 [$H100,false]" "asked again (commit by revision): the same job, not queued"
is "$(bench_jobs | sort | tr '\n' ';')" "NVIDIA H100 queued;cpu succeeded;" \
	"one job per (commit, variant, device): the cpu one done, the H100 one waiting"
call "$ALICE" POST /api/kernels/acme/relu/benchmarks/run '{"variant":"torch999-cxx11-cu999-x86_64-linux"}'
is "$ST" 422 "a variant the farm never published → 422"
call "$ALICE" POST /api/kernels/acme/relu/benchmarks/run '{"device": 7}'
is "$ST" 400 "a device that is no string → 400"
sleep 2	# the daemon polls every second: it had its chances at the H100 job
is "$(bench_jobs | sort | tr '\n' ';')" "NVIDIA H100 queued;cpu succeeded;" "the cpu daemon never claims the H100 job"
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null

done_testing
