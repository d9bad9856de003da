#!/bin/bash
# t0070-git.sh -- git smart HTTP and git-lfs against a real server with
# Debian's git and git-lfs: clone (…/name and …/name.git) + git lfs pull,
# byte-identical to the API; private repos; push of a new branch read back
# through refs/revision/tree/resolve/commits and the JS client; LFS upload
# on push; refused pushes (read-only, anonymous, bad token, missing or
# mis-sized LFS objects, forbidden paths, deleting main) leave refs alone;
# branch deletion; incremental fetch size; git fsck; the audit log.
. "$(dirname "$0")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
git lfs version >/dev/null 2>&1 || { echo "1..0 # SKIP git-lfs not installed"; exit 0; }

khub_setup

skip() { TAP_COUNT=$((TAP_COUNT + 1)); echo "ok $TAP_COUNT # SKIP $*"; }
# A failing "# TODO" test is an expected failure: it must not fail the script
# (the lib's ok counts it; tap-driver would then report ERROR).
ok() {
	local status=$1; shift
	TAP_COUNT=$((TAP_COUNT + 1))
	if [ "$status" -eq 0 ]; then
		echo "ok $TAP_COUNT - $*"
	else
		[[ "$*" == *"# TODO"* ]] || TAP_FAILED=$((TAP_FAILED + 1))
		echo "not ok $TAP_COUNT - $*"
	fi
}

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
SO_FILE=build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so
V1=$(khub import "$SRC" --repo acme/relu --branch v1 2>>"$TEST_DIR/import.log")
SRC2=$TEST_DIR/src2
make_kernel_tree "$SRC2" secret
SECRET_SO=build/torch211-cxx11-cu128-x86_64-linux/_secret_cuda.abi3.so
khub import "$SRC2" --repo acme/secret --branch main --private >/dev/null 2>>"$TEST_DIR/import.log"
khub admin user create bob >/dev/null 2>&1
khub admin member set acme bob write >/dev/null 2>&1
BOB=$(khub admin token create bob --scope write 2>/dev/null | tail -n 1)
khub admin user create rita >/dev/null 2>&1
khub admin member set acme rita read >/dev/null 2>&1
RITA=$(khub admin token create rita --scope read 2>/dev/null | tail -n 1)
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
LFS_DIR=$KHUB_DATA_DIR/lfs/objects
khub_start

like "$V1" '^[0-9a-f]{40}$' "import acme/relu v1"
like "$BOB/$RITA" '^hf_[A-Za-z0-9]+/hf_[A-Za-z0-9]+$' "write token for bob, read token for rita"

# An isolated git: no system or user config but ours, never a prompt.
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
unset GIT_DIR GIT_WORK_TREE GIT_CONFIG_GLOBAL GIT_LFS_SKIP_SMUDGE GIT_LFS_SKIP_PUSH
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
git config --global init.defaultBranch main
git config --global advice.detachedHead false
git lfs install >/dev/null 2>&1
check "git lfs install (isolated HOME)" -- git config --global filter.lfs.smudge

HOSTPORT=127.0.0.1:$KHUB_PORT
ANON=$KHUB_URL/kernels/acme/relu
AS_BOB=http://bob:$BOB@$HOSTPORT/kernels/acme/relu
AS_RITA=http://rita:$RITA@$HOSTPORT/kernels/acme/relu
W=$TEST_DIR/work
mkdir -p "$W"

H=$TEST_DIR/headers
B=$TEST_DIR/body	# for api, header (tests/lib/khub-test.sh)
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print($1)"; }
branch_sha() {	# branch_sha REPO BRANCH: targetCommit from the refs API ('' if absent)
	api GET "$KHUB_URL/api/kernels/$1/refs" "${@:3}"
	json "([b['targetCommit'] for b in d['branches'] if b['name']=='$2'] or [''])[0]"
}
server_refs() { git --git-dir="$GITDIR" for-each-ref --format='%(refname) %(objectname)'; }
lfs_path() { lfs_object_file "$1"; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }
log_lines() { wc -l <"$TEST_DIR/server.log"; }
log_since() {	# lines of the access log after line $1 (waits for the last ones)
	sleep 0.3
	tail -n +"$(($1 + 1))" "$TEST_DIR/server.log"
}

