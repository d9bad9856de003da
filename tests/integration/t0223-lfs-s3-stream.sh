#!/bin/bash
# t0223-lfs-s3-stream.sh -- reads through khub from the S3 backend (a real
# Ceph RGW, lfs_s3_redirect = 0) are streamed, not stored and forwarded: a
# 64 MiB object comes back byte-identical, whole and by several Ranges
# (resolve and the LFS batch's download URL), khub's memory stays flat
# while it serves it, and a client that stalls mid-body holds a bounded
# buffer, not a copy of the object (no spooled fetch file, no growth).
. "$(dirname "$0")/../lib/khub-test.sh"
. "$(dirname "$0")/../lib/ceph-s3.sh"
s3_skip_unless_ceph
khub_setup
SLOW_PID=
trap '[ -n "$SLOW_PID" ] && kill "$SLOW_PID" 2>/dev/null; s3_stop; khub_teardown' EXIT
s3_start

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
BIG=$SRC/build/torch-cpu/big.bin
head -c $((64 * 1024 * 1024)) /dev/urandom >"$BIG"
BIG_SHA=$(sha256sum "$BIG" | cut -c1-64)
SIZE=$(stat -c %s "$BIG")
khub import "$SRC" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log" || bail "import failed"
khub admin user create alice >/dev/null 2>&1
khub admin member set acme alice write >/dev/null 2>&1
TOK=$(khub admin token create alice 2>/dev/null | tail -n 1)
is "$(s3_curl HEAD "$(s3_object_key "$BIG_SHA")")" 200 "the 64 MiB object is in the bucket"
khub_start
URL=$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu/big.bin

rss_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$KHUB_PID/status"; }
spooled() { ls -l "/proc/$KHUB_PID/fd" 2>/dev/null | grep -c 'fetch-'; }

# ---- whole and by Range, byte for byte ----------------------------------------
curl -s "$URL" >/dev/null	# warm up (threads, connections) before measuring
HWM0=$(rss_kb VmHWM)
is "$(curl -s "$URL" | sha256sum | cut -c1-64)" "$BIG_SHA" "a whole GET through khub is byte-identical"
HWM1=$(rss_kb VmHWM)
ok $([ $((HWM1 - HWM0)) -lt 32768 ]; echo $?) "khub's peak memory grew less than 32 MiB serving 64 MiB ($((HWM1 - HWM0)) KiB)"
range_ok() {	# range_ok FROM TO: bytes FROM..TO through khub equal the file's
	local from=$1 to=$2 got want
	got=$(curl -s -o "$TEST_DIR/part" -w '%{http_code} %{size_download}' -H "Range: bytes=$from-$to" "$URL")
	want=$(tail -c +$((from + 1)) "$BIG" | head -c $((to - from + 1)) | sha256sum | cut -c1-64)
	is "$got $(sha256sum <"$TEST_DIR/part" | cut -c1-64)" "206 $((to - from + 1)) $want" "Range $from-$to: 206, its bytes"
}
range_ok 0 0
range_ok 1048576 1049599
range_ok 3000000 9999999
range_ok $((SIZE - 10)) $((SIZE - 1))
curl -s -D "$TEST_DIR/h" -o /dev/null -H "Range: bytes=$((SIZE - 5))-$((SIZE - 1))" "$URL"
is "$(grep -i '^content-range:' "$TEST_DIR/h" | tr -d '\r' | cut -d' ' -f2-)" "bytes $((SIZE - 5))-$((SIZE - 1))/$SIZE" \
	"a Range answers its Content-Range"
curl -s -I -o "$TEST_DIR/h" "$URL"
is "$(grep -i '^content-length:' "$TEST_DIR/h" | tr -d '\r' | cut -d' ' -f2)" "$SIZE" "HEAD still answers the size"

# ---- the LFS batch's download URL streams too -----------------------------------
curl -s -o "$TEST_DIR/batch.json" -H "Authorization: Bearer $TOK" -H 'Content-Type: application/vnd.git-lfs+json' \
	--data "{\"operation\":\"download\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$BIG_SHA\",\"size\":$SIZE}]}" \
	"$KHUB_URL/kernels/acme/relu.git/info/lfs/objects/batch"
HREF=$(jq -r '.objects[0].actions.download.href' "$TEST_DIR/batch.json")
is "$(curl -s "$HREF" | sha256sum | cut -c1-64)" "$BIG_SHA" "the batch's download URL gives the bytes"
is "$(curl -s -r 5-14 "$HREF" | od -An -tx1 | tr -d ' \n')" "$(tail -c +6 "$BIG" | head -c 10 | od -An -tx1 | tr -d ' \n')" \
	"and a Range of them"

# ---- a client that stalls mid-body ---------------------------------------------
RSS0=$(rss_kb VmRSS)
curl -s --limit-rate 64k -o "$TEST_DIR/slow" "$URL" &
SLOW_PID=$!
for _ in $(seq 1 600); do
	[ "$(stat -c %s "$TEST_DIR/slow" 2>/dev/null || echo 0)" -ge 262144 ] && break
	sleep 0.1
done
ok $([ "$(stat -c %s "$TEST_DIR/slow" 2>/dev/null || echo 0)" -ge 262144 ]; echo $?) "a slow client gets its first bytes"
is "$(spooled)" 0 "no copy of the object is spooled for it (khub holds no fetch file)"
RSS1=$(rss_kb VmRSS)
ok $([ $((RSS1 - RSS0)) -lt 32768 ]; echo $?) "khub's memory grew less than 32 MiB while it stalls ($((RSS1 - RSS0)) KiB)"
kill "$SLOW_PID" 2>/dev/null
wait "$SLOW_PID" 2>/dev/null
SLOW_PID=
is "$(curl -s -r 0-1023 -o /dev/null -w '%{http_code}' "$URL")" 206 "khub serves on after the client left"
done_testing
