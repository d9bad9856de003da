#!/bin/bash
# t0328-worker-cache-namespace.sh -- the build cache across commits: the op
# namespace (-DTORCH_EXTENSION_NAME, new with every commit) goes only to the
# translation units that name it, so a new commit with one line of one kernel
# file changed recompiles that file and the binding, and ccache's direct mode
# serves the other four units of bench/kernels/activations (no preprocessor
# run); the rebuilt variant loads and computes what torch does; its files are
# byte for byte those of a cold build of the same commit in a cache of its
# own, and of a build without the cache. A kernel whose header names the
# macro (a kernel file registering its implementation through it) gets it in
# every unit, and builds and loads.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

WORKER=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
[ -x "$WORKER" ] || bail "no khub-worker at $WORKER"
PY=/usr/bin/python3
$PY -c 'import torch, tomllib' 2>/dev/null || { echo "1..0 # SKIP Debian's python3-torch is not installed"; exit 0; }
command -v ccache >/dev/null || { echo "1..0 # SKIP ccache is not installed"; exit 0; }
command -v bwrap >/dev/null || { echo "1..0 # SKIP bubblewrap is not installed"; exit 0; }

T=$(mktemp -d /tmp/khub-t0328-XXXXXX)
chmod 755 "$T"	# run as root, the build runs as uid 65534, which must reach its scratch below
trap 'rm -rf "$T"' EXIT
cat >"$T/toolchains.json" <<EOF
{"toolchains": [{"name": "cpu-debian", "python": "$PY", "cxx": "g++"}]}
EOF
VARIANT=$($PY -c 'import torch; v = torch.__version__.split(".")
print("torch%s%s-cxx%s-cpu-x86_64-linux" % (v[0], v[1], "11" if torch.compiled_with_cxx11_abi() else "98"))')
C1=1111111111111111111111111111111111111111
C2=2222222222222222222222222222222222222222
C3=3333333333333333333333333333333333333333
A_DIR=$T/ccache/$(printf 'acme/activations\ncpu-debian' | sha256sum | cut -d' ' -f1)

wbuild() {	# wbuild NAME SOURCE COMMIT [ARGS...]: exit status in $T/NAME.rc, log in $T/NAME.log
	local name=$1 src=$2 commit=$3; shift 3
	"$WORKER" build --toolchains "$T/toolchains.json" --toolchain cpu-debian --source "$src" \
		--out "$T/out-$name" --variant "$VARIANT" --work-dir "$T/work-$name" --commit "$commit" \
		--source-date-epoch 1700000000 --repo acme/activations "$@" >"$T/$name.log" 2>&1
	echo $? >"$T/$name.rc"
}
cache_field() {	# cache_field NAME KEY: the report's build.cache.KEY of build NAME
	jq -r ".build.cache.$2" "$T/out-$1/abi-report.json" 2>/dev/null
}
stat_of() {	# stat_of COUNTER: ccache's counter in acme/activations' cache
	CCACHE_DIR=$A_DIR ccache --print-stats 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'
}
loads() {	# loads NAME OPS: import build NAME's variant as the loader does, compare each op with torch
	$PY - "$T/out-$1/$VARIANT" "$2" <<'PY' 2>&1
import importlib.util, json, os, sys, torch
d, ops = sys.argv[1], sys.argv[2].split(",")
kid = json.load(open(os.path.join(d, "metadata.json")))["id"]
spec = importlib.util.spec_from_file_location(kid, os.path.join(d, "__init__.py"))
mod = importlib.util.module_from_spec(spec)
sys.modules[kid] = mod
spec.loader.exec_module(mod)
ref = {"relu": torch.relu, "silu": torch.nn.functional.silu, "sigmoid": torch.sigmoid,
       "gelu": lambda x: torch.nn.functional.gelu(x, approximate="tanh"), "softplus": torch.nn.functional.softplus}
bad = [op for op in ops for x in (torch.randn(1000), torch.randn(7, 9, dtype=torch.float64))
       if not torch.allclose(getattr(mod, op)(x), ref[op](x), atol=1e-6)]
print("equal" if not bad else "DIFFERENT: " + " ".join(bad))
PY
}
units_with_namespace() {	# the compiled units of build NAME's log given -DTORCH_EXTENSION_NAME
	grep '^+ .* -c ' "$T/$1.log" | grep -- '-DTORCH_EXTENSION_NAME=' | sed 's/.* -c \([^ ]*\) -o .*/\1/' | sort | tr '\n' ' '
}
ALL_OPS=relu,silu,gelu,sigmoid,softplus

# ---- a cold build of commit 1 ----------------------------------------------------------------------
cp -r "$KHUB_SRC/bench/kernels/activations" "$T/k1"
chmod -R a+rX "$T/k1"
wbuild k1 "$T/k1" $C1 --cache-root "$T/ccache"
is "$(cat "$T/k1.rc")" 0 "a cold build of the six-unit kernel exits 0"
is "$(cache_field k1 hits)/$(cache_field k1 misses)" "0/6" "it misses on all six units"
is "$(units_with_namespace k1)" "torch-ext/torch_binding.cpp " \
	"only the binding, the unit that names it, is given -DTORCH_EXTENSION_NAME"
like "$(cat "$T/k1.log")" 'only for the units that name it: torch-ext/torch_binding.cpp' "the build log says so"

# ---- commit 2: one line of one kernel file changed ------------------------------------------------------
cp -r "$T/k1" "$T/k2"
printf 'static_assert(sizeof(float) == 4, "one more line");\n' >>"$T/k2/cpu/silu.cpp"
direct0=$(stat_of direct_cache_hit) pre0=$(stat_of preprocessed_cache_hit)
wbuild k2 "$T/k2" $C2 --cache-root "$T/ccache"
is "$(cat "$T/k2.rc")" 0 "commit 2 (a new op namespace, one line of cpu/silu.cpp changed) builds with the cache"
is "$(cache_field k2 hits)/$(cache_field k2 misses)" "4/2" \
	"four units served from the cache; the binding (new namespace) and cpu/silu.cpp compiled"
is "$(( $(stat_of direct_cache_hit) - direct0 ))/$(( $(stat_of preprocessed_cache_hit) - pre0 ))" "4/0" \
	"all four hits in ccache's direct mode (the same command line), none needing the preprocessor"
is "$(loads k2 $ALL_OPS)" equal "the rebuilt variant loads as the loader does and its five ops equal torch's"

# ---- commit 2 cold in a cache of its own, and without a cache; a header naming the macro -------------------
cp -r "$T/k1" "$T/k3"
cat >>"$T/k3/cpu/elementwise.h" <<'EOF'

// A kernel file registers its own implementation through this macro.
#include "registration.h"
#define ACTIVATION_CPU_IMPL(op, fn) \
  TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, m) { m.impl(op, fn); }