# Every file a checkout has must download byte-identical through resolve.
files_match_api() {	# files_match_api DIR REPO REV [curl args]: prints "checked/mismatched"
	local dir=$1 repo=$2 rev=$3 f n=0 bad=0; shift 3
	while IFS= read -r f; do
		n=$((n + 1))
		if [ "$(curl -s "$@" "$KHUB_URL/kernels/$repo/resolve/$rev/$f" | sha256sum | cut -d' ' -f1)" != "$(sha256 "$dir/$f")" ]; then
			bad=$((bad + 1))
			echo "# differs: $f" >&2
		fi
	done < <(git -C "$dir" ls-files)
	echo "$n/$bad"
}

# ---- clone a public repo: …/name without LFS smudge, then git lfs pull ----------
GIT_LFS_SKIP_SMUDGE=1 git clone -q -b v1 "$ANON" "$W/plain" >"$TEST_DIR/err" 2>&1
ok $? "git clone $ANON (anonymous, public)"
like "$(head -1 "$W/plain/$SO_FILE")" '^version https://git-lfs.github.com/spec/v1$' ".so is an LFS pointer before git lfs pull"
(cd "$W/plain" && git lfs pull) >"$TEST_DIR/err" 2>&1
ok $? "git lfs pull"
is "$(sha256 "$W/plain/$SO_FILE")" "$(sha256 "$SRC/$SO_FILE")" "git lfs pull fetched the real .so"
N=$(cd "$SRC" && find . -type f | wc -l)
is "$(files_match_api "$W/plain" acme/relu v1)" "$((N + 1))/0" "every file of the clone ($N + .gitattributes) = API resolve (sha256)"
is "$(git -C "$W/plain" rev-parse HEAD)" "$V1" "clone HEAD is the imported v1 commit"

# ---- …/name.git with LFS smudge on checkout --------------------------------------
L0=$(log_lines)
git clone -q -b v1 "$ANON.git" "$W/dotgit" >"$TEST_DIR/err" 2>&1
ok $? "git clone $ANON.git (LFS smudged on checkout)"
check "both clones have identical files" -- diff -r -x .git "$W/plain" "$W/dotgit"
is "$(files_match_api "$W/dotgit" acme/relu v1)" "$((N + 1))/0" "every file of the .git clone = API resolve"
BATCH=$(log_since "$L0" | grep -c 'POST /kernels/acme/relu\.git/info/lfs/objects/batch 200 ')
ok $([ "$BATCH" -ge 1 ]; echo $?) "git-lfs used {E}/kernels/acme/relu.git/info/lfs/objects/batch ($BATCH batch)"
check "no git route answered 404 or 5xx" -- bash -c "! grep -E '/kernels/acme/relu(\.git)?/(info/refs|git-upload-pack|info/lfs/objects/batch) (404|5[0-9][0-9]) ' '$TEST_DIR/server.log'"

# ---- commit shas agree between git and the API -------------------------------------
is "$(branch_sha acme/relu v1)" "$(git -C "$W/plain" rev-parse refs/remotes/origin/v1)" "git's origin/v1 = refs targetCommit"
is "$(branch_sha acme/relu main)" "$(git -C "$W/plain" rev-parse refs/remotes/origin/main)" "git's origin/main = refs targetCommit"
api GET "$KHUB_URL/api/kernels/acme/relu/revision/v1"
is "$(json 'd["sha"]')" "$V1" "revision/v1 sha = git"
api HEAD "$KHUB_URL/kernels/acme/relu/resolve/v1/README.md"
is "$(header X-Repo-Commit)" "$V1" "resolve HEAD X-Repo-Commit = git"

# ---- private repos ------------------------------------------------------------------
git clone -q "$KHUB_URL/kernels/acme/secret" "$W/secret-anon" >"$TEST_DIR/err" 2>&1
RC=$?
ok $([ $RC -ne 0 ]; echo $?) "anonymous clone of a private repo fails"
like "$(cat "$TEST_DIR/err")" "terminal prompts disabled|401|Authentication" "… because credentials were asked for (401)"
git clone -q "http://bob:$BOB@$HOSTPORT/kernels/acme/secret" "$W/secret-bob" >"$TEST_DIR/err" 2>&1
ok $? "clone of a private repo with the token in the URL"
is "$(sha256 "$W/secret-bob/$SECRET_SO")" "$(sha256 "$SRC2/$SECRET_SO")" "… its LFS file came through (authenticated batch)"
printf 'http://rita:%s@%s\n' "$RITA" "$HOSTPORT" >"$TEST_DIR/credentials"
git -c credential.helper="store --file=$TEST_DIR/credentials" clone -q "$KHUB_URL/kernels/acme/secret.git" "$W/secret-rita" \
	>"$TEST_DIR/err" 2>&1
