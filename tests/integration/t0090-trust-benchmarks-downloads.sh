#!/bin/bash
# t0090-trust-benchmarks-downloads.sh -- the kernel repo type's own
# endpoints: the trusted-publisher admin API (and what the org overview
# then says), benchmark uploads in the exact shape `kernels benchmark`
# builds (round trip, filters, aggregate, CSV, malformed bodies), and
# download counting under parallel load (exact counts, shutdown flush,
# latency with and without counting).
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
V1=$(khub import "$SRC" --repo acme/relu --branch v1 2>/dev/null)
echo "changed" >>"$SRC/README.md"
MAIN=$(khub import "$SRC" --repo acme/relu --branch main --message "main commit" 2>/dev/null)
khub import "$SRC" --repo acme/secret --branch main --private >/dev/null 2>&1
khub import "$SRC" --repo acme/doomed --branch main >/dev/null 2>&1
LEGACY=$TEST_DIR/legacy
mkdir -p "$LEGACY/build/torch-universal"
printf 'def relu(x):\n    return x\n' >"$LEGACY/build/torch-universal/__init__.py"
khub import "$LEGACY" --repo acme/legacy --branch main >/dev/null 2>&1
khub admin user create root --site-admin >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin user create mallory >/dev/null 2>&1
khub admin user create carol >/dev/null 2>&1
khub admin member set acme alice read >/dev/null 2>&1
khub admin member set acme carol write >/dev/null 2>&1
ROOT=$(khub admin token create root --scope admin 2>/dev/null)
ROOT_READ=$(khub admin token create root --scope read 2>/dev/null)
ALICE=$(khub admin token create alice --scope read 2>/dev/null)
MALLORY=$(khub admin token create mallory 2>/dev/null)
CAROL=$(khub admin token create carol --scope write 2>/dev/null)
khub_start --download-stats-flush-ms 200

H=$TEST_DIR/headers
B=$TEST_DIR/body	# for api, header (tests/lib/khub-test.sh)
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print($1)"; }
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
overview_trusted() {
	api GET "$KHUB_URL/api/$1/$2/overview"
	json 'd["trustedKernelPublisher"]'
}

# ---- trusted publishers ---------------------------------------------------------------------
TP=$KHUB_URL/api/admin/trusted-publishers
api GET "$TP"
is "$STATUS/$(cat "$B")" "200/[]" "the trusted-publisher list is public and starts empty"
is "$(overview_trusted organizations acme)" False "acme starts untrusted"
api PUT "$TP/acme"
is "$STATUS" 401 "PUT anonymous: 401"
api PUT "$TP/acme" -H "Authorization: Bearer $ALICE"
is "$STATUS" 403 "PUT as a user who is not a site admin: 403"
api PUT "$TP/acme" -H "Authorization: Bearer $ROOT_READ"
is "$STATUS" 403 "PUT as a site admin with a read-scoped token: 403"
is "$(overview_trusted organizations acme)" False "refused changes change nothing"
api PUT "$TP/acme" -H "Authorization: Bearer $ROOT"
is "$STATUS/$(json '(d["name"], d["type"], d["trustedKernelPublisher"], d["changed"])')" \
	"200/('acme', 'org', True, True)" "site admin sets acme trusted"
is "$(overview_trusted organizations acme)" True "the org overview says trustedKernelPublisher: true at once"
api PUT "$TP/acme" -H "Authorization: Bearer $ROOT"
is "$(json 'd["changed"]')" False "setting it again changes nothing"
api PUT "$TP/Alice" -H "Authorization: Bearer $ROOT"
is "$STATUS/$(json 'd["type"]')" "200/user" "a user namespace can be trusted too (case-insensitive name)"
is "$(overview_trusted users alice)" True "the user overview says so"
api GET "$TP"
is "$(json '[(e["name"], e["type"], e["changedBy"]) for e in d]')" "[('acme', 'org', 'root'), ('alice', 'user', 'root')]" \
	"the list names both, with who trusted them"
like "$(json 'd[0]["trustedSince"]')" '^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' "the list says since when"
api DELETE "$TP/alice" -H "Authorization: Bearer $MALLORY"
is "$STATUS" 403 "DELETE as a non-admin: 403"
api DELETE "$TP/alice" -H "Authorization: Bearer $ROOT"
is "$STATUS/$(json 'd["trustedKernelPublisher"]')" "200/False" "site admin unsets alice"
is "$(overview_trusted users alice)" False "the user overview says false again"
api PUT "$TP/nobody-here" -H "Authorization: Bearer $ROOT"
is "$STATUS" 404 "unknown account: 404"
khub admin trust list >"$TEST_DIR/trust.txt" 2>&1
is "$(cut -f1 "$TEST_DIR/trust.txt" | tr '\n' ' ')" "acme " "khub admin trust list agrees with the API"
if command -v psql >/dev/null 2>&1; then
	is "$(sql "select string_agg(action || ':' || target || ':' || actor_name, ' ' order by id) from audit_log where action like 'trust.%'")" \
		"trust.set:acme:root trust.set:acme:root trust.set:alice:root trust.unset:alice:root" \
		"every change through the API is audited with the admin's name"
	is "$(sql "select string_agg(a.name || '=' || c.trusted || '/' || c.changed_by, ' ' order by c.id) from trusted_publisher_changes c join accounts a on a.id = c.account_id")" \
		"acme=true/root alice=true/root alice=false/root" "trusted_publisher_changes records the real changes"
