#!/bin/bash
# t0343-worker-placeholder-bytes.sh -- the op namespace placed in an object
# compiled with its placeholder gives the bytes of compiling with the
# namespace itself: examples/relu and bench/kernels/activations built cold
# by the worker (through ccache, the binding with the placeholder), then
# every compile and the link of each build log redone by hand outside the
# sandbox with -DTORCH_EXTENSION_NAME=<the namespace> (tests/lib/
# worker_build.sh hand_build): the libraries are byte for byte the same.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker_build.sh"

worker_build_setup t0343
for k in relu activations; do
	case $k in relu) src=$KHUB_SRC/examples/relu ;; *) src=$KHUB_SRC/bench/kernels/$k ;; esac
	cp -r "$src" "$T/$k"
	chmod -R a+rX "$T/$k"
done
wbuild relu "$T/relu" 4444444444444444444444444444444444444444 --repo acme/relu --cache-root "$T/ccache" &
wbuild activations "$T/activations" 4444444444444444444444444444444444444444 --repo acme/activations \
	--cache-root "$T/ccache" &
wait
hand_build relu "$T/relu" "$T/hand-relu" &
hand_build activations "$T/activations" "$T/hand-activations" &
wait
for k in relu activations; do
	so=$VARIANT/_${k}_cpu_4444444.abi3.so
	is "$(cat "$T/$k.rc")" 0 "$k: the worker's build exits 0"
	like "$(cat "$T/$k.log")" "C\+\+ units compiled with the placeholder _${k}_cpu_kHnsPH0, replaced by _${k}_cpu_4444444" \
		"$k: the binding was compiled with the placeholder"
	like "$(cat "$T/$k.log")" "torch-ext/torch_binding.cpp: op namespace _${k}_cpu_4444444 placed" "$k: … and patched"
	is "$(grep -c FAILED "$T/hand-$k/hand.log")" 0 "$k: every logged command redone by hand with the namespace itself"
	ok $([ -s "$T/hand-$k/stage/$so" ]; echo $?) "$k: … which linked $so"
	is "$(sha256sum <"$T/out-$k/$so")" "$(sha256sum <"$T/hand-$k/stage/$so")" \
		"$k: the worker's library is byte for byte the one compiled with -DTORCH_EXTENSION_NAME=_${k}_cpu_4444444"
done
done_testing