ok $? "clone of a private repo through a credential helper (read-only member)"
is "$(files_match_api "$W/secret-rita" acme/secret main -u "rita:$RITA")" "$((N + 1))/0" \
	"every file of the private clone = API resolve with the token"

# ---- push a new branch v2 with a new LFS file ------------------------------------------
git clone -q -b v1 "$AS_BOB" "$W/bob" >"$TEST_DIR/err" 2>&1
ok $? "bob clones with his token in the URL"
cd "$W/bob" || bail "no clone"
git checkout -q -b v2
printf '\nSecond version.\n' >>README.md
head -c 300000 /dev/urandom >build/torch-cpu/_extra.abi3.so
mkdir -p docs && printf 'notes\n' >docs/notes.txt
git add -A && git commit -q -m "v2: extra .so and notes"
NEW_SO=build/torch-cpu/_extra.abi3.so
NEW_OID=$(sha256 "$NEW_SO")
like "$(git cat-file -p "HEAD:$NEW_SO")" "oid sha256:$NEW_OID" "the new .so is committed as an LFS pointer"
L0=$(log_lines)
git push -q origin v2 >"$TEST_DIR/err" 2>&1
ok $? "git push origin v2 (new branch)" || sed 's/^/#   /' "$TEST_DIR/err"
V2=$(git rev-parse HEAD)
SINCE=$(log_since "$L0")
like "$SINCE" "PUT /api/lfs/upload/[^ ]*/$NEW_OID/300000/[0-9]+ 200 " "git-lfs uploaded the new object through the signed URL"
like "$SINCE" "POST /kernels/acme/relu(\.git)?/git-receive-pack 200 .* user=bob" "receive-pack ran as bob"
check "the object is in the LFS store" -- test -f "$(lfs_path "$NEW_OID")"
is "$(sha256 "$(lfs_path "$NEW_OID")")" "$NEW_OID" "… under its sha256"
is "$(branch_sha acme/relu v2)" "$V2" "refs lists v2 at the pushed commit"
api GET "$KHUB_URL/api/kernels/acme/relu/revision/v2"
is "$(json 'd["sha"]')" "$V2" "revision/v2 sha = pushed commit"
api GET "$KHUB_URL/api/kernels/acme/relu/tree/v2?recursive=true&expand=false"
is "$(json '"\n".join(sorted(e["path"] for e in d if e["type"]=="file"))')" "$(git ls-tree -r --name-only HEAD | sort)" \
	"tree/v2 lists exactly git's files"
is "$(json '[e.get("lfs",{}).get("oid") for e in d if e["path"]=="'$NEW_SO'"][0]')" "$NEW_OID" "tree/v2 has lfs.oid of the new .so"
api GET "$KHUB_URL/kernels/acme/relu/resolve/v2/$NEW_SO"
is "$STATUS/$(sha256sum <"$B" | cut -d' ' -f1)" "200/$NEW_OID" "the new LFS file downloads byte-identical from the API"
api HEAD "$KHUB_URL/kernels/acme/relu/resolve/v2/docs/notes.txt"
is "$STATUS/$(header X-Repo-Commit)" "200/$V2" "resolve HEAD on v2: X-Repo-Commit = pushed commit"
is "$(files_match_api "$W/bob" acme/relu v2)" "$((N + 3))/0" "every file of the pushed tree = API resolve at v2"
api GET "$KHUB_URL/api/kernels/acme/relu/commits/v2"
is "$(json '" ".join(c["id"] for c in d)')" "$(git log --format=%H v2 | tr '\n' ' ' | sed 's/ $//')" \
	"commits/v2 = git log (same shas, same order)"

