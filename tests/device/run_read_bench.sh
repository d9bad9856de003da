#!/usr/bin/env bash
# run_read_bench.sh -- bench/read_path.sh on the 16-core GPU device machine,
# pinned: each server (khub, nginx) on N dedicated cores, wrk and headbench on
# 8 others, for N in BENCH_CORES (default "2 4 8"), for each khub binary of
# the bench bundle (tests/device/make_bench_bundle.sh), from the repo root,
# with the main bundle (make_bundle.sh) for PostgreSQL and khub's libraries.
# Prints each run's table; the tables, perf counts and flat profiles (with
# BENCH_PERF=1) are gathered into $OUT/read-bench.txt when OUT is set (the
# raw outputs stay in /tmp/read-*: the device returns few files).
#
#   bash tests/device/run_read_bench.sh            # every khub in the bundle
#   BENCH_KHUB="after" BENCH_CORES="8" bash tests/device/run_read_bench.sh
set -u

ROOT=$(pwd)
B=/usr/local/khub-device
rm -rf "$B" && mkdir -p "$B/tools" || exit 1
tar -xJf "$ROOT/.device/bundle.tar.xz" -C "$B" || { echo "FAIL unpack bundle"; exit 1; }
tar -xJf "$ROOT/.device/bench-tools.tar.xz" -C "$B/tools" || { echo "FAIL unpack bench tools"; exit 1; }
chmod 755 "$B"
PGBIN=$B/usr/lib/postgresql/15/bin
# nginx, wrk and perf with their libraries; khub's own come from the main bundle.
mkdir -p "$B/path"
for t in "$B"/tools/bin/*; do
	printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/tools/lib exec %s "$@"\n' "$B" "$t" >"$B/path/$(basename "$t")"
	chmod 755 "$B/path/$(basename "$t")"
done
export PATH=$B/path:$PGBIN:$PATH KHUB_PG_BINDIR=$PGBIN TZ=UTC

ncpu=$(nproc)
echo "== host: $(uname -m) $(. /etc/os-release; echo "$PRETTY_NAME"), $ncpu CPUs, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
echo "== nginx $(nginx -v 2>&1 | sed 's/.*: //'), wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}'), perf $(perf --version 2>/dev/null || echo none)"
[ "$ncpu" -ge 16 ] || echo "== note: fewer than 16 CPUs; the client still gets CPUs 8-$((ncpu - 1))"

status=0
for khub_name in ${BENCH_KHUB:-$(ls "$B/tools/khub")}; do
	# khub with the bundle's libraries; the wrapper keeps its PID (exec).
	printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s/tools/khub/%s "$@"\n' "$B" "$B" "$khub_name" >"$B/khub-$khub_name"
	chmod 755 "$B/khub-$khub_name"
	for n in ${BENCH_CORES:-2 4 8}; do
		echo
		echo "== khub '$khub_name' and nginx on CPUs 0-$((n - 1)), load on CPUs 8-$((ncpu - 1))"
		res=/tmp/read-$khub_name-$n
		rm -rf "$res"
		KHUB_BIN=$B/khub-$khub_name BENCH_RELEASE_BUILD=0 BENCH_RESULTS=$res \
			BENCH_SERVER_CPUS=0-$((n - 1)) BENCH_CLIENT_CPUS=8-$((ncpu - 1)) \
			BENCH_WRK_THREADS=${BENCH_WRK_THREADS:-8} BENCH_CONNECTIONS=${BENCH_CONNECTIONS:-64 512} \
			BENCH_ROUNDS=${BENCH_ROUNDS:-1} BENCH_DURATION=${BENCH_DURATION:-5s} \
			BENCH_FILE_CONNECTIONS=${BENCH_FILE_CONNECTIONS:-16} \
			bash "$ROOT/bench/read_path.sh" 2>"$res.stderr" | grep -v '^# running' || status=1
		grep -i 'bail\|error' "$res.stderr" | head -5
		if [ -n "${OUT:-}" ]; then
			{
				echo "==== khub '$khub_name', $n server CPUs"
				cat "$res/summary.txt" "$res/perf-counts.txt" 2>/dev/null
				for f in "$res"/perf-*.flat.txt; do
					[ -f "$f" ] || continue
					echo "---- $(basename "$f" .flat.txt): by object, then top symbols"
					grep -E '^ +[0-9.]+%' "${f%.flat.txt}.dso.txt" | head -8
					grep -E '^ +[0-9.]+%' "$f" | head -40
				done
			} >>"$OUT/read-bench.txt"
		fi
	done
done
exit $status
