#!/bin/bash
# t0138-head-memo.sh -- a HEAD of a file is answered from the answer kept by
# its HTTP thread (http/response_memo.c) once it was built: what must still
# differ between two answers does (X-Request-Id, Date), what must not leak
# across requests does not (a Range answer's Content-Range, a repo turned
# private, a branch that moved), and many clients at once on few threads
# (slots busy on the wire) all get whole, right answers. The same for GET
# answers the response cache keeps (a tree page and a revision at a sha):
# the body whole and identical, each answer with its own X-Request-Id and
# Date, the API's CORS headers once, and a repo made private answers 401.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }
khub_setup

khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
KHUB_THREADS=2 khub_start

S=$TEST_DIR/src
make_kernel_tree "$S" relu
head -c 3000000 /dev/urandom >"$S/build/torch-cpu/big.bin"
/usr/bin/python3 -c 'print("x = 1\n" * 60000, end="")' >"$S/build/torch-cpu/large.py"	# 360 kB: a git blob
khub import "$S" --repo acme/relu --branch main >/dev/null 2>"$TEST_DIR/import.err" || bail "import failed"
SHA=$(curl -sf "$KHUB_URL/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
like "$SHA" '^[0-9a-f]{40}$' "seeded acme/relu"
BIG_OID=$(sha256sum "$S/build/torch-cpu/big.bin" | cut -d' ' -f1)
LARGE_OID=$(git hash-object "$S/build/torch-cpu/large.py")

U="$KHUB_URL/kernels/acme/relu/resolve/$SHA/build/torch-cpu/big.bin"
UB="$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu/big.bin"
H=$TEST_DIR/h
# answers FILE: one line per answer in a curl -sI dump of several answers:
# "status etag request-id date content-length content-range"
answers() {
	tr -d '\r' <"$1" | awk '
	function flush() { if (st != "") print st, (et == "" ? "-" : et), (id == "" ? "-" : id), (dt == "" ? "-" : dt), (cl == "" ? "-" : cl), (cr == "" ? "-" : cr) }
	/^HTTP\// { flush(); st = $2; et = id = dt = cl = cr = ""; next }
	tolower($1) == "etag:" { et = $2 }
	tolower($1) == "x-request-id:" { id = $2 }
	tolower($1) == "date:" { dt = $6 }
	tolower($1) == "content-length:" { cl = $2 }
	tolower($1) == "content-range:" { cr = $2 $3 }
	END { flush() }'
}

# ---- one connection, three HEADs: the same file, three requests ------------------
curl -sI "$U" "$U" "$U" >"$H"
answers "$H" >"$TEST_DIR/a"
is "$(wc -l <"$TEST_DIR/a")" 3 "three HEAD answers on one connection"
is "$(awk '{print $1, $2, $5}' "$TEST_DIR/a" | sort -u)" "200 \"$BIG_OID\" 3000000" \
	"each: 200, the LFS ETag, the file's size"
is "$(awk '{print $3}' "$TEST_DIR/a" | sort -u | grep -c '^[0-9a-f]\{16\}$')" 3 "each has its own X-Request-Id"
is "$(grep -ci '^X-Request-Id:' "$H")" 3 "one X-Request-Id header per answer (the kept answer's old one is gone)"
is "$(grep -ci '^Date:' "$H")" 3 "one Date header per answer"
first_date=$(awk 'NR == 1 {print $4}' "$TEST_DIR/a")
like "$first_date" '^[0-9]{2}:[0-9]{2}:[0-9]{2}$' "Date carries a time"

# ---- Date moves on ------------------------------------------------------------------
sleep 1.2
curl -sI "$U" >"$H"
later=$(answers "$H" | awk '{print $4}')
ok $([ "$later" != "$first_date" ] && [ "$later" != - ]; echo $?) "a HEAD a second later has a new Date ($first_date, then $later)"

# ---- a Range HEAD is answered whole, and leaves nothing behind ----------------------
curl -sI "$U" -H "Range: bytes=10-19" --next -sI "$U" >"$H"	# --next: the same connection
answers "$H" >"$TEST_DIR/a"
is "$(sed -n 1p "$TEST_DIR/a" | awk '{print $1, $5, $6}')" "206 10 bytes10-19/3000000" "HEAD with Range: 206, its Content-Range"
is "$(sed -n 2p "$TEST_DIR/a" | awk '{print $1, $5, $6}')" "200 3000000 -" "the next plain HEAD has no Content-Range"

# ---- a git blob past the small-file cache: the size without reading it ---------------
curl -sI "$KHUB_URL/kernels/acme/relu/resolve/$SHA/build/torch-cpu/large.py" \
	"$KHUB_URL/kernels/acme/relu/resolve/$SHA/build/torch-cpu/large.py" >"$H"
is "$(answers "$H" | awk '{print $1, $2, $5}' | sort -u)" "200 \"$LARGE_OID\" 360000" \
	"HEAD of a 360 kB regular file: its blob sha and size, twice"
curl -s "$KHUB_URL/kernels/acme/relu/resolve/$SHA/build/torch-cpu/large.py" -o "$TEST_DIR/large.py"
check "GET after the HEADs: the same bytes" -- cmp -s "$TEST_DIR/large.py" "$S/build/torch-cpu/large.py"
curl -s "$U" -o "$TEST_DIR/big.bin"
check "GET of the LFS file after its HEADs: the same bytes" -- cmp -s "$TEST_DIR/big.bin" "$S/build/torch-cpu/big.bin"

# ---- many clients on two threads: every answer whole and its own -------------------
# 24 clients, 25 HEADs each over one connection, by sha and by branch
seq 1 24 | xargs -P 24 -I{} sh -c '
	n=$1 url=$2 dir=$4
	[ $((n % 2)) = 0 ] && url=$3
	set --
	for i in $(seq 1 25); do set -- "$@" "$url"; done
	curl -sI "$@" >"$dir/par.$n"' _ {} "$U" "$UB" "$TEST_DIR"
for f in "$TEST_DIR"/par.*; do answers "$f"; done >"$TEST_DIR/all"
is "$(wc -l <"$TEST_DIR/all")" 600 "600 answers to 24 parallel clients"
is "$(awk '{print $1, $2, $5}' "$TEST_DIR/all" | sort | uniq -c | awk '{print $1, $2, $3, $4}')" \
	"600 200 \"$BIG_OID\" 3000000" "every one 200 with the right ETag and size"
is "$(awk '{print $3}' "$TEST_DIR/all" | sort -u | wc -l)" 600 "600 distinct request ids"
is "$(cat "$TEST_DIR"/par.* | grep -ci '^X-Repo-Commit: '"$SHA")" 600 "every one names the commit"

# ---- a repo turned private: the kept answer is not served to strangers ---------------
curl -sI "$U" >/dev/null
st=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $ALICE" \
	-H 'Content-Type: application/json' --data '{"private":true}' "$KHUB_URL/api/kernels/acme/relu/settings")
is "$st" 200 "acme/relu made private"
curl -sI "$U" "$U" >"$H"
is "$(answers "$H" | awk '{print $1}' | sort -u)" 401 "anonymous HEADs of the kept file: 401"
is "$(grep -ci "^ETag:\|^X-Linked-Size:" "$H")" 0 "and they carry no ETag or size"
curl -sI -H "Authorization: Bearer $ALICE" "$U" >"$H"
is "$(answers "$H" | awk '{print $1, $2}')" "200 \"$BIG_OID\"" "the owner's HEAD: 200"
curl -s -o /dev/null -X PUT -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	--data '{"private":false}' "$KHUB_URL/api/kernels/acme/relu/settings"

# ---- GET answers kept whole: a tree page and a revision at a sha -------------------------
T="$KHUB_URL/api/kernels/acme/relu/tree/$SHA?recursive=true"
R="$KHUB_URL/api/kernels/acme/relu/revision/$SHA"
for url in "$T" "$R"; do
	what=${url##*/api/kernels/acme/relu/}
	what=${what%%/*}
	curl -s -D "$H" -o "$TEST_DIR/b1" "$url" -o "$TEST_DIR/b2" "$url" -o "$TEST_DIR/b3" "$url"
	is "$(answers "$H" | awk '{print $1}' | sort -u)" 200 "$what at the sha, three GETs on one connection: 200"
	check "$what: the three bodies are identical" -- cmp -s "$TEST_DIR/b1" "$TEST_DIR/b2"
	check "$what: the third too" -- cmp -s "$TEST_DIR/b1" "$TEST_DIR/b3"
	check "$what: the body is whole JSON" -- /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TEST_DIR/b3"
	is "$(answers "$H" | awk '{print $5}' | sort -u)" "$(stat -c %s "$TEST_DIR/b1")" "$what: Content-Length is the body's length, each time"
	is "$(answers "$H" | awk '{print $3}' | sort -u | grep -c '^[0-9a-f]\{16\}$')" 3 "$what: each answer has its own X-Request-Id"
	is "$(grep -ci '^X-Request-Id:' "$H")" 3 "$what: one X-Request-Id header per answer"
	is "$(grep -ci '^Date:' "$H")" 3 "$what: one Date header per answer"
	is "$(grep -ci '^Access-Control-Allow-Origin:' "$H")" 3 "$what: the API's CORS header once per answer"
done
grep -o '"sha":"[0-9a-f]*"' "$TEST_DIR/b1" | head -1 >"$TEST_DIR/rev-sha"
is "$(cat "$TEST_DIR/rev-sha")" "\"sha\":\"$SHA\"" "the kept revision answer names the sha asked for"
curl -s -o /dev/null -X PUT -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	--data '{"private":true}' "$KHUB_URL/api/kernels/acme/relu/settings"
is "$(for u in "$T" "$T" "$R" "$R"; do curl -s -o /dev/null -w '%{http_code} ' "$u"; done)" "401 401 401 401 " \
	"repo made private: anonymous GETs of the kept tree page and revision answer 401"
curl -s -o /dev/null -X PUT -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	--data '{"private":false}' "$KHUB_URL/api/kernels/acme/relu/settings"

# ---- the branch moves: HEAD by branch names the new file ----------------------------
head -c 2000000 /dev/urandom >"$S/build/torch-cpu/big.bin"
NEW_OID=$(sha256sum "$S/build/torch-cpu/big.bin" | cut -d' ' -f1)
khub import "$S" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.err" || bail "second import failed"
NEW_SHA=$(curl -sf "$KHUB_URL/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
ok $([ "$NEW_SHA" != "$SHA" ]; echo $?) "main moved"
curl -sI "$UB" "$UB" >"$H"
is "$(answers "$H" | awk '{print $1, $2, $5}' | sort -u)" "200 \"$NEW_OID\" 2000000" "HEAD by branch: the new file"
is "$(grep -i '^X-Repo-Commit:' "$H" | tr -d '\r' | awk '{print $2}' | sort -u)" "$NEW_SHA" "... at the new commit"
curl -sI "$U" >"$H"
is "$(answers "$H" | awk '{print $1, $2, $5}')" "200 \"$BIG_OID\" 3000000" "HEAD by the old sha: still the old file"

done_testing
