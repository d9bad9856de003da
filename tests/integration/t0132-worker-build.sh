#!/bin/bash
# t0132-worker-build.sh -- `khub-worker build` by hand (no server): the
# project's examples/relu built for CPU with Debian's torch and loaded the
# way the kernels loader does; a noarch package; then the failure paths,
# each exiting non-zero with nothing in OUT: a C++ syntax error, a bad
# build.toml, a wrong source layout, the wall-clock limit, build code
# reaching the network. Also: the example's .cu compiled by nvcc and by
# Debian's hipcc (skipped where absent).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs torch	# $WORKER, $PY, or a skip

T=$(mktemp -d /tmp/khub-t0132-XXXXXX)
chmod 755 "$T"	# run as root, the build runs as uid 65534, which must reach its scratch below
LISTENER_PID=
TOKDIR=
cleanup() {
	[ -n "$LISTENER_PID" ] && kill "$LISTENER_PID" 2>/dev/null
	rm -rf "$T"
	[ -n "$TOKDIR" ] && rm -rf "$TOKDIR"
}
trap cleanup EXIT

worker_toolchain "$T/toolchains.json"
VARIANT=$(worker_torch_variant)
COMMIT=0123456789abcdef0123456789abcdef01234567

wbuild() {	# wbuild NAME SOURCE VARIANT [ARGS...]: exit status in $RC, log in $T/NAME.log (one probe reused)
	local name=$1 src=$2 variant=$3; shift 3
	"$WORKER" build --toolchains "$T/toolchains.json" --toolchain cpu-debian --source "$src" \
		--out "$T/out-$name" --variant "$variant" --work-dir "$T/work" --probe-cache "$T/probe" "$@" >"$T/$name.log" 2>&1
	RC=$?
}
out_empty() {	# out_empty NAME: OUT is missing or empty
	[ -z "$(ls -A "$T/out-$1" 2>/dev/null)" ]
}

libs=$(ldd "$WORKER" | grep -E 'libpq|libmicrohttpd|libgit2' )
is "$libs" "" "khub-worker links neither libpq, libmicrohttpd nor libgit2 (common/ and kernel/ only; khub over HTTP)"

# ---- --check ----------------------------------------------------------------------------
check_out=$("$WORKER" --check --toolchains "$T/toolchains.json" 2>&1)
ok $? "--check: a usable toolchain exits 0"
like "$(echo $check_out)" "cpu-debian: torch [^ ]*, cxx11 ABI $VARIANT torch-cpu" "--check: Debian's torch builds $VARIANT and packages torch-cpu"
cat > "$T/bad-toolchains.json" <<EOF
{"toolchains": [{"name": "gone", "python": "/nonexistent/python3", "cxx": "g++"}]}
EOF
bad_out=$("$WORKER" --check --toolchains "$T/bad-toolchains.json" 2>&1)
ok $(( $? == 1 ? 0 : 1 )) "--check: no usable toolchain exits 1"
like "$bad_out" "gone: not usable: /nonexistent/python3: not found" "--check: says why"

# ---- the CPU build of examples/relu -------------------------------------------------------
start=$(date +%s%N)
wbuild relu "$KHUB_SRC/examples/relu" "$VARIANT" --repo demo/relu --commit $COMMIT --build-id 41 --worker w-test
end=$(date +%s%N)
diag "CPU build of examples/relu: $(( (end - start) / 1000000 )) ms"
is "$RC" 0 "build of examples/relu exits 0"
[ "$RC" = 0 ] || sed 's/^/#   /' "$T/relu.log" | tail -30
D="$T/out-relu/$VARIANT"
check "OUT has the variant's metadata.json, _ops.py, __init__.py" -- test -f "$D/metadata.json" -a -f "$D/_ops.py" -a -f "$D/__init__.py"
check "OUT has the library _relu_cpu_0123456.abi3.so" -- test -f "$D/_relu_cpu_0123456.abi3.so"
check "OUT has abi-report.json and README.md (from CARD.md)" -- test -f "$T/out-relu/abi-report.json" -a -f "$T/out-relu/README.md"
is "$(ls "$T/work" 2>/dev/null | wc -l)" 0 "the scratch directory is gone"
check "no __pycache__ in the variant" -- test -z "$(find "$D" -name __pycache__ -o -name '*.pyc')"
meta=$($PY - "$D" <<'EOF'
import base64, hashlib, json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "metadata.json")))
files = {}
for root, dirs, names in os.walk(d):
    for n in names:
        rel = os.path.relpath(os.path.join(root, n), d)
        if rel in ("metadata.json", "metadata.json.sigstore"):
            continue
        files[rel] = base64.b64encode(hashlib.sha256(open(os.path.join(root, n), "rb").read()).digest()).decode()
