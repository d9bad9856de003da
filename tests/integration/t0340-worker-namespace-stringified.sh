#!/bin/bash
# t0340-worker-namespace-stringified.sh -- a unit that uses TORCH_EXTENSION_NAME
# other than as the first argument of khub's registration macros (here:
# stringified, as a schema lookup would) cannot take the runtime namespace:
# the worker compiles it with -DTORCH_EXTENSION_NAME=<the namespace itself>
# (the build log says why, with the line), links no namespace file, and
# the library built from examples/relu loads, computes relu, registers it
# under the namespace, and the unit's string is the namespace at runtime
# (the .so loaded with torch). A comment naming the macro (the binding has
# one) does not count: examples/relu untouched takes the runtime namespace.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker_build.sh"

worker_build_setup t0340
cp -r "$KHUB_SRC/examples/relu" "$T/plain"
cp -r "$KHUB_SRC/examples/relu" "$T/k"
cat >>"$T/k/torch-ext/torch_binding.cpp" <<'CPP'

// the namespace as text, as a schema lookup would use it
#define T0340_STR2(x) #x
#define T0340_STR(x) T0340_STR2(x)
extern "C" const char *t0340_namespace(void) { return T0340_STR(TORCH_EXTENSION_NAME); }
CPP
chmod -R a+rX "$T/k" "$T/plain"
wbuild plain "$T/plain" 2222222222222222222222222222222222222222 --repo acme/relu &
wbuild k "$T/k" 1111111111111111111111111111111111111111 --repo acme/relu --cache-root "$T/ccache" &
wait
is "$(cat "$T/plain.rc")" 0 "examples/relu as it is builds"
like "$(grep -c 'TORCH_EXTENSION_NAME' "$T/plain/torch-ext/torch_binding.cpp")" '^[3-9]' \
	"… its binding names the macro in a comment too"
like "$(cat "$T/plain.log")" 'torch-ext/torch_binding.cpp: registers under the runtime op namespace _relu_cpu_2222222' \
	"… the comment does not count: the binding takes the runtime namespace"
is "$(cat "$T/k.rc")" 0 "a binding that stringifies TORCH_EXTENSION_NAME builds"
like "$(cat "$T/k.log")" 'torch-ext/torch_binding.cpp: compiled with -DTORCH_EXTENSION_NAME=_relu_cpu_1111111: line [0-9]+: TORCH_EXTENSION_NAME not the first argument' \
	"the build log says the unit takes the namespace itself, and why"
is "$(grep '^+ .* -c torch-ext/torch_binding.cpp ' "$T/k.log" | grep -o -- '-D[A-Z_]*NAME[A-Z_]*=[^ ]*\|-DKHUB_RUNTIME_NAMESPACE')" \
	"-DTORCH_EXTENSION_NAME=_relu_cpu_1111111" "the binding is compiled with the namespace itself, not the runtime one"
is "$(grep -c 'khub_op_namespace' "$T/k.log")" 0 "no namespace file is compiled or linked"
is "$(variant_loads k relu)" equal "the variant loads as the loader does and its relu equals torch's"
so=$T/out-k/$VARIANT/_relu_cpu_1111111.abi3.so
is "$($PY - "$so" <<'PY' 2>&1
import ctypes, sys, torch
torch.ops.load_library(sys.argv[1])
f = ctypes.CDLL(sys.argv[1]).t0340_namespace
f.restype = ctypes.c_char_p
ops = sorted(n for n in [s.name for s in torch._C._jit_get_all_schemas()] if n.startswith("_relu_cpu_"))
print(f().decode(), " ".join(ops))
PY
)" "_relu_cpu_1111111 _relu_cpu_1111111::relu" "at runtime its string is the namespace, and relu is registered under it"
done_testing
