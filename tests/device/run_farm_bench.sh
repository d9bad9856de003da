#!/usr/bin/env bash
# run_farm_bench.sh -- the farm benchmarks what it builds, on the GPU device
# machine (see tests/device/lib.sh), from the repo root, with the bundle of
# tests/device/make_bundle.sh: one toolchain on the machine's CUDA torch that
# builds and benchmarks ("benchmarks": true: its GPU is probed); acme/relu
# has buildOnPush and benchmarkAfterPublish on; a git push of examples/relu
# with a benchmarks/ script (the `kernels benchmark` format) builds and
# publishes the CUDA variant, a benchmark job for (commit, variant, GPU
# model) is queued, the worker claims it, runs the scripts in its sandbox
# with the GPU's device nodes and submits a farm run with the GPU model; a
# second commit whose Python wrapper sleeps is built, measured and flagged
# as a regression (API and kernel page). Prints PASS/FAIL lines.
#
#   bash tests/device/run_farm_bench.sh
set -u
. tests/device/lib.sh
device_setup relu '"benchmarks": true'
GPU=$(grep -o 'benchmarks on .*' "$T/check.log" | head -1 | sed 's/^benchmarks on //')
case "$GPU" in *NVIDIA* | *H100* | *H200*) pass "the toolchain benchmarks on the GPU: $GPU" ;; *) fail "device probed: '$GPU'" ;; esac
api PUT /api/kernels/acme/relu/settings '{"buildOnPush": true, "benchmarkAfterPublish": true}' >"$T/settings.json"
[ "$(field 'd.get("benchmarkAfterPublish")' <"$T/settings.json")" = True ] && pass "benchmarkAfterPublish on" ||
	fail "settings: $(cat "$T/settings.json")"

# bench_script: benchmarks/benchmark_relu.py as `kernels benchmark` finds it.
bench_script() {
	mkdir -p "$T/clone/benchmarks"
	cat >"$T/clone/benchmarks/benchmark_relu.py" <<'PY'
import torch
from kernels.benchmark import Benchmark


class ReluBenchmark(Benchmark):
    def setup(self):
        self.x = torch.randn(4096, 4096, device=self.device)

    def benchmark_big(self):
        self.out = self.kernel.relu(self.x)

    def verify_big(self):
        return torch.relu(self.x)
PY
}

# push_and_measure MESSAGE: push the clone, one worker pass builds and
# publishes, the next runs the queued benchmark job; sets SHA.
push_and_measure() {
	(cd "$T/clone" && git add -A && git commit -qm "$1" && git pull -q --rebase origin main && git push origin main) \
		>"$T/push.log" 2>&1 &&
		pass "git push: $1" || fail "git push: $(tail -3 "$T/push.log")"
	SHA=$(git -C "$T/clone" rev-parse HEAD)
	local start pass
	for pass in 1 2 3; do	# builds, then the benchmark jobs their publication queued
		start=$(date +%s.%N)
		run_worker
		api GET "/api/kernels/acme/relu/builds?commit=$SHA" >"$T/matrix-$SHA.json"
		echo "== worker pass $pass: $(seconds_since "$start") s; matrix:" \
			"$(field '" ".join(v["variant"] + "=" + v["status"] for v in d["variants"])' <"$T/matrix-$SHA.json")"
	done
}

cp -r "$ROOT/examples/relu/." "$T/clone/"
bench_script
push_and_measure "relu with a benchmark"
C1=$SHA
api GET "/api/kernels/acme/relu/benchmarks?source=farm" >"$T/farm-runs-1.json"
echo "== farm runs: $(head -c 600 "$T/farm-runs-1.json")"
n=$(field "len([r for r in (d if isinstance(d, list) else d.get('runs', [])) if r['commit'] == '$C1' and r['source'] == 'farm'])" <"$T/farm-runs-1.json" 2>/dev/null)
[ "${n:-0}" -ge 1 ] && pass "a farm run of $C1 was submitted by the worker" || fail "no farm run of $C1"
grep -q "$GPU" "$T/farm-runs-1.json" && pass "… measured on $GPU" || fail "the farm run does not name $GPU"

# the second commit: the wrapper sleeps before each call
"$PY" - "$T/clone/torch-ext/relu/__init__.py" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace("import torch\n", "import time\n\nimport torch\n", 1)
s = s.replace("    if out is None:", "    time.sleep(0.002)\n    if out is None:", 1)
open(p, "w").write(s)
PY
push_and_measure "relu: a sleep in the wrapper"
C2=$SHA
api GET "/api/kernels/acme/relu/benchmarks/regressions" >"$T/regressions.json"
echo "== regressions: $(cat "$T/regressions.json")"
[ "$(field "len([r for r in d['regressions'] if r['commit'] == '$C2' and r['previousCommit'] == '$C1'])" <"$T/regressions.json")" -ge 1 ] &&
	pass "the slower commit ${C2:0:12} is a regression against ${C1:0:12} on $GPU" || fail "no regression flagged"
curl -s -H "Authorization: Bearer $TOKEN" "$E/kernels/acme/relu" >"$T/kernel-page.html"
grep -o '<li class="bench-regression">[^<]*' "$T/kernel-page.html" | head -3 | sed 's/^/   /'
grep -q 'class="bench-regression"' "$T/kernel-page.html" && pass "the kernel page flags it" || fail "the kernel page says nothing"
device_result
