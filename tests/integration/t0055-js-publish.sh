#!/bin/bash
# t0055-js-publish.sh -- publish kernels with the real @huggingface/hub client
# (tests/js/publish_client.mjs) as a write member of the org: createRepo
# (public and private), uploadFiles of a kernel tree with several variants,
# a nested directory, an empty file, a binary without an LFS extension and a
# 20 MiB weights.bin (preupload -> LFS batch -> PUT), createBranch v1, a
# second commit with deletions (commit + deleteFile), deleteBranch and
# deleteRepo. Between the client's phases the server side is checked here:
# the LFS store holds the objects under their sha256, git holds pointers,
# the read API (curl) lists and serves every file byte-identically with the
# tree's lfs/oid rules, the private repo stays invisible anonymously, and a
# git clone + git lfs pull gives the same bytes.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

if ! command -v node >/dev/null 2>&1 || [ ! -d "$KHUB_SRC/tests/js/node_modules/@huggingface/hub" ]; then
	echo "1..0 # SKIP node or tests/js/node_modules missing"
	exit 0
fi
khub_setup

khub admin org create acme >/dev/null 2>&1
for u in alice bob; do khub admin user create $u >/dev/null 2>&1; done
khub admin member set acme alice admin >/dev/null 2>&1
khub admin member set acme bob write >/dev/null 2>&1
BOB=$(khub admin token create bob --scope write 2>/dev/null | tail -n 1)
ALICE=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
khub_start
like "$BOB" '^hf_[A-Za-z0-9]+$' "write token for bob (write member of acme)"

REPOS=$KHUB_DATA_DIR/repos
LFS_DIR=$KHUB_DATA_DIR/lfs/objects
STATE=$TEST_DIR/state.json
CUDA=build/torch211-cxx11-cu128-x86_64-linux
CU126=build/torch28-cxx11-cu126-x86_64-linux
WEIGHTS=$CUDA/relu/weights.bin

# ---- the trees: SRC is published first (and stays on v1), SRC2 is main after
# the update (deletions, a changed README, new files) --------------------------------
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
head -c $((20 * 1024 * 1024)) /dev/urandom >"$SRC/$WEIGHTS"
mkdir -p "$SRC/$CU126/relu"
head -c 300000 /dev/urandom >"$SRC/$CU126/_relu_cuda.abi3.so"
printf 'from ._ops import ops\n' >"$SRC/$CU126/__init__.py"
printf '{"id":"relu","backend":{"type":"cuda"}}\n' >"$SRC/$CU126/metadata.json"
printf 'def f():\n    return 2\n' >"$SRC/$CU126/relu/layers.py"
: >"$SRC/build/torch-cpu/py.typed"						# empty: regular
printf 'BIN\0\1\2\3 not an LFS extension\n' >"$SRC/build/torch-cpu/blob.dat"	# NUL bytes: LFS
SRC2=$TEST_DIR/src2
cp -a "$SRC" "$SRC2"
rm -rf "$SRC2/$CUDA/relu/sub" "$SRC2/build/torch-cpu/blob.dat"
rm -rf "$SRC2/$CU126"
printf '# relu\n\nA test kernel, second release.\n' >"$SRC2/README.md"
head -c 65536 /dev/urandom >"$SRC2/build/torch-cpu/extra.bin"
printf 'VERSION = 2\n' >"$SRC2/build/torch-cpu/_version.py"

# ---- helpers ----------------------------------------------------------------------
H=$TEST_DIR/headers
B=$TEST_DIR/body
api() {	# api METHOD PATH TOKEN -> $STATUS, headers in $H, body in $B
	local args=(-s -X "$1" -D "$H" -o "$B" -w '%{http_code}')
	[ -n "$3" ] && args+=(-H "Authorization: Bearer $3")
	STATUS=$(curl "${args[@]}" "$KHUB_URL$2")
}
code() { echo "$STATUS/$(header X-Error-Code)"; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }

# run_js PHASE: run the client, fold its TAP into ours
run_js() {
	local out rc results=0 plan= line
	out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" TOKEN="$BOB" ADMIN_TOKEN="$ALICE" NS=acme SRC_DIR="$SRC" \
		SRC2_DIR="$SRC2" STATE_FILE="$STATE" PHASE="$1" node tests/js/publish_client.mjs 2>&1)
	rc=$?
	while IFS= read -r line; do
		if [[ "$line" =~ ^ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1)); ok 0 "js $1: ${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^not\ ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1)); ok 1 "js $1: ${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^1\.\.([0-9]+) ]]; then
			plan=${BASH_REMATCH[1]}
		elif [ -n "$line" ]; then
			echo "# node: $line"
		fi
	done <<<"$out"
	is "$plan" "$results" "js $1: node script ran its whole plan"
	[ "$rc" -ne 0 ] && diag "node exited with status $rc"
}

# check_tree REPO REV LOCAL TOKEN: the recursive tree through curl against a
# local directory: every file with its size; regular files without `lfs` and
# oid = git blob sha1; LFS files with lfs.oid = sha256, lfs.size, pointerSize
# and oid = git sha1 of the pointer; directories; nothing else but .gitattributes.
cat >"$TEST_DIR/check_tree.py" <<'PY'
import hashlib, json, os, sys
tree, local = json.load(open(sys.argv[1])), sys.argv[2]
def blob_sha1(b): return hashlib.sha1(b"blob %d\0" % len(b) + b).hexdigest()
def is_lfs(path, b):
    if not b: return False
    if len(b) > 10 * 1024 * 1024 or path.endswith((".so", ".bin")): return True
    return b"\0" in b[:8000]
entries = {e["path"]: e for e in tree}
problems, files, dirs, nlfs = [], {}, set(), 0
for root, _, names in os.walk(local):
    for n in names:
        full = os.path.join(root, n)
        rel = os.path.relpath(full, local)
        files[rel] = open(full, "rb").read()
        parts = rel.split("/")
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
for rel, b in sorted(files.items()):
    e = entries.get(rel)
    if not e:
        problems.append(f"{rel}: not listed"); continue
    if e.get("type") != "file" or e.get("size") != len(b):
        problems.append(f"{rel}: type {e.get('type')} size {e.get('size')}, want file {len(b)}")
    if "xetHash" in e: problems.append(f"{rel}: xetHash")
    if is_lfs(rel, b):
        nlfs += 1
        oid = hashlib.sha256(b).hexdigest()
        ptr = f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(b)}\n".encode()
        want = {"oid": oid, "size": len(b), "pointerSize": len(ptr)}
        if e.get("lfs") != want: problems.append(f"{rel}: lfs {e.get('lfs')}, want {want}")
        if e.get("oid") != blob_sha1(ptr): problems.append(f"{rel}: oid {e.get('oid')}, want sha1 of the pointer")
    else:
        if "lfs" in e: problems.append(f"{rel}: unexpected lfs {e['lfs']}")
        if e.get("oid") != blob_sha1(b): problems.append(f"{rel}: oid {e.get('oid')}, want git blob sha1")
for d in dirs:
    e = entries.get(d)
    if not e or e.get("type") != "directory": problems.append(f"{d}: directory entry {e}")
for p in entries:
    if p not in files and p not in dirs and p != ".gitattributes": problems.append(f"extra {p}")
for p in problems: print("#   " + p)
print(f"# {len(files)} files, {nlfs} LFS")
sys.exit(1 if problems else 0)
PY
check_tree() {
	local repo=$1 rev=$2 local=$3 token=$4 out
	api GET "/api/kernels/$repo/tree/$rev?recursive=true&expand=false" "$token"
	if [ "$STATUS" != 200 ]; then
		ok 1 "curl tree $repo@$rev (status $STATUS)"
		return
	fi
	out=$(/usr/bin/python3 "$TEST_DIR/check_tree.py" "$B" "$local" 2>&1)
	ok $? "curl tree $repo@$rev: files, sizes and lfs/oid fields follow the rules"
	echo "$out"
}
# check_downloads REPO REV LOCAL TOKEN: curl resolve of every file, sha256
check_downloads() {
	local repo=$1 rev=$2 local=$3 token=$4 bad=0 n=0 rel auth=()
	[ -n "$token" ] && auth=(-H "Authorization: Bearer $token")
	while IFS= read -r rel; do
		n=$((n + 1))
		curl -sfL "${auth[@]}" -o "$TEST_DIR/dl" "$KHUB_URL/kernels/$repo/resolve/$rev/$rel" &&
			[ "$(sha256 "$TEST_DIR/dl")" = "$(sha256 "$local/$rel")" ] || { bad=$((bad + 1)); diag "  differs: $rel"; }
	done < <(cd "$local" && find . -type f | sed 's|^\./||' | sort)
	ok $bad "curl resolve $repo@$rev: all $n files byte-identical (sha256)"
}

