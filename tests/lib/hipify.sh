# tests/lib/hipify.sh -- the ROCm-from-CUDA build tests' setup (sourced after
# khub-test.sh; docs/worker-build.md, "ROCm from CUDA sources"): hipify_setup
# skips the test without hipcc, torch.utils.hipify or jq, makes TEST_DIR ($W)
# with toolchains.json holding rocm-hipify (Debian's hipcc and CPU torch,
# "hipify": "torch"), sets $WORKER_BIN, $PY and $VARIANT (its ROCm arch
# variant), and copies examples/relu to $SRC with rocm-archs = ["gfx90a"].
hipify_setup() {
	command -v hipcc >/dev/null 2>&1 || { echo "1..0 # SKIP hipcc not installed (apt-get install hipcc)"; exit 0; }
	WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
	[ -x "$WORKER_BIN" ] || bail "khub-worker not built ($WORKER_BIN)"
	PY=/usr/bin/python3
	$PY -c 'from torch.utils.hipify import version' 2>/dev/null ||
		{ echo "1..0 # SKIP $PY has no torch.utils.hipify (apt-get install python3-torch)"; exit 0; }
	command -v jq >/dev/null 2>&1 || { echo "1..0 # SKIP jq not installed"; exit 0; }
	khub_setup	# TEST_DIR (0755: the build uid reaches the scratch under it)
	W=$TEST_DIR
	printf '{"toolchains": [{"name": "rocm-hipify", "python": "%s", "cxx": "g++", "hipcc": "hipcc", "rocm_from_hipcc": true, "hipify": "torch"}]}\n' \
		"$PY" >"$W/toolchains.json"
	"$WORKER_BIN" --check --toolchains "$W/toolchains.json" >"$W/check.out" 2>&1
	VARIANT=$(grep -oE 'torch[0-9]+-cxx11-rocm[0-9]+-[a-z0-9_]+-linux' "$W/check.out" | head -1)
	[ -n "$VARIANT" ] || bail "no ROCm variant in --check: $(cat "$W/check.out")"
	SRC=$W/src
	cp -r "$KHUB_SRC/examples/relu" "$SRC"
	sed -i 's/^rocm-archs = .*/rocm-archs = ["gfx90a"]/' "$SRC/build.toml"
	grep -q '^rocm-archs = \["gfx90a"\]' "$SRC/build.toml" || bail "examples/relu/build.toml has no rocm-archs line"
}