else
	ok 0 "# SKIP psql not installed"
	ok 0 "# SKIP psql not installed"
fi

# ---- benchmarks: payloads in the shape of kernels' BenchmarkResult.to_payload() --------------
# The dataclasses and to_payload() as kernels/src/kernels/cli/benchmark.py
# has them (without the @strict validators); timings are rounded to 4
# decimals as run_benchmark_class does.
cat >"$TEST_DIR/payloads.py" <<'PY'
import hashlib, json, sys
from dataclasses import dataclass


@dataclass
class TimingResults:
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    iterations: int
    q1_ms: float = 0.0
    q3_ms: float = 0.0
    iqr_ms: float = 0.0
    outliers: int = 0
    verified: bool | None = None
    ref_mean_ms: float | None = None


@dataclass
class MachineInfo:
    gpu: str
    backend: str
    pytorch_version: str
    os: str
    cpu: str
    gpu_cores: int | None = None


@dataclass
class BenchmarkResult:
    timing_results: dict[str, TimingResults]
    machine_info: MachineInfo
    kernel_commit_sha: str
    benchmark_script_path: str
    benchmark_script_sha: str | None = None

    def to_payload(self) -> dict:
        results = []
        for name, timing in sorted(self.timing_results.items()):
            entry: dict = {
                "workload": name,
                "timingResults": {
                    "mean_ms": timing.mean_ms,
                    "std_ms": timing.std_ms,
                    "min_ms": timing.min_ms,
                    "max_ms": timing.max_ms,
                    "q1_ms": timing.q1_ms,
                    "q3_ms": timing.q3_ms,
                    "iqr_ms": timing.iqr_ms,
                    "outliers": timing.outliers,
                    "iterations": timing.iterations,
                },
            }
            if timing.verified is not None:
                entry["verified"] = timing.verified
            results.append(entry)

        machine_info: dict[str, str | int] = {
            "gpu": self.machine_info.gpu,
            "backend": self.machine_info.backend,
            "pytorchVersion": self.machine_info.pytorch_version,
            "os": self.machine_info.os,
            "cpu": self.machine_info.cpu,
        }
        if self.machine_info.gpu_cores is not None:
            machine_info["gpuCores"] = self.machine_info.gpu_cores

        payload = {
            "results": results,
            "machineInfo": machine_info,
            "kernelCommitSha": self.kernel_commit_sha,
            "benchmarkScriptPath": self.benchmark_script_path,
        }
        if self.benchmark_script_sha:
            payload["benchmarkScriptSha"] = self.benchmark_script_sha
        return payload


def percentile(sorted_data, p):
    idx = (len(sorted_data) - 1) * p / 100.0
    lower = int(idx)
    upper = min(lower + 1, len(sorted_data) - 1)
    weight = idx - lower
    return sorted_data[lower] * (1 - weight) + sorted_data[upper] * weight


def timing(times_ms, verified=None, ref=None):
    """What run_benchmark_class computes from raw times."""
    mean = sum(times_ms) / len(times_ms)
    std = (sum((t - mean) ** 2 for t in times_ms) / len(times_ms)) ** 0.5
    s = sorted(times_ms)
    q1, q3 = percentile(s, 25), percentile(s, 75)
    iqr = q3 - q1
    outliers = sum(1 for t in times_ms if t < q1 - 1.5 * iqr or t > q3 + 1.5 * iqr)
    return TimingResults(mean_ms=round(mean, 4), std_ms=round(std, 4), min_ms=round(min(times_ms), 4),
                         max_ms=round(max(times_ms), 4), iterations=len(times_ms), q1_ms=round(q1, 4),
                         q3_ms=round(q3, 4), iqr_ms=round(iqr, 4), outliers=outliers, verified=verified,
                         ref_mean_ms=ref)


def series(base, n=100):
    return [base * (1 + 0.01 * ((i * 37) % 11)) + (0.5 * base if i == 7 else 0) for i in range(n)]


script_sha = hashlib.sha256(b"class ReluBenchmark(Benchmark): ...").hexdigest()
h100 = MachineInfo(gpu="NVIDIA H100 80GB HBM3", backend="CUDA 12.8", pytorch_version="2.11.0+cu128",
                   os="Linux 6.8.0-45-generic", cpu="x86_64")
