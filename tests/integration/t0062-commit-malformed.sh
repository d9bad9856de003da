#!/bin/bash
# t0062-commit-malformed.sh -- malformed NDJSON commit bodies, bad paths,
# bad revisions and missing rights (write contract §2.3, §4.5, §4.6): each is
# a 4xx with a JSON {"error": "..."} naming the problem, and changes nothing
# (refs compared before/after, through git and through GET refs). Preupload
# with invalid paths. Known bugs are TAP TODO tests at the end.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"

command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }

khub_setup
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
V1=$(khub import "$SRC" --repo acme/relu --branch v1 2>>"$TEST_DIR/setup.log")
khub import "$SRC" --repo acme/secret --branch main --private >>"$TEST_DIR/setup.log" 2>&1
for u in bob rita mallory; do khub admin user create $u >>"$TEST_DIR/setup.log" 2>&1; done
khub admin member set acme bob write >>"$TEST_DIR/setup.log" 2>&1
khub admin member set acme rita read >>"$TEST_DIR/setup.log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$TEST_DIR/setup.log" | tail -n 1)
RITA=$(khub admin token create rita --scope write 2>>"$TEST_DIR/setup.log" | tail -n 1)
MALLORY=$(khub admin token create mallory --scope write 2>>"$TEST_DIR/setup.log" | tail -n 1)
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
git --git-dir="$GITDIR" tag rel1 "$V1"
SO=build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so
SO_OID=$(sha256sum "$SRC/$SO" | cut -d' ' -f1)
like "$V1" '^[0-9a-f]{40}$' "seeded acme/relu v1 (and private acme/secret)"
khub_start

H=$TEST_DIR/headers
B=$TEST_DIR/body
CASE=$TEST_DIR/case.ndjson
HDR='{"key":"header","value":{"summary":"Uploaded using `kernel-builder`.","description":""}}'
b64() { printf '%s' "$1" | base64 -w0; }
file_line() {	# file_line PATH [TEXT]
	printf '{"key":"file","value":{"content":"%s","path":"%s","encoding":"base64"}}' "$(b64 "${2:-hello}")" "$1"
}
body() { printf '%s\n' "$@" >"$CASE"; }	# one argument per line
snapshot() {
	git --git-dir="$GITDIR" for-each-ref --format='%(refname) %(objectname)'
	git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/secret.git" for-each-ref --format='%(refname) %(objectname)'
	curl -s -H "Authorization: Bearer $BOB" "$KHUB_URL/api/kernels/acme/relu/refs?include_prs=1"
}
lfs_count() { find "$KHUB_DATA_DIR/lfs/objects" -type f | wc -l; }
# Defaults for post(); a case may override them in front of the call.
post() {	# post -> $STATUS, headers in $H, body in $B; uses $REV $TOK $REPO $URL_KIND
	local auth=()
	[ -n "${TOK-$BOB}" ] && auth=(-H "Authorization: Bearer ${TOK-$BOB}")
	STATUS=$(curl -s -X POST -D "$H" -o "$B" -w '%{http_code}' "${auth[@]}" \
		-H 'Content-Type: application/x-ndjson' --data-binary @"$CASE" \
		"$KHUB_URL/api/kernels/${REPO:-acme/relu}/commit/${REV:-v1}")
}
error_matches() {	# error_matches REGEX: body is {"error": "<matches REGEX>"} sent as JSON
	/usr/bin/python3 - "$B" "$1" <<'PY'
import json, re, sys
try:
    d = json.load(open(sys.argv[1], "rb"))
except Exception:
    sys.exit(1)
e = d.get("error") if isinstance(d, dict) else None
sys.exit(0 if isinstance(e, str) and re.search(sys.argv[2], e) else 1)
PY
}
# refused DESC STATUS REGEX [X-ERROR-CODE]: post the case; one TAP line for
# status + JSON error + X-Error-Code + nothing changed.
refused() {
	local desc=$1 want=$2 re=$3 code=${4:-} before after why=
	before=$(snapshot)
	post
	after=$(snapshot)
	[ "$STATUS" = "$want" ] || why="status $STATUS, want $want;"
	[[ "$(header Content-Type)" == application/json* ]] || why="$why not application/json;"
	error_matches "$re" || why="$why error does not match /$re/;"
	[ -z "$code" ] || [ "$(header X-Error-Code)" = "$code" ] || why="$why X-Error-Code '$(header X-Error-Code)', want $code;"
	[ "$before" = "$after" ] || why="$why refs changed;"
	ok $([ -z "$why" ]; echo $?) "$desc → $want${code:+ $code}"
	[ -z "$why" ] || { diag "  $why"; diag "  body: $(head -c 400 "$B")"; }
}