print(m["id"], m["name"], m["version"], m["license"], m["backend"]["type"], m["python-depends"], m["kernel-depends"],
      m["provenance"]["kernel"]["commit"], m["provenance"]["kernel"]["dirty"], m["khub"]["repo"], m["khub"]["build-id"],
      m["khub"]["worker"], m["khub"]["toolchain"]["name"], "digest-ok" if m["digest"] == {"algorithm": "sha256", "files": files} else "digest-BAD")
EOF
)
is "$meta" "_relu_cpu_0123456 relu 1 Apache-2.0 cpu [] [] $COMMIT False demo/relu 41 w-test cpu-debian digest-ok" \
	"metadata.json: id, name, version, license, backend, depends, provenance, khub fields; digest recomputed matches"
is "$(readelf -d "$D/_relu_cpu_0123456.abi3.so" | grep -c 'RPATH\|RUNPATH')" 0 "the library has no RPATH"
loaded=$($PY - "$D" <<'EOF' 2>&1
# What the kernels loader does with a variant directory (importer.py).
import importlib.util, json, os, sys
import torch
d = sys.argv[1]
kid = json.load(open(os.path.join(d, "metadata.json")))["id"]
spec = importlib.util.spec_from_file_location(kid, os.path.join(d, "__init__.py"))
mod = importlib.util.module_from_spec(spec)
sys.modules[kid] = mod
spec.loader.exec_module(mod)
torch.manual_seed(0)
same = True
for shape in [(1,), (1000,), (64, 33), (3, 5, 7)]:
    x = torch.randn(*shape)
    same = same and torch.equal(mod.relu(x), torch.relu(x))
x = torch.randn(8, 8).t()          # not contiguous
same = same and torch.equal(mod.relu(x), torch.relu(x))
print("equal" if same else "DIFFERENT")
EOF
)
is "$loaded" "equal" "the built relu loads like the kernels loader does and equals torch.relu on random tensors"
report=$(cat "$T/out-relu/abi-report.json")
like "$report" '"manylinux": "manylinux_2_28"' "abi-report.json names the policy"
like "$report" 'Checking for compatibility with manylinux_2_28 and Python ABI version 3.9: _relu_cpu_0123456.abi3.so' \
	"abi-report.json text is in check-abi's wording"
like "$report" '"libtorch_cpu' "abi-report.json lists the DT_NEEDED libraries"
# Debian 12's libstdc++ headers pull __libc_single_threaded (GLIBC 2.32): reported, not hidden.
if ldd --version 2>&1 | head -1 | grep -q '2\.3[2-9]\|2\.[4-9][0-9]'; then
	like "$report" '"symbol": "__libc_single_threaded"' "a glibc >= 2.32 toolchain: the GLIBC_2.32 symbol is reported as a manylinux violation"
fi
like "$(cat "$T/out-relu/README.md")" '# demo/relu' "README.md: CARD.md's {{ repo_id }} rendered"
like "$(cat "$T/relu.log")" 'smoke import: ops _relu_cpu_0123456::relu' "the log shows the smoke import found the op"