# ---- phase 1: createRepo + uploadFiles ----------------------------------------------
T0=$SECONDS
run_js publish
diag "publish phase: $((SECONDS - T0)) s"

OID=$(sha256 "$SRC/$WEIGHTS")
OBJ=$(lfs_object_file "$OID")
check "weights.bin (20 MiB) is in the LFS store under its sha256" -- test -f "$OBJ"
is "$(stat -c %s "$OBJ" 2>/dev/null)/$(sha256 "$OBJ" 2>/dev/null)" "$((20 * 1024 * 1024))/$OID" "the stored object has the right size and content"
missing=0
for f in "$CUDA/_relu_cuda.abi3.so" "$CU126/_relu_cuda.abi3.so" build/torch-cpu/blob.dat; do
	o=$(sha256 "$SRC/$f")
	[ -f "$(lfs_object_file "$o")" ] || { missing=$((missing + 1)); diag "  not in the store: $f"; }
done
is "$missing" 0 "the .so files and the binary blob.dat are in the LFS store too"
like "$(/usr/bin/python3 -c "import json; print(sorted(json.load(open('$STATE')).get('lfsSent', [])))")" "weights.bin" \
	"the client sent weights.bin as an lfsFile line"
GITDIR=$REPOS/kernels/acme/js-pub.git
POINTER=$(printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %s\n' "$OID" $((20 * 1024 * 1024)))
is "$(git --git-dir="$GITDIR" cat-file -p "main:$WEIGHTS")" "$POINTER" "git holds the LFS pointer for weights.bin"
PTR_SHA1=$(printf '%s\n' "$POINTER" | git hash-object --stdin)
STATUS=$(curl -s -o "$B" -w '%{http_code}' -H 'Content-Type: application/json' \
	--data "{\"paths\":[\"$WEIGHTS\"],\"expand\":true}" "$KHUB_URL/api/kernels/acme/js-pub/paths-info/main")
is "$STATUS/$(/usr/bin/python3 -c "import json; e=json.load(open('$B'))[0]; print(e['oid'], e['lfs']['oid'], e['size'], e['lfs']['pointerSize'])")" \
	"200/$PTR_SHA1 $OID $((20 * 1024 * 1024)) $((${#POINTER} + 1))" \
	"paths-info weights.bin: oid = git sha1 of the pointer, lfs.oid = sha256, size = real size, pointerSize"
like "$(curl -s "$KHUB_URL/kernels/acme/js-pub/resolve/main/.gitattributes")" 'blob\.dat filter=lfs' \
	".gitattributes now tracks blob.dat (LFS by content, no matching rule before)"
is "$(git --git-dir="$GITDIR" log --format=%s -1 main)" "Add 2 files" "commit title as the client sent it (2 entries: README.md + build/)"

check_tree acme/js-pub main "$SRC" ""
check_downloads acme/js-pub main "$SRC" ""
check_tree acme/js-priv main "$SRC" "$BOB"
check_downloads acme/js-priv main "$SRC" "$BOB"
for p in "" "/refs" "/revision/main" "/tree/main" "/commits/main"; do
	api GET "/api/kernels/acme/js-priv$p" ""
	is "$(code)" "401/RepoNotFound" "private repo, anonymous GET /api/kernels/acme/js-priv$p: 401 RepoNotFound"
done
api GET "/kernels/acme/js-priv/resolve/main/$WEIGHTS" ""
is "$(code)" "401/RepoNotFound" "private repo, anonymous resolve of weights.bin: 401 RepoNotFound"
api GET "/kernels/acme/js-priv/resolve/main/README.md" "hf_notarealtokennotarealtokennotarea"
is "$(code)" "401/" "private repo, resolve with a bogus token: 401 (invalid credentials)"

# git clone + git lfs pull: the same bytes
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
unset GIT_DIR GIT_WORK_TREE GIT_CONFIG_GLOBAL GIT_LFS_SKIP_SMUDGE
mkdir -p "$HOME"
if git lfs version >/dev/null 2>&1; then
	git config --global user.name t && git config --global user.email t@example.com
	git lfs install >/dev/null 2>&1
	CLONE=$TEST_DIR/clone
	GIT_LFS_SKIP_SMUDGE=1 git clone -q "$KHUB_URL/kernels/acme/js-pub" "$CLONE" >/dev/null 2>&1
	ok $? "git clone $KHUB_URL/kernels/acme/js-pub"
	(cd "$CLONE" && git lfs pull >/dev/null 2>&1)
	ok $? "git lfs pull"
	check "clone + lfs pull: the same bytes as published" -- diff -r -x .git -x .gitattributes "$SRC" "$CLONE"
	is "$(cd "$CLONE" && git rev-parse HEAD)" "$(/usr/bin/python3 -c "import json; print(json.load(open('$STATE'))['pubCommit'])")" \
		"the clone's HEAD is the commitOid the client got"
	check "anonymous clone of the private repo fails" -- bash -c "! git clone -q '$KHUB_URL/kernels/acme/js-priv' '$TEST_DIR/nope'"
	PCLONE=$TEST_DIR/pclone
	git clone -q "http://bob:$BOB@127.0.0.1:$KHUB_PORT/kernels/acme/js-priv" "$PCLONE" >/dev/null 2>&1
	ok $? "clone of the private repo with the token (smudged through LFS)"
	check "private clone: the same bytes" -- diff -r -x .git -x .gitattributes "$SRC" "$PCLONE"
else
	diag "git-lfs missing: clone checks skipped"
fi

# ---- phase 2: createBranch v1, a commit with deletions, deleteFile --------------------
T0=$SECONDS
run_js update
diag "update phase: $((SECONDS - T0)) s"
check_tree acme/js-pub main "$SRC2" ""
check_downloads acme/js-pub main "$SRC2" ""
check_tree acme/js-pub v1 "$SRC" ""
check_downloads acme/js-pub v1 "$SRC" ""
api GET "/kernels/acme/js-pub/resolve/main/build/torch-cpu/blob.dat" ""
is "$(code)" "404/EntryNotFound" "a deleted file: resolve on main 404 EntryNotFound"
api GET "/api/kernels/acme/js-pub/tree/main/$CU126" ""
is "$(code)" "404/EntryNotFound" "a variant whose files were all deleted is gone from the tree"
api GET "/api/kernels/acme/js-pub/commits/main" ""
is "$STATUS/$(header X-Total-Count)" "200/4" "main: initial commit, upload, update, deleteFile"
is "$(/usr/bin/python3 -c "import json; print([c['title'] for c in json.load(open('$B'))][:3])")" \
	"['Delete build/torch28-cxx11-cu126-x86_64-linux/relu/layers.py', 'Update variants', 'Add 2 files']" \
	"commit titles, newest first"
if [ -d "${CLONE:-/nonexistent}" ]; then
	(cd "$CLONE" && git pull -q >/dev/null 2>&1 && git lfs pull >/dev/null 2>&1)
	ok $? "git pull + git lfs pull in the clone"
	out=$(diff -r -x .git -x .gitattributes "$SRC2" "$CLONE" 2>&1)
	ok $? "the clone now matches the updated tree"
	[ -n "$out" ] && echo "$out" | head -5 | sed 's/^/#   /'
fi
check "git fsck of the server's repo" -- git --git-dir="$GITDIR" fsck --no-progress

# ---- phase 3: deleteBranch, deleteRepo ----------------------------------------------------
run_js cleanup
api GET /api/kernels/acme/js-pub "$BOB"
is "$(code)" "404/RepoNotFound" "deleted public repo: 404 RepoNotFound"
api GET /api/kernels/acme/js-priv ""
is "$(code)" "401/RepoNotFound" "deleted private repo, anonymous: 401 RepoNotFound"
check "the deleted repos went to the trash" -- bash -c "ls -d '$KHUB_DATA_DIR'/repos/.trash/kernels/acme/js-pub.git.* '$KHUB_DATA_DIR'/repos/.trash/kernels/acme/js-priv.git.*"

server_and_sanitizer_logs | grep -E 'ERROR|runtime error|AddressSanitizer' | head -5 | sed 's/^/# server: /'
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"

done_testing