# ---- not NDJSON, not objects, header rules ----------------------------------------
body 'this is not json'
refused "not JSON" 400 'malformed NDJSON'
body '[1,2,3]'
refused "a line that is JSON but not an object (array)" 400 'object'
body '"header"'
refused "a line that is a JSON string" 400 'object'
body "$(file_line a.txt)"
refused "missing header" 400 'first line must be .*header'
body "$(file_line a.txt)" "$HDR"
refused "header not first" 400 'first line must be .*header'
body "$HDR" "$HDR" "$(file_line a.txt)"
refused "two headers" 400 'header must be the first line, once'
body "$HDR" '{"key":"copyFile","value":{"path":"a.txt","oldPath":"README.md"}}'
refused "unknown key" 400 "unknown key 'copyFile'"
body "$HDR" '{"key":5,"value":{"path":"a.txt"}}'
refused "key is not a string" 400 '"key" must be a string'
body "$HDR" '{"value":{"path":"a.txt","content":"aGk="}}'
refused "line without key" 400 'missing "key"'
: >"$CASE"
refused "empty body" 400 'header line'
body "$HDR"
refused "no operation lines at all" 400 'no operation'
printf '\xef\xbb\xbf%s\n%s\n' "$HDR" "$(file_line a.txt)" >"$CASE"
refused "a UTF-8 BOM before the first line" 400 'malformed NDJSON'
body "$HDR" "{\"key\":\"file\",\"value\":{\"$(printf 'k%.0s' $(seq 1 300))\":1,\"path\":\"a.txt\"}}"
refused "an overlong object key" 400 'key too long'
body "$HDR" "{\"key\":\"file\",\"value\":$(printf '[%.0s' $(seq 1 80))$(printf ']%.0s' $(seq 1 80))}"
refused "nesting too deep" 400 'nesting too deep'

# ---- file lines ---------------------------------------------------------------------------
body "$HDR" '{"key":"file","value":{"content":"aGk=","encoding":"base64"}}'
refused "file without path" 400 'missing value.path'
body "$HDR" '{"key":"file","value":{"path":"a.txt","encoding":"base64"}}'
refused "file without content" 400 'no value.content'
body "$HDR" '{"key":"file","value":{"content":5,"path":"a.txt","encoding":"base64"}}'
refused "file whose content is a number" 400 'no value.content'
body "$HDR" '{"key":"file","value":{"content":"@@@@","path":"a.txt","encoding":"base64"}}'
refused "bad base64 (characters)" 400 'not valid base64'
body "$HDR" '{"key":"file","value":{"content":"aGk=aGk=","path":"a.txt","encoding":"base64"}}'
refused "bad base64 (data after padding)" 400 'not valid base64'
body "$HDR" '{"key":"file","value":{"content":"Q","path":"a.txt","encoding":"base64"}}'
refused "bad base64 (a single character)" 400 "not valid base64"
body "$HDR" '{"key":"file","value":{"content":"aGk=","path":"a.txt","encoding":"hex"}}'
refused "bad encoding value" 400 "unknown encoding 'hex'"
/usr/bin/python3 -c "
import json
print(json.dumps({'key': 'header', 'value': {'summary': 's'}}))
print(json.dumps({'key': 'file', 'value': {'path': 'big.txt', 'encoding': 'utf-8', 'content': 'a' * ((1 << 20) + 5)}}))" >"$CASE"
refused "utf-8 content over 1 MiB" 413 'over 1 MiB'

