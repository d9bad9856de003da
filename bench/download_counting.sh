#!/usr/bin/env bash
# bench/download_counting.sh -- what counting variant downloads costs a
# resolve GET: the same metadata.json GET with download_stats on and off,
# in alternating rounds (so drift hits both), at 1 connection (latency) and
# at BENCH_CONNECTIONS (throughput). Then prints the counts stored: wrk
# sends everything from 127.0.0.1 and one address counts once per repo,
# variant and hour (the set of what was counted is in memory, so each
# restart of a counting round may count it once more). Not part of the suite.
#
# Environment (all optional):
#   KHUB_BIN           the khub binary (default ./khub; use a release build:
#                      plain ./configure, not --enable-debug)
#   BENCH_DURATION     wrk duration per round   (default 5s)
#   BENCH_ROUNDS       rounds per setting       (default 3)
#   BENCH_CONNECTIONS  wrk -c for the throughput rounds (default 16)

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KHUB_BIN=${KHUB_BIN:-$ROOT/khub}
DURATION=${BENCH_DURATION:-5s}
ROUNDS=${BENCH_ROUNDS:-3}
CONNS=${BENCH_CONNECTIONS:-16}
UA='kernels/0.15.2; hf_hub/1.29.0; python/3.11.2; backend/cu128; platform/x86_64-linux; torch/2.11.0+cu128'
command -v wrk >/dev/null || { echo "wrk is needed" >&2; exit 1; }

TMP=$(mktemp -d /tmp/khub-bench-dl.XXXXXX)
chmod 755 "$TMP"
export KHUB_DATA_DIR=$TMP/data KHUB_LOG_LEVEL=warn
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export KHUB_LISTEN=127.0.0.1:$PORT
URL=http://127.0.0.1:$PORT
PID=
stop() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; PID=; }
trap 'stop; rm -rf "$TMP"' EXIT
start() {
	"$KHUB_BIN" serve "$@" >>"$TMP/server.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 300); do curl -sf "$URL/api/health" >/dev/null && return; sleep 0.1; done
	echo "khub did not start" >&2; exit 1
}

mkdir -p "$TMP/src/build/torch-cpu"
printf 'def relu(x):\n    return x\n' >"$TMP/src/build/torch-cpu/__init__.py"
printf '{"id":"relu","name":"relu","version":1,"license":"apache-2.0","python-depends":[],"backend":{"type":"cpu"}}\n' \
	>"$TMP/src/build/torch-cpu/metadata.json"
SHA=$("$KHUB_BIN" import "$TMP/src" --repo bench/relu --branch main 2>/dev/null)
META=$URL/kernels/bench/relu/resolve/$SHA/build/torch-cpu/metadata.json

round() {	# round CONNECTIONS -> "req/s avg p50 p99 requests"
	wrk -t"$(( $1 < 2 ? 1 : 2 ))" -c"$1" -d"$DURATION" --latency -H "User-Agent: $UA" "$META" >"$TMP/wrk.txt" 2>&1
	awk '/Requests\/sec/ {rps = $2} /^ +Latency / && !lat {lat = $2} $1 == "50%" {p50 = $2}
	     $1 == "99%" {p99 = $2} /requests in/ {n = $1}
	     END {printf "%10s %9s %9s %9s %9s\n", rps, lat, p50, p99, n}' "$TMP/wrk.txt"
}

printf '%-8s %-6s %10s %9s %9s %9s %9s\n' counting conns req/s avg p50 p99 requests
ON_SUM=0
for r in $(seq 1 "$ROUNDS"); do
	for setting in 1 0; do
		start --download-stats "$setting" --download-stats-flush-ms 1000
		for c in 1 "$CONNS"; do
			line=$(round "$c")
			printf '%-8s %-6s %s\n' "$([ $setting = 1 ] && echo on || echo off)" "$c" "$line"
			[ "$setting" = 1 ] && ON_SUM=$((ON_SUM + $(echo "$line" | awk '{print $5}')))
		done
		stop	# a clean stop stores what is still in memory
	done
done
start
TOTAL=$(curl -s "$URL/api/kernels/bench/relu/downloads" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
stop
echo "downloads stored: $TOTAL; responses wrk completed while counting: $ON_SUM"
echo "(one client address counts once per repo, variant and hour, and each counting server start forgets what it counted: stored = counting rounds)"
