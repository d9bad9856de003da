#!/usr/bin/env bash
# run_worker_build.sh -- on the GPU device machine (Ubuntu 24.04, a CUDA
# torch, nvcc; no network), from the repo root with a khub-worker binary
# built here and carried over: build examples/relu for the machine's CUDA
# torch with `khub-worker build`, then load the variant the way the kernels
# loader does and compare relu with torch.relu on GPU tensors. Prints
# PASS/FAIL lines; logs go to $OUT when set.
#
#   bash tests/device/run_worker_build.sh [PYTHON]
set -u
PY=${1:-$(command -v python3)}
WORKER=${KHUB_WORKER_BIN:-./khub-worker}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
T=$(mktemp -d /tmp/khub-worker-gpu-XXXXXX)
LOGDIR=${OUT:-$T}
fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }

cat > "$T/toolchains.json" <<JSON
{"toolchains": [{"name": "cuda", "python": "$PY", "cxx": "g++", "nvcc": "$NVCC"}]}
JSON
"$WORKER" --check --toolchains "$T/toolchains.json" | tee "$LOGDIR/check.txt"
VARIANT=$(grep -o 'torch[0-9]*-cxx1[01]-cu[0-9]*-[a-z0-9_]*-linux' "$LOGDIR/check.txt" | head -1)
[ -n "$VARIANT" ] || { failed "no CUDA arch variant advertised"; exit 1; }
start=$(date +%s%N)
"$WORKER" build --toolchains "$T/toolchains.json" --toolchain cuda --source examples/relu --out "$T/out" \
	--variant "$VARIANT" --repo demo/relu --commit 89abcdef0123456789abcdef0123456789abcdef --wall-seconds 900 \
	>"$LOGDIR/build.log" 2>&1
rc=$?
end=$(date +%s%N)
echo "build of $VARIANT: exit $rc in $(( (end - start) / 1000000 )) ms"
[ $rc = 0 ] && pass "khub-worker build $VARIANT" || { failed "khub-worker build $VARIANT (exit $rc)"; tail -40 "$LOGDIR/build.log"; exit 1; }
cp "$T/out/abi-report.json" "$LOGDIR/" 2>/dev/null
cp "$T/out/$VARIANT/metadata.json" "$LOGDIR/" 2>/dev/null
"$PY" - "$T/out/$VARIANT" <<'PYEOF' 2>&1 | tee "$LOGDIR/gpu-check.txt"
import importlib.util, json, os, sys
import torch
d = sys.argv[1]
m = json.load(open(os.path.join(d, "metadata.json")))
spec = importlib.util.spec_from_file_location(m["id"], os.path.join(d, "__init__.py"))
mod = importlib.util.module_from_spec(spec)
sys.modules[m["id"]] = mod
spec.loader.exec_module(mod)
print("backend", m["backend"], "id", m["id"])
torch.manual_seed(0)
ok = True
for shape in [(1,), (1 << 20,), (512, 333)]:
    x = torch.randn(*shape, device="cuda")
    y = mod.relu(x)
    torch.cuda.synchronize()
    ok = ok and y.is_cuda and torch.equal(y, torch.relu(x))
x = torch.randn(64, 64, device="cuda").t()
ok = ok and torch.equal(mod.relu(x), torch.relu(x))
print("PASS relu on GPU equals torch.relu" if ok else "FAIL relu on GPU differs from torch.relu")
PYEOF
grep -q '^PASS relu on GPU' "$LOGDIR/gpu-check.txt" || fail=1
rm -rf "$T"
exit $fail
