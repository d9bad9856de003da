#!/usr/bin/env bash
# run_loader_check.sh -- on the GPU device machine (Ubuntu 24.04, torch, no
# network, none of khub's C dependencies), from the repo root: unpack
# .device/bundle.tar.xz (made by tests/device/make_bundle.sh), start khub as
# the quickstart would (embedded PostgreSQL, as 'postgres' or 'nobody' when
# run as root), seed a demo kernel khub-demo/relu with `khub import`, trust
# the org, give a member 'bob' a write token, serve, and load the kernel with
# the REAL `kernels` package (tests/device/loader_check.py), which also checks
# khub's variants endpoint against the variant loaded, uploads a GPU benchmark
# of it as kernels' BenchmarkResult.to_payload() and reads it back, and reads
# the variant's download count. Prints PASS/FAIL lines, the client's request
# log and khub's access log. Logs are copied to $OUT when set.
#
#   bash tests/device/run_loader_check.sh
set -u

ROOT=$(pwd)
BUNDLE=${BUNDLE:-$ROOT/.device/bundle.tar.xz}
SHIM=$ROOT/tests/device/kernels_data_shim
PORT=${KHUB_CHECK_PORT:-8080}
FAILS=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

T=$(mktemp -d /tmp/kcheck.XXXXXX)
chmod 755 "$T"
SERVER_PID=
cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
	if [ -n "${OUT:-}" ]; then
		cp "$T"/server.log "$OUT"/ 2>/dev/null
		cp "$T"/data/pg/postgresql.log "$OUT"/ 2>/dev/null
		cp "$T"/import.log "$OUT"/ 2>/dev/null
	fi
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

echo "== host: $(uname -m) $(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -1), user $(id -un)"
mkdir "$T/b"
tar -xJf "$BUNDLE" -C "$T/b" || { fail "unpack bundle"; exit 1; }
chmod 755 "$T/b"
B=$T/b
# khub execs the PostgreSQL tools by full path but with a bare argv[0]
# ("initdb"), and PostgreSQL finds its own directory (and so postgres, the
# share dir and the lib dir) from argv[0] through PATH: without the bindir on
# PATH, initdb fails with 'could not find a "initdb" to execute' (or, where
# another PostgreSQL is on PATH, silently uses that one). Workaround: put the
# bundled bindir first on PATH for khub.
PGBIN=$B/usr/lib/postgresql/15/bin
khub() { PATH=$PGBIN:$PATH LD_LIBRARY_PATH=$B/lib "$B/bin/khub" "$@"; }

export KHUB_DATA_DIR=$T/data
export KHUB_PG_BINDIR=$PGBIN
export KHUB_LISTEN=127.0.0.1:$PORT
export KHUB_LOG_LEVEL=info
unset KHUB_DATABASE_URL KHUB_CONFIG
export TZ=UTC

