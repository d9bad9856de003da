#!/usr/bin/env bash
# bench/sync.sh -- `khub sync export` and `khub sync import` throughput
# next to `tar` packing and unpacking the same bytes (plain, or --zstd with
# BENCH_COMPRESSION=zstd), and the peak RSS of each (GNU time -v), for a
# bundle of BENCH_BUNDLE_MB. Not part of the test suite.
#
# Starts two throw-away khubs (A and B, each with its own embedded
# PostgreSQL), imports one kernel repo with LFS files of BENCH_FILE_MB MiB
# (random bytes: zstd cannot shrink them, as with real .so files mostly)
# into A, then in each of BENCH_ROUNDS rounds (dirty pages flushed first):
#   1. tar -cf of A's LFS objects + sync    vs  khub sync export --compression
#      (A; it fsyncs the bundle: a bundle is what gets carried, so both end on disk)
#   2. tar -xf of that archive + sync        vs  khub sync import (into an empty B)
#   3. khub sync verify of the bundle (for reference)
# Prints median MiB/s, the ratios khub / tar (target >= 0.9) and the peak
# RSS of export and import (target < 64 MiB, flat in the bundle size).
# A khub without --compression (an older build) exports with zstd; the
# reference is then still what BENCH_COMPRESSION says.
# PASS/MISS never fails the script: exit 0 if it ran.
#
# Environment (all optional):
#   BENCH_BUNDLE_MB      bundle size in MiB                       (default 2048)
#   BENCH_FILE_MB        MiB per LFS file                         (default 64)
#   BENCH_ROUNDS         rounds; medians are reported             (default 3)
#   BENCH_COMPRESSION    none (default) | zstd: tar's and khub's compression
#   BENCH_RELEASE_BUILD  auto (default) | 1 | 0, see bench/lib/release_build.sh
#   BENCH_RESULTS        where raw outputs go (default bench/results/sync-DATE)
#   KHUB_BIN             the khub binary (default ./khub)

set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUNDLE_MB=${BENCH_BUNDLE_MB:-2048}
FILE_MB=${BENCH_FILE_MB:-64}
ROUNDS=${BENCH_ROUNDS:-3}
COMPRESSION=${BENCH_COMPRESSION:-none}
case $COMPRESSION in
none) TAR_Z=() ;;
zstd) TAR_Z=(--zstd) ;;
*) echo "sync.sh: BENCH_COMPRESSION is none or zstd" >&2; exit 1 ;;
esac
RESULTS=${BENCH_RESULTS:-$ROOT/bench/results/sync-$(date +%Y%m%d-%H%M%S)}
export KHUB_LOG_LEVEL=${KHUB_LOG_LEVEL:-warn}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

for tool in tar zstd python3 /usr/bin/time; do
	command -v "$tool" >/dev/null 2>&1 || { echo "sync.sh: $tool is not installed" >&2; exit 1; }
done

# shellcheck source=../tests/lib/khub-test.sh
. "$ROOT/tests/lib/khub-test.sh"
# shellcheck source=../tests/integration/lib/mirror_hubs.sh
. "$ROOT/tests/integration/lib/mirror_hubs.sh"

mkdir -p "$RESULTS"
hubs_setup
trap 'exit 130' INT TERM
BENCH_RESULTS=$RESULTS
. "$ROOT/bench/lib/release_build.sh"
bench_release_build

calc() { python3 -c "print($*)"; }
median() { python3 -c 'import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 1))' "$@"; }
timed() {	# timed NAME CMD...: runs CMD under GNU time; sets T_WALL (s) and T_RSS (KiB)
	local name=$1; shift
	sync
	/usr/bin/time -v -o "$RESULTS/$name.time" "$@" >"$RESULTS/$name.out" 2>"$RESULTS/$name.err"
	local rc=$?
	T_WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$RESULTS/$name.time")
	T_RSS=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$RESULTS/$name.time")
	[ $rc -eq 0 ] || { echo "# $name failed (exit $rc):" >&2; tail -5 "$RESULTS/$name.err" >&2; }
	return $rc
}

NFILES=$(( (BUNDLE_MB + FILE_MB - 1) / FILE_MB ))
EXPORT_Z=()
if "$KHUB_BIN" sync 2>&1 | grep -q -- --compression; then
	EXPORT_Z=(--compression "$COMPRESSION")
fi
echo "# khub sync export ${EXPORT_Z[*]:-(zstd: no --compression)}/import vs tar ${TAR_Z[*]:-(plain)}, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# machine: $(nproc) CPU cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
echo "# khub: $("$KHUB_BIN" version 2>/dev/null | head -1), $KHUB_BUILD"
echo "# data: $NFILES LFS files x $FILE_MB MiB = $((NFILES * FILE_MB)) MiB in one repo"