# The JS client sees the pushed revision.
JS_DIR=$KHUB_SRC/tests/js
if command -v node >/dev/null 2>&1 && [ -d "$JS_DIR/node_modules/@huggingface/hub" ]; then
	JS=$(cd "$JS_DIR" && KHUB_URL=$KHUB_URL node --input-type=module -e '
import { listFiles } from "@huggingface/hub";
const out = [];
for await (const f of listFiles({ hubUrl: process.env.KHUB_URL, repo: { type: "kernel", name: "acme/relu" },
				 revision: "v2", recursive: true }))
	if (f.type === "file") out.push(f.path + (f.lfs ? " " + f.lfs.oid : ""));
console.log(out.sort().join("\n"));
' 2>&1)
	ok $? "JS listFiles(revision: v2) runs"
	WANT=$(git ls-tree -r --name-only HEAD | sort | while read -r f; do
		if [ "$f" = "$NEW_SO" ]; then echo "$f $NEW_OID"; elif [ "$f" = "$SO_FILE" ]; then echo "$f $(sha256 "$SRC/$SO_FILE")"; else echo "$f"; fi
	done)
	is "$JS" "$WANT" "JS listFiles at v2 = git's files, with the LFS oids"
else
	skip "node or tests/js/node_modules missing: JS listFiles"
	skip "node or tests/js/node_modules missing: JS listFiles"
fi

# ---- refused pushes leave every ref untouched -----------------------------------------
# Known bugs are marked "# TODO" (XFAIL); once fixed they turn XPASS,
# which fails the suite until the mark is removed.
TODO=
refused() {	# refused RC DESC REGEX: the push (exit status RC) failed, its output matched, refs unchanged
	local rc=$1 desc=$2 re=$3 todo=${TODO:+ # TODO $TODO}
	ok $([ "$rc" -ne 0 ]; echo $?) "$desc: push fails$todo"
	[ -n "$re" ] && like "$(tr -s ' ' <"$TEST_DIR/err")" "$re" "$desc: says why$todo"
	is "$(server_refs)" "$BEFORE" "$desc: refs untouched$todo"
}
printf 'third\n' >>README.md
git commit -q -am "v2: third"
REJECTED=$(git rev-parse HEAD)
BEFORE=$(server_refs)
git push "$AS_RITA" v2 >"$TEST_DIR/err" 2>&1
refused $? "read-only member" "403"
git push "$ANON" v2 >"$TEST_DIR/err" 2>&1
refused $? "anonymous" "terminal prompts disabled|401|Authentication"
git push "http://bob:hf_notarealtokennotarealtoken@$HOSTPORT/kernels/acme/relu" v2 >"$TEST_DIR/err" 2>&1
refused $? "unknown token" "Authentication failed|401"
check "the rejected commit never reached the server" -- bash -c "! git --git-dir='$GITDIR' cat-file -e $REJECTED"

# A read-only member cannot upload LFS objects for a branch either.
head -c 5000 /dev/urandom >build/torch-cpu/_rita.abi3.so
RITA_OID=$(sha256 build/torch-cpu/_rita.abi3.so)
git add -A && git commit -q -m "rita's .so"
git push "$AS_RITA" HEAD:refs/heads/rita >"$TEST_DIR/err" 2>&1
refused $? "read-only member with a new LFS object" ""
check "… whose object was not stored" -- test ! -e "$(lfs_path "$RITA_OID")"
git reset -q --hard "$V2"

# An LFS pointer to an object the server does not have (git-lfs told not to upload).
GHOST=$(head -c 64 /dev/urandom | sha256sum | cut -d' ' -f1)
printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 4242\n' "$GHOST" >build/torch-cpu/_ghost.abi3.so
git add -A && git commit -q -m "ghost pointer"
GIT_LFS_SKIP_PUSH=1 git push origin HEAD:v2 HEAD:refs/heads/v3 >"$TEST_DIR/err" 2>&1
refused $? "pointer to a missing LFS object (to v2 and new v3)" "$GHOST"
like "$(cat "$TEST_DIR/err")" "no ref was changed" "… and says no ref was changed"
like "$(cat "$TEST_DIR/err")" "build/torch-cpu/_ghost.abi3.so" "… and names the file"
git reset -q --hard "$V2"

# A pointer to a stored object but with another size.
printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 300001\n' "$NEW_OID" >build/torch-cpu/_size.abi3.so
git add -A && git commit -q -m "mis-sized pointer"
GIT_LFS_SKIP_PUSH=1 git push origin HEAD:v2 >"$TEST_DIR/err" 2>&1
refused $? "pointer with the wrong size" "has 300000 bytes, the pointer says 300001"
git reset -q --hard "$V2"

# A pointer git-lfs still reads (no final newline) to a missing object.
GHOST2=$(head -c 64 /dev/urandom | sha256sum | cut -d' ' -f1)
printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 4242' "$GHOST2" >build/torch-cpu/_ghost2.abi3.so
check "git-lfs itself takes it for a pointer" -- git lfs pointer --check --file=build/torch-cpu/_ghost2.abi3.so
git add -A && git commit -q -m "ghost pointer without final newline"
GIT_LFS_SKIP_PUSH=1 git push origin HEAD:refs/heads/ghost2 >"$TEST_DIR/err" 2>&1
TODO= \
	refused $? "pointer without its final newline to a missing object" "LFS pointer"
git --git-dir="$GITDIR" update-ref -d refs/heads/ghost2 2>/dev/null
git reset -q --hard "$V2"

# Forbidden paths: git refuses them client-side, so build the trees by hand.
mkdir -p evil/.GIT && echo x >evil/.GIT/config
git add evil/.GIT/config >"$TEST_DIR/err" 2>&1
RC=$?
rm -rf evil
ok $([ $RC -ne 0 ]; echo $?) "git itself refuses to add a '.GIT' path (so: git mktree)"
BLOB=$(echo evil | git hash-object -w --stdin)
evil_commit() {	# evil_commit DIR FILE: a commit on v2 adding DIR/FILE (or DIR as a symlink/submodule/empty tree)
	local sub
	case $2 in
	@empty) sub="040000 tree $(git mktree </dev/null)" ;;
	@link) sub="120000 blob $BLOB" ;;
	@submodule) sub="160000 commit $V1" ;;
	*) sub="040000 tree $(printf '100644 blob %s\t%s\n' "$BLOB" "$2" | git mktree)" ;;
	esac
	local top
	top=$( (git ls-tree "$V2"; printf '%s\t%s\n' "$sub" "$1") | git mktree) || return 1
	git commit-tree "$top" -p "$V2" -m "evil $1/$2"
}
n=0
for spec in ".git config" "extra .git" ".GIT config" ".Git hooks" ".cache x" ".git. config" "git~1 config" \
	"link @link" "sub @submodule" ".git @empty"; do
	set -- $spec
	n=$((n + 1))
	C=$(evil_commit "$1" "$2")
	if [ -z "$C" ]; then
		skip "git mktree refused '$1/$2'"
		continue
	fi
	BEFORE=$(server_refs)
	git push origin "$C:refs/heads/evil$n" >"$TEST_DIR/err" 2>&1
	RC=$?
	case "$1/$2" in
	.cache/x) TODO= ;;
	.git./config | git~1/config) TODO= ;;
	.git/@empty) TODO= ;;
	*) TODO= ;;
	esac
	case $2 in
	@link) WHY="symbolic links" ;;
	@submodule) WHY="submodules" ;;
	*) WHY="invalid path|hasDotgit|hasDot" ;;
	esac
	refused $RC "path '$1/${2#@}'" "$WHY"
	git --git-dir="$GITDIR" update-ref -d "refs/heads/evil$n" 2>/dev/null	# if it got in
