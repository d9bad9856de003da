#!/bin/bash
# t0181-lfs-s3-edges.sh -- the S3 backend on a real Ceph RGW, past the
# shared contract (t0180): an LFS upload whose bytes do not hash to the
# announced oid never reaches the bucket; a good one arrives with khub's
# mark; a 300 MB kernel-builder-style inline commit goes up as a multipart
# upload and comes back byte-identical (whole and by Range through khub);
# with lfs_s3_redirect = 1 a GET answers 302 to a presigned URL (whole and
# Range work there) while HEAD still answers X-Repo-Commit, X-Linked-Etag
# and X-Linked-Size itself; an object changed behind khub's back in the
# bucket is never served whole (the streamed GET ends short; t0224).
. "$(dirname "$0")/../lib/khub-test.sh"
. "$(dirname "$0")/../lib/ceph-s3.sh"
s3_skip_unless_ceph
khub_setup
trap 's3_stop; khub_teardown' EXIT
s3_start

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
V1=$(khub import "$SRC" --repo acme/relu --branch main 2>>"$TEST_DIR/import.log")
like "$V1" '^[0-9a-f]{40}$' "import onto the s3 backend"
khub admin user create alice >/dev/null 2>&1
khub admin member set acme alice write >/dev/null 2>&1
TOK=$(khub admin token create alice 2>/dev/null | tail -n 1)
khub_start

H=$TEST_DIR/headers
B=$TEST_DIR/body
export KEEP_TEST_DIR=${KEEP_TEST_DIR:-}
api() {	# api METHOD URL [curl args] -> $STATUS, headers in $H, body in $B
	local method=$1 url=$2; shift 2
	if [ "$method" = HEAD ]; then
		STATUS=$(curl -s -I -o "$H" -w '%{http_code}' "$@" "$url"); : >"$B"
	else
		STATUS=$(curl -s -X "$method" -D "$H" -o "$B" -w '%{http_code}' "$@" "$url")
	fi
}
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print($1)"; }
AUTH=(-H "Authorization: Bearer $TOK")

# ---- LFS batch + PUT: a wrong sha never becomes visible ---------------------------
batch_upload() {	# batch_upload OID SIZE -> $HREF, $VERIFY (or empty)
	api POST "$KHUB_URL/kernels/acme/relu.git/info/lfs/objects/batch" "${AUTH[@]}" \
		-H 'Content-Type: application/vnd.git-lfs+json' \
		--data "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$1\",\"size\":$2}]}"
	HREF=$(json 'd["objects"][0].get("actions",{}).get("upload",{}).get("href","")')
	VERIFY=$(json 'd["objects"][0].get("actions",{}).get("verify",{}).get("href","")')
}
head -c 200000 /dev/urandom >"$TEST_DIR/good.bin"
head -c 200000 /dev/urandom >"$TEST_DIR/evil.bin"
GOOD=$(sha256sum "$TEST_DIR/good.bin" | cut -c1-64)
EVIL=$(sha256sum "$TEST_DIR/evil.bin" | cut -c1-64)
batch_upload "$GOOD" 200000
is "$STATUS" 200 "batch upload answers 200"
api PUT "$HREF" "${AUTH[@]}" --data-binary @"$TEST_DIR/evil.bin"
ok $([ "${STATUS:0:1}" = 4 ]; echo $?) "PUT of bytes that hash elsewhere is refused ($STATUS)"
is "$(s3_curl HEAD "$(s3_object_key "$GOOD")")" 404 "the announced oid is not in the bucket"
is "$(s3_curl HEAD "$(s3_object_key "$EVIL")")" 404 "nor is the oid of the bytes sent"
api POST "$VERIFY" "${AUTH[@]}" -H 'Content-Type: application/vnd.git-lfs+json' --data "{\"oid\":\"$GOOD\",\"size\":200000}"
is "$STATUS" 404 "verify says the object is not stored"
api PUT "$HREF" "${AUTH[@]}" --data-binary @"$TEST_DIR/good.bin"
is "$STATUS" 200 "PUT of the right bytes is stored"
is "$(s3_curl HEAD "$(s3_object_key "$GOOD")" -D "$TEST_DIR/s3h")" 200 "the object is in the bucket"
is "$(grep -i '^x-amz-meta-sha256:' "$TEST_DIR/s3h" | tr -d '\r' | cut -d' ' -f2)" "$GOOD" "with khub's sha256 mark"
api POST "$VERIFY" "${AUTH[@]}" -H 'Content-Type: application/vnd.git-lfs+json' --data "{\"oid\":\"$GOOD\",\"size\":200000}"
is "$STATUS" 200 "verify 200"
is "$(ls "$KHUB_DATA_DIR/lfs/objects" | wc -l)" 0 "the local store holds no object"