# ---- reproducible: the same source and toolchain, another scratch dir, the same bytes ----------------
# (a work dir of another name and length: the scratch path differs; the
# commit's time given the way the daemon gives it)
wbuild relu-again "$KHUB_SRC/examples/relu" "$VARIANT" --repo demo/relu --commit $COMMIT --build-id 41 --worker w-test \
	--work-dir "$T/another/much/longer/work/dir"
is "$RC" 0 "the same build again in another scratch directory exits 0"
check "OUT is byte for byte the same (the .so, metadata.json, abi-report.json, README.md)" -- diff -r "$T/out-relu" "$T/out-relu-again"
check "the .so holds no scratch path (-ffile-prefix-map)" -- bash -c "! strings '$D/_relu_cpu_0123456.abi3.so' | grep -qE 'khub-build-|$T'"
like "$(grep -o -- '-ffile-prefix-map=[^ ]*' "$T/relu.log" | head -1)" '^-ffile-prefix-map=.*/khub-build-[^=]*=/khub/build$' \
	"the compiler maps the scratch directory to /khub/build"

# ---- a noarch kernel: packaged, not compiled -----------------------------------------------
mkdir -p "$T/noarch/torch-ext/halve"
cat > "$T/noarch/build.toml" <<'EOF'
[general]
name = "halve"
version = 3
edition = 5
license = "MIT"
backends = ["cpu"]

[torch-noarch]
EOF
printf 'import torch\n\n\ndef halve(x):\n    return x / 2\n' > "$T/noarch/torch-ext/halve/__init__.py"
wbuild noarch "$T/noarch" torch-cpu
is "$RC" 0 "noarch kernel: torch-cpu exits 0"
nm=$($PY -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["id"], m["version"], m["backend"]["type"], sorted(m["digest"]["files"]))' \
	"$T/out-noarch/torch-cpu/metadata.json" 2>&1)
like "$nm" '^_halve_cpu_[0-9a-f]{7} 3 cpu \[.__init__.py., ._ops.py.\]$' "noarch: id from the tree hash, version, backend, files"
check "noarch: no library" -- test -z "$(find "$T/out-noarch" -name '*.so')"
SOURCE_DATE_EPOCH=1700000000 wbuild noarch-epoch "$T/noarch" torch-cpu
is "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["khub"]["source-date"])' "$T/out-noarch-epoch/torch-cpu/metadata.json")" \
	"2023-11-14T22:13:20.000Z" "SOURCE_DATE_EPOCH is the metadata's khub.source-date (no time of the build itself)"
wbuild noarch-badepoch "$T/noarch" torch-cpu --source-date-epoch yesterday
is "$RC" 64 "--source-date-epoch that is not a number: usage error"
wbuild noarch-arch "$T/noarch" "$VARIANT"
is "$RC" 2 "noarch kernel asked for an arch variant: exit 2 (bad source)"
like "$(cat "$T/noarch-arch.log")" 'build.toml: torch: missing' "and the log says so"

# ---- failure paths: non-zero, nothing in OUT ---------------------------------------------
# the error on the first line, and a comment left open from there to the
# end: the compiler stops at once instead of parsing torch's headers first
# (15 s of CPU), and the first failure stops the other unit's compile
cp -r "$KHUB_SRC/examples/relu" "$T/syntax"
{ printf 'void broken( {\n/*\n'; cat "$KHUB_SRC/examples/relu/relu_cpu/relu_cpu.cpp"; } >"$T/syntax/relu_cpu/relu_cpu.cpp"
wbuild syntax "$T/syntax" "$VARIANT"
is "$RC" 1 "C++ syntax error: exit 1 (build failed)"
like "$(cat "$T/syntax.log")" 'relu_cpu\.cpp:[0-9]+:[0-9]+: error' "the log shows the compiler's error"
check "C++ syntax error: nothing in OUT" -- out_empty syntax

