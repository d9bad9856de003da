#!/usr/bin/env bash
# bench/read_path.sh -- khub's read path next to nginx serving the same bytes
# as static files, in one run, on loopback. Not part of the test suite.
#
# Starts a throw-away khub (embedded PostgreSQL) and a private nginx, seeds a
# kernel repo bench/relu with a 100 MiB LFS file, then runs wrk (for HEAD:
# headbench, a small client compiled from C below, since wrk cannot do HEAD)
# against each khub endpoint and its static nginx equivalent. Prints a table with
# PASS/MISS per target; a MISS never fails the script (exit 0 if it ran).
#
# Environment (all optional):
#   BENCH_DURATION          wrk duration per run            (default 8s)
#   BENCH_WARMUP            wrk warm-up per run, discarded  (default 1s; 0 = none)
#   BENCH_WRK_THREADS       wrk -t                          (default 4)
#   BENCH_TIMEOUT           wrk --timeout                   (default 10s)
#   BENCH_CONNECTIONS       wrk -c for metadata/HEAD runs; a list runs each
#                           row at each count, e.g. "64 512" (default 64)
#   BENCH_ROUNDS            khub/nginx pairs per endpoint, the order alternating;
#                           the table shows each column's median (default 3)
#   BENCH_FILE_CONNECTIONS  wrk -c for the 100 MiB GET      (default 8)
#   BENCH_FILE_MB           size of the LFS file in MiB     (default 100)
#   BENCH_RESULTS           where raw outputs go  (default bench/results/DATE)
#   BENCH_ONLY              the rows to run, e.g. "head-file tree" (default all:
#                           revision tree head-file file-get)
#   BENCH_PERF=1            perf record -g khub during one extra, unmeasured run
#                           of revision, tree and HEAD; reports in BENCH_RESULTS;
#                           and perf stat on khub and on nginx during one more
#                           run each: system calls and context switches per request
#   BENCH_RELEASE_BUILD     auto (default): when KHUB_BIN is missing or a sanitizer build
#                           (./configure --enable-debug: ASan+UBSan, -O1), build
#                           a release copy of the tree (plain ./configure, -O2)
#                           in the temp dir and measure that; 1: always; 0: never
#   BENCH_SERVER_CPUS       pinned mode: the CPU list (taskset -c syntax, e.g.
#                           "0-3") khub and nginx each run on, nginx with one
#                           worker process per CPU of it (default: unpinned,
#                           nginx worker_processes auto)
#   BENCH_CLIENT_CPUS       pinned mode: the CPU list wrk and headbench run on,
#                           e.g. "8-15" (default: unpinned)
#   KHUB_THREADS            khub worker threads (0 = from the CPUs khub may use,
#                           khub's default)
#   KHUB_LOG_LEVEL          default warn here
#   KHUB_BIN                the khub binary (default ./khub)

set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${BENCH_DURATION:-8s}
WARMUP=${BENCH_WARMUP:-1s}
WRK_THREADS=${BENCH_WRK_THREADS:-4}
WRK_TIMEOUT=${BENCH_TIMEOUT:-10s}
CONNS=${BENCH_CONNECTIONS:-64}
ROUNDS=${BENCH_ROUNDS:-3}
FILE_CONNS=${BENCH_FILE_CONNECTIONS:-8}
FILE_MB=${BENCH_FILE_MB:-100}
RESULTS=${BENCH_RESULTS:-$ROOT/bench/results/$(date +%Y%m%d-%H%M%S)}
export KHUB_LOG_LEVEL=${KHUB_LOG_LEVEL:-warn}
# Every connection of the load comes from 127.0.0.1: khub's per-address cap
# (max_connections_per_ip, 256 by default) would refuse half of 512 clients,
# which nginx (no such cap here) never does.
export KHUB_MAX_CONNECTIONS_PER_IP=${KHUB_MAX_CONNECTIONS_PER_IP:-0}

SERVER_CPUS=${BENCH_SERVER_CPUS:-}
CLIENT_CPUS=${BENCH_CLIENT_CPUS:-}
for tool in wrk nginx curl python3 ${SERVER_CPUS:+taskset} ${CLIENT_CPUS:+taskset}; do
	command -v "$tool" >/dev/null 2>&1 || { echo "read_path.sh: $tool is not installed" >&2; exit 1; }
