#!/bin/bash
# t0328-worker-cache-namespace.sh -- the build cache across commits: the op
# namespace (-DTORCH_EXTENSION_NAME, new with every commit) goes only to the
# translation units that name it, and a host C++ unit that names it only as
# the first argument of khub's registration macros is compiled with
# -DKHUB_RUNTIME_NAMESPACE -DTORCH_EXTENSION_NAME=khub_ops (the same on every
# commit): it registers under khub_op_namespace, a string of a small C file
# the worker compiles and links in. So a new commit with one
# line of one kernel file changed recompiles that file only: ccache's direct
# mode serves the other four units of bench/kernels/activations (with
# ATen's headers: activations_kernel) and the
# binding (no preprocessor run); the ops register under the new commit's
# namespace; the rebuilt variant loads and computes what torch does; its
# files are byte for byte those of a cold build of the same commit in a
# cache of its own, and of a build without the cache. A kernel whose header
# names the macro (a kernel file registering its implementation through it)
# gets the namespace itself in every unit, and builds and loads.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker_build.sh"

worker_build_setup t0328
C1=1111111111111111111111111111111111111111
C2=2222222222222222222222222222222222222222
C3=3333333333333333333333333333333333333333
A_DIR=$T/ccache/$(printf 'acme/activations\ncpu-debian' | sha256sum | cut -d' ' -f1)
units_with_namespace() {	# the compiled units of build NAME's log given -DTORCH_EXTENSION_NAME
	grep '^+ .* -c ' "$T/$1.log" | grep -- '-DTORCH_EXTENSION_NAME=' | sed 's/.* -c \([^ ]*\) -o .*/\1/' | sort | tr '\n' ' '
}
ALL_OPS=relu,silu,gelu,sigmoid,softplus

# ---- a cold build of commit 1 ----------------------------------------------------------------------
activations_kernel "$T/k1"
wbuild k1 "$T/k1" $C1 --repo acme/activations --cache-root "$T/ccache"
is "$(cat "$T/k1.rc")" 0 "a cold build of the six-unit kernel exits 0"
is "$(cache_field k1 hits)/$(cache_field k1 misses)" "0/6" "it misses on all six units"
is "$(units_with_namespace k1)" "torch-ext/torch_binding.cpp " \
	"only the binding, the unit that names it, is given -DTORCH_EXTENSION_NAME"
like "$(cat "$T/k1.log")" 'only for the units that name it: torch-ext/torch_binding.cpp' "the build log says so"
like "$(cat "$T/k1.log")" 'torch-ext/torch_binding.cpp: registers under the runtime op namespace _activations_cpu_1111111 \(-DKHUB_RUNTIME_NAMESPACE\)' \
	"the binding registers under the runtime namespace"
like "$(grep -- ' -c torch-ext/torch_binding.cpp ' "$T/k1.log")" '-DKHUB_RUNTIME_NAMESPACE -DTORCH_EXTENSION_NAME=khub_ops ' \
	"… compiled with a fixed identifier in place of the namespace (the same on every commit)"
like "$(cat "$T/k1.log")" '-c \.\./obj/khub_op_namespace\.c -o \.\./obj/khub_op_namespace\.o' \
	"… and the namespace file is compiled (and linked in)"

# ---- commit 2: one line of one kernel file changed ------------------------------------------------------
cp -r "$T/k1" "$T/k2"
printf 'static_assert(sizeof(float) == 4, "one more line");\n' >>"$T/k2/cpu/silu.cpp"
direct0=$(stat_of "$A_DIR" direct_cache_hit) pre0=$(stat_of "$A_DIR" preprocessed_cache_hit)
wbuild k2 "$T/k2" $C2 --repo acme/activations --cache-root "$T/ccache"
is "$(cat "$T/k2.rc")" 0 "commit 2 (a new op namespace, one line of cpu/silu.cpp changed) builds with the cache"
is "$(cache_field k2 hits)/$(cache_field k2 misses)" "5/1" \
	"five units served from the cache, the binding too (a new namespace, the same command line); cpu/silu.cpp compiled"
is "$(( $(stat_of "$A_DIR" direct_cache_hit) - direct0 ))/$(( $(stat_of "$A_DIR" preprocessed_cache_hit) - pre0 ))" "5/0" \
	"all five hits in ccache's direct mode (the same command line), none needing the preprocessor"
like "$(cat "$T/k2.log")" 'torch-ext/torch_binding.cpp: registers under the runtime op namespace _activations_cpu_2222222' \
	"the binding's cached object registers under commit 2's namespace"
is "$(variant_loads k2 $ALL_OPS)" equal "the rebuilt variant loads as the loader does and its five ops equal torch's"

# ---- commit 2 cold in a cache of its own, and without a cache; a header naming the macro -------------------
cp -r "$T/k1" "$T/k3"
cat >>"$T/k3/cpu/elementwise.h" <<'EOF'

// A kernel file registers its own implementation through this macro.
#include <torch/library.h>
#include "registration.h"
#define ACTIVATION_CPU_IMPL(op, fn) \
  TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, m) { m.impl(op, fn); }
EOF
sed -i '/ops.impl("silu"/d' "$T/k3/torch-ext/torch_binding.cpp"
printf 'ACTIVATION_CPU_IMPL("silu", &silu)\n' >>"$T/k3/cpu/silu.cpp"
chmod -R a+rX "$T/k3"
wbuild k2cold "$T/k2" $C2 --repo acme/activations --cache-root "$T/ccache-other" &
wbuild k2none "$T/k2" $C2 --repo acme/activations &
wbuild k3 "$T/k3" $C3 --repo acme/activations &
wait
is "$(cat "$T/k2cold.rc")/$(cache_field k2cold hits)/$(cache_field k2cold misses)" "0/0/6" \
	"commit 2 cold in another cache: exit 0, six misses"
is "$(cat "$T/k2none.rc")/$(cache_field k2none used)" "0/false" "commit 2 without the cache: exit 0"
check "the variant served from the cache is byte for byte the cold build's" -- \
	diff -r "$T/out-k2/$VARIANT" "$T/out-k2cold/$VARIANT"
check "… and the build without the cache's" -- diff -r "$T/out-k2/$VARIANT" "$T/out-k2none/$VARIANT"
so=$VARIANT/_activations_cpu_2222222.abi3.so
is "$(sha256sum <"$T/out-k2/$so")" "$(sha256sum <"$T/out-k2cold/$so")" "the .so's sha256: cached = cold"
check "commit 2's .so holds neither commit 1's namespace nor the fixed identifier" -- \
	bash -c "! grep -aq -e _activations_cpu_1111111 -e khub_ops '$T/out-k2/$so'"
is "$(cat "$T/k3.rc")" 0 "a kernel whose header names TORCH_EXTENSION_NAME builds"
like "$(cat "$T/k3.log")" 'every unit gets -DTORCH_EXTENSION_NAME=_activations_cpu_3333333: cpu/elementwise.h names it' \
	"every unit gets the namespace: a header names it"
is "$(units_with_namespace k3 | wc -w)" 6 "all six compiles are given it"
check "… as it is: no unit registers under the runtime namespace" -- \
	bash -c "! grep -q -e 'registers under the runtime' -e KHUB_RUNTIME_NAMESPACE '$T/k3.log'"
is "$(variant_loads k3 $ALL_OPS)" equal "… and silu, registered from its kernel file, is found in the build's namespace"
done_testing
