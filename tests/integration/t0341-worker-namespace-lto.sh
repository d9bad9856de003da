#!/bin/bash
# t0341-worker-namespace-lto.sh -- a binding compiled with -flto ([torch]
# cxx-flags of examples/relu): with the runtime namespace no object is
# rewritten, so LTO IR is fine. The binding is compiled for the runtime
# namespace (the same command line on both commits), the library links,
# loads, computes relu and registers it under the commit's namespace; the
# .so holds no khub_ops-derived name. A second commit does the same
# through the build cache (the binding a cache hit).
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
	like "$(grep '^+ .* -c torch-ext/torch_binding.cpp ' "$T/$k.log" | head -1)" ' -DKHUB_RUNTIME_NAMESPACE -DTORCH_EXTENSION_NAME=khub_ops .* -flto ' \
		"$k: the worker passes build.toml's cxx-flags, the binding compiled for the runtime namespace"
	like "$(cat "$T/$k.log")" "torch-ext/torch_binding.cpp: registers under the runtime op namespace $n" "$k: the log says so"
	is "$(variant_loads "$k" relu)" equal "$k: the variant loads as the loader does and its relu equals torch's"
	check "$k: the .so holds no khub_ops-derived name" -- bash -c "! grep -aq khub_ops '$T/out-$k/$VARIANT/$n.abi3.so'"
	like "$(cat "$T/$k.log")" "smoke import: ops $n::relu" "$k: the smoke import found relu under $n"
done
is "$(cache_field k2 hits)/$(cache_field k2 misses)" "2/0" "k2: both units (the -flto binding too) from the cache"
done_testing
