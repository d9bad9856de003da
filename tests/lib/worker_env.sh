# tests/lib/worker_env.sh -- the one preamble of the tests that run
# khub-worker (sourced after khub-test.sh): finding the worker, skipping
# without what the test needs, the cpu-debian toolchain file and its
# --check. tests/lib/worker_build.sh, bench_kernel.sh and hipify.sh build on it.

# worker_needs [torch] [ccache] [bwrap] [root]: sets WORKER_BIN (and
# WORKER, the same) and PY (Debian's python3); bails without khub-worker;
# skips the test (1..0) without each thing named: Debian's python3-torch
# (with tomllib), ccache, bubblewrap, running as root.
worker_needs() {
	local need
	WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
	[ -x "$WORKER_BIN" ] || bail "khub-worker not built ($WORKER_BIN)"
	WORKER=$WORKER_BIN
	PY=/usr/bin/python3
	for need; do
		case $need in
		torch) $PY -c 'import torch, tomllib' 2>/dev/null ||
			{ echo "1..0 # SKIP Debian's python3-torch is not installed"; exit 0; } ;;
		ccache) command -v ccache >/dev/null || { echo "1..0 # SKIP ccache is not installed"; exit 0; } ;;
		bwrap) command -v bwrap >/dev/null || { echo "1..0 # SKIP bubblewrap is not installed"; exit 0; } ;;
		root) [ "$(id -u)" = 0 ] || { echo "1..0 # SKIP the test runs the worker as root"; exit 0; } ;;
		*) bail "worker_needs: no such need: $need" ;;
		esac
	done
}

# worker_toolchain FILE [FIELDS]: FILE holds one toolchain, cpu-debian
# (Debian's python3 and g++), with FIELDS (more of its JSON members:
# ', "cmake": "cmake"') added.
worker_toolchain() {
	printf '{"toolchains": [{"name": "cpu-debian", "python": "%s", "cxx": "g++"%s}]}\n' \
		"${PY:-/usr/bin/python3}" "${2:-}" >"$1"
}

# worker_check FILE: `khub-worker --check` of the toolchains FILE into
# check.out beside it, skipping the test when it fails; VARIANT: the CPU
# arch variant it offers ("" when none).
worker_check() {
	local out
	out=$(dirname "$1")/check.out
	"$WORKER_BIN" --check --toolchains "$1" >"$out" 2>&1 ||
		{ sed 's/^/# /' "$out"; echo "1..0 # SKIP no usable toolchain on this machine"; exit 0; }
	VARIANT=$(grep -oE 'torch[0-9]+-cxx[0-9a-z]+-cpu-[a-z0-9_]+-linux' "$out" | head -1)
}

# worker_torch_variant: the CPU variant of Debian's torch, as the worker
# names it (torch<MM>-cxx11-cpu-x86_64-linux).
worker_torch_variant() {
	$PY -c 'import torch; v = torch.__version__.split(".")
print("torch%s%s-cxx%s-cpu-x86_64-linux" % (v[0], v[1], "11" if torch.compiled_with_cxx11_abi() else "98"))'
}
