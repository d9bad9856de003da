#!/usr/bin/env bash
# run_build_cache.sh -- the build cache on the GPU device machine (16 cores),
# from the repo root, with the bundle of tests/device/make_bundle.sh and
# Debian's ccache carried in .device/ccache/ (ccache and its libhiredis; the
# machine has no ccache): khub-worker builds examples/relu's CUDA variant
# (all capabilities, the machine's cores) cold into a new cache, then as
# three later commits: one line changed in the CPU source, one line changed
# in the CUDA kernel, nothing changed. Prints each time and its ratio to
# the cold build (issue 34's target: a one-line change <= 0.3 of cold), each
# unit's compile time from the build log, and the cache's hit counts. Prints PASS/FAIL lines.
#
#   bash tests/device/run_build_cache.sh
set -u
. tests/device/lib.sh
T=$(mktemp -d /tmp/kcache.XXXXXX)
chmod 755 "$T"
trap device_cleanup EXIT
device_bundle
device_ccache
device_toolchain >/dev/null

SRC=$T/src
cp -r "$ROOT/examples/relu" "$SRC"
chmod -R a+rX "$T"
# build NAME COMMIT: one build of the CUDA variant into the shared cache.
build() {
	local start
	rm -rf "$T/out-$1"
	start=$(date +%s.%N)
	worker build --toolchains "$T/toolchains.json" --toolchain torch-cuda --source "$SRC" --out "$T/out-$1" \
		--variant "$CUDA_VARIANT" --repo acme/relu --commit "$2" --jobs "$(nproc)" --cache-root "$T/cache" \
		--cache-max-mb 2048 --probe-cache "$T/probe" >"$T/build-$1.log" 2>&1 && pass "build $1" || { fail "build $1"; tail -20 "$T/build-$1.log"; }
	eval "SECS_$1=$(seconds_since "$start")"
	echo "== $1: $(eval echo \$SECS_$1) s; $(grep -io 'cache[^,;]*hit[^;]*' "$T/build-$1.log" | tail -1)"
	grep '^compiled .* in [0-9.]* s$' "$T/build-$1.log" | sed 's/^/   /'	# each unit's time, nvcc's apart
}
# The farm's builds do not probe the toolchain: the daemon probes it once
# when it starts (daemon.c) and gives every build that probe (job.c,
# --probe-cache). So here: one probe first, which the builds then reuse (a
# build with no build.toml probes, then stops).
mkdir -p "$T/empty" "$T/probe"
worker build --toolchains "$T/toolchains.json" --toolchain torch-cuda --source "$T/empty" --out "$T/out-probe" \
	--variant "$CUDA_VARIANT" --commit 1111111111111111111111111111111111111111 --probe-cache "$T/probe" >"$T/probe.log" 2>&1
[ -n "$(ls "$T/probe" 2>/dev/null)" ] && pass "the toolchain probed once, as the daemon does" || fail "no probe in $T/probe"
build cold 1111111111111111111111111111111111111111
echo 'int relu_cpu_bench_line(void) { return 1; }' >>"$SRC/relu_cpu/relu_cpu.cpp"
build cpu_line 2222222222222222222222222222222222222222
echo '__device__ int relu_cuda_bench_line(void) { return 1; }' >>"$SRC/relu_cuda/relu_kernel.cu"
build cuda_line 3333333333333333333333333333333333333333
build no_change 3333333333333333333333333333333333333333
for b in cpu_line cuda_line no_change; do
	"$PY" -c "print('== $b / cold: %.2f' % ($(eval echo \$SECS_$b) / $SECS_cold))"
done
"$PY" -c "import sys; sys.exit(0 if $SECS_cuda_line / $SECS_cold <= 0.3 else 1)" &&
	pass "a one-line change in the CUDA kernel rebuilds in <= 0.3 of cold" || fail "a one-line change in the CUDA kernel: over 0.3 of cold"
CCACHE_DIR=$(find "$T/cache" -name ccache.conf -printf '%h\n' 2>/dev/null | head -1)
[ -n "$CCACHE_DIR" ] && CCACHE_DIR=$CCACHE_DIR ccache -s 2>/dev/null | sed 's/^/   /' | head -12
device_result