cp -r "$KHUB_SRC/examples/relu" "$T/badver"
sed -i 's/^version = 1$/version = -1/' "$T/badver/build.toml"
wbuild badver "$T/badver" "$VARIANT"
is "$RC" 2 "general.version = -1: exit 2 (bad source)"
like "$(cat "$T/badver.log")" 'build.toml: general.version: must be an integer ≥ 0' "the message names the key"
check "bad build.toml: nothing in OUT" -- out_empty badver

cp -r "$KHUB_SRC/examples/relu" "$T/unknown"
sed -i 's/^license = "Apache-2.0"$/license = "Apache-2.0"\ncolour = "red"/' "$T/unknown/build.toml"
wbuild unknown "$T/unknown" "$VARIANT"
is "$RC" 2 "an unknown key: exit 2"
like "$(cat "$T/unknown.log")" 'build.toml: general.colour: unknown key' "the message names the unknown key"

cp -r "$KHUB_SRC/examples/relu" "$T/badtoml"
echo 'this is = = not toml' >> "$T/badtoml/build.toml"
wbuild badtoml "$T/badtoml" "$VARIANT"
is "$RC" 2 "build.toml that is not TOML: exit 2"
like "$(cat "$T/badtoml.log")" 'build.toml: not valid TOML' "the message says so"

cp -r "$KHUB_SRC/examples/relu" "$T/escape"
sed -i 's|src = \["relu_cpu/relu_cpu.cpp"\]|src = ["../../etc/relu_cpu.cpp"]|' "$T/escape/build.toml"
wbuild escape "$T/escape" "$VARIANT"
is "$RC" 2 "a source path leaving the tree: exit 2"
like "$(cat "$T/escape.log")" 'build.toml: kernel.relu_cpu.src\[0\]: .* must be a relative path inside the source' "the message names the key"

cp -r "$KHUB_SRC/examples/relu" "$T/cutlass"
sed -i '0,/depends = \["torch"\]/s//depends = ["torch", "cutlass_3_6"]/' "$T/cutlass/build.toml"
wbuild cutlass "$T/cutlass" "$VARIANT"
is "$RC" 1 "a CPU kernel depending on CUTLASS without a checkout: exit 1"
like "$(cat "$T/cutlass.log")" 'depends = "cutlass_3_6" needs a checkout: set CUTLASS_SRC_DIR' "and the log says what to set"

cp -r "$KHUB_SRC/examples/relu" "$T/layout"
rm "$T/layout/torch-ext/relu/__init__.py"
wbuild layout "$T/layout" "$VARIANT"
is "$RC" 2 "no torch-ext/relu/__init__.py: exit 2"
like "$(cat "$T/layout.log")" 'source layout: torch-ext/relu/__init__.py is missing' "the message names the file"
check "bad layout: nothing in OUT" -- out_empty layout

# A compile that never ends: g++ evaluating a constexpr loop of 2^40 steps
# (real compiler work, no sleep). The wall-clock limit kills the group.
mkdir -p "$T/slow/torch-ext/slow"
cat > "$T/slow/build.toml" <<'EOF'
[general]
name = "slow"
version = 1
edition = 5
license = "MIT"
backends = ["cpu"]

[torch]
src = ["torch-ext/spin.cpp"]
cxx-flags = ["-fconstexpr-ops-limit=1099511627776", "-fconstexpr-loop-limit=2147483647"]
EOF
cat > "$T/slow/torch-ext/spin.cpp" <<'EOF'
constexpr unsigned long spin() {
  unsigned long x = 0;
  for (unsigned long i = 0; i < (1ul << 40); ++i)
    x += i ^ (x >> 3);
  return x;
}
static_assert(spin() != 1, "spin");
EOF
echo 'from ._ops import ops' > "$T/slow/torch-ext/slow/__init__.py"
s0=$(date +%s)
wbuild slow "$T/slow" "$VARIANT" --wall-seconds 6
s1=$(date +%s)
is "$RC" 3 "a compile running past --wall-seconds 6: exit 3 (timed out)"
diag "stopped $((s1 - s0)) s after it started (the compile alone would take hours)"
like "$(cat "$T/slow.log")" 'ran out of time \(wall-clock limit of 6 s\)' \
	"the log says the wall-clock limit was hit (whichever step it was in: a busy machine may still be probing)"