done
NGINX=$(command -v nginx)

# shellcheck source=../tests/lib/khub-test.sh
. "$ROOT/tests/lib/khub-test.sh"

mkdir -p "$RESULTS"
khub_setup

BENCH_RESULTS=$RESULTS
. "$ROOT/bench/lib/release_build.sh"
bench_release_build

# cpu_count LIST: how many CPUs a taskset -c list names ("0-3,8" -> 5).
cpu_count() {
	python3 - "$1" <<'PY'
import sys
n = 0
for part in sys.argv[1].split(","):
    lo, _, hi = part.partition("-")
    n += int(hi or lo) - int(lo) + 1
print(n)
PY
}
# Pinned mode: khub (and the PostgreSQL it starts) and nginx on the server
# CPUs, the load generators on the client CPUs, so that neither competes with
# the other for a core (on a shared machine the server that spends fewer
# cycles per connection switch looks better than it is).
SERVER_PIN=() CLIENT_PIN=() NGINX_WORKERS=auto
if [ -n "$SERVER_CPUS" ]; then
	SERVER_PIN=(taskset -c "$SERVER_CPUS")
	NGINX_WORKERS=$(cpu_count "$SERVER_CPUS") || bail "BENCH_SERVER_CPUS: bad CPU list '$SERVER_CPUS'"
	printf '#!/bin/sh\nexec taskset -c %s %s "$@"\n' "$SERVER_CPUS" "$KHUB_BIN" >"$TEST_DIR/khub-pinned"
	chmod 755 "$TEST_DIR/khub-pinned"
	KHUB_UNPINNED_BIN=$KHUB_BIN
	KHUB_BIN=$TEST_DIR/khub-pinned
fi
[ -n "$CLIENT_CPUS" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")

NGINX_PID=
cleanup() {
	if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
		kill -QUIT "$NGINX_PID"
		wait "$NGINX_PID" 2>/dev/null
	fi
	khub_teardown
}
trap cleanup EXIT
trap 'exit 130' INT TERM

seconds() {	# "8s" "2m" "500ms"? -> whole seconds (at least 1)
	case $1 in
	*ms) echo 1 ;;
	*s) echo "${1%s}" ;;
	*m) echo $(( ${1%m} * 60 )) ;;
	*h) echo $(( ${1%h} * 3600 )) ;;
	*) echo "$1" ;;
	esac
}

