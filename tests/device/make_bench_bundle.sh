#!/usr/bin/env bash
# make_bench_bundle.sh -- pack what bench/read_path.sh needs on the GPU device
# machine (16 cores, no network, none of khub's C libraries) beside the main
# bundle of make_bundle.sh (which carries PostgreSQL and khub's libraries):
# nginx, wrk and perf from this Debian machine with their shared libraries,
# and one or more release khub binaries to compare, into
# .device/bench-tools.tar.xz. Nothing it collects is committed.
#
#   tests/device/make_bench_bundle.sh NAME=KHUB_BINARY ...
#   e.g. make_bench_bundle.sh before=/tmp/rb/before/khub after=./build-release/khub
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d /tmp/khub-bench-bundle.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
STAGE=$WORK/stage
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/khub"

[ $# -gt 0 ] || { echo "usage: make_bench_bundle.sh NAME=KHUB_BINARY ..." >&2; exit 2; }
for pair in "$@"; do
	name=${pair%%=*} bin=${pair#*=}
	[ -x "$bin" ] || { echo "make_bench_bundle: $bin is not an executable" >&2; exit 1; }
	if ldd "$bin" | grep -Eq 'lib(asan|ubsan)'; then
		echo "make_bench_bundle: $bin is a sanitizer build; measure a release build" >&2
		exit 1
	fi
	install -m 755 "$bin" "$STAGE/khub/$name"
done
for tool in nginx wrk perf; do
	path=$(command -v "$tool") || { [ "$tool" = perf ] && continue; echo "make_bench_bundle: $tool is not installed" >&2; exit 1; }
	install -m 755 "$(readlink -f "$path")" "$STAGE/bin/$tool"
done
# perf's Debian wrapper (/usr/bin/perf) picks perf_$(uname -r); take the real one.
if [ -f "$STAGE/bin/perf" ] && head -c 2 "$STAGE/bin/perf" | grep -q '#!'; then
	real=$(ls /usr/bin/perf_* 2>/dev/null | sort -V | tail -1)
	if [ -n "$real" ]; then install -m 755 "$real" "$STAGE/bin/perf"; else rm -f "$STAGE/bin/perf"; fi
fi

is_system_lib() {
	case $1 in
	linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | \
		librt.so.* | libresolv.so.* | libutil.so.* | libstdc++.so.* | libgcc_s.so.*)
		return 0 ;;
	esac
	return 1
}
for f in "$STAGE"/bin/*; do
	ldd "$f" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
	is_system_lib "$name" && continue
	cp -L "$path" "$STAGE/lib/$name"
done
chmod -R a+rX "$STAGE"
mkdir -p "$ROOT/.device"
tar -C "$STAGE" -cJf "$ROOT/.device/bench-tools.tar.xz.tmp" .
mv "$ROOT/.device/bench-tools.tar.xz.tmp" "$ROOT/.device/bench-tools.tar.xz"
echo "bench bundle: $ROOT/.device/bench-tools.tar.xz ($(du -h "$ROOT/.device/bench-tools.tar.xz" | cut -f1)): $(ls "$STAGE/khub" | tr '\n' ' ')+ $(ls "$STAGE/bin" | tr '\n' ' ')"