check "timed out: nothing in OUT" -- out_empty slow
check "no compiler left running from the killed group" -- bash -c "! pgrep -f 'spin[.]cpp' >/dev/null"

wbuild cpu "$T/slow" "$VARIANT" --cpu-seconds 3 --wall-seconds 3600
is "$RC" 3 "the same compile under --cpu-seconds 3: exit 3 (a limit was hit)"
like "$(cat "$T/cpu.log")" 'CPU-time limit \(3 s per process\) was hit' "the log names the CPU-time limit"
check "and the CPU limit, not the wall clock, stopped it" -- bash -c "! grep -q 'ran out of time' '$T/cpu.log'"

mkdir -p "$T/big/torch-ext/big"
sed 's/name = "halve"/name = "big"/' "$T/noarch/build.toml" > "$T/big/build.toml"
echo 'SIZE = 3' > "$T/big/torch-ext/big/__init__.py"
head -c 3000000 /dev/urandom > "$T/big/blob.bin"
wbuild big "$T/big" torch-cpu --disk-mb 2
is "$RC" 3 "a 3 MB source under --disk-mb 2: exit 3 (a limit was hit)"
like "$(cat "$T/big.log")" 'over the limit of 2 MiB' "the log names the disk limit"
check "disk limit: nothing in OUT" -- out_empty big

# Nothing of the worker reaches build code: not its environment, not a
# file it hides (the daemon hides its token file with --hide).
# (Not under /tmp: the sandbox has its own empty /tmp.)
TOKDIR=$(mktemp -d /var/tmp/khub-t0132-XXXXXX)
echo "worker-token-secret" > "$TOKDIR/worker.token"
mkdir -p "$T/leak/torch-ext/leak"
sed 's/name = "halve"/name = "leak"/' "$T/noarch/build.toml" > "$T/leak/build.toml"
cat > "$T/leak/torch-ext/leak/__init__.py" <<EOF
import os
leaks = []
if os.environ.get("KHUB_TEST_SECRET"):
    leaks.append("environment")
try:
    if open("$TOKDIR/worker.token").read():
        leaks.append("token file")
except OSError:
    pass
if leaks:
    raise SystemExit("leaked: " + ", ".join(leaks))
EOF
KHUB_TEST_SECRET=hunter2 wbuild leak "$T/leak" torch-cpu --hide "$TOKDIR/worker.token"
is "$RC" 0 "build code sees neither the worker's environment nor a --hide file"
KHUB_TEST_SECRET=hunter2 wbuild leak2 "$T/leak" torch-cpu
is "$RC" 0 "without --hide the file is not seen either: nothing of the machine but /usr, the toolchain and a minimal /etc is"
$PY -c "exec(open('$T/leak/torch-ext/leak/__init__.py').read())" 2>"$T/leak-control.log"
like "$(cat "$T/leak-control.log")" 'leaked: token file' "control: the same code outside the sandbox reads the file"

