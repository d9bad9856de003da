#!/bin/bash
# t0340-worker-placeholder-in-source.sh -- the op namespace's placeholder
# (what the host C++ compiler is given in its place, replaced by it in the
# objects) written literally by the author: a kernel file of examples/relu
# holds "_relu_cpu_kHnsPH0" in a string its op can be asked for. Replacing
# the placeholder's bytes would rewrite the author's text, so the build
# gives every unit the namespace itself (the build log says why), builds,
# loads, computes relu, and the author's string is untouched in the .so.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker_build.sh"

worker_build_setup t0340
cp -r "$KHUB_SRC/examples/relu" "$T/k"
printf '\n// the author'"'"'s own text, which must reach the library as written\nextern "C" const char *author_marker(void) { return "_relu_cpu_kHnsPH0"; }\n' \
	>>"$T/k/relu_cpu/relu_cpu.cpp"
chmod -R a+rX "$T/k"
wbuild k "$T/k" 1111111111111111111111111111111111111111 --repo acme/relu --cache-root "$T/ccache"
is "$(cat "$T/k.rc")" 0 "a kernel holding the placeholder in a source builds"
like "$(cat "$T/k.log")" 'the op namespace compiled in as it is, no placeholder: relu_cpu/relu_cpu.cpp holds _relu_cpu_kHnsPH0' \
	"the build log says the placeholder is not used, and which file holds it"
is "$(grep '^+ .* -c torch-ext/torch_binding.cpp ' "$T/k.log" | grep -o -- '-DTORCH_EXTENSION_NAME=[^ ]*')" \
	"-DTORCH_EXTENSION_NAME=_relu_cpu_1111111" "the binding is compiled with the namespace itself"
is "$(grep -c 'op namespace .* placed' "$T/k.log")" 0 "no object is patched"
is "$(variant_loads k relu)" equal "the variant loads as the loader does and its relu equals torch's"
so=$T/out-k/$VARIANT/_relu_cpu_1111111.abi3.so
is "$($PY - "$so" <<'PY'
import ctypes, sys
f = ctypes.CDLL(sys.argv[1]).author_marker
f.restype = ctypes.c_char_p
print(f().decode())
PY
)" "_relu_cpu_kHnsPH0" "the author's string in the library is as written"
done_testing