mi300 = MachineInfo(gpu="AMD Instinct MI300X", backend="ROCm 7.1.25424", pytorch_version="2.11.0+rocm7.1",
                    os="Linux 6.8.0-45-generic", cpu="x86_64", gpu_cores=304)
v1, main = sys.argv[1], sys.argv[2]
runs = [
    BenchmarkResult({"ReluBenchmark.relu_small": timing(series(0.021), True, 0.05),
                     "ReluBenchmark.relu_large": timing(series(0.48), True, 0.9),
                     "ReluBenchmark.reference": timing(series(0.063))},
                    h100, v1[:7], "benchmarks", script_sha),
    BenchmarkResult({"ReluBenchmark.relu_small": timing(series(0.17), False),
                     "ReluBenchmark.reference": timing(series(0.2))},
                    mi300, main, "benchmarks"),
    BenchmarkResult({"ReluBenchmark.relu_small": timing(series(0.019), True),
                     "ReluBenchmark.relu_large": timing(series(0.45), True),
                     "ReluBenchmark.reference": timing(series(0.061))},
                    h100, v1, "benchmarks", script_sha),
]
for i, r in enumerate(runs):
    json.dump(r.to_payload(), open(f"{sys.argv[3]}/run{i}.json", "w"))
PY
/usr/bin/python3 "$TEST_DIR/payloads.py" "$V1" "$MAIN" "$TEST_DIR"
BENCH=$KHUB_URL/api/kernels/acme/relu/benchmarks
post() {	# post FILE [curl args]
	local file=$1; shift
	api POST "$BENCH" -H 'Content-Type: application/json' --data-binary "@$file" "$@"
}

post "$TEST_DIR/run0.json"
is "$STATUS" 401 "upload anonymous: 401"
api POST "$KHUB_URL/api/kernels/acme/secret/benchmarks" -H "Authorization: Bearer $MALLORY" \
	-H 'Content-Type: application/json' --data-binary "@$TEST_DIR/run0.json"
is "$STATUS/$(header X-Error-Code)" "404/RepoNotFound" "upload to a private repo by an outsider: 404 RepoNotFound"
post "$TEST_DIR/run0.json" -H "Authorization: Bearer $ALICE"
is "$STATUS" 403 "upload with a read-scoped token (of a read member): 403"
IDS=()
for i in 0 1 2; do
	post "$TEST_DIR/run$i.json" -H "Authorization: Bearer $CAROL"
	is "$STATUS/$(json 'd["source"]')" 200/maintainer "upload run $i by a write member: 200, a maintainer run (what kernels' submit_benchmark expects)"
	IDS+=("$(json 'd["id"]')")
done
is "$(json 'd["commit"]')" "$V1" "the answer names the resolved commit"
post "$TEST_DIR/run0.json" -H "Authorization: Bearer $MALLORY"
is "$STATUS/$(json 'd["source"]')" 200/community "upload by a signed-in non-member with a write token: stored as a community run"
COMMUNITY_ID=$(json 'd["id"]')
api GET "$BENCH?id=$COMMUNITY_ID"
is "$STATUS/$(cat "$B")" "200/[]" "community runs are not listed by default"
api GET "$BENCH?id=$COMMUNITY_ID&source=community"
is "$(json '[(r["id"], r["source"]) for r in d]')" "[($COMMUNITY_ID, 'community')]" "…but with ?source=community"
api GET "$BENCH?source=bogus"
is "$STATUS" 400 "source=bogus: 400"
post "$TEST_DIR/run0.json" -H "Authorization: Bearer $CAROL"
is "$STATUS" 200 "the same payload again is a new run (runs are measurements)"
EXTRA_ID=$(json 'd["id"]')

# Round trip: what GET answers for a run is what was sent.
ROUNDTRIP=$(/usr/bin/python3 - "$BENCH" "$CAROL" "$TEST_DIR" "${IDS[@]}" <<'PY'
import json, sys, urllib.request
base, token, tmp, ids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
bad = []
for i, rid in enumerate(ids):
    sent = json.load(open(f"{tmp}/run{i}.json"))
    got = json.load(urllib.request.urlopen(f"{base}?id={rid}"))
    if len(got) != 1:
        bad.append(f"run {i}: {len(got)} answers")
        continue
    got = got[0]
    for key in ("results", "machineInfo", "kernelCommitSha", "benchmarkScriptPath"):
        if got[key] != sent[key]:
            bad.append(f"run {i}: {key} differs: {got[key]!r} != {sent[key]!r}")
    if got.get("benchmarkScriptSha") != sent.get("benchmarkScriptSha"):
        bad.append(f"run {i}: benchmarkScriptSha differs")
    if got["submitter"] != "carol" or got["source"] != "maintainer" or not got["submittedAt"].endswith("Z"):
        bad.append(f"run {i}: submitter/time {got['submitter']} {got['submittedAt']}")
print("ok" if not bad else "; ".join(bad))
PY
)
is "$ROUNDTRIP" ok "GET gives back exactly the uploaded results, machineInfo, shas and script path"