# Build code reaching the network: the kernel's __init__.py (run by the
# smoke import) connects to a listener this test runs on the host.
PORT=$(free_port)
$PY - "$PORT" "$T/connections" <<'EOF' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("connection\n"); c.close()
EOF
LISTENER_PID=$!
mkdir -p "$T/net/torch-ext/net"
sed 's/name = "halve"/name = "net"/' "$T/noarch/build.toml" > "$T/net/build.toml"
cat > "$T/net/torch-ext/net/__init__.py" <<EOF
import socket
socket.create_connection(("127.0.0.1", $PORT), timeout=5).close()
EOF
lines_at_least() {	# lines_at_least N: wait (bounded) until the listener logged N connections
	for _ in $(seq 1 600); do [ "$(wc -l < "$T/connections" 2>/dev/null || echo 0)" -ge "$1" ] && return 0; sleep 0.1; done
	return 1
}
# the listener takes connections in order: a marker connection made from
# the host after the build is logged after any the build could have made
marker() { $PY -c "import socket; socket.create_connection(('127.0.0.1', $PORT), timeout=30).close()"; }
for _ in $(seq 1 600); do
	$PY -c "import socket; socket.create_connection(('127.0.0.1', $PORT), timeout=1).close()" 2>/dev/null && break
	sleep 0.1
done
lines_at_least 1	# the readiness probe's line, logged
: > "$T/connections"
$PY -c "exec(open('$T/net/torch-ext/net/__init__.py').read())"
lines_at_least 1
is "$(wc -l < "$T/connections")" 1 "control: the same code outside the sandbox reaches the listener"
: > "$T/connections"
wbuild net "$T/net" torch-cpu
is "$RC" 1 "a build whose code connects to the host: exit 1 (the smoke import failed)"
like "$(cat "$T/net.log")" 'ConnectionRefusedError|Network is unreachable|OSError' "the log shows the connection refused in the sandbox"
marker && lines_at_least 1
is "$(wc -l < "$T/connections")" 1 "the listener saw no connection from the build (only the marker after it)"
: > "$T/connections"
check "network build: nothing in OUT" -- out_empty net
if [ "$(id -u)" = 0 ]; then
	wbuild net-unshare "$T/net" torch-cpu --sandbox unshare
	is "$RC" 64 "--sandbox unshare (weaker than bubblewrap) is refused: usage error"
	like "$(cat "$T/net-unshare.log")" 'sandbox unshare is refused' "and the log says why"
	marker && lines_at_least 1
	is "$(wc -l < "$T/connections")" 1 "the listener still saw no connection (only the marker)"
else
	for i in 1 2 3; do ok 0 "# SKIP the unshare fallback needs root"; done
fi

wbuild usage "$KHUB_SRC/examples/relu" torch212-cxx11-cu130-x86_64-linux
is "$RC" 64 "a variant the toolchain cannot build: exit 64"
like "$(cat "$T/usage.log")" 'toolchain cpu-debian cannot build torch212-cxx11-cu130-x86_64-linux' "and says why"

# ---- GPU sources, compile only --------------------------------------------------------------
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
if [ -n "$NVCC" ]; then
	"$NVCC" -O3 -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 -c "$KHUB_SRC/examples/relu/relu_cuda/relu_kernel.cu" \
		-o "$T/relu_cuda.o" >"$T/nvcc.log" 2>&1
	ok $? "nvcc compiles examples/relu's CUDA kernel to an object"
	like "$(readelf -S "$T/relu_cuda.o" 2>&1)" 'nv_fatbin' "the object carries a CUDA fat binary"
else
	ok 0 "# SKIP nvcc not installed (the CUDA toolkit is not in Debian main)"
	ok 0 "# SKIP nvcc not installed"
fi
if command -v hipcc >/dev/null; then
	hipcc -x hip --offload-arch=gfx90a -O3 -fPIC -DUSE_ROCM=1 -c "$KHUB_SRC/examples/relu/relu_cuda/relu_kernel.cu" \
		-o "$T/relu_hip.o" >"$T/hipcc.log" 2>&1
	ok $? "Debian's hipcc compiles the same kernel as HIP to an object"
	like "$(readelf -S "$T/relu_hip.o" 2>&1)" 'hip_fatbin' "the object carries a HIP fat binary"
else
	ok 0 "# SKIP hipcc not installed (apt-get install hipcc)"
	ok 0 "# SKIP hipcc not installed"
fi

done_testing