# CPU time (clock ticks) used so far by a process and its direct children.
cpu_ticks() {
	local total=0 p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		# fields 14, 15: utime, stime (after the ')' of comm)
		total=$(( total + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}') ))
	done
	echo "$total"
}
# Context switches (voluntary + involuntary) so far, over every thread of
# the given processes: a server that wakes once per request pays for it in
# the kernel, which the CPU column shows but does not explain.
ctx_switches() {
	local p
	for p in "$@"; do
		cat /proc/"$p"/task/*/status 2>/dev/null
	done | awk '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}
nginx_pids() { echo "$NGINX_PID" $(pgrep -P "$NGINX_PID" 2>/dev/null); }
CLK_TCK=$(getconf CLK_TCK)

echo "# khub read path vs nginx static, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# machine: $(nproc) CPU cores (nproc), $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)" \
	"-- wrk, khub and nginx share them, so absolute numbers are low; the ratios are the point"
echo "# khub: $("$KHUB_BIN" version 2>/dev/null | head -1), $KHUB_BUILD"
echo "# khub config: threads=${KHUB_THREADS:-0} (0 = from the CPUs khub may use), log_level=$KHUB_LOG_LEVEL"
echo "# nginx: $("$NGINX" -v 2>&1 | sed 's/.*: //'), worker_processes $NGINX_WORKERS, sendfile on"
if [ -n "$SERVER_CPUS$CLIENT_CPUS" ]; then
	echo "# pinned: khub and nginx on CPUs ${SERVER_CPUS:-any} ($([ -n "$SERVER_CPUS" ] && cpu_count "$SERVER_CPUS" || echo all)), wrk/headbench on CPUs ${CLIENT_CPUS:-any}"
fi
echo "# wrk: -t$WRK_THREADS -c$CONNS (file GET: -c$FILE_CONNS) -d$DURATION --timeout $WRK_TIMEOUT --latency, warm-up $WARMUP; $ROUNDS rounds per endpoint (khub and nginx alternating who goes first), medians shown"
echo "# raw outputs: $RESULTS"
echo "# load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (anything else busy on this machine skews both columns)"

# ---- seed ----------------------------------------------------------------
khub_start
SRC="$TEST_DIR/src"
make_kernel_tree "$SRC" relu
head -c $((FILE_MB * 1024 * 1024)) /dev/urandom >"$SRC/build/torch-cpu/big.bin"
khub import "$SRC" --repo bench/relu --branch main >"$TEST_DIR/import.out" 2>"$TEST_DIR/import.err" ||
	{ cat "$TEST_DIR/import.err" >&2; bail "khub import failed"; }
sed 's/^/# /' "$TEST_DIR/import.err"

SHA=$(curl -sf "$KHUB_URL/api/kernels/bench/relu/revision/main" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])') || bail "cannot read revision/main"
[[ "$SHA" =~ ^[0-9a-f]{40}$ ]] || bail "bad commit sha '$SHA'"
echo "# commit: $SHA"

REV_PATH="/api/kernels/bench/relu/revision/$SHA"
TREE_PATH="/api/kernels/bench/relu/tree/$SHA?recursive=true&expand=false"
FILE_PATH="/kernels/bench/relu/resolve/$SHA/build/torch-cpu/big.bin"

# ---- nginx with the same bytes -------------------------------------------
NG="$TEST_DIR/nginx"
mkdir -p "$NG/www" "$NG/tmp"
curl -sf -o "$NG/www/revision.json" "$KHUB_URL$REV_PATH" || bail "GET revision/{sha} failed"
curl -sf -o "$NG/www/tree.json" "$KHUB_URL$TREE_PATH" || bail "GET tree/{sha} failed"
# The file through khub once: checks the bytes and warms the page cache.
curl -sf "$KHUB_URL$FILE_PATH" | cmp -s - "$SRC/build/torch-cpu/big.bin" || bail "resolve big.bin: bytes differ"
ln "$SRC/build/torch-cpu/big.bin" "$NG/www/big.bin" 2>/dev/null || cp "$SRC/build/torch-cpu/big.bin" "$NG/www/big.bin"
cat "$NG/www/big.bin" >/dev/null
chmod -R a+rX "$NG"
echo "# bodies: revision $(stat -c %s "$NG/www/revision.json") B, tree $(stat -c %s "$NG/www/tree.json") B, file $(stat -c %s "$NG/www/big.bin") B"

NGINX_PORT=$(free_port)
NGINX_URL="http://127.0.0.1:$NGINX_PORT"
user_line=
[ "$(id -u)" -eq 0 ] && user_line="user nobody $(id -gn nobody 2>/dev/null || echo nogroup);"
cat >"$NG/nginx.conf" <<EOF
daemon off;
$user_line
worker_processes $NGINX_WORKERS;
pid $NG/nginx.pid;
error_log $NG/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	tcp_nodelay on;
	keepalive_timeout 65;
	keepalive_requests 1000000;
	types { application/json json; application/octet-stream bin; }
	default_type application/octet-stream;
	client_body_temp_path $NG/tmp/body;
	proxy_temp_path $NG/tmp/proxy;
	fastcgi_temp_path $NG/tmp/fastcgi;
	uwsgi_temp_path $NG/tmp/uwsgi;
	scgi_temp_path $NG/tmp/scgi;
	server {
		listen 127.0.0.1:$NGINX_PORT;
		root $NG/www;
	}
}
EOF
"${SERVER_PIN[@]}" "$NGINX" -p "$NG" -c "$NG/nginx.conf" -e "$NG/error.log" >"$NG/stdout.log" 2>&1 &
NGINX_PID=$!
for _ in $(seq 1 100); do
	curl -sf -o /dev/null "$NGINX_URL/revision.json" && break
	kill -0 "$NGINX_PID" 2>/dev/null || { cat "$NG/error.log" "$NG/stdout.log" >&2; bail "nginx exited"; }
	sleep 0.1
done
curl -sf -o /dev/null "$NGINX_URL/revision.json" || bail "nginx did not answer"
for f in revision.json tree.json; do
	curl -sf "$NGINX_URL/$f" | cmp -s - "$NG/www/$f" || bail "nginx $f differs"
done

# wrk (4.1, and upstream master too) cannot measure HEAD of a file with a
# body: with wrk.method = "HEAD" its parser waits for Content-Length bytes
# that never come. So HEAD goes through headbench, a small keep-alive HTTP/1.1
# client below (one thread per connection, wrk-style output), the same for
# khub and nginx.
HEADBENCH=
if command -v "${CC:-cc}" >/dev/null 2>&1; then
	cat >"$TEST_DIR/headbench.c" <<'CSRC'
#define _GNU_SOURCE
/* headbench: HEAD load generator with wrk-style output (wrk 4.x waits for
 * a body after HEAD and so cannot measure it). One thread per connection,
 * HTTP/1.1 keep-alive, reconnects when the server closes. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in addr;
static char req[4096];
static size_t req_len;
static atomic_int stop;

struct worker {
	pthread_t tid;
	uint32_t *lat;
	size_t n, cap;
	uint64_t bytes, non2xx, econnect, eread, ewrite, etimeout, reconnects;
};

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int dial(struct worker *w)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct timeval tv = { 10, 0 };	/* like wrk --timeout 10s */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		w->econnect++;
		close(fd);
		return -1;
	}
	return fd;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	char buf[16384];
	int fd = -1;
	while (!atomic_load(&stop)) {
		if (fd < 0 && (fd = dial(w)) < 0) {
			usleep(1000);
			continue;
		}
		uint64_t t0 = now_us();
		if (write(fd, req, req_len) != (ssize_t)req_len) {
			w->ewrite++;
			close(fd);
			fd = -1;
			continue;
		}
		size_t got = 0;
		char *end = NULL;
		while (!end) {
			ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
			if (r <= 0) {
				if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
					w->etimeout++;
				else if (!atomic_load(&stop))
					w->eread++;
				break;
			}
			got += (size_t)r;
			buf[got] = '\0';
			end = strstr(buf, "\r\n\r\n");
			if (!end && got >= sizeof(buf) - 1)
				break;
		}
		if (!end) {
			close(fd);
			fd = -1;
			continue;
		}
		uint64_t us = now_us() - t0;
		w->bytes += got;
		int status = atoi(buf + 9);
		if (status < 200 || status >= 400)
			w->non2xx++;
		if (w->n == w->cap) {
			w->cap = w->cap ? w->cap * 2 : 65536;
			w->lat = realloc(w->lat, w->cap * sizeof(*w->lat));
			if (!w->lat)
				abort();
		}
		w->lat[w->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
		char *body = end + 4;
		int close_it = body != buf + got;	/* bytes after a HEAD response: out of step */
		if (close_it)
			w->eread++;
		*end = '\0';
		char *h = strcasestr(buf, "\r\nconnection:");
		if (h) {	/* a server that says close: reconnect, as wrk does */
			char *eol = strstr(h + 2, "\r\n");
			if (eol)
				*eol = '\0';
			if (strcasestr(h + 2, "close")) {
				close_it = 1;
				w->reconnects++;
			}
		}
		if (close_it) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void fmt_lat(char *out, size_t n, double us)
{
	if (us < 1000)
		snprintf(out, n, "%.2fus", us);
	else if (us < 1000000)
		snprintf(out, n, "%.2fms", us / 1000);
	else
		snprintf(out, n, "%.2fs", us / 1000000);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: headbench HOST PORT PATH CONNECTIONS SECONDS\n");
		return 2;
	}
	const char *host = argv[1], *path = argv[3];
	int port = atoi(argv[2]), conns = atoi(argv[4]), secs = atoi(argv[5]);
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &addr.sin_addr) != 1 || conns < 1 || secs < 1) {
		fprintf(stderr, "headbench: bad arguments\n");
		return 2;
	}
	req_len = (size_t)snprintf(req, sizeof(req), "HEAD %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", path, host, port);
	struct worker *w = calloc((size_t)conns, sizeof(*w));
	printf("Running %ds test @ http://%s:%d%s (HEAD)\n  %d threads and %d connections\n", secs, host, port, path,
	       conns, conns);
	uint64_t t0 = now_us();
	for (int i = 0; i < conns; i++)
		pthread_create(&w[i].tid, NULL, run, &w[i]);
	sleep((unsigned)secs);
	atomic_store(&stop, 1);
	uint64_t elapsed = now_us() - t0;
	size_t total = 0;
	uint64_t bytes = 0, non2xx = 0, ec = 0, er = 0, ew = 0, et = 0, rc = 0;
	for (int i = 0; i < conns; i++) {
		pthread_join(w[i].tid, NULL);
		total += w[i].n;
		bytes += w[i].bytes;
		non2xx += w[i].non2xx;
		ec += w[i].econnect;
		er += w[i].eread;
		ew += w[i].ewrite;
		et += w[i].etimeout;
		rc += w[i].reconnects;
	}
	uint32_t *all = malloc((total ? total : 1) * sizeof(*all));
	size_t k = 0;
	double sum = 0;
	for (int i = 0; i < conns; i++)
		for (size_t j = 0; j < w[i].n; j++) {
			all[k++] = w[i].lat[j];
			sum += w[i].lat[j];
		}
	qsort(all, total, sizeof(*all), cmp_u32);
	char s[32];
	fmt_lat(s, sizeof(s), total ? sum / (double)total : 0);
	char mx[32];
	fmt_lat(mx, sizeof(mx), total ? all[total - 1] : 0);
	printf("  Latency avg %s, max %s\n  Latency Distribution\n", s, mx);
	static const int pct[] = { 50, 75, 90, 99 };
	for (int i = 0; i < 4; i++) {
		fmt_lat(s, sizeof(s), total ? all[(size_t)((double)(total - 1) * pct[i] / 100.0)] : 0);
		printf("  %3d%% %10s\n", pct[i], s);
	}
	double secs_f = (double)elapsed / 1e6;
	printf("  %zu requests in %.2fs, %.2fKB read\n", total, secs_f, (double)bytes / 1024);
	printf("  Reconnects (server closed the connection): %llu\n", (unsigned long long)rc);
	if (ec || er || ew || et)
		printf("  Socket errors: connect %llu, read %llu, write %llu, timeout %llu\n", (unsigned long long)ec,
		       (unsigned long long)er, (unsigned long long)ew, (unsigned long long)et);
	if (non2xx)
		printf("  Non-2xx or 3xx responses: %llu\n", (unsigned long long)non2xx);
	printf("Requests/sec: %10.2f\n", (double)total / secs_f);
	printf("Transfer/sec: %10.2fKB\n", (double)bytes / 1024 / secs_f);
	return 0;
}
CSRC
	"${CC:-cc}" -O2 -pthread -o "$TEST_DIR/headbench" "$TEST_DIR/headbench.c" 2>"$TEST_DIR/headbench.err" &&
		HEADBENCH="$TEST_DIR/headbench"