count_runs() {	# count_runs QUERY -> number of runs
	api GET "$BENCH?$1"
	json 'len(d)'
}
is "$(count_runs '')" 4 "all four runs listed"
api GET "$BENCH"
is "$(json '[r["id"] for r in d]')" "[$EXTRA_ID, ${IDS[2]}, ${IDS[1]}, ${IDS[0]}]" "newest first"
is "$(count_runs revision=v1)" 3 "revision=v1 (branch) keeps the runs of v1's commit (short and full sha)"
is "$(count_runs "revision=$MAIN")" 1 "revision=<sha> keeps the run of that commit"
is "$(count_runs "revision=${MAIN:0:10}")" 1 "an abbreviated sha works too"
api GET "$BENCH?revision=nope"
is "$STATUS/$(header X-Error-Code)" "404/RevisionNotFound" "unknown revision: 404 RevisionNotFound"
is "$(count_runs gpu=h100)" 3 "gpu= is a case-insensitive substring"
is "$(count_runs backend=cuda)" 3 "backend=cuda (family)"
is "$(count_runs backend=cu128)" 3 "backend=cu128 (variant-style key)"
is "$(count_runs backend=rocm71)" 1 "backend=rocm71"
is "$(count_runs 'backend=ROCm%207.1.25424')" 1 "backend= the exact machineInfo text"
is "$(count_runs variant=torch211-cxx11-cu128-x86_64-linux)" 3 "variant= keeps machines that load that variant"
is "$(count_runs variant=torch210-cxx11-cu128-x86_64-linux)" 0 "another torch minor matches nothing"
is "$(count_runs variant=torch-rocm)" 1 "variant=torch-rocm: any ROCm"
is "$(count_runs variant=torch-cpu)" 0 "variant=torch-cpu: no CPU runs"
is "$(count_runs variant=torch-universal)" 4 "variant=torch-universal: all"
api GET "$BENCH?variant=%3F%3F"
is "$STATUS" 400 "an unreadable variant name: 400"
api GET "$BENCH?workload=ReluBenchmark.relu_large"
is "$(json 'str((sorted({r["workload"] for run in d for r in run["results"]}), len(d)))')" "(['ReluBenchmark.relu_large'], 3)" \
	"workload= keeps that workload's results and the runs that have it"

# Pagination: absolute Link headers that keep the filters.
PAGED=$(/usr/bin/python3 - "$BENCH?limit=1&gpu=h100" <<'PY'
import json, re, sys, urllib.request
url, ids, links = sys.argv[1], [], []
while url:
    resp = urllib.request.urlopen(url)
    ids += [r["id"] for r in json.load(resp)]
    m = re.match(r'<(.*)>; rel="next"', resp.headers.get("Link") or "")
    url = m.group(1) if m else None
    if url:
        links.append(url)
print(len(ids), len(set(ids)), all(l.startswith("http://127.0.0.1:") and "gpu=h100" in l for l in links))
PY
)
is "$PAGED" "3 3 True" "limit=1 pages through every run once, with absolute Links keeping the filter"

# CSV listing
CSV_OK=$(/usr/bin/python3 - "$BENCH?format=csv&revision=main" "$TEST_DIR/run1.json" <<'PY'
import csv, io, json, sys, urllib.request
resp = urllib.request.urlopen(sys.argv[1])
rows = list(csv.DictReader(io.StringIO(resp.read().decode())))
sent = json.load(open(sys.argv[2]))
ok = resp.headers["Content-Type"].startswith("text/csv") and len(rows) == len(sent["results"])
for row, r in zip(rows, sent["results"]):
    ok &= row["workload"] == r["workload"] and row["gpu"] == sent["machineInfo"]["gpu"]
    ok &= row["gpu_cores"] == "304" and row["backend"] == "ROCm 7.1.25424"
    for k, v in r["timingResults"].items():
        ok &= float(row[k]) == v
    ok &= row["verified"] == ("" if "verified" not in r else str(r["verified"]).lower())
print("ok" if ok else rows)
PY
)
is "$CSV_OK" ok "format=csv lists one row per result with the same numbers"