done
TODO=

# main cannot be deleted.
BEFORE=$(server_refs)
git push origin :main >"$TEST_DIR/err" 2>&1
refused $? "deleting main" "main cannot be deleted"

# ---- a big history, then an incremental fetch ---------------------------------------------
git reset -q --hard "$V2"
mkdir -p history
for i in 1 2 3 4; do
	head -c 1100000 /dev/urandom | base64 >"history/part-$i.txt"	# ~1.5 MB of text, not LFS
	git add history && git commit -q -m "history $i"
done
git push -q origin v2 >"$TEST_DIR/err" 2>&1
ok $? "push 4 commits with ~6 MB of (non-LFS) text" || sed 's/^/#   /' "$TEST_DIR/err"
is "$(branch_sha acme/relu v2)" "$(git rev-parse HEAD)" "v2 moved to the new tip"

upload_pack_bytes() {	# sum N of 'POST …/git-upload-pack 200 N bytes' after log line $1
	log_since "$1" | sed -n 's|.* POST /kernels/acme/relu\(\.git\)\{0,1\}/git-upload-pack [0-9]* \([0-9]*\) bytes.*|\2|p' |
		awk '{ s += $1 } END { print s + 0 }'
}
L0=$(log_lines)
GIT_LFS_SKIP_SMUDGE=1 git clone -q -b v2 "$ANON" "$W/fetcher" >"$TEST_DIR/err" 2>&1
ok $? "fresh clone of the big history"
FULL=$(upload_pack_bytes "$L0")
printf 'small change\n' >>README.md
git commit -q -am "small change"
git push -q origin v2 >"$TEST_DIR/err" 2>&1
ok $? "push one small commit"
TIP=$(git rev-parse HEAD)
L0=$(log_lines)
git -C "$W/fetcher" fetch -q origin >"$TEST_DIR/err" 2>&1
ok $? "incremental git fetch"
INC=$(upload_pack_bytes "$L0")
is "$(git -C "$W/fetcher" rev-parse origin/v2)" "$TIP" "the fetch brought the new tip"
diag "upload-pack bytes: fresh clone $FULL, incremental fetch $INC"
ok $([ "$FULL" -gt 3000000 ] && [ "$INC" -gt 0 ] && [ $((INC * 5)) -lt "$FULL" ]; echo $?) \
	"incremental fetch ($INC bytes) < 20% of a fresh clone ($FULL bytes)"