fi
[ -n "$HEADBENCH" ] || echo "# no C compiler: the HEAD row is skipped"

# ---- measure -------------------------------------------------------------
# run_wrk NAME SERVER CONNS URL [LUA [ROUND]]: raw output to $RESULTS/NAME-cCONNS-SERVER-ROUND.txt,
# prints "req/s p99_ms bytes/s errors cpu_us_per_req context_switches_per_req"
run_wrk() {
	local name=$1 server=$2 conns=$3 url=$4 lua=${5:-} round=${6:-1}
	local out="$RESULTS/$name-c$conns-$server-$round.txt" script=() pids
	[ -n "$lua" ] && script=(-s "$lua")
	if [ "$lua" = HEAD ]; then	# headbench HOST PORT PATH CONNECTIONS SECONDS
		local hostport=${url#http://}
		local host=${hostport%%:*} rest=${hostport#*:}
		local port=${rest%%/*} path=/${rest#*/}
		load() { "${CLIENT_PIN[@]}" "$HEADBENCH" "$host" "$port" "$path" "$conns" "$(seconds "$1")"; }
	else
		load() { "${CLIENT_PIN[@]}" wrk -t"$WRK_THREADS" -c"$conns" -d"$1" --timeout "$WRK_TIMEOUT" --latency "${script[@]}" "$url"; }
	fi
	case $server in khub*) pids=$KHUB_PID ;; *) pids=$(nginx_pids) ;; esac
	if [ "$WARMUP" != 0 ]; then
		load "$WARMUP" >/dev/null 2>&1
	fi
	local t0 t1
	# shellcheck disable=SC2086
	t0=$(cpu_ticks $pids)
	# shellcheck disable=SC2086
	local cs0 cs1
	cs0=$(ctx_switches $pids)
	load "$DURATION" >"$out" 2>&1
	# shellcheck disable=SC2086
	cs1=$(ctx_switches $pids)
	# shellcheck disable=SC2086
	t1=$(cpu_ticks $pids)
	echo "context switches: $((cs1 - cs0))" >>"$out"
	awk -v ticks=$((t1 - t0)) -v hz="$CLK_TCK" '
	function ms(v) {
		if (v ~ /us$/) return v / 1000
		if (v ~ /ms$/) return v + 0
		if (v ~ /m$/) return v * 60000
		if (v ~ /s$/) return v * 1000
		return v + 0
	}
	function bytes(v,   n) {
		n = v + 0
		if (v ~ /GB$/) return n * 1024 * 1024 * 1024
		if (v ~ /MB$/) return n * 1024 * 1024
		if (v ~ /KB$/) return n * 1024
		return n
	}
	/^ +99%/ { p99 = ms($2) }
	/^Requests\/sec:/ { rps = $2 }
	/^Transfer\/sec:/ { bps = bytes($2) }
	/requests in/ { total = $1 }
	/^context switches:/ { cs = $3 }
	/Non-2xx or 3xx responses:/ { err += $NF }
	/Socket errors:/ { gsub(",", ""); err += $4 + $6 + $8 + $10 }
	END {
		cpu = (total > 0) ? ticks / hz * 1e6 / total : 0
		csr = (total > 0) ? cs / total : 0
		printf "%s %s %s %d %.1f %.3f\n", (rps == "" ? 0 : rps), (p99 == "" ? 0 : p99), (bps == "" ? 0 : bps), err, cpu, csr
	}' "$out"
}

