#!/usr/bin/env bash
# bench/lfs_s3.sh -- a 100 MiB LFS file from the S3 backend, three ways in one
# run on a real single-node Ceph RGW (deploy/ceph-single.sh): through khub
# (lfs_s3_redirect = 0: khub fetches the object, re-hashes it and streams
# it), through khub's redirect to a presigned GET (lfs_s3_redirect = 1: curl
# follows it to RGW), straight from RGW with that presigned URL, and through
# Debian's nginx as a plain reverse proxy of that URL (in-memory buffers, no
# hashing: what one proxy hop costs on this machine, the reference for the
# through-khub way). Not part of the test suite; prints MB/s per way (best of
# BENCH_ROUNDS, the ways alternating) and the ratios to RGW direct and to the
# nginx hop, then the median time to first byte of a whole GET and of a
# 1 KiB Range GET, through khub and direct. For the through-khub ways also
# khub's CPU time per GiB served (user + system, its own threads, best
# round): on a machine others load, the steadiest number for an A/B.
#
# Environment (all optional):
#   BENCH_FILE_MB     size of the LFS file in MiB          (default 100)
#   BENCH_GETS        downloads per way                    (default 8)
#   BENCH_PARALLEL    downloads at once                    (default 2)
#   BENCH_PROBES      latency probes per way               (default 15)
#   BENCH_ROUNDS      rounds of GETs per way (best kept)   (default 3)
#   KHUB_BIN          the khub binary (default ./khub; a release build is made
#                     when it is a sanitizer build, as bench/read_path.sh does)
#   KHUB_BIN_B        a second khub binary (say main's release build) for an
#                     A/B in the same run: the through-khub way and its probes
#                     are measured for both, the two alternating round by round
#                     (khub restarted between them), and B's rows added
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FILE_MB=${BENCH_FILE_MB:-100}
GETS=${BENCH_GETS:-8}
PAR=${BENCH_PARALLEL:-2}
PROBES=${BENCH_PROBES:-15}
export KHUB_LOG_LEVEL=${KHUB_LOG_LEVEL:-warn}

. "$ROOT/tests/lib/khub-test.sh"
. "$ROOT/tests/lib/ceph-s3.sh"
s3_skip_unless_ceph
khub_setup
. "$ROOT/bench/lib/release_build.sh"
bench_release_build
NGINX_PID=
trap '[ -n "$NGINX_PID" ] && kill "$NGINX_PID"; khub_stop; s3_stop; khub_teardown' EXIT
s3_start

# nginx_hop_start: nginx on a free port proxying every request to RGW as is
# (the presigned query included; Host kept as signed); sets NGINX_URL.
nginx_hop_start() {
	local n=$TEST_DIR/nginx port rgw=${S3_ENDPOINT#http://}
	port=$(free_port)
	mkdir -p "$n/tmp" && chmod 777 "$n/tmp"
	{
		[ "$(id -u)" -eq 0 ] && echo "user root;"
		cat <<EOC
worker_processes 1;
pid $n/nginx.pid;
error_log $n/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path $n/tmp/body;
	proxy_temp_path $n/tmp/proxy;
	server {
		listen 127.0.0.1:$port;
		location / {
			proxy_pass http://$rgw;
			proxy_set_header Host $rgw;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffers 16 256k;
			proxy_max_temp_file_size 0;
		}
	}
}
EOC
	} >"$n/nginx.conf"
	nginx -p "$n" -c "$n/nginx.conf" -g 'daemon off;' >>"$n/error.log" 2>&1 &
	NGINX_PID=$!
	NGINX_URL=http://127.0.0.1:$port
	local i
	for i in $(seq 1 100); do curl -s -o /dev/null "$NGINX_URL/" && return 0; sleep 0.1; done
	bail "nginx did not start: $(cat "$n/error.log")"
}

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
head -c $((FILE_MB * 1024 * 1024)) /dev/urandom >"$SRC/build/torch-cpu/big.bin"
khub import "$SRC" --repo bench/relu --branch main >/dev/null 2>"$TEST_DIR/import.err" || bail "import failed"
URL_PATH=/kernels/bench/relu/resolve/main/build/torch-cpu/big.bin
WANT=$(sha256sum "$SRC/build/torch-cpu/big.bin" | cut -c1-64)

