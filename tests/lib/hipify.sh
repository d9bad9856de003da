# tests/lib/hipify.sh -- the ROCm-from-CUDA build tests' setup (sourced after
# khub-test.sh; docs/worker-build.md, "ROCm from CUDA sources"): hipify_setup
# skips the test without hipcc, torch.utils.hipify or jq, makes TEST_DIR ($W)
# with toolchains.json holding rocm-hipify (Debian's hipcc and CPU torch,
# "hipify": "torch"), sets $WORKER_BIN, $PY and $VARIANT (its ROCm arch
# variant), and copies examples/relu to $SRC with rocm-archs = ["gfx90a"]
# (hipify_source). hipify_cuda_kernel writes the CUDA-only kernel.
. "$KHUB_SRC/tests/lib/worker_env.sh"

# hipify_needs: skips the test without hipcc, torch.utils.hipify or jq;
# sets $WORKER_BIN and $PY (tests/lib/worker_env.sh) and $HIPIFY (the
# version of torch.utils.hipify).
hipify_needs() {
	command -v hipcc >/dev/null 2>&1 || { echo "1..0 # SKIP hipcc not installed (apt-get install hipcc)"; exit 0; }
	worker_needs
	HIPIFY=$($PY -c 'from torch.utils.hipify import version; print(version.__version__)' 2>/dev/null) ||
		{ echo "1..0 # SKIP $PY has no torch.utils.hipify (apt-get install python3-torch)"; exit 0; }
	command -v jq >/dev/null 2>&1 || { echo "1..0 # SKIP jq not installed"; exit 0; }
}

# hipify_source: examples/relu copied to $SRC ($W/src) with rocm-archs =
# ["gfx90a"].
hipify_source() {
	SRC=$W/src
	cp -r "$KHUB_SRC/examples/relu" "$SRC"
	sed -i 's/^rocm-archs = .*/rocm-archs = ["gfx90a"]/' "$SRC/build.toml"
	grep -q '^rocm-archs = \["gfx90a"\]' "$SRC/build.toml" || bail "examples/relu/build.toml has no rocm-archs line"
}

hipify_setup() {
	hipify_needs
	khub_setup	# TEST_DIR (0755: the build uid reaches the scratch under it)
	W=$TEST_DIR
	printf '{"toolchains": [{"name": "rocm-hipify", "python": "%s", "cxx": "g++", "hipcc": "hipcc", "rocm_from_hipcc": true, "hipify": "torch"}]}\n' \
		"$PY" >"$W/toolchains.json"
	"$WORKER_BIN" --check --toolchains "$W/toolchains.json" >"$W/check.out" 2>&1
	VARIANT=$(grep -oE 'torch[0-9]+-cxx11-rocm[0-9]+-[a-z0-9_]+-linux' "$W/check.out" | head -1)
	[ -n "$VARIANT" ] || bail "no ROCm variant in --check: $(cat "$W/check.out")"
	hipify_source
}

# hipify_cuda_kernel FILE COMMENT INCLUDES LAUNCH: FILE is examples/relu's
# kernel written for CUDA only (<cuda_runtime.h>, no HIP branch): the line
# "// COMMENT", its includes and then the INCLUDES lines (none for ""),
# relu_kernel_f32, and relu_launch_f32, whose body after its n == 0 return
# is the LAUNCH lines.
hipify_cuda_kernel() {
	{
		printf '// %s\n#include <cuda_runtime.h>\n#include "relu_kernel.h"\n' "$2"
		[ -z "$3" ] || printf '%s\n' "$3"
		cat <<'EOF'

__global__ void relu_kernel_f32(float *__restrict__ out, const float *__restrict__ in, int64_t n) {
  int64_t stride = (int64_t)blockDim.x * gridDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

int relu_launch_f32(float *out, const float *in, int64_t n, void *stream) {
  if (n == 0)
    return 0;
EOF
		printf '%s\n}\n' "$4"
	} >"$1"
}
