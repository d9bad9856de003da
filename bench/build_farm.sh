#!/usr/bin/env bash
# bench/build_farm.sh -- the build farm's cost. Not part of the test suite.
# Targets (issue 11): (a) a build through the farm (enqueue -> claim ->
# source tar -> `khub-worker build` -> log -> output tar -> published) takes
# at most 1.1x the wall time of the same `khub-worker build` run by hand;
# (b) claim latency with 20 queued jobs and 4 workers; (c) (issue 34) the
# build cache: a rebuild after a one-line change takes at most 30% of a
# cold build.
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
# (c) a repo of its own (acme/relucache, buildOnPush on, the worker's cache
#     cold) and one worker with its build cache; its kernel is
#     bench/kernels/activations (a binding and five kernel files, as real
#     kernels spread their code): push the source and time push ->
#     published (cold); push a one-line change (a line of code appended to
#     one kernel file: a new commit, so a new op namespace for the binding)
#     and time it again (cached: the binding and that file recompile, the
#     other units are ccache direct hits); rebuild that commit with
#     no change (force: every compile a hit, and no new commit published:
#     the farm publishes with PUBLISH_SKIP_UNCHANGED); then the same commit
#     with the worker's --no-build-cache, whose bytes must be the cached
#     build's (the .so's sha256 on v1, and the farm's "identical" note).
#     Each: the client's push/enqueue -> succeeded, the server's started ->
#     finished, the report's cache hits/misses.
#
# Environment (all optional):
#   BENCH_RUNS            runs of each side of (a)                 (default 3)
#   BENCH_JOBS            jobs of (b)                              (default 20)
#   BENCH_WORKERS         workers of (b)                           (default 4)
#   BENCH_KERNEL_SRC      the kernel source of (a), (b)  (default examples/relu)
#   BENCH_CACHE_KERNEL_SRC  the kernel source of (c) (default bench/kernels/activations)
#   BENCH_CACHE_CHANGE    the file of (c)'s one-line change (default: the first
#                         .cpp/.cc/.cu of its [kernel.*] sources)
#   BENCH_TOOLCHAINS      a toolchains.json  (default: Debian's python3-torch)
#   BENCH_RELEASE_BUILD   auto|1|0, as in read_path.sh             (default auto)
#   BENCH_PARTS           which of a b c to run                    (default "a b c")
#   KHUB_BIN              the khub binary (default ./khub; khub-worker beside it)

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${BENCH_RUNS:-3}
JOBS=${BENCH_JOBS:-20}
WORKERS=${BENCH_WORKERS:-4}
PARTS=${BENCH_PARTS:-a b c}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
KSRC=${BENCH_KERNEL_SRC:-$ROOT/examples/relu}
CSRC=${BENCH_CACHE_KERNEL_SRC:-$ROOT/bench/kernels/activations}
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
for r in relu relucache; do
	khub import "$TEST_DIR/readme" --repo "acme/$r" --branch main >/dev/null 2>>"$TEST_DIR/import.log" ||
		{ echo "import failed" >&2; exit 1; }
done
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
part b && for j in $(seq 1 "$JOBS"); do
	(cd "$CLONE" && git checkout -q -b "j$j" main && printf '\n# job %s\n' "$j" >>build.toml &&
		git commit -qam "job $j" && git checkout -q main)
done
part b && { (cd "$CLONE" && git push -q origin $(seq -f 'j%g' 1 "$JOBS")) ||
	{ echo "git push of the job branches failed" >&2; exit 1; }; }

start_worker() {	# start_worker NAME [options]: a daemon in the background, pid in $WPID
	local name=$1; shift
	"$KHUB_WORKER_BIN" --url "$KHUB_URL" --token-file "$W/$name.token" --toolchains "$W/toolchains.json" \
		--name "$name" --work-dir "$W/work" --poll-seconds 20 --log-level info "$@" 2>>"$W/$name.log" &
	WPID=$!
	WORKER_PIDS="$WORKER_PIDS $WPID"
	for _ in $(seq 1 1200); do grep -q 'registered with' "$W/$name.log" 2>/dev/null && return 0; sleep 0.1; done
	echo "worker $name did not register:" >&2; cat "$W/$name.log" >&2; exit 1
}
stop_workers() { for p in "$@"; do kill -TERM "$p" 2>/dev/null; done; for p in "$@"; do wait "$p" 2>/dev/null; done; }