ROWS=()
# median_cols "A B C ..." "A B C ..." ...: the median of each column
median_cols() {
	printf '%s\n' "$@" | awk '
	{ for (i = 1; i <= NF; i++) v[i, NR] = $i; nf = NF; n = NR }
	END {
		for (i = 1; i <= nf; i++) {
			for (j = 1; j <= n; j++) a[j] = v[i, j]
			for (j = 2; j <= n; j++) { x = a[j]; k = j - 1; while (k > 0 && a[k] > x) { a[k + 1] = a[k]; k-- } a[k + 1] = x }
			m = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			printf "%s%s", m, (i < nf ? " " : "\n")
		}
	}'
}

measure() {	# measure NAME CONNS KHUB_PATH NGINX_PATH [LUA]
	local name=$1 conns=$2 kpath=$3 npath=$4 lua=${5:-}
	local round ks=() ns=() k n
	case " ${BENCH_ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
	for round in $(seq 1 "$ROUNDS"); do
		echo "# running $name -c$conns round $round/$ROUNDS ..." >&2
		# alternate who goes first, so a drift of the machine's load
		# weighs on both columns alike
		if [ $((round % 2)) = 1 ]; then
			k=$(run_wrk "$name" khub "$conns" "$KHUB_URL$kpath" "$lua" "$round")
			n=$(run_wrk "$name" nginx "$conns" "$NGINX_URL$npath" "$lua" "$round")
		else
			n=$(run_wrk "$name" nginx "$conns" "$NGINX_URL$npath" "$lua" "$round")
			k=$(run_wrk "$name" khub "$conns" "$KHUB_URL$kpath" "$lua" "$round")
		fi
		if ! kill -0 "$KHUB_PID" 2>/dev/null; then
			local rc=0
			wait "$KHUB_PID" 2>/dev/null || rc=$?
			echo "khub exited during this run (status $rc)" >>"$RESULTS/$name-c$conns-khub.txt"
			tail -20 "$TEST_DIR/server.log" | sed 's/^/# /' >&2
			KHUB_PID=
			bail "khub (status $rc$( [ "$rc" -gt 128 ] && echo ", signal $((rc - 128))")) exited during the $name run"
		fi
		echo "$name c$conns round $round: khub $k | nginx $n" >>"$RESULTS/rounds.txt"
		ks+=("$k")
		ns+=("$n")
	done
	ROWS+=("$name $conns $(median_cols "${ks[@]}") $(median_cols "${ns[@]}")")
	[ "${BENCH_PERF:-0}" = 1 ] &&
		perf_khub "$name" "$conns" "$KHUB_URL$kpath" "$lua" "$NGINX_URL$npath"
	return 0
}

