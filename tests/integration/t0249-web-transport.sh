#!/bin/bash
# t0249-web-transport.sh -- issue 36 (transport), with curl against a real
# server: pages and JSON answers built in memory are gzipped when asked
# (and byte-identical to the plain answer once inflated), not when not
# asked or refused with q=0; a resolved file or LFS object never is; static
# files have content-hashed URLs in the pages, immutable caching, strong
# ETags and 304s; /favicon.ico is an icon, not a 404.
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
# a README worth compressing, and a text file resolve must send as stored
for i in $(seq 1 60); do echo "Line $i of a README that repeats itself, as documentation does."; done >>"$SRC/README.md"
for i in $(seq 1 100); do echo "config line $i"; done >"$SRC/notes.txt"
khub import "$SRC" --repo acme/relu --branch main >/dev/null 2>&1
khub_start

H=$TEST_DIR/headers
fetch() {	# fetch URL OUT [curl args] -> status in $STATUS, headers in $H
	local url=$1 out=$2; shift 2
	STATUS=$(curl -s -D "$H" -o "$out" -w '%{http_code}' "$@" "$url")
}
header() { grep -i "^$1:" "$H" | head -1 | cut -d' ' -f2- | tr -d '\r'; }
gunzip_to() { /usr/bin/python3 -c "import gzip,sys; sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1],'rb').read()))" "$1" >"$2"; }

# ---- gzip of answers built in memory ---------------------------------------
for url in /kernels/acme/relu /kernels /api/openapi.json; do
	fetch "$KHUB_URL$url" "$TEST_DIR/plain"
	is "$STATUS/$(header Content-Encoding)" "200/" "$url without Accept-Encoding: not compressed"
	fetch "$KHUB_URL$url" "$TEST_DIR/gz" -H 'Accept-Encoding: gzip, deflate'
	is "$STATUS/$(header Content-Encoding)" "200/gzip" "$url with Accept-Encoding: gzip is gzipped"
	like "$(grep -i '^Vary:' "$H" | tr -d '\r' | tr '\n' ' ')" 'Accept-Encoding' "$url says Vary: Accept-Encoding"
	gunzip_to "$TEST_DIR/gz" "$TEST_DIR/inflated"
	if [ "$url" = /api/openapi.json ]; then
		cmp -s "$TEST_DIR/plain" "$TEST_DIR/inflated"
		ok $? "$url inflated is byte-identical to the plain answer"
	else	# pages carry a per-request CSRF token: compare without it
		sed 's/value="[0-9a-f]\{64\}"//' "$TEST_DIR/plain" >"$TEST_DIR/p1"
		sed 's/value="[0-9a-f]\{64\}"//' "$TEST_DIR/inflated" >"$TEST_DIR/p2"
		cmp -s "$TEST_DIR/p1" "$TEST_DIR/p2"
		ok $? "$url inflated is the same page as the plain answer"
	fi
	ok $(($(stat -c %s "$TEST_DIR/gz") < $(stat -c %s "$TEST_DIR/plain") ? 0 : 1)) "$url gzipped is smaller"
	fetch "$KHUB_URL$url" "$TEST_DIR/q0" -H 'Accept-Encoding: gzip;q=0, identity'
	is "$(header Content-Encoding)" "" "$url with gzip;q=0 is not compressed"
done

# ---- never a resolved file or an LFS object --------------------------------
SO=build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so
for path in notes.txt README.md "$SO"; do
	fetch "$KHUB_URL/kernels/acme/relu/resolve/main/$path" "$TEST_DIR/r-plain" -L
	fetch "$KHUB_URL/kernels/acme/relu/resolve/main/$path" "$TEST_DIR/r-gz" -L -H 'Accept-Encoding: gzip'
	is "$STATUS/$(header Content-Encoding)" "200/" "resolve of $path is sent as stored even when gzip is asked"
	cmp -s "$TEST_DIR/r-plain" "$TEST_DIR/r-gz"
	ok $? "resolve of $path: the same bytes either way"
