#!/bin/bash
# t0351-worker-hipify-headers.sh -- ROCm from CUDA sources translates the
# project headers a source includes, as kernel-builder's hipify does
# (docs/worker-build.md, "ROCm from CUDA sources"): examples/relu with its
# kernel CUDA only, which includes "relu_kernel.h" and
# "detail/relu_launch.cuh", which includes "../relu_kernel.h" and
# "relu_errors.cuh" (both headers use cudaGetLastError, cudaError_t,
# cudaSuccess and <cuda_runtime.h>), is built for ROCm by `khub-worker
# build` with Debian's hipcc and torch.utils.hipify: each header is
# translated once in the sandbox into <name>_hip<ext> beside it (logged),
# the translations' includes point at them, hipcc compiles, the library
# calls HIP's runtime and nothing of CUDA's, the ABI report lists the headers
# in build.hipify.headers, and the source is untouched.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/hipify.sh"
hipify_setup
mkdir -p "$SRC/relu_cuda/detail"
hipify_cuda_kernel "$SRC/relu_cuda/relu_kernel.cu" "ReLU written for CUDA only; its launch checks live in a CUDA header." \
	'#include "detail/relu_launch.cuh"' \
	'  relu_kernel_f32<<<relu_blocks(n), 256, 0, (cudaStream_t)stream>>>(out, in, n);
  return relu_check_last_error();'
cat >"$SRC/relu_cuda/detail/relu_launch.cuh" <<'EOF'
// CUDA launch helpers (a header hipify must translate).
#pragma once
#include <cuda_runtime.h>
#include "../relu_kernel.h"
#include "relu_errors.cuh"

static inline unsigned relu_blocks(int64_t n) {
  int64_t blocks = (n + 255) / 256;
  return (unsigned)(blocks > 65535 ? 65535 : blocks);
}

static inline int relu_check_last_error() {
  cudaError_t err = cudaGetLastError();
  return relu_error_code(err);
}
EOF
cat >"$SRC/relu_cuda/detail/relu_errors.cuh" <<'EOF'
// Included by relu_launch.cuh only: translated transitively.
#pragma once
#include <cuda_runtime.h>

static inline int relu_error_code(cudaError_t err) { return err == cudaSuccess ? 0 : (int)err; }
EOF
cp -r "$SRC" "$W/src.orig"

"$WORKER_BIN" build --toolchains "$W/toolchains.json" --toolchain rocm-hipify --source "$SRC" --out "$W/out" \
	--variant "$VARIANT" --work-dir "$W/work" >"$W/build.log" 2>&1
is "$?" 0 "khub-worker build $VARIANT: the .cu and the CUDA headers it includes" || tail -40 "$W/build.log" | sed 's/^/#   /'
LOG=$(cat "$W/build.log")
like "$LOG" 'hipified relu_cuda/relu_kernel\.cu -> relu_cuda/relu_kernel\.hip' "the source is hipified"
like "$LOG" 'hipified header relu_cuda/detail/relu_launch\.cuh -> relu_cuda/detail/relu_launch_hip\.cuh' \
	"the header it includes is translated beside it"
like "$LOG" 'hipified header relu_cuda/detail/relu_errors\.cuh -> relu_cuda/detail/relu_errors_hip\.cuh' \
	"and the header that header includes (transitively)"
like "$LOG" 'hipified header relu_cuda/relu_kernel\.h -> relu_cuda/relu_kernel_hip\.h' \
	"relu_kernel.h (included by the .cu and as ../relu_kernel.h)"
is "$(grep -c 'hipified header relu_cuda/relu_kernel\.h ' "$W/build.log")" 1 "… translated once"
like "$LOG" '\+ [^ ]*python3 -B \.\./obj/khub-hipify\.py relu_cuda/detail/relu_launch\.cuh relu_cuda/detail/relu_launch_hip\.cuh' \
	"the translation runs in the sandbox (the logged command, in the scratch copy)"
like "$LOG" '\+ [^ ]*python3 -B \.\./obj/khub-hipify-includes\.py relu_cuda/relu_kernel\.hip relu_kernel\.h relu_kernel_hip\.h detail/relu_launch\.cuh detail/relu_launch_hip\.cuh' \
	"the .hip's includes are pointed at the translations"
like "$LOG" 'khub-hipify-includes\.py relu_cuda/detail/relu_launch_hip\.cuh \.\./relu_kernel\.h \.\./relu_kernel_hip\.h relu_errors\.cuh relu_errors_hip\.cuh' \
	"and the translated header's, as spelled"
like "$LOG" '\+ ([^ ]*ccache )?[^ ]*hipcc .*-x hip -c relu_cuda/relu_kernel\.hip ' "hipcc compiled the hipified source"
R=$W/out/abi-report.json
is "$(jq -c '.build.hipify.sources' "$R")" '["relu_cuda/relu_kernel.cu"]' "the ABI report: the source"
is "$(jq -c '.build.hipify.headers' "$R")" \
	'["relu_cuda/relu_kernel.h","relu_cuda/detail/relu_launch.cuh","relu_cuda/detail/relu_errors.cuh"]' \
	"… and the headers translated (build.hipify.headers)"
SO=$(ls "$W/out/$VARIANT"/*.abi3.so 2>/dev/null | head -1)
[ -n "$SO" ] || bail "no library in $W/out/$VARIANT"
UNDEF=$(nm -D --undefined-only "$SO")
like "$UNDEF" 'hipGetLastError' "the library calls hipGetLastError (the header's cudaGetLastError, translated)"
is "$(echo "$UNDEF" | grep -ci cuda)" 0 "and names nothing of CUDA's"
diff -r "$SRC" "$W/src.orig" >/dev/null
ok $? "the source itself is untouched (no _hip file, no edit)"
ok $([ -z "$(ls "$TEST_DIR"/sanitizer* 2>/dev/null)" ]; echo $?) "no sanitizer reports from khub-worker"
done_testing