# perf_khub NAME CONNS KHUB_URL LUA NGINX_URL: more (unmeasured) runs of khub
# and of nginx with perf attached, so that perf does not disturb the table's
# numbers: perf record -g of each, then perf stat of each.
perf_khub() {
	command -v perf >/dev/null 2>&1 || { echo "# perf is not installed" >&2; return 0; }
	perf_record "$1" khub "$2" "$3" "${4:-}"
	perf_record "$1" nginx "$2" "$5" "${4:-}"
	perf_counts "$1" khub "$2" "$3" "${4:-}"
	perf_counts "$1" nginx "$2" "$5" "${4:-}"
}

# perf_record NAME SERVER CONNS URL [LUA]: perf record -g of the server
# (nginx: its workers) during one more run; reports perf-NAME-cCONNS[-nginx].*
perf_record() {
	local name=$1-c$3 pids
	case $2 in khub) pids=$KHUB_PID ;; *) name=$name-nginx; pids=$(pgrep -P "$NGINX_PID" | tr '\n' ',' | sed 's/,$//') ;; esac
	echo "# perf record -g on $2 during another $1 -c$3 run ..." >&2
	perf record -q -F 999 -g -p "$pids" -o "$RESULTS/perf-$name.data" -- sleep "$(seconds "$DURATION")" \
		>"$RESULTS/perf-$name.log" 2>&1 &
	local perf_pid=$!
	sleep 0.2
	(WARMUP=0 run_wrk "$1" "$2-under-perf" "$3" "$4" "${5:-}" >/dev/null)
	wait "$perf_pid"
	perf report -i "$RESULTS/perf-$name.data" --stdio --no-children --percent-limit 1 \
		>"$RESULTS/perf-$name.report.txt" 2>/dev/null
	perf report -i "$RESULTS/perf-$name.data" --stdio --no-children -g none --percent-limit 0.5 \
		>"$RESULTS/perf-$name.flat.txt" 2>/dev/null
	perf report -i "$RESULTS/perf-$name.data" --stdio --no-children -g none --sort dso \
		>"$RESULTS/perf-$name.dso.txt" 2>/dev/null
}