# ---- (a) overhead ---------------------------------------------------------------------------------------
if part a; then
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
fi

# ---- (b) claim latency --------------------------------------------------------------------------------
if part b; then
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
fi

# ---- (c) the build cache ---------------------------------------------------------------------------------
if part c; then
CCLONE=$TEST_DIR/cclone
git clone -q "http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relucache" "$CCLONE" 2>/dev/null ||
	{ echo "git clone of acme/relucache failed" >&2; exit 1; }
cp -r "$CSRC"/. "$CCLONE"/
rm -rf "$CCLONE/build"
MODULE=$(sed -n 's/^name = "\(.*\)"/\1/p' "$CCLONE/build.toml" | head -1 | tr - _)
CHANGE=${BENCH_CACHE_CHANGE:-$(python3 -c 'import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
print(next(s for k in c.get("kernel", {}).values() for s in k.get("src", []) if s.endswith((".cpp", ".cc", ".cu"))))' \
	"$CCLONE/build.toml")}
[ -f "$CCLONE/$CHANGE" ] || { echo "build_farm.sh: no kernel file $CHANGE to change in $CSRC" >&2; exit 1; }
cat >"$TEST_DIR/c.py" <<'PY'
# c.py URL TOKEN VARIANT CLONE MODULE cache|nocache CHANGE: one line per build,
# "<what> <push or enqueue -> succeeded, s> <started -> finished, s> <hits> <misses> <.so sha256> <v1 head> <note>"
import datetime, hashlib, json, subprocess, sys, time, urllib.request
url, token, variant, clone, module, mode, change = sys.argv[1:8]
REPO = "acme/relucache"
def call(method, path, body=None, raw=False):
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return r.read() if raw else json.load(r)
def git(*args):
    return subprocess.run(["git", "-C", clone, *args], check=True, capture_output=True, text=True).stdout.strip()
def build_of(sha):	# the build the push queued (buildOnPush)
    for _ in range(6000):
        lst = call("GET", f"/api/kernels/{REPO}/builds?limit=100")
        for b in (lst.get("builds", []) if isinstance(lst, dict) else lst):
            if b["commit"] == sha and b["variant"] == variant:
                return b["id"]
        time.sleep(0.05)
    sys.exit(f"no build of {sha} was queued")
def wait(what, bid, t0):
    while True:
        b = call("GET", f"/api/builds/{bid}")
        if b["state"] in ("succeeded", "failed", "canceled"):
            break
        time.sleep(0.05)
    took = time.monotonic() - t0
    if b["state"] != "succeeded":
        sys.exit(f"build #{bid} {b['state']}: {b.get('error')}")
    ts = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    c = (b.get("abi_report") or {}).get("build", {}).get("cache", {})
    so = f"build/{variant}/_{module}_cpu_{b['commit'][:7]}.abi3.so"
    digest = hashlib.sha256(call("GET", f"/kernels/{REPO}/resolve/v1/{so}", raw=True)).hexdigest()
    head = git("ls-remote", "origin", "refs/heads/v1").split()[0]
    note = (b.get("note") or "-").split(" ")[0]
    print(what, f"{took:.1f} {ts(b['finished_at']) - ts(b['started_at']):.1f} {c.get('hits', '-')} {c.get('misses', '-')}"
          f" {digest[:16]} {head[:12]} {note}", flush=True)
def push(message):
    t0 = time.monotonic()
    git("add", "-A")
    git("commit", "-qm", message)
    git("push", "-q", "origin", "HEAD:main")
    sha = git("rev-parse", "HEAD")
    wait(message, build_of(sha), t0)
    git("pull", "-q", "--rebase", "origin", "main")	# the farm publishes README.md on main
    return sha
def rebuild(what, sha):
    t0 = time.monotonic()
    b = call("POST", f"/api/kernels/{REPO}/builds", {"revision": sha, "variants": [variant], "force": True})
    wait(what, b["builds"][0]["id"], t0)
if mode == "cache":
    push("cold")
    with open(f"{clone}/{change}", "a") as f:	# a line of code: the unit's text changes
        f.write('static_assert(sizeof(char) == 1, "one more line");\n')
    sha = push("change")
    rebuild("nochange", sha)
    open(f"{clone}/.git/bench-sha", "w").write(sha)
else:
    rebuild("nocache", open(f"{clone}/.git/bench-sha").read().strip())
PY
rm -rf "$W/work/w1/ccache"	# cold
start_worker w1
C_PID=$WPID
python3 "$TEST_DIR/c.py" "$KHUB_URL" "$ALICE" "$VARIANT" "$CCLONE" "$MODULE" cache "$CHANGE" >"$TEST_DIR/c.out" 2>"$TEST_DIR/c.err" ||
	{ echo "(c) failed:" >&2; cat "$TEST_DIR/c.out" "$TEST_DIR/c.err" >&2; exit 1; }
stop_workers "$C_PID"
start_worker w1 --no-build-cache
C_PID=$WPID
python3 "$TEST_DIR/c.py" "$KHUB_URL" "$ALICE" "$VARIANT" "$CCLONE" "$MODULE" nocache "$CHANGE" >>"$TEST_DIR/c.out" 2>"$TEST_DIR/c.err" ||
	{ echo "(c) failed:" >&2; cat "$TEST_DIR/c.out" "$TEST_DIR/c.err" >&2; exit 1; }
stop_workers "$C_PID"
fi

echo "# khub: $KHUB_BUILD"
echo "# variant $VARIANT, toolchain $TOOLCHAIN, source $KSRC"
part c && echo "# (c): source $CSRC, one line appended to $CHANGE"
part a && printf '%-60s %10s\n' "(a) khub-worker build by hand, median (s)" "$A_DIRECT"
part a && printf '%-60s %10s\n' "(a) through the farm: enqueue -> published, median (s)" "$A_FARM"
part a && printf '%-60s %10s  %s\n' "(a) farm / by hand" "$A_RATIO" \
	"$(python3 -c "print('PASS (<= 1.1x)' if $A_RATIO <= 1.1 else 'MISS (target <= 1.1x)')")"
part a && printf '%-60s %10s\n' "(a) each run, by hand / farm (s)" "$A_ALL"
part b && printf '%-60s %10s\n' "(b) jobs claimed / enqueued (per worker: $B_SPLIT)" "$B_CLAIMED/$B_JOBS"
part b && printf '%-60s %10s\n' "(b) builds succeeded" "$B_OK"
part b && printf '%-60s %10s\n' "(b) enqueue -> claim by an idle worker, median (ms)" "$B_IDLE50"
part b && printf '%-60s %10s\n' "(b) enqueue -> claim by an idle worker, max (ms)" "$B_IDLEMAX"
part b && printf '%-60s %10s\n' "(b) enqueue -> claim, all jobs (queued behind builds), p50 (ms)" "$B_ALL50"
part b && printf '%-60s %10s\n' "(b) enqueue -> claim, all jobs, p99 (ms)" "$B_ALL99"
part b && printf '%-60s %10s\n' "(b) build end -> next claim by the same worker, p50 (ms)" "$B_GAP50"
part b && printf '%-60s %10s\n' "(b) build end -> next claim by the same worker, p99 (ms, n=$B_NGAP)" "$B_GAP99"

if part c; then
	while read -r what took ran hits misses so head note; do
		printf '%-60s %10s\n' "(c) $what: push/enqueue -> published (s)" "$took"
		printf '%-60s %10s\n' "(c) $what: started -> finished on the worker (s)" "$ran"
		printf '%-60s %10s\n' "(c) $what: cache hits/misses" "$hits/$misses"
		printf '%-60s %10s\n' "(c) $what: .so sha256, v1 head, note" "$so $head $note"
	done <"$TEST_DIR/c.out"
	python3 - "$TEST_DIR/c.out" <<'PY'
import sys
r = {l.split()[0]: l.split() for l in open(sys.argv[1]) if l.strip()}
cold, change = float(r["cold"][1]), float(r["change"][1])
print("%-60s %10.3f  %s" % ("(c) one-line change / cold, push -> published", change / cold,
                            "PASS (<= 0.30)" if change / cold <= 0.30 else "MISS (target <= 0.30)"))
print("%-60s %10.3f" % ("(c) one-line change / cold, on the worker", float(r["change"][2]) / float(r["cold"][2])))
print("%-60s %10s" % ("(c) no change: nothing new published (v1 head unchanged)",
                      "yes" if r["nochange"][6] == r["change"][6] else "NO"))
print("%-60s %10s" % ("(c) cached and uncached builds: the same .so bytes",
                      "yes" if r["nochange"][5] == r["nocache"][5] and r["nocache"][7] == "identical" else "NO"))
PY
fi