# ---- paths -------------------------------------------------------------------------------------
for p in 'a/../b.txt' '../b.txt' 'build/..' './a.txt' 'a/./b.txt'; do
	body "$HDR" "$(file_line "$p")"
	refused "path '$p'" 400 "invalid path .*'\\.' or '\\.\\.'"
done
body "$HDR" "$(file_line /etc/passwd)"
refused "absolute path" 400 'must be relative'
for p in .git/config sub/.git/hooks/post-update .GIT/config; do
	body "$HDR" "$(file_line "$p")"
	refused "path '$p'" 400 "'\\.git' component"
done
for p in .cache/huggingface/x.txt build/.Cache/x.txt; do
	body "$HDR" "$(file_line "$p")"
	refused "path '$p' (PY refuses .cache, §4.5)" 400 "'\\.cache' component"
done
body "$HDR" "$(file_line 'a\u0000b.txt')"
refused 'NUL byte (\u0000) in a path' 400 'u0000|NUL'
body "$HDR" "$(file_line 'a\u0001b.txt')"
refused 'control character (\u0001) in a path' 400 'control character'
body "$HDR" "$(file_line 'a\\b.txt')"
refused 'backslash in a path' 400 'backslash'
body "$HDR" "$(file_line '')"
refused "empty path" 400 'path is empty'
body "$HDR" "$(file_line 'a//b.txt')"
refused "empty path component" 400 'empty component'
LONG=$(/usr/bin/python3 -c 'print("/".join(["d" * 200] * 6) + "/x.txt")')
EDGE=$(/usr/bin/python3 -c 'p = "/".join(["e" * 200] * 5); print(p + "/" + "x" * (1024 - len(p) - 1))')	# exactly 1024 bytes
body "$HDR" "$(file_line "$LONG")"
refused "a path over 1024 bytes (${#LONG})" 400 'invalid path'
body "$HDR" "$(file_line "${EDGE}y")"
refused "a path of 1025 bytes" 400 'invalid path'
body "$HDR" '{"key":"deletedFile","value":{"path":"../README.md"}}'
refused "deletedFile with '..'" 400 'invalid path'
body "$HDR" '{"key":"deletedFolder","value":{"path":".git/"}}'
refused "deletedFolder .git/" 400 'invalid path'

# ---- lfsFile, deletes ------------------------------------------------------------------------------
MISSING_OID=$(printf 'not uploaded' | sha256sum | cut -d' ' -f1)
body "$HDR" "{\"key\":\"lfsFile\",\"value\":{\"path\":\"w.bin\",\"algo\":\"sha256\",\"oid\":\"$MISSING_OID\",\"size\":12}}"
refused "lfsFile whose oid is not in the store" 422 'not stored'
body "$HDR" '{"key":"lfsFile","value":{"path":"w.bin","algo":"sha256","oid":"xyz-not-hex","size":12}}'
refused "lfsFile with a non-hex oid" 400 '64-hex'
body "$HDR" "{\"key\":\"lfsFile\",\"value\":{\"path\":\"w.bin\",\"algo\":\"sha256\",\"oid\":\"${SO_OID^^}\",\"size\":1500000}}"
refused "lfsFile with an upper-case oid" 400 '64-hex'
body "$HDR" "{\"key\":\"lfsFile\",\"value\":{\"path\":\"w.bin\",\"algo\":\"sha256\",\"oid\":\"$SO_OID\",\"size\":7}}"
refused "lfsFile with the wrong size for a stored oid" 422 'bytes, not 7'
body "$HDR" "{\"key\":\"lfsFile\",\"value\":{\"path\":\"w.bin\",\"algo\":\"md5\",\"oid\":\"$SO_OID\"}}"
refused "lfsFile with algo md5" 400 'algo must be sha256'
body "$HDR" "{\"key\":\"lfsFile\",\"value\":{\"path\":\"w.bin\",\"algo\":\"sha256\",\"oid\":\"$SO_OID\",\"size\":-1}}"
refused "lfsFile with a negative size" 400 'size must be a non-negative integer'
body "$HDR" '{"key":"deletedFile","value":{"path":"no/such/file.py"}}'
refused "deletedFile of a missing file" 404 "doesn't exist: no/such/file.py" EntryNotFound
body "$HDR" '{"key":"deletedFile","value":{"path":"build"}}'
refused "deletedFile of a directory" 404 'differentiate file and folder' EntryNotFound
body "$HDR" '{"key":"deletedFolder","value":{"path":"nope/"}}'
refused "deletedFolder of a missing folder" 404 "doesn't exist" EntryNotFound
body "$HDR" "$(file_line ok.txt)" '{"key":"deletedFile","value":{"path":"gone.txt"}}'
refused "a good file line, then a deletedFile of a missing file" 404 'gone.txt' EntryNotFound

