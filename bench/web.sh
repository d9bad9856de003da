#!/usr/bin/env bash
# bench/web.sh -- the web UI's two budgets, measured: server time per page
# (p50 under 5 ms with 1,000 kernels in the hub) and the size of the UI's own
# files (HTML templates, CSS, JS; under 150 KB, the chart library aside). Not
# part of the test suite.
#
# Starts a throw-away khub (embedded PostgreSQL, a release build as the other
# bench scripts do), publishes 1,000 kernel repos over 20 orgs through the
# API (each with a README and three variants; one with benchmark runs and
# downloads), signs in, then requests every page BENCH_REQUESTS times and
# reads the server's own time per request from its access log (the "us"
# field), so client and network time are left out. Prints a table with
# PASS/MISS per target; a MISS never fails the script (exit 0 if it ran).
#
# Environment (all optional):
#   BENCH_KERNELS        kernel repos to publish         (default 1000)
#   BENCH_REQUESTS       requests per page               (default 200)
#   BENCH_RELEASE_BUILD  as in bench/read_path.sh        (default auto)
#   KHUB_BIN             the khub binary                 (default ./khub)

set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KERNELS=${BENCH_KERNELS:-1000}
REQUESTS=${BENCH_REQUESTS:-200}
export KHUB_SRC=${KHUB_SRC:-$ROOT}
export KHUB_BIN=${KHUB_BIN:-$ROOT/khub}

for tool in curl python3; do
	command -v "$tool" >/dev/null 2>&1 || { echo "web.sh: $tool is not installed" >&2; exit 1; }
done

# shellcheck source=../tests/lib/khub-test.sh
. "$ROOT/tests/lib/khub-test.sh"
khub_setup
. "$ROOT/bench/lib/release_build.sh"
bench_release_build