# Aggregate: per workload and GPU, median and latest, speedup against the reference.
AGG=$(/usr/bin/python3 - "$BENCH/aggregate" "$TEST_DIR" <<'PY'
import csv, io, json, statistics, sys, urllib.request
base, tmp = sys.argv[1], sys.argv[2]
runs = [json.load(open(f"{tmp}/run{i}.json")) for i in (0, 1, 2, 0)]   # run0 was sent twice
want = {}
for run in runs:
    for r in run["results"]:
        want.setdefault((r["workload"], run["machineInfo"]["gpu"]), []).append(r["timingResults"]["mean_ms"])
got = json.load(urllib.request.urlopen(base))
problems = []
rows = {(e["workload"], e["gpu"]): e for e in got["results"]}
if set(rows) != set(want):
    problems.append(f"groups {sorted(rows)}")
for key, means in want.items():
    e = rows.get(key)
    if not e:
        continue
    if e["count"] != len(means) or abs(e["medianMeanMs"] - statistics.median(means)) > 1e-12:
        problems.append(f"{key}: count/median {e['count']} {e['medianMeanMs']}")
    if e["latest"]["mean_ms"] != means[-1]:
        problems.append(f"{key}: latest {e['latest']['mean_ms']} != {means[-1]}")
    if e["bestMeanMs"] != min(means):
        problems.append(f"{key}: best")
    ref = ("ReluBenchmark.reference", key[1])
    if key[0] != ref[0]:
        speedup = statistics.median(want[ref]) / statistics.median(means)
        if e["referenceWorkload"] != ref[0] or abs(e["speedup"] - speedup) > 1e-9:
            problems.append(f"{key}: speedup {e['speedup']} != {speedup}")
    elif e["speedup"] is not None:
        problems.append("the reference has no speedup against itself")
# ?reference= another workload of the class; CSV says the same as JSON.
got = json.load(urllib.request.urlopen(base + "?reference=relu_large&gpu=h100"))
e = [e for e in got["results"] if e["workload"] == "ReluBenchmark.relu_small"][0]
speedup = statistics.median(want[("ReluBenchmark.relu_large", e["gpu"])]) / statistics.median(want[("ReluBenchmark.relu_small", e["gpu"])])
if abs(e["speedup"] - speedup) > 1e-9 or len(got["results"]) != 3:
    problems.append(f"reference=relu_large: {e['speedup']} != {speedup}")
resp = urllib.request.urlopen(base + "?format=csv&workload=ReluBenchmark.relu_small")
table = list(csv.DictReader(io.StringIO(resp.read().decode())))
js = {e["gpu"]: e for e in json.load(urllib.request.urlopen(base + "?workload=ReluBenchmark.relu_small"))["results"]}
if len(table) != 2 or len(js) != 2:
    problems.append(f"workload filter: {len(table)} csv rows, {len(js)} json")
for row in table:
    e = js[row["gpu"]]
    if float(row["speedup"]) != e["speedup"] or float(row["median_mean_ms"]) != e["medianMeanMs"] or int(row["count"]) != e["count"]:
        problems.append(f"csv {row} != json {e}")
print("ok" if not problems else "; ".join(problems))
PY
)
is "$AGG" ok "aggregate: per workload+GPU count, median, best, latest and speedup vs the reference (JSON = CSV)"

# Malformed uploads
cat >"$TEST_DIR/malformed.py" <<'PY'
import copy, json, sys
base = json.load(open(sys.argv[1]))
out = sys.argv[2]
def variant(name, change):
    p = copy.deepcopy(base)
    change(p)
    json.dump(p, open(f"{out}/bad-{name}.json", "w"))
def setitem(path, value):
    def f(p):
        for k in path[:-1]:
            p = p[k]
        p[path[-1]] = value
    return f
def delitem(path):
    def f(p):
        for k in path[:-1]:
            p = p[k]
        del p[path[-1]]
    return f
