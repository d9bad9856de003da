#!/usr/bin/env bash
# bench/build_farm.sh -- the build farm's cost. Not part of the test suite.
# Targets (issue 11): (a) a build through the farm (enqueue -> claim ->
# source tar -> `khub-worker build` -> log -> output tar -> published) takes
# at most 1.1x the wall time of the same `khub-worker build` run by hand;
# (b) claim latency with 20 queued jobs and 4 workers.
#
# A throw-away khub on loopback; the kernel source (examples/relu) pushed
# with git to acme/relu (buildOnPush off: the bench enqueues by hand).
# (a) after one untimed warm-up build, BENCH_RUNS times each, alternating:
#     `khub-worker build` on a checkout of the source; then POST .../builds
#     {force} with one idle worker long-polling, timed until GET
#     /api/builds/ID says succeeded. Medians.
# (b) four idle workers (concurrency 1 each); 20 builds of 20 commits
#     enqueued back to back. Enqueue-to-claim per job: from the moment its
#     POST was sent to the worker's "claimed build #ID" log line (same
#     clock, ms). Reported apart: jobs an idle worker took (the claim path
#     alone) and all jobs (they queue behind builds), plus the hand-over gap
#     from a worker's "published" line to its next "claimed" line.
#
# Environment (all optional):
#   BENCH_RUNS            runs of each side of (a)                 (default 3)
#   BENCH_JOBS            jobs of (b)                              (default 20)
#   BENCH_WORKERS         workers of (b)                           (default 4)
#   BENCH_KERNEL_SRC      the kernel source       (default examples/relu)
#   BENCH_TOOLCHAINS      a toolchains.json  (default: Debian's python3-torch)
#   BENCH_RELEASE_BUILD   auto|1|0, as in read_path.sh             (default auto)
#   KHUB_BIN              the khub binary (default ./khub; khub-worker beside it)

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${BENCH_RUNS:-3}
JOBS=${BENCH_JOBS:-20}
WORKERS=${BENCH_WORKERS:-4}
KSRC=${BENCH_KERNEL_SRC:-$ROOT/examples/relu}
export KHUB_LOG_LEVEL=${KHUB_LOG_LEVEL:-warn}
# a Debian toolchain links symbols newer than manylinux_2_28: publish anyway
export KHUB_ABI_POLICY=${KHUB_ABI_POLICY:-warn}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

for tool in curl git python3; do
	command -v "$tool" >/dev/null 2>&1 || { echo "build_farm.sh: $tool is not installed" >&2; exit 1; }
done
[ -f "$KSRC/build.toml" ] || { echo "build_farm.sh: no kernel source at $KSRC" >&2; exit 1; }
# shellcheck source=../tests/lib/khub-test.sh
. "$ROOT/tests/lib/khub-test.sh"
khub_setup
WORKER_PIDS=
# workers die with the bench, even when it stops early (they hold its output open)
trap 'kill $WORKER_PIDS 2>/dev/null; khub_teardown' EXIT
trap 'exit 130' INT TERM
. "$ROOT/bench/lib/release_build.sh"
bench_release_build khub-worker
[ -x "$KHUB_WORKER_BIN" ] || { echo "build_farm.sh: no khub-worker beside $KHUB_BIN (make khub-worker)" >&2; exit 1; }

W=$TEST_DIR/worker
mkdir -p "$W/work" "$TEST_DIR/readme"
if [ -n "${BENCH_TOOLCHAINS:-}" ]; then
	cp "$BENCH_TOOLCHAINS" "$W/toolchains.json"
else
	cat >"$W/toolchains.json" <<EOF
{"toolchains": [{"name": "cpu-debian", "python": "/usr/bin/python3", "cxx": "g++",
                 "cmake": "cmake", "ninja": "ninja", "env": {}}]}
EOF
fi
"$KHUB_WORKER_BIN" --check --toolchains "$W/toolchains.json" >"$W/check.out" 2>&1 ||
	{ echo "build_farm.sh: no usable toolchain:" >&2; cat "$W/check.out" >&2; exit 1; }
TOOLCHAIN=$(sed -n 's/^\([^ ][^:]*\): torch .*/\1/p' "$W/check.out" | head -1)
VARIANT=$(grep -oE 'torch[0-9]+-cxx[0-9a-z]+-cpu-[a-z0-9_]+-linux' "$W/check.out" | head -1)
[ -n "$VARIANT" ] || VARIANT=$(grep -oE '\btorch[0-9a-z_-]*' "$W/check.out" | grep -v '^torch$' | head -1)

