#!/bin/bash
# t0240-one-owner-small-rules.sh -- small rules with one owner each: the
# LFS store backend is chosen by name once, from the backend table
# (storage/lfs/lfs_store.c), and asked for what it can do afterwards (no
# strcmp on "local" or "s3" anywhere else); khub has one UTF-8 decoder
# (utf8_decode) and one JSON string quoter (strbuf_add_json_quoted). Then
# the attack: an API answer echoing bytes that are not UTF-8 (surrogate,
# overlong, past U+10FFFF) is still strict UTF-8 JSON, and a backend name
# with no row is refused before anything starts.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"
SRC="api http server farm mirror sync web common storage kernel builder-worker"

# ---- the LFS backend: one table, chosen by name once --------------------------------
hits=$(grep -rnE --include='*.[ch]' 'str(n|case|ncase)?cmp\([^;]*"(local|s3)"' $SRC)
is "$hits" "" "no strcmp on an LFS backend name (lfs_backend_find looks names up in the table)"
hits=$(grep -rn --include='*.[ch]' '"s3"' $SRC | grep -v '^storage/lfs/lfs_s3\.c:')
is "$hits" "" "\"s3\" is spelled only by the S3 backend (its table row and SigV4 service)"
hits=$(grep -rn --include='*.[ch]' 'config\.lfs_backend\b' $SRC | grep -v '^server/config\.c:')
is "$hits" "" "the lfs_backend setting is read by config_load alone (then config_lfs_backend())"
hits=$(grep -rn --include='*.[ch]' 'backup_lfs_source("' $SRC)
is "$hits" "" "no second table keyed by backend name"

# ---- one UTF-8 decoder, one JSON string quoter ----------------------------------------
hits=$(grep -rnE --include='*.[ch]' '0xc0\) != 0x80|0x10ffff|0xd800 && .* <= 0xdfff' $SRC |
	grep -v '^common/strbuf\.c:' | grep -v '^common/json_stream\.c:.*high_surrogate')
is "$hits" "" "UTF-8 is decoded by utf8_decode (common/strbuf.c) only"
hits=$(grep -rn --include='*.[ch]' "'u', '0', '0'\|strbuf_add_json_string" $SRC | grep -v '^common/strbuf\.c:')
is "$hits" "" "JSON strings are quoted by strbuf_add_json_quoted only"

# ---- the attack: bytes that are not UTF-8 in an answer --------------------------------
khub_setup
khub admin org create acme >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin member set acme alice admin >/dev/null 2>&1
ALICE=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
khub_start
B=$TEST_DIR/body
status=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	--data-binary '{"name":"relu","organization":"acme","type":"kernel"}' "$KHUB_URL/api/repos/create")
is "$status" 200 "a repo to aim at"
# a surrogate (ED A0 80), an overlong '/' (E0 80 AF), past U+10FFFF
# (F4 90 80 80), a cut-short sequence (E2 82), then '~' so the name is refused
# and echoed in the error
status=$(curl -s -o "$B" -w '%{http_code}' -X POST -H "Authorization: Bearer $ALICE" \
	-H 'Content-Type: application/json' --data-binary '{}' \
	"$KHUB_URL/api/kernels/acme/relu/branch/x%ED%A0%80%E0%80%AF%F4%90%80%80%E2%82~%F0%9F%98%80")
is "$status" 400 "a branch name with '~' is refused"
got=$(/usr/bin/python3 -c '
import json, sys
text = open(sys.argv[1], "rb").read().decode("utf-8")	# strict: raises on a surrogate or overlong
print(json.loads(text)["error"])' "$B" 2>&1)
is "$got" "Invalid reference for a branch: x$(printf '\uFFFD%.0s' 1 2 3 4 5 6 7 8 9 10 11 12)~$(printf '\U1F600')" \
	"the error is strict UTF-8 JSON: each byte that is not UTF-8 is U+FFFD, the emoji kept"
is "$(jq -r .error "$B" | grep -c x)" 1 "jq reads it too"

# ---- a backend name with no row ---------------------------------------------------------
out=$(KHUB_LFS_BACKEND=nfs KHUB_DATA_DIR="$TEST_DIR/other" KHUB_LISTEN="127.0.0.1:$(free_port)" \
	timeout 30 "$KHUB_BIN" serve 2>&1)
rc=$?
is "$rc" 1 "serve with lfs_backend = nfs stops at once (it used to run on the local store)"
like "$out" "lfs_backend must be local or s3 \(got 'nfs'\)" "naming the backends the table has"
check "nothing was started for it" -- test ! -e "$TEST_DIR/other/pg"
done_testing
