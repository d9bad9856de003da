#!/bin/bash
# t0343-worker-namespace-direct.sh -- the runtime namespace registers the
# same ops a direct compile does: examples/relu and bench/kernels/activations
# built cold by the worker (through ccache, the binding for the runtime
# namespace); every compile and the link of each build log redone by hand
# outside the sandbox with -DTORCH_EXTENSION_NAME=<the namespace> and no
# namespace file (tests/lib/worker_build.sh hand_build): both libraries
# register the same op list under the namespace, and the worker's names no
# khub_ops-derived namespace. A second worker build of the same commit,
# served from the cache, is byte for byte the cold build.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker_build.sh"

worker_build_setup t0343
cp -r "$KHUB_SRC/examples/relu" "$T/relu"
chmod -R a+rX "$T/relu"
activations_kernel "$T/activations"
C=4444444444444444444444444444444444444444
wbuild relu "$T/relu" $C --repo acme/relu --cache-root "$T/ccache" &
wbuild activations "$T/activations" $C --repo acme/activations --cache-root "$T/ccache" &
wait
wbuild relu-hit "$T/relu" $C --repo acme/relu --cache-root "$T/ccache" &
hand_build relu "$T/relu" "$T/hand-relu" &
hand_build activations "$T/activations" "$T/hand-activations" &
wait
oplist() {	# oplist SO NS: the ops registered under NS by loading SO
	$PY - "$1" "$2" <<'PY' 2>&1
import sys, torch
torch.ops.load_library(sys.argv[1])
names = [s.name for s in torch._C._jit_get_all_schemas()]
print(" ".join(sorted(n for n in names if n.startswith(sys.argv[2] + "::"))) or "none",
      "khub_ops" if any(n.startswith("khub_ops") for n in names) else "")
PY
}
for k in relu activations; do
	ns=_${k}_cpu_4444444
	so=$VARIANT/$ns.abi3.so
	is "$(cat "$T/$k.rc")" 0 "$k: the worker's build exits 0"
	like "$(cat "$T/$k.log")" "torch-ext/torch_binding.cpp: registers under the runtime op namespace $ns" \
		"$k: the binding was compiled for the runtime namespace"
	is "$(grep -c FAILED "$T/hand-$k/hand.log")" 0 "$k: every logged command redone by hand with the namespace itself"
	ok $([ -s "$T/hand-$k/stage/$so" ]; echo $?) "$k: … which linked $so"
	want=$(oplist "$T/hand-$k/stage/$so" "$ns")
	like "$want" "^$ns::" "$k: the direct compile registers ops under $ns ($want)"
	is "$(oplist "$T/out-$k/$so" "$ns")" "$want" "$k: the worker's library registers the same op list, none under khub_ops"
done
is "$(cat "$T/relu-hit.rc")/$(cache_field relu-hit hits)/$(cache_field relu-hit misses)" "0/2/0" \
	"relu again: both units from the cache"
check "… byte for byte the cold build" -- diff -r "$T/out-relu/$VARIANT" "$T/out-relu-hit/$VARIANT"
done_testing
