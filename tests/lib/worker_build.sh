# worker_build.sh -- sourced by the tests that run `khub-worker build` by hand
# with Debian's python3-torch (after khub-test.sh): the worker, skips without
# torch, ccache or bubblewrap, a scratch $T, the cpu-debian toolchain, the
# variant's name, and helpers to build, read the report and load the result.
# worker_build_setup NAME: sets WORKER, PY (tests/lib/worker_env.sh), T
# (/tmp/khub-NAME-*, removed at exit) and VARIANT; writes $T/toolchains.json.
. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_build_setup() {
	worker_needs torch ccache bwrap
	T=$(mktemp -d "/tmp/khub-$1-XXXXXX")
	chmod 755 "$T"	# run as root, the build runs as uid 65534, which must reach its scratch below
	trap 'rm -rf "$T"' EXIT
	worker_toolchain "$T/toolchains.json"
	VARIANT=$(worker_torch_variant)
}

# activations_kernel DIR: bench/kernels/activations (a binding and five
# kernel files) copied to DIR with ATen's headers in place of <torch/torch.h>,
# the whole C++ frontend, which none of its units uses: the same code and
# ops at a third of the compile time. The bench keeps the kernel as authors
# write it; what the tests check (which units the cache serves, namespaces,
# bytes, the ops) does not depend on which torch header a unit includes.
activations_kernel() {
	cp -r "$KHUB_SRC/bench/kernels/activations" "$1"
	sed -i 's|#include <torch/torch.h>|#include <ATen/ATen.h>|' "$1/cpu/elementwise.h"
	sed -i 's|#include <torch/torch.h>|#include <ATen/core/Tensor.h>|' "$1/torch-ext/torch_binding.h"
	sed -i 's/torch::/at::/g' "$1/cpu/"*.h "$1/cpu/"*.cpp "$1/torch-ext/"*.h "$1/torch-ext/"*.cpp
	! grep -rq -e 'torch/torch.h' -e 'torch::' "$1" || bail "activations_kernel: $1 still names torch's C++ frontend"
	chmod -R a+rX "$1"
}

# wbuild NAME SOURCE COMMIT [ARGS...]: exit status in $T/NAME.rc, log in
# $T/NAME.log. The toolchain is probed once per test and the probe reused
# (--probe-cache), as the daemon gives its builds its own probe.
wbuild() {
	local name=$1 src=$2 commit=$3; shift 3
	"$WORKER" build --toolchains "$T/toolchains.json" --toolchain cpu-debian --source "$src" \
		--out "$T/out-$name" --variant "$VARIANT" --work-dir "$T/work-$name" --commit "$commit" \
		--probe-cache "$T/probe" --source-date-epoch 1700000000 "$@" >"$T/$name.log" 2>&1
	echo $? >"$T/$name.rc"
}

cache_field() {	# cache_field NAME KEY: the report's build.cache.KEY of build NAME
	jq -r ".build.cache.$2" "$T/out-$1/abi-report.json" 2>/dev/null
}

stat_of() {	# stat_of DIR COUNTER: ccache's counter in the cache DIR
	CCACHE_DIR=$1 ccache --print-stats 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}

# variant_loads NAME OPS: import build NAME's variant as the loader does and
# compare each op (of relu, silu, gelu, sigmoid, softplus) with torch's:
# "equal", else what differs or failed. The registered op namespaces follow
# on a line "namespaces: ...".
variant_loads() {
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

# hand_build NAME SOURCE DIR: build NAME's logged compiles and link (its
# "+ " lines) run again by hand in DIR, outside the sandbox and without
# ccache, with the op namespace itself where the worker compiled a unit
# for the runtime namespace (and without the namespace file): DIR/stage/
# <variant>/<ops>.abi3.so is what compiling with -DTORCH_EXTENSION_NAME=<ops>
# directly gives. registration.h is the
# worker's own text (read from its binary). Failed commands in DIR/hand.log.
hand_build() {
	local log=$T/$1.log src=$2 S=$3 scratch ns line argv
	mkdir -p "$S/obj"
	cp -r "$src" "$S/src"
	$PY - "$WORKER" >"$S/src/torch-ext/registration.h" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
i = b.index(b"// registration.h -- written by khub-worker")
sys.stdout.write(b[i:b.index(b"\0", i)].decode())
PY
	scratch=$(sed -n 's/^+ .* -ffile-prefix-map=\([^= ]*\)=\/khub\/build .*/\1/p' "$log" | head -1)
	ns=$(sed -n 's/.*: registers under the runtime op namespace \([^ ]*\) .*/\1/p' "$log" | head -1)
	grep '^+ ' "$log" | grep -v ' -c \.\./obj/khub_op_namespace\.c ' | while read -r line; do
		line=${line#+ }
		line=${line#/*/ccache }
		[ -n "$ns" ] && line=${line//-DKHUB_RUNTIME_NAMESPACE -DTORCH_EXTENSION_NAME=khub_ops /-DTORCH_EXTENSION_NAME=$ns }
		line=${line//\/khub\/build\/src/$S/src}
		line=${line//$scratch/$S}
		line=${line// $S\/obj\/khub_op_namespace.o/}
		read -ra argv <<<"$line"
		case " $line " in *" -shared "*) mkdir -p "$(dirname "${argv[3]}")" ;; esac
		(cd "$S/src" && "${argv[@]}") >>"$S/hand.log" 2>&1 || echo "FAILED: $line" >>"$S/hand.log"
	done
}