# ---- header values, truncation -------------------------------------------------------------------------
body '{"key":"header","value":{"summary":"s","parentCommit":"zzzzzzz"}}' "$(file_line a.txt)"
refused "parentCommit not hex" 400 'parentCommit'
body '{"key":"header","value":{"summary":"s","parentCommit":"abc"}}' "$(file_line a.txt)"
refused "parentCommit of 3 hex digits" 400 'parentCommit'
body '{"key":"header","value":{"summary":"s","parentCommit":"00000000"}}' "$(file_line a.txt)"
refused "parentCommit that is not the head" 412 'The branch was updated since you opened this page'
body "$HDR" "$(file_line a.txt some-content-long-enough-to-cut)"
head -c -20 "$CASE" >"$CASE.cut" && mv "$CASE.cut" "$CASE"
refused "truncated body (the last line cut in the middle)" 400 'ended inside'
body "$HDR" "$(file_line a.txt)" '{"key":"file","value":{"content":"aGk=","path":"b.txt"'
refused "truncated body (the last line lacks its closing braces)" 400 'ended inside'
# The whole commit is refused, even when the bad line comes after a large good one.
head -c 3000000 /dev/urandom >"$TEST_DIR/big.so"
/usr/bin/python3 "$LIB/commit_body.py" ndjson --file build/big.so="$TEST_DIR/big.so" >"$CASE"
printf '%s\n' "$(file_line ../escape.txt)" >>"$CASE"
LFS_BEFORE=$(lfs_count)
refused "a 3 MB file line followed by a bad path" 400 "line 3: invalid path .*'../escape.txt'"
LFS_AFTER=$(lfs_count)

# ---- revisions ----------------------------------------------------------------------------------------------
body "$HDR" "$(file_line a.txt)"
REV=no-such-branch refused "commit to a missing branch" 404 'no-such-branch' RevisionNotFound
REV=rel1 refused "commit to a tag" 404 'rel1' RevisionNotFound
REV=refs%2Ftags%2Frel1 refused "commit to refs%2Ftags%2Frel1" 404 'rel1' RevisionNotFound
REV=$V1 refused "commit to a commit sha" 404 'Invalid rev' RevisionNotFound
REV=refs%2Fpr%2F7 refused "commit to a PR that does not exist" 404 'refs/pr/7' RevisionNotFound
REV='rel1?create_pr=1' refused "create_pr=1 on a tag" 404 'rel1' RevisionNotFound
REV='no-such-branch?create_pr=1' refused "create_pr=1 on a missing branch" 404 'no-such-branch' RevisionNotFound
body '{"key":"header","value":{"summary":"s","parentCommit":"1234567"}}' "$(file_line a.txt)"
REV='v1?create_pr=1' refused "create_pr=1 with an unknown parentCommit" 404 '1234567' RevisionNotFound

