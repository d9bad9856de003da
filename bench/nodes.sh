#!/usr/bin/env bash
# bench/nodes.sh -- read requests/s through HAProxy (deploy/haproxy-khub.cfg)
# with 1, 2 and 3 khub nodes on one embedded PostgreSQL, in one run, on
# loopback, and the CPU each node spent per request. Not part of the test
# suite; it asserts nothing about speed. On a machine of 2 cores the nodes,
# HAProxy and wrk share the cores, so the figures show the overhead of the
# balancer and of more processes, not a speed-up.
#
# Environment (all optional):
#   BENCH_DURATION     wrk duration per run        (default 8s)
#   BENCH_CONNECTIONS  wrk -c                      (default 32)
#   BENCH_WRK_THREADS  wrk -t                      (default 2)
#   BENCH_PATH         the request                 (default the revision info of bench/relu v1)
#   BENCH_RESULTS      raw outputs                 (default bench/results/nodes-DATE)
#   KHUB_BIN           the khub binary             (default ./khub; a release build measures khub,
#                                                   a debug (sanitizer) build measures mostly ASan)
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
KHUB_BIN=${KHUB_BIN:-$SRC/khub}
DURATION=${BENCH_DURATION:-8s}
CONNS=${BENCH_CONNECTIONS:-32}
THREADS=${BENCH_WRK_THREADS:-2}
RESULTS=${BENCH_RESULTS:-$SRC/bench/results/nodes-$(date +%Y%m%d-%H%M%S)}
for tool in haproxy wrk curl; do
	command -v $tool >/dev/null || { echo "bench/nodes.sh: $tool is not installed" >&2; exit 1; }
done
mkdir -p "$RESULTS"
WORK=$(mktemp -d /tmp/khub-bench-nodes.XXXXXX)
chmod 755 "$WORK"
export KHUB_DATA_DIR=$WORK/data KHUB_LOG_LEVEL=warn KHUB_MAX_CONNECTIONS_PER_IP=0
unset KHUB_DATABASE_URL KHUB_CONFIG
PIDS=() PORTS=() HAPROXY_PID=
cleanup() {
	[ -n "$HAPROXY_PID" ] && kill "$HAPROXY_PID" 2>/dev/null && wait "$HAPROXY_PID" 2>/dev/null
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_up() { for _ in $(seq 1 300); do curl -sf "$1/api/health" >/dev/null && return 0; sleep 0.1; done; return 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# ---- one repo, three nodes -----------------------------------------------------------------
mkdir -p "$WORK/src/build/torch-cpu/relu"
printf 'def relu(x):\n    return x.clamp(min=0)\n' >"$WORK/src/build/torch-cpu/relu/__init__.py"
"$KHUB_BIN" import "$WORK/src" --repo bench/relu --branch v1 >/dev/null 2>&1 || { echo "import failed" >&2; exit 1; }
for i in 1 2 3; do
	PORTS[$i]=$(free_port)
	KHUB_LISTEN=127.0.0.1:${PORTS[$i]} "$KHUB_BIN" serve >>"$RESULTS/node$i.log" 2>&1 &
	PIDS[$i]=$!
	wait_up "http://127.0.0.1:${PORTS[$i]}" || { echo "node $i did not start" >&2; exit 1; }
done
REQ=${BENCH_PATH:-/api/kernels/bench/relu/revision/v1}

# haproxy_with N: HAProxy in front of the first N nodes.
haproxy_with() {
	[ -n "$HAPROXY_PID" ] && kill "$HAPROXY_PID" 2>/dev/null && wait "$HAPROXY_PID" 2>/dev/null
	LB_PORT=$(free_port)
	sed -e '/log \/dev\/log/d' -e '/^\tlog global/d' -e '/option httplog/d' \
		-e "s|bind :80|bind 127.0.0.1:$LB_PORT|" -e '/^\tserver node/d' \
		"$SRC/deploy/haproxy-khub.cfg" >"$WORK/haproxy.cfg"
	for i in $(seq 1 "$1"); do
		printf '\tserver node%s 127.0.0.1:%s check\n' "$i" "${PORTS[$i]}" >>"$WORK/haproxy.cfg"
	done
	haproxy -db -f "$WORK/haproxy.cfg" >>"$RESULTS/haproxy.log" 2>&1 &
	HAPROXY_PID=$!
	wait_up "http://127.0.0.1:$LB_PORT"
	sleep 1.5	# every server passed its first checks (rise 2, inter 500ms)
}

HZ=$(getconf CLK_TCK)
printf '%-6s %12s %10s %28s %16s\n' nodes req/s "vs 1 node" "CPU ms/request per node" "CPU ms/request" | tee "$RESULTS/summary.txt"
BASE=
for n in 1 2 3; do
	haproxy_with "$n"
	wrk -t "$THREADS" -c "$CONNS" -d 1s "http://127.0.0.1:$LB_PORT$REQ" >/dev/null 2>&1	# warm-up
	declare -a before=()
	for i in 1 2 3; do before[$i]=$(cpu_ticks "${PIDS[$i]}"); done
	wrk -t "$THREADS" -c "$CONNS" -d "$DURATION" "http://127.0.0.1:$LB_PORT$REQ" >"$RESULTS/wrk-$n.txt" 2>&1
	total=$(awk '/^Requests\/sec/ {print $2}' "$RESULTS/wrk-$n.txt")
	reqs=$(awk '/requests in/ {print $1}' "$RESULTS/wrk-$n.txt")
	per_node="" all=0
	for i in $(seq 1 "$n"); do
		t=$(( $(cpu_ticks "${PIDS[$i]}") - before[$i] ))
		all=$((all + t))
		per_node+=$(awk -v t="$t" -v hz="$HZ" -v r="$reqs" -v nn="$n" 'BEGIN {printf "%.3f ", t * 1000 / hz / (r / nn)}')
	done
	BASE=${BASE:-$total}
	printf '%-6s %12s %10s %28s %16s\n' "$n" "$total" \
		"$(awk -v a="$total" -v b="$BASE" 'BEGIN {printf "%.2fx", a / b}')" "$per_node" \
		"$(awk -v t="$all" -v hz="$HZ" -v r="$reqs" 'BEGIN {printf "%.3f", t * 1000 / hz / r}')" | tee -a "$RESULTS/summary.txt"
done
echo "raw outputs in $RESULTS (CPU per request per node: the node's CPU over the requests it served, assuming leastconn spread them evenly)"
