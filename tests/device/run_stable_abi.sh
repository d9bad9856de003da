#!/usr/bin/env bash
# run_stable_abi.sh -- on the GPU device machine (Ubuntu 24.04, torch 2.11,
# g++, no khub C dependencies, no network), from the repo root: build
# examples/relu-stable-abi as torch-stable-abi211-cpu-<cpu>-linux with the
# compiler and linker commands khub-worker runs for it (Path B, logged by
# `khub-worker build`: -DTORCH_TARGET_VERSION=0x020b000000000000, the
# registration.h and _ops.py of builder-worker/package.c), check that the
# library imports no C++ symbol of c10::, at:: or torch:: (the stable ABI
# rule of builder-worker/abi_check.c), run the worker's own smoke import
# (builder-worker/smoke_check.py: the ops check) on torch 2.11, then load
# the variant the way the kernels loader does and compare relu with
# torch.relu. Sources come from git (REF, default HEAD), so it runs on a
# copy of the repository whose work tree is another branch. PASS/FAIL lines.
#
#   bash tests/device/run_stable_abi.sh [REF] [PYTHON]
set -u
REF=${1:-HEAD}
PY=${2:-$(command -v python3)}
T=$(mktemp -d /tmp/khub-stable-XXXXXX)
fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }
git archive "$REF" examples/relu-stable-abi builder-worker/package.c builder-worker/smoke_check.py | tar -x -C "$T" ||
	{ echo "FAIL git archive $REF"; exit 1; }
S=$T/examples/relu-stable-abi
OPS=_relu_stable_abi_cpu_0123456
V=torch-stable-abi211-cpu-$(uname -m)-linux
D=$T/repo/build/$V
mkdir -p "$D" "$T/obj"
# registration.h and the arch _ops.py: the C strings of package.c.
"$PY" - "$T/builder-worker/package.c" "$S/torch-ext/registration.h" "$D/_ops.py" "$OPS" <<'PYEOF'
import ast, re, sys
src = open(sys.argv[1]).read()
def cstring(name):
    body = re.search(r"const char " + name + r"\[\] =\n(.*?);\n", src, re.S).group(1)
    return "".join(ast.literal_eval(s) for s in re.findall(r'"(?:[^"\\]|\\.)*"', body))
open(sys.argv[2], "w").write(cstring("registration_header"))
open(sys.argv[3], "w").write(cstring("ops_arch_template").replace("@OPS@", sys.argv[4]))
PYEOF
read -r PYINC TORCHLIB TORCHINC CXX11 TV <<<"$("$PY" -c 'import sysconfig, torch
from torch.utils import cpp_extension as ce
print(sysconfig.get_paths()["include"], ce.library_paths()[0], ",".join(ce.include_paths()), int(torch.compiled_with_cxx11_abi()), torch.__version__)')"
echo "torch $TV, cxx11 $CXX11"
INCS=$(echo "$TORCHINC" | tr ',' '\n' | sed 's/^/-I/' | tr '\n' ' ')
FLAGS="-O3 -DNDEBUG -fPIC -fno-gnu-unique -std=c++17 -DTORCH_TARGET_VERSION=0x020b000000000000 -D_GLIBCXX_USE_CXX11_ABI=$CXX11
	-DTORCH_EXTENSION_NAME=$OPS -DPy_LIMITED_API=0x03090000 -DCPU_KERNEL -I$S/torch-ext $INCS -I$PYINC"
ok=1
g++ $FLAGS -c "$S/torch-ext/torch_binding.cpp" -o "$T/obj/0.o" >"$T/cc.log" 2>&1 || ok=0
g++ $FLAGS -c "$S/relu_cpu/relu_cpu.cpp" -o "$T/obj/1.o" >>"$T/cc.log" 2>&1 || ok=0
g++ -shared -o "$D/$OPS.abi3.so" "$T/obj/0.o" "$T/obj/1.o" -L"$TORCHLIB" -ltorch -ltorch_cpu -lc10 >>"$T/cc.log" 2>&1 || ok=0
[ $ok = 1 ] && pass "examples/relu-stable-abi compiles and links against torch $TV's stable ABI 2.11" ||
	{ failed "compile/link"; grep -E 'error' "$T/cc.log" | head -20; exit 1; }
cxx=$(nm -D --undefined-only "$D/$OPS.abi3.so" | awk '{print $NF}' | c++filt | grep -E '^(c10|at|torch)::' | grep -v '^torch::stable::')
[ -z "$cxx" ] && pass "no undefined c10::/at::/torch:: C++ symbol (shim: $(nm -D --undefined-only "$D/$OPS.abi3.so" | grep -c 'aoti_torch\|torch_'))" ||
	failed "C++ symbols outside the stable ABI: $cxx"
cp "$S/torch-ext/relu_stable_abi/__init__.py" "$D/"
printf '{"id":"%s","name":"relu-stable-abi","version":1,"license":"Apache-2.0","python-depends":[],"backend":{"type":"cpu"}}\n' "$OPS" >"$D/metadata.json"
"$PY" "$T/builder-worker/smoke_check.py" "$D" "$OPS" relu_stable_abi arch direct >"$T/smoke.log" 2>&1 &&
	pass "the worker's smoke import and ops check: $(grep 'smoke import: ops' "$T/smoke.log")" ||
	{ failed "smoke import"; cat "$T/smoke.log"; }
"$PY" - "$D" <<'PYEOF'
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
for dtype in (torch.float32, torch.float64):
    for shape in [(1,), (1000,), (64, 33), (3, 5, 7)]:
        x = torch.randn(*shape, dtype=dtype)
        same = same and torch.equal(mod.relu(x), torch.relu(x))
x = torch.randn(8, 8).t()
same = same and torch.equal(mod.relu(x), torch.relu(x))
print("PASS relu of %s equals torch.relu on torch %s" % (os.path.basename(d), torch.__version__) if same else "FAIL relu differs")
PYEOF
rm -rf "$T"
exit $fail