# ---- who may commit ---------------------------------------------------------------------------------------------
body "$HDR" "$(file_line a.txt)"
TOK= refused "anonymous commit" 401 'password|[Aa]uthentication'
TOK=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 refused "commit with an unknown token" 401 'credentials|password'
TOK=$RITA refused "a read-only member" 403 'rights to write'
TOK=$MALLORY refused "a non-member on a public repo" 403 'rights to write'
REV=main TOK=$MALLORY REPO=acme/secret refused "a non-member on a private repo" 404 'Repository not found' RepoNotFound
REV=main REPO=acme/no-such-repo refused "a missing repo" 404 'Repository not found' RepoNotFound
TOK= REV='v1?create_pr=1' refused "anonymous create_pr=1" 401 'password|[Aa]uthentication'
# A big body refused before it is read: the client still gets the answer.
/usr/bin/python3 "$LIB/commit_body.py" ndjson --file build/big.so="$TEST_DIR/big.so" >"$TEST_DIR/bigcase.ndjson"
cp "$TEST_DIR/bigcase.ndjson" "$CASE"
TOK=$RITA refused "a read-only member sending a 4 MB body" 403 'rights to write'
RES=$(/usr/bin/python3 "$LIB/post_body.py" "$KHUB_URL/api/kernels/acme/relu/commit/v1" "$CASE" "$RITA")
like "$RES" '^status=403 ' "the same without Expect: 100-continue (as hf-hub sends it): the 403 arrives"

# ---- preupload ------------------------------------------------------------------------------------------------------
preupload() {	# preupload JSON [TOKEN|-] -> $STATUS, $B
	local tok=${2-$BOB} auth=()
	[ -n "$tok" ] && auth=(-H "Authorization: Bearer $tok")
	STATUS=$(curl -s -X POST -D "$H" -o "$B" -w '%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' \
		-d "$1" "$KHUB_URL/api/kernels/acme/relu/preupload/${PREV:-v1}")
}
for p in ../x.txt a/./b.txt /abs.txt .git/config '' 'a\u0001b'; do
	preupload "{\"files\":[{\"path\":\"ok.txt\",\"size\":2,\"sample\":\"aGk=\"},{\"path\":\"$p\",\"size\":2,\"sample\":\"aGk=\"}]}"
	ok $([ "$STATUS" = 400 ] && error_matches "files\\[1\\]: invalid path"; echo $?) "preupload with path '$p' → 400 naming files[1]"
done
preupload '{"files":[{"path":"a\u0000b","size":2,"sample":"aGk="}]}'
ok $([ "$STATUS" = 400 ] && error_matches 'u0000'; echo $?) "preupload with a NUL in a path → 400"
preupload "{\"files\":[{\"path\":\"$LONG\",\"size\":2}]}"
ok $([ "$STATUS" = 400 ] && error_matches 'longer than 1024'; echo $?) "preupload with a path over 1024 bytes → 400"
preupload '{"files":[{"path":"a.txt","size":-5}]}'
ok $([ "$STATUS" = 400 ] && error_matches 'size'; echo $?) "preupload with a negative size → 400"
preupload '{"nofiles":true}'
ok $([ "$STATUS" = 400 ] && error_matches 'files'; echo $?) "preupload without files → 400"
preupload 'not json'
ok $([ "$STATUS" = 400 ] && error_matches 'JSON'; echo $?) "preupload with a body that is not JSON → 400"
preupload '{"files":[{"path":"a.txt","size":2}]}' ''
is "$STATUS" 401 "anonymous preupload → 401"
preupload '{"files":[{"path":"a.txt","size":2}]}' "$RITA"
is "$STATUS" 403 "preupload by a read-only member → 403"
PREV=no-such-branch preupload '{"files":[{"path":"a.txt","size":2}]}'
is "$STATUS/$(header X-Error-Code)" "404/RevisionNotFound" "preupload to a missing branch → 404 RevisionNotFound"