khub admin org create acme >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin member set acme alice admin >/dev/null 2>&1
ALICE=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
for i in $(seq 1 "$WORKERS"); do
	khub admin worker add "w$i" 2>/dev/null | tail -n 1 >"$W/w$i.token"
	chmod 600 "$W/w$i.token"
done
printf '# relu\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log" ||
	{ echo "import failed" >&2; exit 1; }
khub_start
curl -sf -X PUT -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	-d '{"buildOnPush": false}' "$KHUB_URL/api/kernels/acme/relu/settings" >/dev/null ||
	echo "# (could not turn buildOnPush off; pushes may enqueue builds too)" >&2

# the source: main, and one branch per job of (b)
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name bench && git config --global user.email bench@example.com
CLONE=$TEST_DIR/clone
git clone -q "http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu" "$CLONE" 2>/dev/null ||
	{ echo "git clone failed" >&2; exit 1; }
cp -r "$KSRC"/. "$CLONE"/
rm -rf "$CLONE/build"
(cd "$CLONE" && git add -A && git commit -qm source && git push -q origin main) ||
	{ echo "git push failed" >&2; exit 1; }
for j in $(seq 1 "$JOBS"); do
	(cd "$CLONE" && git checkout -q -b "j$j" main && printf '\n# job %s\n' "$j" >>build.toml &&
		git commit -qam "job $j" && git checkout -q main)
done
(cd "$CLONE" && git push -q origin $(seq -f 'j%g' 1 "$JOBS")) || { echo "git push of the job branches failed" >&2; exit 1; }

start_worker() {	# start_worker NAME [options]: a daemon in the background, pid in $WPID
	local name=$1; shift
	"$KHUB_WORKER_BIN" --url "$KHUB_URL" --token-file "$W/$name.token" --toolchains "$W/toolchains.json" \
		--name "$name" --work-dir "$W/work" --poll-seconds 20 --log-level info "$@" 2>>"$W/$name.log" &
	WPID=$!
	WORKER_PIDS="$WORKER_PIDS $WPID"
	for _ in $(seq 1 100); do grep -q 'registered with' "$W/$name.log" 2>/dev/null && return 0; sleep 0.1; done
	echo "worker $name did not register:" >&2; cat "$W/$name.log" >&2; exit 1
}
stop_workers() { for p in "$@"; do kill -TERM "$p" 2>/dev/null; done; for p in "$@"; do wait "$p" 2>/dev/null; done; }

# ---- (a) overhead ---------------------------------------------------------------------------------------
start_worker w1
A_PID=$WPID
python3 - "$KHUB_URL" "$ALICE" "$VARIANT" "$RUNS" "$KHUB_WORKER_BIN" "$W/toolchains.json" "$TOOLCHAIN" \
	"$CLONE" "$TEST_DIR/direct" >"$TEST_DIR/a.out" <<'PY' || { echo "(a) failed:" >&2; cat "$TEST_DIR/a.out" >&2; exit 1; }
