# real_loader.sh -- sourced by tests that can run the real `kernels` loader:
# real_loader_pythonpath DIR assembles, in DIR, the `kernels` package from a
# huggingface/kernels git dir ($KERNELS_GIT_DIR, tag $KERNELS_REF, default
# v0.16.0) and `huggingface_hub` from a huggingface/huggingface_hub git dir
# ($HF_HUB_GIT_DIR, tag $HF_HUB_REF, default v1.28.0), read with `git
# archive` at run time (nothing of theirs is kept in this repository), plus
# tests/device/kernels_data_shim; prints DIR for PYTHONPATH, or nothing (exit
# 1) when either git dir is absent or this Python cannot run them. Their other
# needs are Debian packages (python3-httpx, -filelock >= 3.10, -fsspec, -tqdm,
# -yaml, -packaging, -torch); Debian 12's filelock is too old, so there the
# tests use the loader's steps by hand (tests/integration/lib/load_kernel.py).
real_loader_pythonpath() {
	local dir=$1 kref=${KERNELS_REF:-v0.16.0} href=${HF_HUB_REF:-v1.28.0} src
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	[ -n "${KERNELS_GIT_DIR:-}" ] && [ -n "${HF_HUB_GIT_DIR:-}" ] || return 1
	git --git-dir="$KERNELS_GIT_DIR" rev-parse -q --verify "$kref^{commit}" >/dev/null 2>&1 || return 1
	git --git-dir="$HF_HUB_GIT_DIR" rev-parse -q --verify "$href^{commit}" >/dev/null 2>&1 || return 1
	mkdir -p "$dir/x" "$dir/py" || return 1
	git --git-dir="$KERNELS_GIT_DIR" archive "$kref" kernels/src/kernels | tar -x -C "$dir/x" || return 1
	git --git-dir="$HF_HUB_GIT_DIR" archive "$href" src/huggingface_hub | tar -x -C "$dir/x" || return 1
	mv "$dir/x/kernels/src/kernels" "$dir/x/src/huggingface_hub" "$dir/py/" || return 1
	local name ver
	for name in kernels:${kref#v} huggingface_hub:${href#v}; do
		ver=${name#*:} name=${name%%:*}
		mkdir -p "$dir/py/$name-$ver.dist-info"
		printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$name" "$ver" >"$dir/py/$name-$ver.dist-info/METADATA"
	done
	cp -a "$src/tests/device/kernels_data_shim/." "$dir/py/"
	/usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import kernels' "$dir/py" >/dev/null 2>&1 || return 1
	# huggingface_hub 1.x passes FileLock(mode=...), which Debian 12's
	# python3-filelock (3.9) lacks: no real loader there.
	/usr/bin/python3 -c 'import inspect, filelock, sys
sys.exit(0 if "mode" in inspect.signature(filelock.FileLock.__init__).parameters else 1)' >/dev/null 2>&1 || return 1
	echo "$dir/py"
}