variant("no-results", delitem(["results"]))
variant("results-object", setitem(["results"], {}))
variant("results-empty", setitem(["results"], []))
variant("no-mean", delitem(["results", 0, "timingResults", "mean_ms"]))
variant("no-timing", delitem(["results", 0, "timingResults"]))
variant("no-workload", delitem(["results", 0, "workload"]))
variant("negative-min", setitem(["results", 0, "timingResults", "min_ms"], -0.5))
variant("min-above-max", setitem(["results", 0, "timingResults", "min_ms"], 99.0))
variant("mean-above-max", setitem(["results", 0, "timingResults", "mean_ms"], 99.0))
variant("zero-iterations", setitem(["results", 0, "timingResults", "iterations"], 0))
variant("float-iterations", setitem(["results", 0, "timingResults", "iterations"], 1.5))
variant("string-outliers", setitem(["results", 0, "timingResults", "outliers"], "3"))
variant("too-many-outliers", setitem(["results", 0, "timingResults", "outliers"], 101))
variant("bool-mean", setitem(["results", 0, "timingResults", "mean_ms"], True))
variant("huge-mean", setitem(["results", 0, "timingResults", "max_ms"], 1e12))
variant("string-verified", setitem(["results", 0, "verified"], "yes"))
variant("no-gpu", delitem(["machineInfo", "gpu"]))
variant("number-gpu", setitem(["machineInfo", "gpu"], 42))
variant("long-gpu", setitem(["machineInfo", "gpu"], "H" * 300))
variant("control-gpu", setitem(["machineInfo", "gpu"], "H100\n,evil"))
variant("float-cores", setitem(["machineInfo", "gpuCores"], 1.5))
variant("no-machine", delitem(["machineInfo"]))
variant("no-commit", delitem(["kernelCommitSha"]))
variant("unknown-commit", setitem(["kernelCommitSha"], "0000000"))
variant("branch-commit", setitem(["kernelCommitSha"], "main"))
variant("number-commit", setitem(["kernelCommitSha"], 1234567))
variant("no-script", delitem(["benchmarkScriptPath"]))
variant("duplicate-workload", lambda p: p["results"].append(copy.deepcopy(p["results"][0])))
variant("too-many-results", lambda p: p.update(results=[dict(copy.deepcopy(p["results"][0]), workload=f"W.w{i}") for i in range(1001)]))
variant("long-workload", setitem(["results", 0, "workload"], "W." + "x" * 300))
p = copy.deepcopy(base); p["results"][0]["timingResults"]["std_ms"] = float("nan")
open(f"{out}/bad-nan.json", "w").write(json.dumps(p))          # Python writes NaN, which is not JSON
p = copy.deepcopy(base); p["padding"] = "x" * (1100 * 1024)
json.dump(p, open(f"{out}/bad-too-large.json", "w"))
open(f"{out}/bad-not-json.json", "w").write("results=1")
open(f"{out}/bad-array.json", "w").write("[]")
PY
/usr/bin/python3 "$TEST_DIR/malformed.py" "$TEST_DIR/run0.json" "$TEST_DIR"
BEFORE=$(count_runs 'limit=1000')
for f in "$TEST_DIR"/bad-*.json; do
	name=$(basename "$f" .json)
	post "$f" -H "Authorization: Bearer $CAROL"
	want=400
	[ "$name" = bad-too-large ] && want=413
	is "$STATUS" "$want" "malformed upload ${name#bad-}: $want ($(json 'd.get("error","")' 2>/dev/null | cut -c1-90))"
done
is "$(count_runs 'limit=1000')" "$BEFORE" "no malformed upload was stored"
api POST "$KHUB_URL/api/kernels/acme/relu/benchmarks" -H "Authorization: Bearer $CAROL" \
	-H 'Content-Type: application/json' --data-binary '{"results":[{"workload":"A.b","timingResults":{"mean_ms":1,"std_ms":0,"min_ms":1,"max_ms":1,"q1_ms":0,"q3_ms":0,"iqr_ms":0,"outliers":0,"iterations":1}}],"machineInfo":{"gpu":"g","backend":"CPU","pytorchVersion":"N/A","os":"Linux 6","cpu":"x"},"kernelCommitSha":"'"$V1"'","benchmarkScriptPath":"benchmarks","futureField":{"x":1}}'
is "$STATUS" 200 "integers for times, the dataclass's default quartiles (0.0) and an unknown extra field are accepted"

# ---- download statistics -------------------------------------------------------------------------
DL=$KHUB_URL/api/kernels/acme/relu/downloads
META=$KHUB_URL/kernels/acme/relu/resolve/$V1/build/torch-cpu/metadata.json
INIT=$KHUB_URL/kernels/acme/relu/resolve/$V1/build/torch-cpu/__init__.py
UA1='kernels/0.15.2; hf_hub/1.29.0; python/3.11.2; python/3.11; backend/cu128; platform/x86_64-linux; file_type/kernel; torch/2.11.0+cu128'
UA2='kernels/0.17.0.dev0; hf_hub/1.29.0.dev0; python/3.12.1; backend/cpu; torch/2.10.0'
api GET "$DL"
is "$STATUS/$(json 'd["total"]')/$(json 'd["downloads"]')" "200/0/0" "no downloads yet"
wait_total() {	# wait_total URL WANT: poll until the endpoint's total is WANT (10 s at most)
	local got
	for _ in $(seq 1 100); do
		got=$(curl -s "$1" | jq -r '.total')
		[ "$got" = "$2" ] && break
		sleep 0.1
	done
	echo "$got"
}

