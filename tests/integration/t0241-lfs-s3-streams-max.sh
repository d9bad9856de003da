#!/bin/bash
# t0241-lfs-s3-streams-max.sh -- streamed reads from the S3 backend (a
# real Ceph RGW, lfs_s3_redirect = 0) are bounded per process by
# lfs_s3_streams_max: with 2, two anonymous clients that read slowly hold
# both, and every further read (resolve, a Range, the LFS batch's download
# URL, six more slow clients) is answered 503 with Retry-After and a JSON
# error at once, never a hang; khub starts no thread for them (its thread
# count stays within the baseline plus the bound), /metrics shows the
# streams alive and counts the refusals, and once the slow clients left,
# reads work again.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$(dirname "$0")/../lib/ceph-s3.sh"
s3_skip_unless_ceph
khub_setup
SLOW_PIDS=()
stop_slow() {
	local p
	for p in "${SLOW_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${SLOW_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	SLOW_PIDS=()
}
trap 'stop_slow; s3_stop; khub_teardown' EXIT
s3_start
export KHUB_LFS_S3_STREAMS_MAX=2
export KHUB_CONNECTION_TIMEOUT=3600	# a client reading 1 KiB/s is not idle, whatever the send buffer says
export KHUB_REPO_CACHE_TTL_MS=0	# the repo cache's refresher thread starts at the 2nd request, before the baseline

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
BIG=$SRC/build/torch-cpu/big.bin
# far more than khub's 2 MiB buffer and both sockets' buffers: a slow read stays under way
head -c $((32 * 1024 * 1024)) /dev/urandom >"$BIG"
BIG_SHA=$(sha256sum "$BIG" | cut -c1-64)
SIZE=$(stat -c %s "$BIG")
khub import "$SRC" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log" || bail "import failed"
khub admin user create root --site-admin >/dev/null 2>&1
ROOT=$(khub admin token create root --scope read 2>/dev/null | tail -n 1)
khub_start
URL=$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu/big.bin
metric() { curl -s -H "Authorization: Bearer $ROOT" "$KHUB_URL/metrics" | awk -v s="$1" '$1 == s { v = $2 } END { print v == "" ? "absent" : v }'; }
threads() { awk '$1 == "Threads:" { print $2 }' "/proc/$KHUB_PID/status"; }
# slow_read N: an anonymous GET read at 1 KiB/s in the background (headers in slow.N.h)
slow_read() {
	curl -s --limit-rate 1k -D "$TEST_DIR/slow.$1.h" -o "$TEST_DIR/slow.$1" "$URL" &
	SLOW_PIDS+=($!)
}
status_of() { head -n 1 "$TEST_DIR/slow.$1.h" 2>/dev/null | cut -d' ' -f2; }
# wait_answered N...: until each of those slow reads has its status line or ended
wait_answered() {
	local n i
	for n in "$@"; do
		for i in $(seq 1 600); do
			[ -n "$(status_of "$n")" ] && break
			kill -0 "${SLOW_PIDS[$n]}" 2>/dev/null || break
			sleep 0.1
		done
	done
}

# ---- the baseline: a whole read, then nothing under way -------------------------------
is "$(curl -s "$URL" | sha256sum | cut -c1-64)" "$BIG_SHA" "a whole GET through khub is byte-identical"
is "$(metric khub_lfs_s3_streams)" 0 "/metrics: no stream alive once it ended"
curl -s -o /dev/null -I "$URL"
T0=$(threads)

# ---- two slow clients hold both streams -------------------------------------------------
slow_read 0
slow_read 1
wait_answered 0 1
is "$(status_of 0) $(status_of 1)" "200 200" "two slow anonymous reads are answered 200"
for _ in $(seq 1 600); do
	[ "$(stat -c %s "$TEST_DIR/slow.0" 2>/dev/null || echo 0)" -gt 0 ] &&
		[ "$(stat -c %s "$TEST_DIR/slow.1" 2>/dev/null || echo 0)" -gt 0 ] && break
	sleep 0.1
done
ok $(kill -0 "${SLOW_PIDS[0]}" && kill -0 "${SLOW_PIDS[1]}"; echo $?) "and are still reading"
is "$(metric khub_lfs_s3_streams)" 2 "/metrics: 2 streams alive"
is "$(metric khub_lfs_s3_streams_refused_total)" 0 "/metrics: none refused yet"

# ---- a third read is refused at once: 503, Retry-After, a JSON error ---------------------
got=$(curl -s -m 60 -D "$TEST_DIR/h3" -o "$TEST_DIR/b3" -w '%{http_code}' "$URL")
is "$got" 503 "a 3rd read answers 503 (not a hang, not a 4xx)"
like "$(grep -i '^retry-after:' "$TEST_DIR/h3" | tr -d '\r')" '^[Rr]etry-[Aa]fter: [0-9]+$' "with Retry-After"
like "$(jq -r .error "$TEST_DIR/b3" 2>/dev/null)" 'too many LFS reads' "and a JSON error that says why"
is "$(curl -s -m 60 -o /dev/null -w '%{http_code}' -r 0-1023 "$URL")" 503 "a Range read is refused alike"
curl -s -o "$TEST_DIR/batch.json" -H "Authorization: Bearer $ROOT" -H 'Content-Type: application/vnd.git-lfs+json' \
	--data "{\"operation\":\"download\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$BIG_SHA\",\"size\":$SIZE}]}" \
	"$KHUB_URL/kernels/acme/relu.git/info/lfs/objects/batch"
HREF=$(jq -r '.objects[0].actions.download.href' "$TEST_DIR/batch.json")
got=$(curl -s -m 60 -D "$TEST_DIR/hb" -o "$TEST_DIR/bb" -w '%{http_code}' "$HREF")
is "$got $(grep -ci '^retry-after:' "$TEST_DIR/hb")" "503 1" "the LFS batch's download URL: 503 with Retry-After"
like "$(jq -r .message "$TEST_DIR/bb" 2>/dev/null)" 'too many LFS reads' "and git-lfs's JSON message"
is "$(curl -s -m 60 -o /dev/null -w '%{http_code}' -I "$URL")" 200 "a HEAD (no stream) is still answered"

# ---- six more slow clients start no thread ----------------------------------------------
for n in 2 3 4 5 6 7; do slow_read $n; done
wait_answered 2 3 4 5 6 7
statuses=$(for n in 2 3 4 5 6 7; do printf '%s ' "$(status_of $n)"; done)
is "$statuses" "503 503 503 503 503 503 " "six more slow reads are each refused 503"
T1=$(threads)
ok $([ "$T1" -le $((T0 + 2)) ]; echo $?) "khub's threads stay within the baseline plus the bound ($T0 + 2 >= $T1)"
is "$(metric khub_lfs_s3_streams)" 2 "/metrics: still 2 streams alive"
is "$(metric khub_lfs_s3_streams_refused_total)" 9 "/metrics: the 9 refusals counted"

# ---- the slow clients leave: reads work again ---------------------------------------------
stop_slow
for _ in $(seq 1 600); do
	[ "$(metric khub_lfs_s3_streams)" = 0 ] && break
	sleep 0.1
done
is "$(metric khub_lfs_s3_streams)" 0 "/metrics: the streams are gone with their clients"
ok $([ "$(threads)" -le "$T0" ]; echo $?) "so are their threads ($(threads) <= $T0)"
is "$(curl -s "$URL" | sha256sum | cut -c1-64)" "$BIG_SHA" "a whole read works again"
is "$(curl -s -m 60 -o /dev/null -w '%{http_code}' -r 0-1023 "$URL")" 206 "and a Range"
done_testing
