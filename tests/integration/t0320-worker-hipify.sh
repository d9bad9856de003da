#!/bin/bash
# t0320-worker-hipify.sh -- ROCm from CUDA sources, as kernel-builder builds
# them: examples/relu with its kernel rewritten for CUDA only (cuda_runtime.h,
# cudaStream_t, cudaGetLastError; no HIP branch) is built for ROCm by
# `khub-worker build` with Debian's hipcc and CPU torch. A toolchain whose
# "hipify" is "torch" (torch.utils.hipify of its Python, the translator
# kernel-builder's cmake/hipify.py calls) says so in --check, hipifies
# relu_cuda/relu_kernel.cu inside the sandbox into relu_kernel.hip beside it
# in the scratch copy (the source itself is untouched), and hipcc compiles
# that copy: the library calls the HIP runtime (hipGetLastError,
# hipLaunchKernel) and nothing of CUDA's, carries a gfx90a code object, and
# the log and the ABI report name the tool, its version and the file. The
# same build with a toolchain without hipify fails saying exactly why; a
# hipify program that does not answer makes its toolchain unusable, named.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/hipify.sh"

hipify_needs	# $WORKER_BIN, $PY, $HIPIFY, or a skip
TORCH=$($PY -c 'import torch; print(torch.__version__.split("+")[0])')
khub_setup	# TEST_DIR (0755: the build uid reaches the scratch under it), sanitizer logs there
W=$TEST_DIR

cat >"$W/toolchains.json" <<EOF
{"toolchains": [{"name": "rocm-hipify", "python": "$PY", "cxx": "g++", "hipcc": "hipcc", "rocm_from_hipcc": true,
                 "hipify": "torch"},
                {"name": "rocm-plain", "python": "$PY", "cxx": "g++", "hipcc": "hipcc", "rocm_from_hipcc": true},
                {"name": "rocm-gone", "python": "$PY", "cxx": "g++", "hipcc": "hipcc", "rocm_from_hipcc": true,
                 "hipify": "/usr/bin/khub-no-such-hipify-perl"}]}
EOF
"$WORKER_BIN" --check --toolchains "$W/toolchains.json" >"$W/check.out" 2>&1
TOOL="torch.utils.hipify $HIPIFY (torch $TORCH)"
TOOL_RE=$(printf '%s' "$TOOL" | sed 's/[.()]/\\&/g')
grep -qxF "  hipify $TOOL: a ROCm variant's CUDA sources are hipified first" "$W/check.out"
ok $? "--check: rocm-hipify has hipify $TOOL" || sed 's/^/#   /' "$W/check.out"
like "$(cat "$W/check.out")" 'rocm-gone: not usable: hipify: /usr/bin/khub-no-such-hipify-perl --version failed' \
	"a hipify program that does not answer: its toolchain is not usable, saying why"
VARIANT=$(grep -oE 'torch[0-9]+-cxx11-rocm[0-9]+-[a-z0-9_]+-linux' "$W/check.out" | head -1)
like "$VARIANT" '^torch[0-9]+-cxx11-rocm[0-9]+-' "the ROCm variant: $VARIANT"
printf '{"toolchains": [{"name": "x", "python": "%s", "cxx": "g++", "hipify": "torch"}]}\n' "$PY" >"$W/nohipcc.json"
"$WORKER_BIN" --check --toolchains "$W/nohipcc.json" >"$W/nohipcc.out" 2>&1
like "$(cat "$W/nohipcc.out")" 'toolchains\[0\]\.hipify: needs "hipcc"' "hipify without hipcc: refused, naming the key"

# ---- the source: examples/relu, its kernel CUDA only ----------------------------------------------
hipify_source
hipify_cuda_kernel "$SRC/relu_cuda/relu_kernel.cu" "ReLU written for CUDA only: a ROCm build hipifies it first." "" \
	'  int64_t blocks = (n + 255) / 256;
  if (blocks > 65535)
    blocks = 65535;
  relu_kernel_f32<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(out, in, n);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? 0 : (int)err;'