# One client address counts once per repo, variant and hour, so the load
# comes from distinct loopback addresses (all of 127.0.0.0/8 is local):
# client FROM..TO prints one 127.x.y.z per line.
clients() { seq "$1" "$2" | awk '{ printf "127.%d.%d.%d\n", 1 + int($1 / 62500), int($1 / 250) % 250, 1 + $1 % 250 }'; }
# curl_each PARALLEL CONFIG: one curl makes a transfer per line of stdin,
# PARALLEL at a time (curl -Z), each with CONFIG (curl -K lines, {} the
# line): what `xargs -P PARALLEL -I{} curl -s ...` did, without starting
# a curl per transfer (its start cost more CPU than the request).
curl_each() {
	local par=(-Z --parallel-max "$1")
	[ "$1" -gt 1 ] || par=()
	CFG=$2 awk 'NR > 1 { print "next" } { c = ENVIRON["CFG"]; gsub(/\{\}/, $0, c); print c }' | curl -s --no-progress-meter "${par[@]}" -K -
}
N1=1500 N2=500
LOAD=()
get() {	# get URL UA [CONFIG-LINE...]: curl_each's CONFIG for a GET of URL as UA, its body dropped
	printf 'url = "%s"\noutput = "/dev/null"\nuser-agent = "%s"\n' "$1" "$2"
	[ $# -gt 2 ] && printf '%s\n' "${@:3}"
}
clients 1 $N1 | curl_each 16 "$(get "$META" "$UA1" 'interface = "{}"' 'write-out = "%{http_code}\n"')" >"$TEST_DIR/codes1" &
LOAD+=($!)
clients 10001 $((10000 + N2)) | curl_each 16 "$(get "$META" "$UA2" 'interface = "{}"' 'write-out = "%{http_code}\n"')" >"$TEST_DIR/codes2" &
LOAD+=($!)
# Not downloads: HEAD, ranged GET, __init__.py of a variant that has metadata.json, other files.
seq 1 100 | curl_each 8 "$(get "$META" "$UA1" head)" &
LOAD+=($!)
seq 1 50 | curl_each 8 "$(get "$META" "$UA1" 'header = "Range: bytes=0-0"')" &
LOAD+=($!)
seq 1 50 | curl_each 8 "$(get "$INIT" "$UA1")" &
LOAD+=($!)
seq 1 50 | curl_each 8 "$(get "$KHUB_URL/kernels/acme/relu/resolve/$V1/README.md" "$UA1")" &
LOAD+=($!)
wait "${LOAD[@]}"	# not the server, which runs in the background too
is "$(cat "$TEST_DIR/codes1" "$TEST_DIR/codes2" | sort | uniq -c | sed 's/^ *//')" "$((N1 + N2)) 200" \
	"$((N1 + N2)) parallel GETs of metadata.json all answered 200"
is "$(wait_total "$DL" $((N1 + N2)))" $((N1 + N2)) "after a flush the count is exact: $((N1 + N2)), nothing lost, nothing extra"
api GET "$DL"
is "$(json 'sorted((r["variant"], r["kernels"], r["torch"], r["backend"], r["count"]) for r in d["rows"])')" \
	"[('torch-cpu', '0.15.2', '2.11.0+cu128', 'cu128', $N1), ('torch-cpu', '0.17.0.dev0', '2.10.0', 'cpu', $N2)]" \
	"counted per variant with the kernels/, torch/ and backend/ User-Agent parts"
is "$(json '[(v["variant"], v["total"], len(v["days"]), v["days"][-1]["count"], sum(x["count"] for x in v["days"])) for v in d["variants"]]')" \
	"[('torch-cpu', $((N1 + N2)), 30, $((N1 + N2)), $((N1 + N2)))]" \
	"per-variant totals and days (every day of the 30, today last)"
like "$(json 'd["variants"][0]["days"][0]["day"]')" '^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]$' "days are UTC dates"
for _ in $(seq 1 30); do
	api GET "$KHUB_URL/api/kernels/acme/relu"
	[ "$(json 'd["downloads"]')" = $((N1 + N2)) ] && break
	sleep 0.1
done
is "$(json 'd["downloads"]')" $((N1 + N2)) "repo info downloads = the counted variant downloads"
# Only a loader's fetch is a download: a browser (a README that embeds the
# file) or a client that does not say what it is counts nothing.
CU128=$KHUB_URL/kernels/acme/relu/resolve/$V1/build/torch211-cxx11-cu128-x86_64-linux/metadata.json
curl -s -o /dev/null --interface 127.3.0.1 -A 'Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0' "$CU128"
curl -s -o /dev/null --interface 127.3.0.2 -A '' "$CU128"
curl -s -o /dev/null --interface 127.3.0.3 -A 'curl/7.88.1' "$CU128"
curl -s -o /dev/null -A 'unknown/None; hf_hub/1.29.0; python/3.11.2' "$CU128"
clients 20001 20007 | curl_each 4 "$(get "$KHUB_URL/kernels/acme/legacy/resolve/main/build/torch-universal/__init__.py" "$UA1" 'interface = "{}"')"
is "$(wait_total "$KHUB_URL/api/kernels/acme/legacy/downloads" 7)" 7 "a variant without metadata.json counts its __init__.py"
is "$(wait_total "$DL" $((N1 + N2 + 1)))" $((N1 + N2 + 1)) \
	"another variant's metadata.json counts for huggingface_hub alone (no kernels/ part), not for a browser, curl or no User-Agent"
api GET "$DL?format=csv"
is "$(head -1 "$B" | tr -d '\r')" "day,variant,kernels_version,torch_version,backend,count" "format=csv"
is "$(tail -n +2 "$B" | tr -d '\r' | awk -F, '{n += $6} END {print n}')" $((N1 + N2 + 1)) "the CSV rows add up"
api GET "$DL?days=0"
is "$STATUS" 400 "days=0: 400"
api GET "$KHUB_URL/api/kernels/acme/secret/downloads" -H "Authorization: Bearer $MALLORY"
is "$STATUS/$(header X-Error-Code)" "404/RepoNotFound" "a private repo's statistics are invisible to outsiders"
api GET "$KHUB_URL/api/kernels/acme/secret/downloads" -H "Authorization: Bearer $ALICE"
is "$STATUS" 200 "and visible to members"

# A clean stop loses nothing: counts held in memory are stored at shutdown.
khub_stop
khub_start --download-stats-flush-ms 3600000
clients 30001 30300 | curl_each 16 "$(get "$META" "$UA1" 'interface = "{}"')"
khub_stop
khub_start --download-stats-flush-ms 200
is "$(wait_total "$DL" $((N1 + N2 + 301)))" $((N1 + N2 + 301)) "300 downloads counted just before SIGTERM survive the restart"

# Deleting a repo takes its benchmarks and counters with it.
curl -s -o /dev/null -H 'Content-Type: application/json' -H "Authorization: Bearer $ROOT" \
	--data-binary '{"results":[{"workload":"A.b","timingResults":{"mean_ms":1,"std_ms":0,"min_ms":1,"max_ms":1,"q1_ms":1,"q3_ms":1,"iqr_ms":0,"outliers":0,"iterations":1}}],"machineInfo":{"gpu":"g","backend":"CPU","pytorchVersion":"N/A","os":"Linux 6","cpu":"x"},"kernelCommitSha":"'"$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/doomed.git" rev-parse main)"'","benchmarkScriptPath":"benchmarks"}' \
	"$KHUB_URL/api/kernels/acme/doomed/benchmarks"