done
cmp -s "$TEST_DIR/r-gz" "$SRC/$SO"
ok $? "the LFS object is its own bytes"
fetch "$KHUB_URL/kernels/acme/relu/-/resolve/main/notes.txt" "$TEST_DIR/pr" -H 'Accept-Encoding: gzip'
is "$STATUS/$(header Content-Encoding)" "200/" "the page route's resolve is not compressed either"

# ---- static files: hashed URLs, immutable, 304 -----------------------------
fetch "$KHUB_URL/kernels/acme/relu" "$TEST_DIR/page"
CSS=$(grep -o '/-/static/khub\.[0-9a-f]\{12\}\.css' "$TEST_DIR/page" | head -1)
like "$CSS" '^/-/static/khub\.[0-9a-f]{12}\.css$' "the page links the content-hashed stylesheet"
WANT=$(sha256sum "$KHUB_SRC/web/static/khub.css" | cut -c1-12)
is "$CSS" "/-/static/khub.$WANT.css" "the hash is the file's SHA-256"
like "$(grep -o '/-/static/kernel\.[0-9a-f]\{12\}\.js' "$TEST_DIR/page" | head -1)" 'kernel' "and the hashed script"
fetch "$KHUB_URL$CSS" "$TEST_DIR/css"
is "$STATUS" 200 "the hashed URL answers"
is "$(header Cache-Control)" "public, max-age=31536000, immutable" "the hashed URL is cached for good"
ETAG=$(header ETag)
like "$ETAG" '^"[0-9a-f]{12}"$' "with a strong ETag"
cmp -s "$TEST_DIR/css" "$KHUB_SRC/web/static/khub.css"
ok $? "its bytes are the stylesheet's"
fetch "$KHUB_URL$CSS" "$TEST_DIR/css304" -H "If-None-Match: $ETAG"
is "$STATUS/$([ -s "$TEST_DIR/css304" ] && echo body)" "304/" "If-None-Match: 304 with no body"
fetch "$KHUB_URL$CSS" "$TEST_DIR/cssgz" -H 'Accept-Encoding: gzip'
is "$(header Content-Encoding)" gzip "the stylesheet gzipped when asked (precompressed)"
gunzip_to "$TEST_DIR/cssgz" "$TEST_DIR/cssin"
cmp -s "$TEST_DIR/cssin" "$KHUB_SRC/web/static/khub.css"
ok $? "and inflates to the stylesheet"
GZTAG=$(header ETag)
fetch "$KHUB_URL$CSS" "$TEST_DIR/gz304" -H 'Accept-Encoding: gzip' -H "If-None-Match: $GZTAG"
is "$STATUS" 304 "the gzipped copy's ETag gets a 304 too"
fetch "$KHUB_URL/-/static/khub.css" "$TEST_DIR/old"
is "$STATUS/$(header ETag)" "200/$ETAG" "the unversioned URL still works, with the ETag"
like "$(header Cache-Control)" 'no-cache|max-age=[0-9]{1,3}(,|$)' "and is revalidated (no long max-age)"
fetch "$KHUB_URL/-/static/khub.css" "$TEST_DIR/old304" -H "If-None-Match: $ETAG"
is "$STATUS" 304 "the unversioned URL answers 304 too"
fetch "$KHUB_URL/-/static/khub.000000000000.css" "$TEST_DIR/bad"
is "$STATUS" 404 "a hash that is not the file's is a 404"

# ---- favicon ---------------------------------------------------------------
fetch "$KHUB_URL/favicon.ico" "$TEST_DIR/icon"
is "$STATUS/$(header Content-Type)" "200/image/svg+xml" "/favicon.ico is an icon"
like "$(head -c 100 "$TEST_DIR/icon")" '<svg' "an SVG"
done_testing