cp "$SRC/relu_cuda/relu_kernel.cu" "$W/relu_kernel.cu.orig"
build() {	# build TOOLCHAIN NAME: khub-worker build of $SRC into $W/NAME, its log $W/NAME.log
	"$WORKER_BIN" build --toolchains "$W/toolchains.json" --toolchain "$1" --source "$SRC" --out "$W/$2" \
		--variant "$VARIANT" --work-dir "$W/work-$2" --probe-cache "$W/probe" >"$W/$2.log" 2>&1	# one probe per toolchain
}

# ---- with hipify ------------------------------------------------------------------------------------
build rocm-hipify hip
is "$?" 0 "khub-worker build $VARIANT with rocm-hipify" || tail -30 "$W/hip.log" | sed 's/^/#   /'
LOG=$(cat "$W/hip.log")
like "$LOG" "hipify with $TOOL_RE: 1 CUDA source to HIP" "the log names the tool and its version"
like "$LOG" '\+ [^ ]*python3 -B \.\./obj/khub-hipify\.py relu_cuda/relu_kernel\.cu relu_cuda/relu_kernel\.hip' \
	"the log shows the hipify command (run in the sandbox, in the scratch copy)"
like "$LOG" 'hipified relu_cuda/relu_kernel\.cu -> relu_cuda/relu_kernel\.hip' "and what it wrote"
like "$LOG" '\+ ([^ ]*ccache )?[^ ]*hipcc .*--offload-arch=gfx90a .*-x hip -c relu_cuda/relu_kernel\.hip ' \
	"hipcc compiled the hipified copy"
ok $([ ! -e "$SRC/relu_cuda/relu_kernel.hip" ] && cmp -s "$SRC/relu_cuda/relu_kernel.cu" "$W/relu_kernel.cu.orig"; echo $?) \
	"the source itself is untouched (copies only)"
R=$W/hip/abi-report.json
is "$(jq -r '.build.hipify.tool' "$R")" "$TOOL" "the ABI report names the hipify tool and version"
is "$(jq -c '.build.hipify.sources' "$R")" '["relu_cuda/relu_kernel.cu"]' "and the CUDA source it hipified"
like "$(jq -r '.build.notes | join(" | ")' "$R")" "CUDA sources hipified with $TOOL_RE before hipcc compiled them" \
	"a note says so in words"
SO=$(ls "$W/hip/$VARIANT"/*.abi3.so 2>/dev/null | head -1)
[ -n "$SO" ] || bail "no library in $W/hip/$VARIANT"
UNDEF=$(nm -D --undefined-only "$SO")
like "$UNDEF" 'hipGetLastError' "the library calls hipGetLastError (cudaGetLastError, translated)"
like "$UNDEF" 'hipLaunchKernel' "and launches through the HIP runtime"
is "$(echo "$UNDEF" | grep -ci cuda)" 0 "and names nothing of CUDA's"
like "$(jq -c '.build.offload_archs' "$R")" 'gfx90a' "the report found its gfx90a code object"
like "$(readelf -S "$SO" 2>&1)" '\.hip_fatbin' "the library has a .hip_fatbin section"

# ---- without hipify -----------------------------------------------------------------------------------
build rocm-plain plain
is "$?" 6 "the same build with rocm-plain (no hipify) stops: exit 6, its toolchain lacks a tool (retried elsewhere)"
like "$(cat "$W/plain.log")" 'relu_cuda/relu_kernel\.cu is a CUDA source: a ROCm build hipifies it first \(as kernel-builder does\) and toolchain rocm-plain has no hipify' \
	"saying why: a CUDA source and no hipify in the toolchain"
ok $([ ! -e "$W/plain/$VARIANT" ]; echo $?) "and publishes nothing into OUT"
ok $([ -z "$(ls "$TEST_DIR"/sanitizer* 2>/dev/null)" ]; echo $?) "no sanitizer reports from khub-worker"
done_testing