# ---- a 300 MB inline commit (kernel-builder upload_folder style) ------------------
BIG=$TEST_DIR/big.so
MB=${S3_BIG_MB:-300}
head -c $((MB * 1024 * 1024)) /dev/urandom >"$BIG"
BIG_SHA=$(sha256sum "$BIG" | cut -c1-64)
/usr/bin/python3 - "$BIG" >"$TEST_DIR/big.ndjson" <<'PY'
import base64, sys
sys.stdout.write('{"key":"header","value":{"summary":"big variant","description":""}}\n')
sys.stdout.write('{"key":"file","value":{"path":"build/torch-cuda/big.so","encoding":"base64","content":"')
with open(sys.argv[1], 'rb') as f:
    while True:
        chunk = f.read(3 * 1024 * 1024)
        if not chunk:
            break
        sys.stdout.write(base64.b64encode(chunk).decode())
sys.stdout.write('"}}\n')
PY
t0=$SECONDS
api POST "$KHUB_URL/api/kernels/acme/relu/commit/main" "${AUTH[@]}" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$TEST_DIR/big.ndjson"
is "$STATUS" 200 "a $MB MB inline commit is accepted ($((SECONDS - t0)) s)"
[ "$STATUS" = 200 ] || { head -c 300 "$B" | sed 's/^/# /'; echo; tail -5 "$TEST_DIR/server.log" | sed 's/^/# /'; }
rm -f "$TEST_DIR/big.ndjson"
is "$(s3_curl HEAD "$(s3_object_key "$BIG_SHA")")" 200 "the $MB MB object is in the bucket (multipart)"
URL=$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cuda/big.so
is "$(curl -s "$URL" | sha256sum | cut -c1-64)" "$BIG_SHA" "GET through khub is byte-identical"
api GET "$URL" -H "Range: bytes=104857600-104858623"
is "$STATUS" 206 "Range through khub: 206"
is "$(sha256sum <"$B" | cut -c1-64)" "$(tail -c +104857601 "$BIG" | head -c 1024 | sha256sum | cut -c1-64)" "Range bytes match"
rm -f "$BIG"

# ---- presigned redirects for GET, HEAD answered by khub ---------------------------
khub_stop
khub_start --lfs-s3-redirect 1
LFS_PATH=build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so
LFS_SHA=$(sha256sum "$SRC/$LFS_PATH" | cut -c1-64)
LFS_SIZE=$(stat -c %s "$SRC/$LFS_PATH")
URL=$KHUB_URL/kernels/acme/relu/resolve/main/$LFS_PATH
api HEAD "$URL"
is "$STATUS" 200 "HEAD of an LFS file is answered by khub (no redirect)"
is "$(header X-Repo-Commit | wc -c)" 41 "HEAD carries X-Repo-Commit"
is "$(header X-Linked-Etag)" "\"$LFS_SHA\"" "HEAD carries X-Linked-Etag"
is "$(header X-Linked-Size)" "$LFS_SIZE" "HEAD carries X-Linked-Size"
api GET "$URL"
is "$STATUS" 302 "GET answers 302"
like "$(header Location)" "^$S3_ENDPOINT/$S3_BUCKET/objects/.*X-Amz-Signature=" "to a presigned object-store URL"
is "$(header X-Linked-Etag)" "\"$LFS_SHA\"" "the 302 still names the object"
is "$(curl -sL "$URL" | sha256sum | cut -c1-64)" "$LFS_SHA" "following it gives the bytes"
is "$(curl -sL -r 5-14 "$URL" | od -An -tx1 | tr -d ' \n')" "$(tail -c +6 "$SRC/$LFS_PATH" | head -c 10 | od -An -tx1 | tr -d ' \n')" "Range works at the presigned URL"
api GET "$KHUB_URL/kernels/acme/relu/resolve/main/README.md"
is "$STATUS" 200 "a regular file is still served by khub"
khub_stop
khub_start

# ---- an object changed in the bucket behind khub's back ---------------------------
KEY=$(s3_object_key "$LFS_SHA")
head -c "$LFS_SIZE" /dev/urandom >"$TEST_DIR/evil.bin"	# same size, other bytes, khub's mark forged
curl -s -o /dev/null -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H "x-amz-meta-sha256: $LFS_SHA" \
	--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	--data-binary @"$TEST_DIR/evil.bin" "$S3_ENDPOINT/$S3_BUCKET/$KEY"
curl -s -o "$B" "$URL"
is "$?" 18 "tampered bytes are never served whole: the streamed GET ends short (t0224)"
ok $(! cmp -s "$B" "$TEST_DIR/evil.bin"; echo $?) "the body is not the tampered file"
check "the log says why" -- grep -q "came back with sha256" "$TEST_DIR/server.log"
done_testing