# perf_counts NAME SERVER CONNS URL [LUA]: one more run with perf stat
# counting the server's system calls and context switches; one line per run
# in $RESULTS/perf-counts.txt, per completed request.
perf_counts() {
	local name=$1 server=$2 pids out="$RESULTS/perf-stat-$1-c$3-$2.txt"
	case $server in khub) pids=$KHUB_PID ;; *) pids=$(nginx_pids | tr ' ' ',') ;; esac
	perf stat -e raw_syscalls:sys_enter -e context-switches -e cpu-migrations -p "$pids" -x, -o "$out" \
		-- sleep "$(seconds "$DURATION")" >/dev/null 2>&1 &
	local perf_pid=$!
	sleep 0.2
	local line
	line=$(WARMUP=0 run_wrk "$name" "$server-under-perf-stat" "$3" "$4" "${5:-}")
	wait "$perf_pid"
	local total
	total=$(awk '/requests in/ {print $1}' "$RESULTS/$name-c$3-$server-under-perf-stat-1.txt")
	awk -F, -v total="${total:-0}" -v name="$name" -v conns="$3" -v server="$server" '
	/raw_syscalls:sys_enter/ { sc = $1 } /context-switches/ { cs = $1 } /cpu-migrations/ { mig = $1 }
	END { if (total > 0) printf "%-10s %4d %-6s syscalls/req %.2f  context-switches/req %.3f  migrations/req %.4f  (%d requests)\n",
		name, conns, server, sc / total, cs / total, mig / total, total }' "$out" | tee -a "$RESULTS/perf-counts.txt" >&2
}

for conns in $CONNS; do
	measure revision "$conns" "$REV_PATH" /revision.json
	measure tree "$conns" "$TREE_PATH" /tree.json
	[ -n "$HEADBENCH" ] && measure head-file "$conns" "$FILE_PATH" /big.bin HEAD
done
measure file-get "$FILE_CONNS" "$FILE_PATH" /big.bin