# khub_cpu_ticks: user + system clock ticks of the khub server so far
khub_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$KHUB_PID/stat"; }

# gets NAME URL [curl args]: GETS downloads, PAR at once; prints "NAME MB/s
# bytes cpu-ms-per-GiB" (the last for through-khub ways only, else -)
gets() {
	local name=$1 url=$2 t0 t1 bytes c0=- c1=-
	shift 2
	[[ "$name" == through-khub* ]] && c0=$(khub_cpu_ticks)
	t0=$(date +%s.%N)
	bytes=$(seq 1 "$GETS" | xargs -P "$PAR" -I{} curl -s -o /dev/null -w '%{size_download}\n' "$@" "$url" |
		awk '{ s += $1 } END { print s + 0 }')
	t1=$(date +%s.%N)
	[ "$c0" != - ] && c1=$(khub_cpu_ticks)
	python3 -c "import sys; b, t = float(sys.argv[1]), float(sys.argv[2]) - float(sys.argv[3])
cpu = '-' if sys.argv[5] == '-' else round((int(sys.argv[6]) - int(sys.argv[5])) * 1000 / int(sys.argv[7]) / (b / 2**30), 1)
print(sys.argv[4], round(b / t / 1e6, 1), int(b), cpu)" \
		"$bytes" "$t1" "$t0" "$name" "$c0" "$c1" "$(getconf CLK_TCK)"
}

# probes TAG: PROBES rounds of four timings, interleaved so that khub and
# RGW see the same load: whole-GET time to first byte and 1 KiB Range time,
# through khub and straight from RGW; prints "name seconds" lines, the khub
# ones named with TAG (khub, or khubB for KHUB_BIN_B).
probes() {
	local i tag=$1 t=(-s -o /dev/null -w '%{time_starttransfer}\n') r=(-s -o /dev/null -r 1048576-1049599 -w '%{time_total}\n')
	for i in $(seq 1 "$PROBES"); do
		echo "ttfb-$tag $(curl "${t[@]}" "$KHUB_URL$URL_PATH")"
		echo "ttfb-direct $(curl "${t[@]}" "$PRESIGNED")"
		echo "range1k-$tag $(curl "${r[@]}" "$KHUB_URL$URL_PATH")"
		echo "range1k-direct $(curl "${r[@]}" "$PRESIGNED")"
	done
}
# medians: "name seconds" lines in, "name median-ms" lines out
medians() {
	sort -k1,1 -k2,2n | awk '
		{ v[$1, ++n[$1]] = $2 }
		END { for (k in n) printf "%s %.1f\n", k, v[k, int((n[k] + 1) / 2)] * 1000 }'
}
# serve_with BIN: khub restarted as BIN (lfs_s3_redirect = 0), its bytes checked
serve_with() {
	khub_stop
	KHUB_BIN=$1 khub_start
	local got
	got=$(curl -s "$KHUB_URL$URL_PATH" | sha256sum | cut -c1-64)
	[ "$got" = "$WANT" ] || bail "through $1: bytes differ"
}
# best NAME URL [curl args]: the best of ROUNDS runs of gets, alternating with the others
ROUNDS=${BENCH_ROUNDS:-3}