EOF
sed -i '/ops.impl("silu"/d' "$T/k3/torch-ext/torch_binding.cpp"
printf 'ACTIVATION_CPU_IMPL("silu", &silu)\n' >>"$T/k3/cpu/silu.cpp"
chmod -R a+rX "$T/k3"
wbuild k2cold "$T/k2" $C2 --cache-root "$T/ccache-other" &
wbuild k2none "$T/k2" $C2 &
wbuild k3 "$T/k3" $C3 &
wait
is "$(cat "$T/k2cold.rc")/$(cache_field k2cold hits)/$(cache_field k2cold misses)" "0/0/6" \
	"commit 2 cold in another cache: exit 0, six misses"
is "$(cat "$T/k2none.rc")/$(cache_field k2none used)" "0/false" "commit 2 without the cache: exit 0"
check "the variant served from the cache is byte for byte the cold build's" -- \
	diff -r "$T/out-k2/$VARIANT" "$T/out-k2cold/$VARIANT"
check "… and the build without the cache's" -- diff -r "$T/out-k2/$VARIANT" "$T/out-k2none/$VARIANT"
so=$VARIANT/_activations_cpu_2222222.abi3.so
is "$(sha256sum <"$T/out-k2/$so")" "$(sha256sum <"$T/out-k2cold/$so")" "the .so's sha256: cached = cold"
is "$(cat "$T/k3.rc")" 0 "a kernel whose header names TORCH_EXTENSION_NAME builds"
like "$(cat "$T/k3.log")" 'every unit gets -DTORCH_EXTENSION_NAME=_activations_cpu_3333333: cpu/elementwise.h names it' \
	"every unit gets the namespace: a header names it"
is "$(units_with_namespace k3 | wc -w)" 6 "all six compiles are given it"
is "$(loads k3 $ALL_OPS)" equal "… and silu, registered from its kernel file, is found in the build's namespace"
done_testing