# ---- report --------------------------------------------------------------
{
echo
printf '%-10s %4s %11s %11s %6s %9s %9s %9s %9s %7s %8s %8s %7s %7s  %s\n' \
	endpoint conn 'khub req/s' 'nginx req/s' ratio 'khub p99' 'ngx p99' 'khub MB/s' 'ngx MB/s' 'MB/s x' \
	'khub cpu' 'ngx cpu' 'khub cs' 'ngx cs' 'targets'
printf '%-10s %4s %11s %11s %6s %9s %9s %9s %9s %7s %8s %8s %7s %7s\n' \
	'' '' '' '' '' '(ms)' '(ms)' '' '' '' '(us/req)' '(us/req)' '(/req)' '(/req)'
for row in "${ROWS[@]}"; do
	# shellcheck disable=SC2086
	set -- $row
	name=$1 conns=$2 krps=$3 kp99=$4 kbps=$5 kerr=$6 kcpu=$7 kcs=$8 nrps=$9 np99=${10} nbps=${11} nerr=${12} ncpu=${13} ncs=${14}
	awk -v name="$name" -v conns="$conns" -v krps="$krps" -v kp99="$kp99" -v kbps="$kbps" -v kerr="$kerr" \
		-v kcpu="$kcpu" -v nrps="$nrps" -v np99="$np99" -v nbps="$nbps" -v nerr="$nerr" -v ncpu="$ncpu" \
		-v kcs="$kcs" -v ncs="$ncs" '
	function pf(ok) { return ok ? "PASS" : "MISS" }
	BEGIN {
		ratio = nrps > 0 ? krps / nrps : 0
		kmb = kbps / 1e6; nmb = nbps / 1e6
		mbx = nmb > 0 ? kmb / nmb : 0
		if (name == "file-get") {
			t = sprintf("throughput>=0.95x:%s", pf(mbx >= 0.95))
		} else {
			t = sprintf("req/s>=1.0x:%s p99<=1.5x:%s", pf(ratio >= 1.0), pf(kp99 > 0 && np99 > 0 && kp99 <= 1.5 * np99))
		}
		if (kerr > 0) t = t sprintf(" (khub errors/non-2xx: %d)", kerr)
		if (nerr > 0) t = t sprintf(" (nginx errors/non-2xx: %d)", nerr)
		if (name == "file-get")
			mb = sprintf("%9.1f %9.1f %7.2f", kmb, nmb, mbx)
		else
			mb = sprintf("%9s %9s %7s", "-", "-", "-")
		printf "%-10s %4d %11.0f %11.0f %6.2f %9.2f %9.2f %s %8.1f %8.1f %7.2f %7.2f  %s\n",
			name, conns, krps, nrps, ratio, kp99, np99, mb, kcpu, ncpu, kcs, ncs, t
	}'
done
echo
echo "# each column is the median of $ROUNDS rounds (per-round figures: $RESULTS/rounds.txt); ratio = khub req/s / nginx req/s of those medians;"
echo "# MB/s x = khub throughput / nginx throughput (MB = 10^6 bytes);"
echo "# cpu = server CPU time (user+sys) per completed request (khub: its process; nginx: master+workers);"
echo "# cs = the server's context switches (voluntary + involuntary, all threads) per completed request."
echo "# targets (issues 10, 26): metadata endpoints and HEAD >= 1.0x nginx req/s with p99 <= 1.5x nginx's at each connection count, file GET >= 0.95x throughput."
if [ -n "$SERVER_CPUS" ] && [ -n "$CLIENT_CPUS" ]; then
	echo "# pinned: servers on CPUs $SERVER_CPUS, load generators on CPUs $CLIENT_CPUS (of $(nproc))."
else
	echo "# $(nproc) cores shared by wrk and the server under test."
fi
} | tee "$RESULTS/summary.txt"

if [ "${BENCH_PERF:-0}" = 1 ]; then
	echo
	echo "# perf stat: the server's system calls and context switches per request"
	cat "$RESULTS/perf-counts.txt" 2>/dev/null
	for f in "$RESULTS"/perf-*.flat.txt; do
		name=$(basename "$f" .flat.txt)
		name=${name#perf-}
		[ -s "$f" ] || continue
		echo
		echo "# perf, khub during $name (by object, then top self symbols; call graphs: ${f%.flat.txt}.report.txt)"
		grep -E '^ +[0-9.]+%' "${f%.flat.txt}.dso.txt" | head -8
		grep -E '^ +[0-9.]+%' "$f" | head -25
	done
fi
exit 0