import json, shutil, statistics, subprocess, sys, time, urllib.request
url, token, variant, runs, worker, tcs, tc, src, outdir = sys.argv[1:10]
def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)
direct, farm = [], []
# one untimed build first: compiler and Python caches warm for both sides
subprocess.run([worker, "build", "--toolchains", tcs, "--toolchain", tc, "--source", src, "--out", outdir,
                "--variant", variant], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for i in range(int(runs)):
    shutil.rmtree(outdir, ignore_errors=True)
    t0 = time.monotonic()
    rc = subprocess.run([worker, "build", "--toolchains", tcs, "--toolchain", tc, "--source", src, "--out", outdir,
                         "--variant", variant], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    direct.append(time.monotonic() - t0)
    if rc != 0:
        sys.exit(f"khub-worker build by hand failed: exit {rc}")
    t0 = time.monotonic()
    b = call("POST", "/api/kernels/acme/relu/builds", {"revision": "main", "variants": [variant], "force": True})
    bid = b["builds"][0]["id"]
    while True:
        st = call("GET", f"/api/builds/{bid}")["state"]
        if st in ("succeeded", "failed", "canceled"):
            break
        time.sleep(0.02)
    farm.append(time.monotonic() - t0)
    if st != "succeeded":
        info = call("GET", f"/api/builds/{bid}")
        sys.exit(f"build #{bid} {st}: {info.get('error')}")
d, f = statistics.median(direct), statistics.median(farm)
print(f"{d:.2f} {f:.2f} {f / d:.3f} {' '.join(f'{x:.2f}' for x in direct)} / {' '.join(f'{x:.2f}' for x in farm)}")
PY
stop_workers "$A_PID"
read -r A_DIRECT A_FARM A_RATIO A_ALL <"$TEST_DIR/a.out"

# ---- (b) claim latency --------------------------------------------------------------------------------
PIDS=()
for i in $(seq 1 "$WORKERS"); do
	: >"$W/w$i.log"
	start_worker "w$i"
	PIDS+=("$WPID")
done
sleep 1	# every worker parked in its long poll
python3 - "$KHUB_URL" "$ALICE" "$VARIANT" "$JOBS" "$WORKERS" "$W" >"$TEST_DIR/b.out" <<'PY' ||
import datetime, json, re, statistics, sys, time, urllib.request
url, token, variant, jobs, workers, wdir = sys.argv[1:7]
jobs, workers = int(jobs), int(workers)
def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)
enqueued = {}
for j in range(1, jobs + 1):
    t = time.time()
    b = call("POST", "/api/kernels/acme/relu/builds", {"revision": f"j{j}", "variants": [variant]})
    enqueued[b["builds"][0]["id"]] = t
deadline = time.time() + 3600
while time.time() < deadline:
    states = [call("GET", f"/api/builds/{i}")["state"] for i in enqueued]
    if all(s in ("succeeded", "failed", "canceled") for s in states):
        break
    time.sleep(0.5)
def stamp(line):
    return datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()
claimed, gaps, by_worker = {}, [], {}
for w in range(1, workers + 1):
    last_end = None
    for line in open(f"{wdir}/w{w}.log"):
        m = re.search(r"claimed build #(\d+)", line)
        if m and int(m.group(1)) in enqueued:
            claimed[int(m.group(1))] = stamp(line)
            by_worker[w] = by_worker.get(w, 0) + 1
            if last_end is not None:
                gaps.append(stamp(line) - last_end)
        if re.search(r"(published|failed) build #(\d+)", line):
            last_end = stamp(line)
lat = {i: (claimed[i] - enqueued[i]) * 1000 for i in claimed}
first = sorted(lat, key=lambda i: claimed[i])[:workers]
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")
idle = [lat[i] for i in first]
allv = list(lat.values())
gapv = [g * 1000 for g in gaps]
print(len(claimed), len(enqueued), " ".join(str(by_worker.get(w, 0)) for w in range(1, workers + 1)))
print(f"{q(idle, 50):.0f} {max(idle) if idle else float('nan'):.0f}")
print(f"{q(allv, 50):.0f} {q(allv, 99):.0f}")
print(f"{q(gapv, 50):.0f} {q(gapv, 99):.0f} {len(gapv)}")
print(sum(1 for i in enqueued if call("GET", f"/api/builds/{i}")["state"] == "succeeded"))
PY
	{ echo "(b) failed:" >&2; cat "$TEST_DIR/b.out" >&2; exit 1; }
stop_workers "${PIDS[@]}"
{ read -r B_CLAIMED B_JOBS B_SPLIT; read -r B_IDLE50 B_IDLEMAX; read -r B_ALL50 B_ALL99; read -r B_GAP50 B_GAP99 B_NGAP
  read -r B_OK; } <"$TEST_DIR/b.out"

echo "# khub: $KHUB_BUILD"
echo "# variant $VARIANT, toolchain $TOOLCHAIN, source $KSRC"
printf '%-60s %10s\n' "(a) khub-worker build by hand, median (s)" "$A_DIRECT"
printf '%-60s %10s\n' "(a) through the farm: enqueue -> published, median (s)" "$A_FARM"
printf '%-60s %10s  %s\n' "(a) farm / by hand" "$A_RATIO" \
	"$(python3 -c "print('PASS (<= 1.1x)' if $A_RATIO <= 1.1 else 'MISS (target <= 1.1x)')")"
printf '%-60s %10s\n' "(a) each run, by hand / farm (s)" "$A_ALL"
printf '%-60s %10s\n' "(b) jobs claimed / enqueued (per worker: $B_SPLIT)" "$B_CLAIMED/$B_JOBS"
printf '%-60s %10s\n' "(b) builds succeeded" "$B_OK"
printf '%-60s %10s\n' "(b) enqueue -> claim by an idle worker, median (ms)" "$B_IDLE50"
printf '%-60s %10s\n' "(b) enqueue -> claim by an idle worker, max (ms)" "$B_IDLEMAX"
printf '%-60s %10s\n' "(b) enqueue -> claim, all jobs (queued behind builds), p50 (ms)" "$B_ALL50"
printf '%-60s %10s\n' "(b) enqueue -> claim, all jobs, p99 (ms)" "$B_ALL99"
printf '%-60s %10s\n' "(b) build end -> next claim by the same worker, p50 (ms)" "$B_GAP50"
printf '%-60s %10s\n' "(b) build end -> next claim by the same worker, p99 (ms, n=$B_NGAP)" "$B_GAP99"