# ---- shas agree at the end ---------------------------------------------------------------------
is "$(branch_sha acme/relu v2)" "$TIP" "refs targetCommit of v2 = git log"
api GET "$KHUB_URL/api/kernels/acme/relu/revision/v2"
is "$(json 'd["sha"]')" "$TIP" "revision/v2 sha = git log"
api HEAD "$KHUB_URL/kernels/acme/relu/resolve/v2/README.md"
is "$(header X-Repo-Commit)" "$TIP" "resolve HEAD X-Repo-Commit = git log"
api GET "$KHUB_URL/kernels/acme/relu/resolve/v2/history/part-3.txt"
is "$(sha256sum <"$B" | cut -d' ' -f1)" "$(sha256 history/part-3.txt)" "a pushed 1.5 MB text file downloads byte-identical"

# ---- tags and branch deletion --------------------------------------------------------------------
git push -q origin "$V2:refs/tags/release-2" >"$TEST_DIR/err" 2>&1
ok $? "push a tag"
api GET "$KHUB_URL/api/kernels/acme/relu/refs"
is "$(json '[t["targetCommit"] for t in d["tags"] if t["name"]=="release-2"]')" "['$V2']" "refs lists the tag"
BEFORE=$(server_refs | grep -v '^refs/heads/v2 ')
git push origin :v2 >"$TEST_DIR/err" 2>&1
ok $? "git push origin :v2"
is "$(branch_sha acme/relu v2)" "" "v2 is gone from refs"
api GET "$KHUB_URL/api/kernels/acme/relu/revision/v2"
is "$STATUS" 404 "revision/v2 is 404"
is "$(server_refs)" "$BEFORE" "no other ref moved"
cd "$TEST_DIR" || exit 1

# ---- the server repository is sound -----------------------------------------------------------------
FSCK=$(git --git-dir="$GITDIR" fsck --no-progress --no-dangling 2>&1)
ok $? "git fsck of the server repo exits 0"
is "$FSCK" "" "git fsck --no-dangling prints nothing (no errors, no warnings)"

# ---- audit log --------------------------------------------------------------------------------------
if command -v psql >/dev/null 2>&1; then
	AUDIT=$(psql -h "$KHUB_DATA_DIR/pg/run" -U khub khub -Atc \
		"select action, target, actor_name, details->>'ref', remote_addr from audit_log where action like 'git.%' order by id" 2>&1)
	diag "audit: $(echo "$AUDIT" | tr '\n' ';')"
	is "$(echo "$AUDIT" | grep -v '|refs/heads/\(evil[0-9]*\|ghost2\)|' | cut -d'|' -f1-4 | tr '\n' ';')" \
		"git.push|acme/relu|bob|refs/heads/v2;git.push|acme/relu|bob|refs/heads/v2;git.push|acme/relu|bob|refs/heads/v2;git.push|acme/relu|bob|refs/tags/release-2;git.push.delete|acme/relu|bob|refs/heads/v2;" \
		"the audit log has exactly the accepted pushes (by bob), none of the refused ones"
	is "$(echo "$AUDIT" | cut -d'|' -f5 | sort -u)" "127.0.0.1" "audited pushes carry the client's address"
else
	skip "psql missing: audit log"
	skip "psql missing: audit log"
fi

done_testing