curl -s -o /dev/null "$KHUB_URL/kernels/acme/doomed/resolve/main/build/torch-cpu/metadata.json"
wait_total "$KHUB_URL/api/kernels/acme/doomed/downloads" 1 >/dev/null
api DELETE "$KHUB_URL/api/repos/delete" -H "Authorization: Bearer $ROOT" --data-binary '{"name":"doomed","organization":"acme","type":"kernel"}'
is "$STATUS" 200 "a repo with benchmarks and download counts can be deleted"

# ---- latency with and without counting (diagnostics, no timed assertions) ------------------------
latency() {	# latency LABEL: wrk (or one curl's 500 sequential GETs) against metadata.json
	if command -v wrk >/dev/null 2>&1; then
		wrk -t2 -c16 -d3s --latency -H "User-Agent: $UA1" "$META" >"$TEST_DIR/wrk.txt" 2>&1
		diag "$1: $(awk '/Requests\/sec/ {print $2 " req/s"}' "$TEST_DIR/wrk.txt"), latency" \
			"avg $(awk '/^ +Latency / {print $2; exit}' "$TEST_DIR/wrk.txt")" \
			"p50 $(awk '$1 == "50%" {print $2}' "$TEST_DIR/wrk.txt")" \
			"p99 $(awk '$1 == "99%" {print $2}' "$TEST_DIR/wrk.txt")" \
			"($(awk '/requests in/ {print $1}' "$TEST_DIR/wrk.txt") requests)"
	else
		local start end
		start=$(date +%s%N)
		seq 1 500 | curl_each 1 "$(get "$META" "$UA1")"
		end=$(date +%s%N)
		diag "$1: $(( (end - start) / 500000 )) us per sequential GET (500 GETs)"
	fi
}
latency "counting on "
khub_stop	# stores what that run counted
khub_start --download-stats 0
BEFORE=$(curl -s "$DL" | jq -r '.total')
latency "counting off"
khub_stop
khub_start --download-stats-flush-ms 200
is "$(wait_total "$DL" "$BEFORE")" "$BEFORE" "with download_stats = 0 nothing is counted"
latency "counting on "
ok 0 "latency measured (see the diagnostics above)"

grep -E "runtime error|AddressSanitizer|downloads: cannot store" "$TEST_DIR/server.log" | sed 's/^/# /' | head -5
check "no sanitizer report and no failed flush in the server log" -- \
	bash -c "! grep -qE 'runtime error|AddressSanitizer|downloads: cannot store' '$TEST_DIR/server.log'"
done_testing
