#!/bin/bash
# t0224-lfs-s3-stream-tamper.sh -- an object overwritten in the bucket
# behind khub's back (a real Ceph RGW; same size, khub's sha256 mark
# forged) while reads are streamed: the whole GET is cut short before its
# last byte (the client sees a short read, never a complete wrong file),
# the object is moved to quarantine/lfs/ in the bucket, so the next GET
# answers 404 instead of the same bytes, and the log and /metrics say so.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$(dirname "$0")/../lib/ceph-s3.sh"
s3_skip_unless_ceph
khub_setup
trap 's3_stop; khub_teardown' EXIT
s3_start

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
OBJ=$SRC/build/torch-cpu/weights.bin
head -c $((8 * 1024 * 1024 + 17)) /dev/urandom >"$OBJ"
SHA=$(sha256sum "$OBJ" | cut -c1-64)
SIZE=$(stat -c %s "$OBJ")
khub import "$SRC" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log" || bail "import failed"
khub admin user create root --site-admin >/dev/null 2>&1
ROOT=$(khub admin token create root --scope read 2>/dev/null | tail -n 1)
khub_start
URL=$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu/weights.bin
metric() { curl -s -H "Authorization: Bearer $ROOT" "$KHUB_URL/metrics" | awk -v s="$1" '$1 == s { v = $2 } END { print v == "" ? "absent" : v }'; }

is "$(curl -s "$URL" | sha256sum | cut -c1-64)" "$SHA" "the intact object is served whole"
is "$(metric khub_lfs_s3_damaged_on_read_total)" 0 "/metrics counts no damaged S3 read"

KEY=$(s3_object_key "$SHA")
head -c "$SIZE" /dev/urandom >"$TEST_DIR/evil.bin"	# same size, other bytes, khub's mark forged
curl -s -o /dev/null -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H "x-amz-meta-sha256: $SHA" \
	--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	--data-binary @"$TEST_DIR/evil.bin" "$S3_ENDPOINT/$S3_BUCKET/$KEY"

curl -s -o "$TEST_DIR/got" -D "$TEST_DIR/h" "$URL"
RC=$?
is "$RC" 18 "the GET of the tampered object ends short (curl: partial file)"
GOT=$(stat -c %s "$TEST_DIR/got")
ok $([ "$GOT" -lt "$SIZE" ]; echo $?) "the client got fewer bytes than announced ($GOT < $SIZE)"
ok $(! cmp -s "$TEST_DIR/got" "$TEST_DIR/evil.bin"; echo $?) "never the whole tampered file"
like "$(head -1 "$TEST_DIR/h")" '^HTTP/1.1 200' "headers came first (streamed), from the link record"
check "the log says why" -- grep -q "came back with sha256" "$TEST_DIR/server.log"
check "and that it was quarantined" -- grep -q "$SHA moved to quarantine" "$TEST_DIR/server.log"
is "$(s3_curl HEAD "$KEY")" 404 "the object's key is empty now"
s3_curl GET "?prefix=quarantine" >/dev/null	# nothing to encode: curl 7.88 signs queries as written
check "the bytes wait under quarantine/lfs/ in the bucket" -- grep -q "<Key>quarantine/lfs/$SHA\." "$S3_DIR/answer"
is "$(metric khub_lfs_s3_damaged_on_read_total)" 1 "/metrics counts the damaged read"
is "$(curl -s -o /dev/null -w '%{http_code}' "$URL")" 404 "the next GET answers 404, not the same bytes"
is "$(curl -s -o /dev/null -w '%{http_code}' -r 0-1023 "$URL")" 404 "a Range of it too"
done_testing