echo "# LFS on S3 (Ceph RGW, memstore OSD, loopback): a ${FILE_MB} MiB file, $GETS GETs per way, $PAR at once,"
echo "# best of $ROUNDS rounds (ways alternate); latencies: medians of $PROBES, interleaved"
echo "# khub: $KHUB_BUILD; $(nproc) cores shared by curl, khub and Ceph"
KHUB_LFS_S3_REDIRECT=1 khub_start
PRESIGNED=$(curl -s -o /dev/null -w '%{redirect_url}' "$KHUB_URL$URL_PATH")
[[ "$PRESIGNED" == http* ]] || bail "no redirect with lfs_s3_redirect = 1"
got=$(curl -sL "$KHUB_URL$URL_PATH" | sha256sum | cut -c1-64)
[ "$got" = "$WANT" ] || bail "through the redirect: bytes differ"
RUNS=
for r in $(seq 1 "$ROUNDS"); do RUNS+="$(gets "khub-redirect" "$KHUB_URL$URL_PATH" -L)"$'\n'; done
khub_stop
khub_start	# lfs_s3_redirect = 0: khub serves the bytes (the presigned URL stays valid)
got=$(curl -s "$KHUB_URL$URL_PATH" | sha256sum | cut -c1-64)
[ "$got" = "$WANT" ] || bail "through khub: bytes differ"
nginx_hop_start
VIA_NGINX=$NGINX_URL${PRESIGNED#"$S3_ENDPOINT"}
got=$(curl -s "$VIA_NGINX" | sha256sum | cut -c1-64)
[ "$got" = "$WANT" ] || bail "through nginx: bytes differ"
BIN_A=$KHUB_BIN
if [ -n "${KHUB_BIN_B:-}" ]; then
	is_sanitized "$KHUB_BIN_B" && echo "# KHUB_BIN_B $KHUB_BIN_B links ASan/UBSan: its numbers are not representative"
	echo "# A/B: through-khub = $BIN_A, through-khub-B = $KHUB_BIN_B (alternating, restarted each round)"
fi
LAT=
for r in $(seq 1 "$ROUNDS"); do
	[ -n "${KHUB_BIN_B:-}" ] && serve_with "$BIN_A"
	RUNS+="$(gets "through-khub" "$KHUB_URL$URL_PATH")"$'\n'
	LAT+="$(probes khub)"$'\n'
	if [ -n "${KHUB_BIN_B:-}" ]; then
		serve_with "$KHUB_BIN_B"
		RUNS+="$(gets "through-khub-B" "$KHUB_URL$URL_PATH")"$'\n'
		LAT+="$(probes khubB)"$'\n'
	fi
	RUNS+="$(gets "rgw-direct" "$PRESIGNED")"$'\n'
	RUNS+="$(gets "nginx-proxy" "$VIA_NGINX")"$'\n'
done
LAT=$(printf '%s' "$LAT" | grep . | medians)
printf '%s' "$RUNS" | awk '$2 > best[$1] { best[$1] = $2 }
	$4 != "-" && (!($1 in cpu) || $4 < cpu[$1]) { cpu[$1] = $4 } END {
	n = split("through-khub through-khub-B khub-redirect rgw-direct nginx-proxy", order, " ")
	printf "%-14s %10s %8s %8s %14s\n", "way", "MB/s", "x rgw", "x nginx", "khub cpu ms/GiB"
	for (i = 1; i <= n; i++) if (order[i] in best) printf "%-14s %10.1f %8.2f %8.2f %14s\n", order[i], best[order[i]],
		best[order[i]] / best["rgw-direct"], best[order[i]] / best["nginx-proxy"], (order[i] in cpu ? cpu[order[i]] : "")
	if ("through-khub-B" in best) printf "A/B: through-khub / through-khub-B = %.2f (MB/s), %.2f (khub cpu per GiB)\n",
		best["through-khub"] / best["through-khub-B"], cpu["through-khub"] / cpu["through-khub-B"] }'
printf '%s\n' "$LAT" | awk '{ v[$1] = $2 } END {
	printf "%-14s %10s %8s\n", "latency", "median ms", "x direct"
	n = split("ttfb-khub ttfb-khubB ttfb-direct range1k-khub range1k-khubB range1k-direct", o, " ")
	for (i = 1; i <= n; i++) if (o[i] in v) { d = v[o[i] ~ /^ttfb/ ? "ttfb-direct" : "range1k-direct"]
		printf "%-14s %10.1f %8.2f\n", o[i], v[o[i]], (d > 0 ? v[o[i]] / d : 0) } }'
exit 0
