#!/bin/bash
# t0112-disk-full.sh -- a full disk is the server's failure, never the
# client's: with the LFS store (where uploads and commit spool files are
# written) on an 8 MiB tmpfs, a 20 MiB LFS PUT through the batch's signed
# upload URL answers 507 with a JSON error naming the storage, is logged,
# and stores nothing; an NDJSON commit whose inline base64 file does not fit
# in the spool answers 507 and leaves the refs alone; once space is back a
# commit works again. Needs root and mount(2); skipped otherwise.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

probe=$(mktemp -d /tmp/khub-mount-probe.XXXXXX)
if ! mount -t tmpfs -o size=1m tmpfs "$probe" 2>/dev/null; then
	rmdir "$probe"
	echo "1..0 # SKIP cannot mount a tmpfs here (needs root and mount permission)"
	exit 0
fi
umount "$probe"
rmdir "$probe"

khub_setup
LFSDIR=$KHUB_DATA_DIR/lfs
cleanup() {
	khub_stop
	umount "$LFSDIR" 2>/dev/null
	khub_teardown
}
trap cleanup EXIT

log=$TEST_DIR/setup.log
khub admin user create alice >>"$log" 2>&1
TOKEN=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
mkdir -p "$LFSDIR"
mount -t tmpfs -o size=8m,mode=0755 tmpfs "$LFSDIR"
ok $? "an 8 MiB tmpfs mounted as the LFS store ($LFSDIR)"
khub_start

B=$TEST_DIR/body
api() {	# api METHOD PATH [BODY-FILE [CONTENT-TYPE]] -> status, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $TOKEN")
	[ -n "${3-}" ] && args+=(-H "Content-Type: ${4:-application/json}" --data-binary "@$3")
	curl "${args[@]}" "$KHUB_URL$2"
}
printf '{"name":"big","type":"kernel","files":[{"path":"README.md","content":"%s","encoding":"base64"}]}' \
	"$(printf '# big\n' | base64 -w0)" >"$TEST_DIR/create.json"
is "$(api POST /api/repos/create "$TEST_DIR/create.json")" 200 "alice creates alice/big"
GD=$KHUB_DATA_DIR/repos/kernels/alice/big.git
MAIN=$(git --git-dir="$GD" rev-parse refs/heads/main)

# ---- a 20 MiB LFS PUT ------------------------------------------------------------------------
head -c $((20 << 20)) /dev/urandom >"$TEST_DIR/blob"
OID=$(sha256sum "$TEST_DIR/blob" | cut -c1-64)
printf '{"operation":"upload","transfers":["basic"],"ref":{"name":"main"},"objects":[{"oid":"%s","size":%d}]}' \
	"$OID" $((20 << 20)) >"$TEST_DIR/batch.json"
is "$(api POST /kernels/alice/big.git/info/lfs/objects/batch "$TEST_DIR/batch.json" application/vnd.git-lfs+json)" 200 \
	"LFS batch upload of a 20 MiB object"
PUT=$(/usr/bin/python3 -c "import json; print(json.load(open('$B'))['objects'][0]['actions']['upload']['href'])")
VERIFY=$(/usr/bin/python3 -c "import json; print(json.load(open('$B'))['objects'][0]['actions']['verify']['href'])")
like "$PUT" '/api/lfs/upload/' "the batch hands out a signed upload URL"
s=$(curl -s -o "$B" -w '%{http_code}' -X PUT --data-binary "@$TEST_DIR/blob" "$PUT")
is "$s" 507 "PUT of 20 MiB onto an 8 MiB store → 507 Insufficient Storage (not 400)"
like "$(cat "$B")" '^\{"error":"insufficient storage: .*LFS' "  … with a JSON error naming the storage: $(head -c 150 "$B")"
grep -q '507 insufficient storage' "$TEST_DIR/server.log"
ok $? "  … logged as an error"
is "$(find "$LFSDIR/objects" -type f | wc -l)" 0 "  … no object stored"
is "$(find "$LFSDIR/tmp" -type f | wc -l)" 0 "  … and no partial upload left behind"
s=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data-binary "{\"oid\":\"$OID\",\"size\":$((20 << 20))}" "$VERIFY")
is "$s" 404 "  … so verify says the object is not stored"

# ---- an NDJSON commit whose inline file does not fit in the spool ------------------------------------
head -c $((12 << 20)) /dev/urandom >"$TEST_DIR/big.so"
{
	printf '{"key":"header","value":{"summary":"too big"}}\n'
	printf '{"key":"file","value":{"path":"build/big.so","encoding":"base64","content":"'
	base64 -w0 "$TEST_DIR/big.so"
	printf '"}}\n'
} >"$TEST_DIR/commit.ndjson"
s=$(api POST /api/kernels/alice/big/commit/main "$TEST_DIR/commit.ndjson" application/x-ndjson)
is "$s" 507 "NDJSON commit of a 12 MiB inline file with the spool full → 507 (not 400)"
like "$(cat "$B")" '^\{"error":"insufficient storage' "  … with a JSON error: $(head -c 150 "$B")"
is "$(git --git-dir="$GD" rev-parse refs/heads/main)" "$MAIN" "  … main unchanged"
is "$(git --git-dir="$GD" for-each-ref --format='%(refname)' | tr '\n' ' ')" "refs/heads/main " "  … no other ref created"
is "$(find "$LFSDIR/tmp" -type f | wc -l)" 0 "  … and the spool file is gone"

# ---- space is back: writes work ---------------------------------------------------------------
printf '{"key":"header","value":{"summary":"small"}}\n{"key":"file","value":{"path":"small.txt","encoding":"base64","content":"%s"}}\n' \
	"$(printf small | base64 -w0)" >"$TEST_DIR/small.ndjson"
is "$(api POST /api/kernels/alice/big/commit/main "$TEST_DIR/small.ndjson" application/x-ndjson)" 200 \
	"a small commit afterwards works"
head -c $((1 << 20)) /dev/urandom >"$TEST_DIR/small.bin"
{
	printf '{"key":"header","value":{"summary":"lfs"}}\n'
	printf '{"key":"file","value":{"path":"build/small.so","encoding":"base64","content":"'
	base64 -w0 "$TEST_DIR/small.bin"
	printf '"}}\n'
} >"$TEST_DIR/lfs.ndjson"
is "$(api POST /api/kernels/alice/big/commit/main "$TEST_DIR/lfs.ndjson" application/x-ndjson)" 200 \
	"a 1 MiB binary (stored as LFS on the tmpfs) works"

grep -E 'runtime error|AddressSanitizer' "$TEST_DIR/server.log" | head -5 | sed 's/^/# server: /'
check "server log has no sanitizer reports" -- bash -c "! grep -qE 'runtime error|AddressSanitizer' '$TEST_DIR/server.log'"
done_testing