# ---- positive controls: the same endpoint takes good bodies -------------------------------------------------------------
printf '{"key":"header","value":{"summary":"JS style"}}\n%s' "$(file_line js.txt)" >"$CASE"
post
is "$STATUS" 200 "a JS-style body (no description, no trailing newline) → 200"
body "$HDR" "$(file_line 'build/torch-cpu/a b+c (1).py')" "{\"key\":\"file\",\"value\":{\"content\":\"$(b64 é)\",\"path\":\"build/torch-cpu/donn\u00e9es.py\",\"encoding\":\"base64\"}}"
post
is "$STATUS" 200 "spaces, '+', '()' and \\u00e9 in paths → 200"
is "$(git --git-dir="$GITDIR" ls-tree --name-only -z v1 build/torch-cpu/ | tr '\0' '\n' | grep -c -e 'a b+c (1).py' -e 'données.py')" 2 \
	"and both are in the tree under their decoded names"
body "$HDR" "$(file_line "$EDGE")"
post
is "$STATUS/${#EDGE}" "200/1024" "a path of exactly 1024 bytes → 200"
FSCK=$(git --git-dir="$GITDIR" fsck --strict --no-dangling 2>&1)
is "$?/$FSCK" "0/" "git fsck --strict clean"

ok $([ "$LFS_AFTER" = "$LFS_BEFORE" ]; echo $?) "a refused commit stores no LFS object ($LFS_BEFORE → $LFS_AFTER)"

# Refused commits leave no git objects either (security issue, item 6): five
# 4 MB text files, then a bad sixth line; and a whole commit refused by its
# parentCommit. The objects stay in memory until the commit is accepted.
objects() { git --git-dir="$GITDIR" count-objects -v | awk '/^(count|in-pack|size-pack):/ {printf "%s ", $2}'; }
/usr/bin/python3 - "$CASE" "$HDR" <<'PY'
import base64, json, sys
with open(sys.argv[1], "w") as f:
    f.write(sys.argv[2] + "\n")
    for i in range(5):
        text = (f"line {i} " * 500000)[:4 << 20].encode()
        f.write(json.dumps({"key": "file", "value": {"path": f"big{i}.txt", "content": base64.b64encode(text).decode(),
                                                     "encoding": "base64"}}) + "\n")
    f.write('{"key":"file","value":{"path":"../escape","content":"aGk=","encoding":"base64"}}\n')
PY
OBJ_BEFORE=$(objects)
refused "five 4 MB files then a bad line 6" 400 'invalid path'
is "$(objects)" "$OBJ_BEFORE" "the refused commit left no git object behind (count, in-pack, size-pack)"
body "{\"key\":\"header\",\"value\":{\"summary\":\"stale\",\"parentCommit\":\"$V1\"}}" "$(file_line stale-parent.txt 'never stored 4f1c')"
OBJ_BEFORE=$(objects)
post
is "$STATUS" 412 "a commit on a stale parentCommit → 412"
is "$(objects)" "$OBJ_BEFORE" "and its objects were never stored"
check "its blob is not in the repo" -- bash -c "! git --git-dir='$GITDIR' cat-file -e \$(printf 'never stored 4f1c' | git hash-object --stdin)"

# ---- known bugs (TODO: see the t0062 section of the QA report) ------------------------------------------------------------
body "$HDR" "$(file_line "$LONG")"
post
ok $(error_matches 'longer than 1024'; echo $?) "the error for a long path says why"
body '{"key":"header","value":{"summary":"s","parentCommit":12345}}' "$(file_line num-parent.txt)"
BEFORE=$(snapshot); post; AFTER=$(snapshot)
ok $([ "$STATUS" = 400 ] && [ "$BEFORE" = "$AFTER" ]; echo $?) "parentCommit as a JSON number → 400, nothing changed (got $STATUS)"
printf '%s\n{"key":"file","value":{"content":"aGk=","path":"bad\xff\xfename.txt","encoding":"base64"}}\n' "$HDR" >"$CASE"
BEFORE=$(snapshot); post; AFTER=$(snapshot)
ok $([ "$STATUS" = 400 ] && [ "$BEFORE" = "$AFTER" ]; echo $?) "a path that is not UTF-8 → 400, nothing changed (got $STATUS)"
curl -s "$KHUB_URL/api/kernels/acme/relu/tree/v1" -o "$B"
ok $(/usr/bin/python3 -c "import json,sys; json.loads(open('$B','rb').read())" 2>/dev/null; echo $?) "the tree of v1 is still valid JSON"
# Spellings of .git that git itself refuses (fsck hasDotgit, core.protectNTFS
# / core.protectHFS): .git + trailing dot or space, the 8.3 name git~1, and
# .git with Unicode characters HFS+ ignores (U+200C, U+200E).
for p in '.git./config' '.git /config' 'git~1/config' 'GIT~1/HEAD'; do
	body "$HDR" "$(file_line "$p")"
	refused "path '$p'" 400 '.'
	ok $(error_matches "'\\.git'"; echo $?) "  path '$p': the error says it is a .git spelling"