hub_init a
hub_init b
hub_spawn a
hub_spawn b
hub_wait a
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" bench
VAR=$SRC/build/torch211-cxx11-cu128-x86_64-linux
for i in $(seq -w 1 "$NFILES"); do
	head -c $((FILE_MB << 20)) /dev/urandom >"$VAR/_bench_$i.abi3.so"
done
hub a import "$SRC" --repo bench/big --branch main >/dev/null 2>"$RESULTS/import.log" || bail "import failed"
rm -rf "$SRC"
hub a sync keygen --out "$TEST_DIR/k" >/dev/null || bail "keygen failed"
export KHUB_SYNC_TRUSTED_KEYS=$TEST_DIR/k.pub
hub_wait b
A_LFS=$(hub_data a)/lfs/objects
B_DATA=$(hub_data b)
TOTAL=$(du -sb "$A_LFS" | cut -f1)
BUNDLE=$TEST_DIR/bench.khub
REF=$TEST_DIR/ref.tar
OUTDIR=$B_DATA/../tar-out	# same filesystem as B's store

declare -a TX KX TI KI KV
RSS_EX=0 RSS_IM=0
for r in $(seq 1 "$ROUNDS"); do
	rm -f "$REF" "$BUNDLE"
	timed "tar-c-$r" sh -c "tar ${TAR_Z[*]} -cf '$REF' -C '$A_LFS' . && sync" && TX+=("$T_WALL")
	timed "export-$r" env KHUB_DATA_DIR="$TEST_DIR/a/data" KHUB_LISTEN="127.0.0.1:${HUB_PORT[a]}" \
		"$KHUB_BIN" sync export --key "$TEST_DIR/k.key" --out "$BUNDLE" --repos 'bench/*' "${EXPORT_Z[@]}" && KX+=("$T_WALL")
	[ "$T_RSS" -gt "$RSS_EX" ] && RSS_EX=$T_RSS
	rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
	timed "tar-x-$r" sh -c "tar ${TAR_Z[*]} -xf '$REF' -C '$OUTDIR' && sync" && TI+=("$T_WALL")
	rm -rf "$OUTDIR"
	timed "verify-$r" env KHUB_DATA_DIR="$TEST_DIR/b/data" "$KHUB_BIN" sync verify "$BUNDLE" && KV+=("$T_WALL")
	# an empty B: the repo and its LFS objects removed (the row stays: a mirrored repo)
	rm -rf "$B_DATA/repos/kernels/bench/big.git" "$B_DATA/lfs/objects"
	timed "import-$r" env KHUB_DATA_DIR="$TEST_DIR/b/data" KHUB_LISTEN="127.0.0.1:${HUB_PORT[b]}" \
		"$KHUB_BIN" sync import "$BUNDLE" && KI+=("$T_WALL")
	[ "$T_RSS" -gt "$RSS_IM" ] && RSS_IM=$T_RSS
	echo "round $r: tar -c ${TX[-1]:-?} s, export ${KX[-1]:-?} s, tar -x ${TI[-1]:-?} s, verify ${KV[-1]:-?} s, import ${KI[-1]:-?} s" |
		tee -a "$RESULTS/summary.txt"
done
MB=$(calc "$TOTAL / 1048576")
mbs() { calc "round($MB / $(median "$@"), 1)"; }
tx=$(mbs "${TX[@]}"); kx=$(mbs "${KX[@]}"); ti=$(mbs "${TI[@]}"); ki=$(mbs "${KI[@]}"); kv=$(mbs "${KV[@]}")
rex=$(calc "round($kx / $tx, 2)"); rim=$(calc "round($ki / $ti, 2)")
verdict() { python3 -c "import sys; print('PASS' if float(sys.argv[1]) $2 float(sys.argv[3]) else 'MISS')" "$1" "$2" "$3"; }
echo "bundle: $(stat -c %s "$BUNDLE") bytes for $TOTAL bytes of LFS objects"
echo "export: $kx MiB/s vs tar ${TAR_Z[*]} -c + sync $tx MiB/s: ratio $rex (target >= 0.9: $(verdict "$rex" '>=' 0.9))"
echo "import: $ki MiB/s vs tar ${TAR_Z[*]} -x + sync $ti MiB/s: ratio $rim (target >= 0.9: $(verdict "$rim" '>=' 0.9))"
echo "verify: $kv MiB/s"
echo "peak RSS: export $((RSS_EX / 1024)) MiB, import $((RSS_IM / 1024)) MiB (target < 64 MiB: $(verdict $((RSS_EX > RSS_IM ? RSS_EX : RSS_IM)) '<' 65536))"