v=$(khub version 2>&1) && pass "khub runs from the bundle ($v)" || { fail "khub version: $v"; exit 1; }
missing=$(LD_LIBRARY_PATH=$B/lib ldd "$B/bin/khub" "$KHUB_PG_BINDIR"/* 2>&1 | grep "not found")
[ -z "$missing" ] && pass "all bundled binaries resolve their libraries" || fail "unresolved libraries: $missing"

# ---- the demo kernel -------------------------------------------------------
SRC=$T/src
make_variant() {	# make_variant VARIANT BACKEND_TYPE
	local d=$SRC/build/$1
	mkdir -p "$d/data"
	cat >"$d/metadata.json" <<EOF
{"id": "_relu_khub_demo_${1//-/_}", "name": "relu", "version": 1, "license": "apache-2.0",
 "python-depends": [], "backend": {"type": "$2"}}
EOF
	printf '{"variant": "%s"}\n' "$1" >"$d/data/info.json"
	cp "$T/weights.bin" "$d/weights.bin"
}
mkdir -p "$SRC/build"
python3 - "$T/weights.bin" <<'EOF'
import sys, hashlib
data = b"\x00KHUBLFS\x00" + bytes(range(256)) * 300   # NUL bytes: binary, becomes LFS
open(sys.argv[1], "wb").write(data)
EOF
WEIGHTS_SHA256=$(sha256sum "$T/weights.bin" | cut -d' ' -f1)
printf '# relu demo kernel for khub\nA pure-Python relu served by khub.\n' >"$SRC/README.md"

for variant in torch-cpu torch-cuda; do
	make_variant "$variant" "${variant#torch-}"
	cat >"$SRC/build/$variant/__init__.py" <<EOF
import hashlib
import json
from pathlib import Path

import torch

BRANCH = "v1"
VARIANT = "$variant"
NATIVE = False
_here = Path(__file__).parent
WEIGHTS_SHA256 = hashlib.sha256((_here / "weights.bin").read_bytes()).hexdigest()
INFO = json.loads((_here / "data" / "info.json").read_text())


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x, torch.zeros_like(x))
EOF
done

# A compiled CUDA variant for this torch (e.g. torch211-cxx11-cu130-x86_64-linux),
# when nvcc and a GPU are here: a plain shared library called through ctypes.
ARCH_VARIANT=
if command -v nvcc >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
	ARCH_VARIANT=$(python3 -c '
import platform, torch
v = torch.__version__.split("+")[0].split(".")
cu = torch.version.cuda.replace(".", "")
abi = "cxx11" if torch._C._GLIBCXX_USE_CXX11_ABI else "cxx98"
print(f"torch{v[0]}{v[1]}-{abi}-cu{cu}-{platform.machine()}-linux")' 2>/dev/null)
	CAP=$(python3 -c 'import torch; a,b = torch.cuda.get_device_capability(); print(f"{a}{b}")' 2>/dev/null)
fi
if [ -n "$ARCH_VARIANT" ] && [ -n "$CAP" ]; then
	make_variant "$ARCH_VARIANT" cuda
	cat >"$T/relu.cu" <<'EOF'
#include <cuda_runtime.h>
__global__ void relu_kernel(const float *x, float *y, long n)
{
	long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
extern "C" int khub_relu_f32(const float *x, float *y, long n, void *stream)
{
	if (n > 0)
		relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(x, y, n);
	return (int)cudaGetLastError();
}
EOF
	if nvcc -O2 -shared -Xcompiler -fPIC -gencode "arch=compute_$CAP,code=[sm_$CAP,compute_$CAP]" \
		-o "$SRC/build/$ARCH_VARIANT/_relu_cuda.so" "$T/relu.cu" >"$T/nvcc.log" 2>&1; then
		pass "nvcc built build/$ARCH_VARIANT/_relu_cuda.so (sm_$CAP)"
		cat >"$SRC/build/$ARCH_VARIANT/__init__.py" <<EOF
import ctypes
import hashlib
import json
from pathlib import Path

import torch

BRANCH = "v1"
VARIANT = "$ARCH_VARIANT"
NATIVE = True
_here = Path(__file__).parent
WEIGHTS_SHA256 = hashlib.sha256((_here / "weights.bin").read_bytes()).hexdigest()
INFO = json.loads((_here / "data" / "info.json").read_text())
_lib = ctypes.CDLL(str(_here / "_relu_cuda.so"))
_lib.khub_relu_f32.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
_lib.khub_relu_f32.restype = ctypes.c_int


def relu(x: torch.Tensor) -> torch.Tensor:
    if not x.is_cuda or x.dtype != torch.float32:
        raise TypeError("this variant takes float32 CUDA tensors")
    x = x.contiguous()
    y = torch.empty_like(x)
    rc = _lib.khub_relu_f32(x.data_ptr(), y.data_ptr(), x.numel(), torch.cuda.current_stream().cuda_stream)
    if rc != 0:
        raise RuntimeError(f"khub_relu_f32: CUDA error {rc}")
    return y
EOF
	else
		fail "nvcc: $(tail -5 "$T/nvcc.log")"
		rm -rf "${SRC:?}/build/$ARCH_VARIANT"
		ARCH_VARIANT=
	fi
else
	echo "SKIP compiled CUDA variant (no nvcc or no GPU)"
fi
echo "== demo kernel tree:"
(cd "$SRC" && find . -type f | sort | sed 's/^/   /')

# ---- seed khub -------------------------------------------------------------
seed() {	# seed REPO BRANCH -> prints the commit sha
	khub import "$SRC" --repo "$1" --branch "$2" 2>>"$T/import.log"
}
sha_v1=$(seed khub-demo/relu v1) && pass "khub import --repo khub-demo/relu --branch v1 ($sha_v1)" ||
	{ fail "import v1"; cat "$T/import.log"; cat "$T/data/pg/postgresql.log" 2>/dev/null | tail -30; exit 1; }
# main differs from v1, so the checks can tell which branch was loaded.
sed -i 's/^BRANCH = "v1"/BRANCH = "main"/' "$SRC"/build/*/__init__.py
sha_main=$(seed khub-demo/relu main) && pass "khub import --branch main ($sha_main)" || fail "import main"
sed -i 's/^BRANCH = "main"/BRANCH = "v1"/' "$SRC"/build/*/__init__.py
sha_other=$(seed other-org/relu v1) && pass "khub import --repo other-org/relu --branch v1 (untrusted org)" || fail "import other-org"
echo "== import log:"; sed 's/^/   /' "$T/import.log"
khub admin trust set khub-demo >>"$T/import.log" 2>&1 && pass "khub admin trust set khub-demo" || fail "trust set"
khub admin trust list 2>&1 | sed 's/^/   trust list: /'
# A user with write access to khub-demo and a write token, for the benchmark
# upload (loader_check.py posts kernels' BenchmarkResult.to_payload()).
{ khub admin user create bob && khub admin member set khub-demo bob write; } >>"$T/import.log" 2>&1 &&
	WRITE_TOKEN=$(khub admin token create bob --scope write 2>>"$T/import.log") && [ -n "$WRITE_TOKEN" ] &&
	pass "khub admin user create bob; member set khub-demo bob write; token create bob --scope write" ||
	{ fail "user/member/token for bob: $(tail -3 "$T/import.log")"; WRITE_TOKEN=; }

# ---- serve -----------------------------------------------------------------
# not through the khub() function: $! must be khub itself, not a subshell
# Download counts are flushed to the database every 500 ms (default 5 s), so
# the downloads check need not wait long.
PATH=$PGBIN:$PATH LD_LIBRARY_PATH=$B/lib "$B/bin/khub" serve --listen "127.0.0.1:$PORT" \
	--download-stats-flush-ms 500 >"$T/server.log" 2>&1 &
SERVER_PID=$!
E=http://127.0.0.1:$PORT
up=
for _ in $(seq 1 120); do
	if python3 -c "import urllib.request,sys; urllib.request.urlopen('$E/api/organizations/khub-demo/overview', timeout=2)" 2>/dev/null; then
		up=1; break
	fi
	kill -0 "$SERVER_PID" 2>/dev/null || break
	sleep 0.25
done
[ -n "$up" ] && pass "khub serve answers on $E" || { fail "khub serve did not come up"; cat "$T/server.log"; exit 1; }
lines_before=$(wc -l <"$T/server.log")

# ---- the real kernels loader -----------------------------------------------
export HF_ENDPOINT=$E HF_HUB_DISABLE_XET=1 HF_HUB_CACHE=$T/hf-cache HF_HOME=$T/hf-home
unset HF_TOKEN HF_HUB_OFFLINE KERNELS_CACHE LOCAL_KERNELS
export PYTHONUNBUFFERED=1
if python3 -c 'import kernels' 2>/dev/null; then
	echo "== using the installed kernels package"
else
	export PYTHONPATH=$B/py${PYTHONPATH:+:$PYTHONPATH}
	python3 -c 'import kernels_data' 2>/dev/null || export PYTHONPATH=$PYTHONPATH:$SHIM
	echo "== using kernels from the bundle (commit $(cat "$B/py/KERNELS_COMMIT"))," \
		"kernels_data from $(python3 -c 'import kernels_data,os; print(os.path.dirname(kernels_data.__file__))' 2>&1)"
fi
export KHUB_REPO=khub-demo/relu KHUB_UNTRUSTED_REPO=other-org/relu
export EXPECT_WEIGHTS_SHA256=$WEIGHTS_SHA256 EXPECT_ARCH_VARIANT=$ARCH_VARIANT
export KHUB_ENDPOINT=$E KHUB_WRITE_TOKEN=$WRITE_TOKEN KHUB_V1_SHA=$sha_v1
echo "== loader_check (cold cache)"
python3 "$ROOT/tests/device/loader_check.py" cold 2>&1 | tee "$T/loader.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || FAILS=$((FAILS + 1))
cold_lines=$(wc -l <"$T/server.log")
echo "== loader_check (warm cache, new process)"
python3 "$ROOT/tests/device/loader_check.py" warm 2>&1 | tee -a "$T/loader.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || FAILS=$((FAILS + 1))
[ -n "${OUT:-}" ] && cp "$T/loader.log" "$OUT/"
warm_lines=$(wc -l <"$T/server.log")

# khub's access log names the path but not the headers the client reacts
# to: show them for the two HEADs whose answers matter most.
echo "== raw HEAD answers (status and X-* headers)"
python3 - "$E" "$sha_v1" <<'EOF'
import sys, http.client, urllib.parse
e, sha = sys.argv[1], sys.argv[2]
u = urllib.parse.urlparse(e)
for path in (f"/kernels/khub-demo/relu/resolve/{sha}/kernel-status.toml",
             f"/kernels/khub-demo/relu/resolve/{sha}/build/torch-cpu/weights.bin",
             f"/kernels/khub-demo/relu/resolve/{sha}/build/torch-cpu/__init__.py"):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("HEAD", path, headers={"Accept-Encoding": "identity"})
    r = c.getresponse()
    hdrs = ", ".join(f"{k}: {v}" for k, v in r.getheaders()
                     if k.lower().startswith("x-") or k.lower() in ("etag", "location", "content-length"))
    print(f"   HEAD {path} -> {r.status} [{hdrs}]")
    c.close()
EOF

echo "== khub server log (startup, imports' database use excluded):"
head -n "$lines_before" "$T/server.log" | sed 's/^/   /'
echo "== khub access log, cold-cache run:"
awk -v a="$lines_before" -v b="$cold_lines" 'NR > a && NR <= b { print "   " $0 }' "$T/server.log"
echo "== khub access log, warm-cache run:"
awk -v a="$cold_lines" -v b="$warm_lines" 'NR > a && NR <= b { print "   " $0 }' "$T/server.log"

lp=$(grep -c '^PASS' "$T/loader.log"); lf=$(grep -c '^FAIL' "$T/loader.log")
echo "== summary: loader checks $lp passed, $lf failed; harness failures $FAILS"
[ "$FAILS" -eq 0 ] && [ "$lf" -eq 0 ] && echo "RESULT PASS" || echo "RESULT FAIL"
[ "$FAILS" -eq 0 ] && [ "$lf" -eq 0 ]