done
for p in '.g\u200cit/config' '.git\u200e/hooks/x'; do
	body "$HDR" "$(file_line "$p")"
	BEFORE=$(snapshot); post; AFTER=$(snapshot)
	ok $([ "$STATUS" = 400 ] && [ "$BEFORE" = "$AFTER" ]; echo $?) "path '$p' (.git on HFS+) → 400, nothing changed (got $STATUS)"
done
# A read-only member may open a PR (§4.6) and kernel-builder then commits its
# later batches to refs/pr/N (§7.7).
body "$HDR" "$(file_line rita-1.txt)"
REV='v1?create_pr=1' TOK=$RITA post
is "$STATUS" 200 "a read-only member opens a PR with create_pr=1"
PR=$(/usr/bin/python3 -c "import json; print(json.load(open('$B'))['prNum'])" 2>/dev/null)
PREV="refs%2Fpr%2F$PR" preupload '{"files":[{"path":"rita-2.txt","size":5,"sample":"aGVsbG8="}]}' "$RITA"
is "$STATUS" 200 "she preuploads batch 2 to refs/pr/$PR"
body "$HDR" "$(file_line rita-2.txt)"
REV="refs%2Fpr%2F$PR" TOK=$RITA post
is "$STATUS" 200 "she commits batch 2 to refs/pr/$PR"

# ---- commit_memory_mb: a commit whose regular files outgrow it is refused ---------------
# (they are held in memory until the commit is accepted; big files go as LFS)
khub_stop
KHUB_COMMIT_MEMORY_MB=1 khub_start
big_line() {	# big_line PATH BYTES: a regular file of about BYTES of random text (text
	# under 10 MB stays a git blob), base64
	printf '{"key":"file","value":{"content":"%s","path":"%s","encoding":"base64"}}' \
		"$(head -c $(($2 * 3 / 4)) /dev/urandom | base64 -w 76 | base64 -w0)" "$1"
}
objects() { find "$GITDIR/objects" -type f | wc -l; }
body "$HDR" "$(big_line notes/a.txt 400000)" "$(big_line notes/b.txt 400000)" "$(big_line notes/c.txt 400000)"
BEFORE=$(snapshot); OBJ_BEFORE=$(objects); post; AFTER=$(snapshot)
is "$STATUS" 413 "commit_memory_mb=1: three 400 kB regular files in one commit → 413"
ok $(error_matches 'quarantine limit.*split it into several commits'; echo $?) "  the error says to split the commit"
ok $([ "$BEFORE" = "$AFTER" ]; echo $?) "  no ref moved"
is "$(objects)" "$OBJ_BEFORE" "  no object reached the repo"
body "$HDR" "$(big_line notes/a.txt 400000)"
post
is "$STATUS" 200 "one 400 kB file under the same limit commits"
curl -s "$KHUB_URL/api/kernels/acme/relu/tree/v1/notes" -o "$B"
is "$(/usr/bin/python3 -c "import json; print([e['path'] for e in json.load(open('$B'))])")" "['notes/a.txt']" \
	"  and is the only new file on v1"

is "$(server_and_sanitizer_logs | grep -c -e 'ERROR: AddressSanitizer' -e 'runtime error:')" 0 "no sanitizer report in the server log"
done_testing