# ---- own asset size ------------------------------------------------------------------------
own_bytes=$(cat "$ROOT"/web/templates/*.html "$ROOT"/web/static/*.css "$ROOT"/web/static/*.js | wc -c)
vendor_bytes=$(cat "$ROOT"/web/node_modules/uplot/dist/uPlot.iife.min.js "$ROOT"/web/node_modules/uplot/dist/uPlot.min.css 2>/dev/null | wc -c)

# ---- a hub with 1,000 kernels ------------------------------------------------------------------
export KHUB_LOG_LEVEL=info
khub admin user create root --site-admin >/dev/null 2>&1
for i in $(seq -w 0 19); do khub admin org create "org$i" >/dev/null 2>&1; done
TOKEN=$(khub admin token create root --scope write 2>/dev/null)
khub_start --download-stats-flush-ms 200
echo "# publishing $KERNELS kernels through the API ..." >&2
python3 - "$KHUB_URL" "$TOKEN" "$KERNELS" <<'PY' || { echo "web.sh: publishing failed" >&2; exit 1; }
import base64, http.client, json, sys, time, urllib.parse
url, token, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port)
H = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
def b64(s): return base64.b64encode(s.encode()).decode()
def meta(b): return json.dumps({"id": "k", "name": "k", "version": 1, "license": "mit", "python-depends": [], "backend": {"type": b}})
for i in range(n):
    org, name = f"org{i % 20:02d}", f"k{i:04d}"
    files = [{"path": "README.md", "content": b64(f"# {name}\n\nKernel {i}.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"), "encoding": "base64"}]
    for v, b in (("torch-cpu", "cpu"), ("torch211-cxx11-cu128-x86_64-linux", "cuda"), ("torch211-cxx11-rocm71-x86_64-linux", "rocm")):
        files.append({"path": f"build/{v}/__init__.py", "content": b64("x = 1\n"), "encoding": "base64"})
        files.append({"path": f"build/{v}/metadata.json", "content": b64(meta(b)), "encoding": "base64"})
    for attempt in range(10):	# a 503 (busy machine) says when to retry
        conn.request("POST", "/api/repos/create", json.dumps({"name": name, "organization": org, "type": "kernel", "files": files}), H)
        r = conn.getresponse(); r.read()
        if r.status != 503:
            break
        time.sleep(float(r.getheader("Retry-After") or 1))
    if r.status != 200:
        sys.exit(f"create {org}/{name}: {r.status}")
    if i == 0:
        conn.request("POST", f"/api/kernels/{org}/{name}/branch/v1", "{}", H); r = conn.getresponse(); r.read()
        conn.request("GET", f"/api/kernels/{org}/{name}/revision/v1", headers=H); r = conn.getresponse()
        sha = json.loads(r.read())["sha"]
        for gpu, scale in (("NVIDIA H100", 1.0), ("NVIDIA A100", 1.6)):
            run = {"results": [{"workload": w, "timingResults": {"mean_ms": k * scale, "std_ms": 0.01, "min_ms": k * scale, "max_ms": k * scale,
                   "q1_ms": k * scale, "q3_ms": k * scale, "iqr_ms": 0, "outliers": 0, "iterations": 100}} for k, w in enumerate(("K.small", "K.large", "K.reference"), 1)],
                   "machineInfo": {"gpu": gpu, "backend": "CUDA 12.8", "pytorchVersion": "2.11.0", "os": "Linux", "cpu": "x86_64"},
                   "kernelCommitSha": sha, "benchmarkScriptPath": "benchmarks/benchmark.py"}
            conn.request("POST", f"/api/kernels/{org}/{name}/benchmarks", json.dumps(run), H); r = conn.getresponse(); r.read()
        for _ in range(5):
            conn.request("GET", f"/kernels/{org}/{name}/resolve/main/build/torch211-cxx11-cu128-x86_64-linux/metadata.json")
            r = conn.getresponse(); r.read()
PY
sleep 1
# Fresh statistics, as autovacuum would soon have: measure the steady state,
# not the planner's guesses about tables it has not looked at yet.
if command -v psql >/dev/null 2>&1; then
	psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qc ANALYZE >/dev/null 2>&1 ||
		echo "# ANALYZE failed: the filtered listings may be measured with stale statistics" >&2
fi

# a session for the signed-in pages
login_cookie=$(curl -s -c - "$KHUB_URL/login" -o "$TEST_DIR/login.html" | awk '$6 == "khub_login" {print $7}')
csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/login.html" | head -1 | sed 's/.*value="//; s/"//')
session=$(curl -s -c - -o /dev/null -b "khub_login=$login_cookie" --data-urlencode "csrf=$csrf" \
	--data-urlencode "token=$TOKEN" --data-urlencode "next=/kernels" "$KHUB_URL/login" | awk '$6 == "khub_session" {print $7}')
[ -n "$session" ] || { echo "web.sh: sign-in failed" >&2; exit 1; }

PAGES=(
	"/kernels"
	"/kernels?backend=cuda&torch=2.11&sort=downloads"
	"/kernels?search=k09&trusted=false&sort=trending"
	"/kernels/org00/k0000"
	"/kernels/org05/k$(printf %04d $(( (KERNELS - 1) / 20 * 20 + 5 < KERNELS ? (KERNELS - 1) / 20 * 20 + 5 : 5 )))"
	"/kernels/org00/k0000/tree/main/build"
	"/kernels/org00/k0000/commits/main"
	"/org00"
	"/login"
	"/settings/tokens"
	"/admin"
)
# kernel page bytes (HTML) for the report
page_bytes=$(curl -s -b "khub_session=$session" "$KHUB_URL/kernels/org00/k0000" | wc -c)
sleep 0.2
start_line=$(wc -l <"$TEST_DIR/server.log")
for p in "${PAGES[@]}"; do
	for _ in $(seq 1 "$REQUESTS"); do echo "url = \"$KHUB_URL$p\""; echo "output = /dev/null"; done
done >"$TEST_DIR/curl.cfg"
curl -s -b "khub_session=$session" -K "$TEST_DIR/curl.cfg"
sleep 0.5

tail -n +"$((start_line + 1))" "$TEST_DIR/server.log" >"$TEST_DIR/measured.log"
python3 - "$TEST_DIR/measured.log" "$own_bytes" "$vendor_bytes" "$page_bytes" "$KERNELS" "$KHUB_BUILD" "${PAGES[@]}" <<'PY'
import re, statistics, sys
log = open(sys.argv[1])
own, vendor, page_bytes, kernels, build = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
pages = sys.argv[7:]
# requests ran one after the other, page after page: the log lines come in
# that order (the access log has no query string)
lines = [m for m in (re.search(r' GET (\S+) (\d{3}) \d+ bytes (\d+) us', l) for l in log) if m]
n = len(lines) // len(pages) if pages else 0
times = {p: sorted(int(m.group(3)) / 1000 for m in lines[i * n:(i + 1) * n]) for i, p in enumerate(pages)}
status = {p: sorted({m.group(2) for m in lines[i * n:(i + 1) * n]}) for i, p in enumerate(pages)}
print(f"# khub web UI, {kernels} kernels, {build}")
print(f"{'page':52} {'n':>5} {'p50 ms':>8} {'p95 ms':>8}  target p50 < 5 ms")
if len(lines) != n * len(pages):
    print(f"# {len(lines)} log lines for {len(pages)} pages: some requests are missing")
worst = 0
for p in pages:
    t = sorted(times[p])
    if not t:
        worst = float("inf")
        print(f"{p:52} {0:5d} {'-':>8} {'-':>8}  MISS (no answers)"); continue
    p50, p95 = statistics.median(t), t[max(0, int(len(t) * 0.95) - 1)]
    worst = max(worst, p50)
    print(f"{p:52} {len(t):5d} {p50:8.2f} {p95:8.2f}  {'PASS' if p50 < 5 else 'MISS'} (HTTP {','.join(status[p])})")
print(f"worst page p50: {worst:.2f} ms  {'PASS' if worst < 5 else 'MISS'}")
print(f"own assets (templates, CSS, JS): {own / 1000:.1f} KB  {'PASS' if own < 150000 else 'MISS'} (< 150 KB); "
      f"uPlot (embedded, not counted): {vendor / 1000:.1f} KB; kernel page HTML: {page_bytes / 1000:.1f} KB")
PY
exit 0
