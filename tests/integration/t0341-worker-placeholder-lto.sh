#!/bin/bash
# t0341-worker-placeholder-lto.sh -- a binding compiled with -flto ([torch]
# cxx-flags of examples/relu): its object holds LTO IR, whose names are
# not plain bytes, so the placeholder cannot be replaced there. The worker
# compiles that unit again with the namespace itself (the build log says
# why), and the library registers its op under the namespace, never under
# the placeholder: it builds, loads and computes relu; the .so holds no
# placeholder. A second commit does the same through the build cache.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker_build.sh"

worker_build_setup t0341
cp -r "$KHUB_SRC/examples/relu" "$T/k1"
sed -i 's|^src = \["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"\]|&\ncxx-flags = ["-flto"]|' "$T/k1/build.toml"
chmod -R a+rX "$T/k1"
cp -r "$T/k1" "$T/k2"
printf '\n# one more line\n' >>"$T/k2/build.toml"
is "$(grep -c 'cxx-flags = \["-flto"\]' "$T/k1/build.toml")" 1 "[torch] cxx-flags = [\"-flto\"]"
wbuild k1 "$T/k1" 1111111111111111111111111111111111111111 --repo acme/relu --cache-root "$T/ccache"
wbuild k2 "$T/k2" 2222222222222222222222222222222222222222 --repo acme/relu --cache-root "$T/ccache"
for k in k1 k2; do
	n=_relu_cpu_$(printf '%s' "${k#k}" | sed 's/./&&&&&&&/')
	is "$(cat "$T/$k.rc")" 0 "$k: a binding compiled with -flto builds"
	like "$(grep '^+ .* -c torch-ext/torch_binding.cpp ' "$T/$k.log" | head -1)" ' -flto ' "$k: the worker passes build.toml's cxx-flags"
	like "$(cat "$T/$k.log")" "torch-ext/torch_binding.cpp: compiled again with -DTORCH_EXTENSION_NAME=$n: it has LTO IR" \
		"$k: its object's names are not plain bytes: compiled again with the namespace itself, the log says why"
	is "$(variant_loads "$k" relu)" equal "$k: the variant loads as the loader does and its relu equals torch's"
	check "$k: the .so holds no placeholder" -- bash -c "! grep -aq kHnsPH0 '$T/out-$k/$VARIANT/$n.abi3.so'"
	like "$(cat "$T/$k.log")" "smoke import: ops $n::relu" "$k: the smoke import found relu under $n"
done
done_testing
