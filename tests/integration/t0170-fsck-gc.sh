#!/bin/bash
# t0170-fsck-gc.sh -- khub fsck and khub gc, run while khub serve serves.
# fsck: a healthy hub (with an empty repo) is clean; a flipped byte in an
# LFS object, a linked LFS object gone from the store, a git object removed
# under a ref, a ref at a missing commit, a repo row without its git dir, a
# git dir without a row, a variant index row for a missing variant, a stale
# recorded branch head and a published build output its commit lacks are
# each reported (exit 1); --repair fixes what it says it can and a later
# fsck reports exactly what it said it could not.
# gc: removes an old unreferenced LFS object, an old temp pack and expired
# trash; keeps an object referenced only by an old commit and young ones;
# never removes the object of an upload in flight (a throttled PUT while
# gc --grace 0 runs).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

for tool in /usr/bin/python3 git curl jq psql; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
khub_start
REPOS=$KHUB_DATA_DIR/repos/kernels
LFS=$KHUB_DATA_DIR/lfs/objects
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }
obj_path() { echo "$LFS/${1:0:2}/${1:2:2}/$1"; }
# plant FILE [touch date]: put FILE's bytes in the store unlinked; prints the oid
plant() {
	local oid; oid=$(sha256 "$1")
	mkdir -p "$(dirname "$(obj_path "$oid")")"
	cp "$1" "$(obj_path "$oid")"
	[ -n "${2:-}" ] && touch -d "$2" "$(obj_path "$oid")"
	echo "$oid"
}
# batch_upload_url OID SIZE: the signed PUT URL of an upload to alice/relu
batch_upload_url() {
	curl -s -u "alice:$TOK" -H "Content-Type: application/vnd.git-lfs+json" \
		--data "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$1\",\"size\":$2}]}" \
		"$KHUB_URL/kernels/alice/relu.git/info/lfs/objects/batch" | jq -r '.objects[0].actions.upload.href'
}

# ---- a healthy hub -------------------------------------------------------------------
khub admin user create alice >/dev/null 2>&1
TOK=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
W=$TEST_DIR/work
seed=0
for r in relu other broken nodir; do
	make_kernel_tree "$W/$r" "$r"
	khub import "$W/$r" --repo "alice/$r" >/dev/null 2>>"$TEST_DIR/import.log" || seed=1
done
ok $seed "four kernel repos imported (each with an LFS .so)"
RELU_SO=$(sha256 "$W/relu/build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so")
OTHER_SO=$(sha256 "$W/other/build/torch211-cxx11-cu128-x86_64-linux/_other_cuda.abi3.so")
# an empty repo (a mirror before its first sync): git fsck's notices are no damage
khub admin org create mirrors >/dev/null 2>&1
git init -q --bare "$REPOS/mirrors/empty.git"
sql "INSERT INTO repos (type, owner_id, namespace, name) SELECT 'kernel', id, 'mirrors', 'empty' FROM accounts WHERE name = 'mirrors'" >/dev/null
is "$(sql "SELECT count(*) FROM repos WHERE namespace = 'mirrors' AND name = 'empty'")" 1 "an empty repo (no commit) is registered"
khub fsck >"$TEST_DIR/fsck0.out" 2>&1
is "$?" 0 "fsck of a healthy hub exits 0 (while khub serve runs)"
is "$(khub fsck --json 2>/dev/null | jq -c '[.damaged, .complete]')" "[0,true]" "fsck --json: nothing damaged, the check complete"

# ---- gc ----------------------------------------------------------------------------------
# relu's .so is referenced only by the old commit once main drops it
printf '%s\n%s\n' '{"key":"header","value":{"summary":"drop the so"}}' \
	'{"key":"deletedFile","value":{"path":"build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so"}}' >"$W/drop.ndjson"
STATUS=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOK" \
	-H 'Content-Type: application/x-ndjson' --data-binary @"$W/drop.ndjson" "$KHUB_URL/api/kernels/alice/relu/commit/main")
is "$STATUS" 200 "a commit removes relu's .so from main (the old commit still references it)"
touch -d '3 days ago' "$(obj_path "$RELU_SO")"
head -c 70000 /dev/urandom >"$W/orphan-old"
head -c 50000 /dev/urandom >"$W/orphan-young"
OLD=$(plant "$W/orphan-old" '3 days ago')
YOUNG=$(plant "$W/orphan-young")
PACKS=$REPOS/alice/other.git/objects/pack
mkdir -p "$PACKS"
head -c 4000 /dev/urandom >"$PACKS/tmp_pack_oldXYZ"
touch -d '3 days ago' "$PACKS/tmp_pack_oldXYZ"
head -c 3000 /dev/urandom >"$PACKS/pack_git2_k1ll3d"	# libgit2's name for a pack being written
touch -d '3 days ago' "$PACKS/pack_git2_k1ll3d"
head -c 4000 /dev/urandom >"$PACKS/tmp_pack_newXYZ"
mkdir -p "$KHUB_DATA_DIR/repos/.sync-staging/deadbundle" "$KHUB_DATA_DIR/lfs/tmp/sync-deadbundle"
: >"$KHUB_DATA_DIR/repos/.sync-staging/import.lock"
head -c 1000 /dev/urandom >"$KHUB_DATA_DIR/repos/.sync-staging/deadbundle/pack-x.pack"
head -c 500 /dev/urandom >"$KHUB_DATA_DIR/lfs/tmp/sync-deadbundle/obj"
touch -d '3 days ago' "$KHUB_DATA_DIR/repos/.sync-staging/deadbundle" "$KHUB_DATA_DIR/lfs/tmp/sync-deadbundle"
TRASH=$KHUB_DATA_DIR/repos/.trash/kernels/alice
mkdir -p "$TRASH/gone.git.20200101T000000Z.abcdef/objects" "$TRASH/fresh.git.$(date -u +%Y%m%dT%H%M%SZ).ghijkl"
printf 'x\n' >"$TRASH/gone.git.20200101T000000Z.abcdef/objects/f"

khub gc --dry-run >"$TEST_DIR/gc-dry.out" 2>&1
ok $([ -f "$(obj_path "$OLD")" ] && [ -f "$PACKS/tmp_pack_oldXYZ" ] && [ -d "$TRASH/gone.git.20200101T000000Z.abcdef" ]; echo $?) \
	"gc --dry-run removes nothing"
like "$(cat "$TEST_DIR/gc-dry.out")" "would remove lfs object $OLD" "gc --dry-run names the old orphan"
khub gc >"$TEST_DIR/gc1.out" 2>&1
is "$?" 0 "gc exits 0"
ok $([ ! -e "$(obj_path "$OLD")" ]; echo $?) "gc removed the old unreferenced LFS object"
ok $([ -f "$(obj_path "$YOUNG")" ]; echo $?) "gc kept the unreferenced object younger than the grace period"
ok $([ -f "$(obj_path "$RELU_SO")" ] && [ -f "$(obj_path "$OTHER_SO")" ]; echo $?) \
	"gc kept the objects commits reference (one only by an old commit)"
ok $([ ! -e "$PACKS/tmp_pack_oldXYZ" ] && [ ! -e "$PACKS/pack_git2_k1ll3d" ] && [ -f "$PACKS/tmp_pack_newXYZ" ]; echo $?) \
	"gc removed the old temp packs (git's and libgit2's), kept the young one"
ok $([ ! -e "$KHUB_DATA_DIR/repos/.sync-staging/deadbundle" ] && [ ! -e "$KHUB_DATA_DIR/lfs/tmp/sync-deadbundle" ] &&
	[ -f "$KHUB_DATA_DIR/repos/.sync-staging/import.lock" ]; echo $?) \
	"gc removed what a killed sync import staged (no import holds its lock), kept the lock file"
ok $([ ! -e "$TRASH/gone.git.20200101T000000Z.abcdef" ] && [ -n "$(ls -d "$TRASH"/fresh.git.* 2>/dev/null)" ]; echo $?) \
	"gc removed trash older than trash_keep_days, kept fresh trash"
like "$(tail -n 1 "$TEST_DIR/gc1.out")" "freed 1 LFS objects \(70000 bytes\), 4 temp files \(8500 bytes\), 1 trash dirs \(2 bytes\)" \
	"gc reports what it freed (count and bytes)"

# an upload in flight: its object (stored already, unlinked and old) survives gc --grace 0
head -c 400000 /dev/urandom >"$W/slow.bin"
SLOW=$(plant "$W/slow.bin" '3 days ago')
URL=$(batch_upload_url "$SLOW" 400000)
like "$URL" '^http' "the batch API hands out an upload URL for the slow object"
curl -s -o "$W/put.out" -w '%{http_code}' -X PUT --limit-rate 20k --data-binary @"$W/slow.bin" "$URL" >"$W/put.status" &
PUT_PID=$!
inflight=1
for _ in $(seq 1 600); do
	[ "$(sql "SELECT count(*) FROM lfs_inflight WHERE oid = '$SLOW'")" = 1 ] && { inflight=0; break; }
	sleep 0.1
done
ok $inflight "the upload in flight is recorded in lfs_inflight"
khub gc --grace 0 >"$TEST_DIR/gc2.out" 2>&1
ok $([ -f "$(obj_path "$SLOW")" ]; echo $?) "gc --grace 0 kept the object of the upload in flight"
ok $([ ! -e "$(obj_path "$YOUNG")" ]; echo $?) "gc --grace 0 removed the young orphan"
like "$(tail -n 1 "$TEST_DIR/gc2.out")" ", 1 in use$" "gc says it kept one old unlinked object because a write names it"
kill -0 $PUT_PID 2>/dev/null
ok $? "the upload was still in flight while gc ran"
wait $PUT_PID
is "$(cat "$W/put.status")" 200 "the upload completes"
is "$(sql "SELECT count(*) FROM lfs_repo_objects WHERE oid = '$SLOW'")/$(sql "SELECT count(*) FROM lfs_inflight")" "1/0" \
	"the object is linked to alice/relu, the in-flight row is gone"
is "$(sha256 "$(obj_path "$SLOW")")" "$SLOW" "the uploaded object is whole"
khub fsck >"$TEST_DIR/fsck1.out" 2>&1
is "$?" 0 "fsck after gc is clean"

# ---- damage -------------------------------------------------------------------------------
# 1. a flipped byte in other's .so
/usr/bin/python3 - "$(obj_path "$OTHER_SO")" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[1000] ^= 0xff
open(p, "wb").write(bytes(b))
PY
# 2. an object linked to relu (uploaded, not committed) gone from the store
head -c 30000 /dev/urandom >"$W/linked.bin"
LINKED=$(sha256 "$W/linked.bin")
curl -s -o /dev/null -X PUT --data-binary @"$W/linked.bin" "$(batch_upload_url "$LINKED" 30000)"
is "$(sql "SELECT count(*) FROM lfs_repo_objects WHERE oid = '$LINKED'")" 1 "an uploaded object is linked to alice/relu"
rm -f "$(obj_path "$LINKED")"
# 3. a git object under broken's main removed
README_BLOB=$(git --git-dir="$REPOS/alice/broken.git" rev-parse main:README.md)
rm -f "$REPOS/alice/broken.git/objects/${README_BLOB:0:2}/${README_BLOB:2}"
ok $([ -z "$(git --git-dir="$REPOS/alice/broken.git" cat-file -t "$README_BLOB" 2>/dev/null)" ]; echo $?) \
	"broken's README blob is gone"
# 3b. a ref pointing at a commit the repo does not have
echo 1234567890123456789012345678901234567890 >"$REPOS/alice/broken.git/refs/heads/ghost"
# 4. a repo row without its git dir; 5. a git dir without a row
mv "$REPOS/alice/nodir.git" "$TEST_DIR/nodir.git.saved"
git init -q --bare "$REPOS/alice/stray.git"
git init -q --bare "$REPOS/alice/young.git"	# maybe a create in progress: left alone
touch -d '2 hours ago' "$REPOS/alice/stray.git"
# 6. a variant index row for a variant the commit does not have
HEAD=$(git --git-dir="$REPOS/alice/relu.git" rev-parse main)
indexed=1
for _ in $(seq 1 600); do	# the server indexes a new commit in the background
	[ "$(sql "SELECT count(*) FROM kernel_commits WHERE commit_sha = '$HEAD'")" = 1 ] && { indexed=0; break; }
	sleep 0.1
done
ok $indexed "relu's head commit is in the variant index"
sql "INSERT INTO kernel_variants (repo_id, commit_sha, variant, name_valid, file_count, total_size, metadata_status)
     SELECT id, '$HEAD', 'torch-bogus', false, 0, 0, 'missing' FROM repos WHERE name = 'relu'" >/dev/null
is "$(sql "SELECT count(*) FROM kernel_variants WHERE variant = 'torch-bogus'")" 1 "a bogus variant index row planted"
sql "UPDATE kernel_heads SET commit_sha = repeat('0', 40) WHERE ref = 'refs/heads/main' AND repo_id = (SELECT id FROM repos WHERE name = 'relu')" >/dev/null
# 7. a succeeded build whose published commit lacks its output (and one that has it)
for v in torch-gone torch-cpu; do
	sql "INSERT INTO builds (repo_id, source_commit, variant, state, published_branch, published_commit)
	     SELECT id, '$HEAD', '$v', 'succeeded', 'main', '$HEAD' FROM repos WHERE name = 'relu'" >/dev/null
done

khub fsck --json >"$TEST_DIR/fsck2.json" 2>"$TEST_DIR/fsck2.err"
is "$?" 1 "fsck of the damaged hub exits 1"
found() { jq -e --arg r "$1" --arg w "$2" --arg x "$3" \
	'[.problems[] | select(.repo == $r and (.what | test($w)) and (.where | test($x)))] | length > 0' \
	"$TEST_DIR/fsck2.json" >/dev/null; }
check "reports the flipped byte (object content vs name), attributed to the repo using it" -- found kernels/alice/other "does not match its sha256" "$OTHER_SO"
check "reports the missing linked object" -- found kernels/alice/relu "LFS link to a missing object" "$LINKED"
check "reports the missing git object (git fsck)" -- found kernels/alice/broken "git fsck" "$README_BLOB|missing"
check "reports the ref pointing at a missing commit (git fsck)" -- found kernels/alice/broken "git fsck" "ghost"
check "reports the repo row without a git dir" -- found kernels/alice/nodir "without a git directory" "nodir.git"
check "reports the git dir without a repo row" -- found kernels/alice/stray "without a repo row" "stray.git"
ok $(jq -e '[.problems[] | select(.where | test("young.git"))] | length == 0' "$TEST_DIR/fsck2.json" >/dev/null; echo $?) \
	"an unregistered git dir younger than an hour is not reported (a create may be in progress)"
check "reports the published build output missing from its commit" -- found kernels/alice/relu "build output missing" "build/torch-gone at $HEAD"
ok $(jq -e '[.problems[] | select(.where | test("build/torch-cpu"))] | length == 0' "$TEST_DIR/fsck2.json" >/dev/null; echo $?) \
	"a build output its commit holds is not reported"
check "reports the variant index's recorded branch head that git does not have" -- found kernels/alice/relu "branch head differs" "refs/heads/main"
check "reports the variant index row for a missing variant" -- found kernels/alice/relu "variant index rows differ" "$HEAD"
khub fsck >"$TEST_DIR/fsck2.txt" 2>&1
like "$(cat "$TEST_DIR/fsck2.txt")" "kernels/alice/nodir	repo row without a git directory	[^	]*nodir.git	damaged" \
	"the text report has one line per problem: repo, what, where, state"

khub fsck --repair --json >"$TEST_DIR/repair.json" 2>"$TEST_DIR/repair.err"
is "$?" 1 "fsck --repair exits 1: some damage could not be repaired"
is "$(jq -c '[.problems[] | select(.state == "repaired") | .what] | sort' "$TEST_DIR/repair.json" | grep -o 'does not match\|LFS link\|without a repo row\|variant index' | LC_ALL=C sort -u | tr '\n' ' ')" \
	"LFS link does not match variant index without a repo row " \
	"--repair: quarantined the damaged object, dropped the dangling link, re-indexed, trashed the stray dir"
ok $([ ! -e "$(obj_path "$OTHER_SO")" ] && ls "$KHUB_DATA_DIR/quarantine/lfs/$OTHER_SO".* >/dev/null 2>&1; echo $?) \
	"the damaged object is in data_dir/quarantine/lfs, not deleted"
is "$(sql "SELECT count(*) FROM lfs_repo_objects WHERE oid = '$LINKED'")/$(sql "SELECT count(*) FROM kernel_variants WHERE variant = 'torch-bogus'")" \
	"0/0" "the dangling link and the bogus index row are gone"
is "$(sql "SELECT commit_sha FROM kernel_heads WHERE ref = 'refs/heads/main' AND repo_id = (SELECT id FROM repos WHERE name = 'relu')")" "$HEAD" \
	"the recorded branch head is git's again"
ok $([ ! -e "$REPOS/alice/stray.git" ] && [ -n "$(ls -d "$KHUB_DATA_DIR"/repos/.trash/kernels/alice/stray.git.* 2>/dev/null)" ]; echo $?) \
	"the stray git dir was moved to trash/"
unrepaired() { jq -c '[.problems[] | select(.state != "repaired") | [.repo, .what, .where]] | sort' "$1"; }
khub fsck --json >"$TEST_DIR/after.json" 2>/dev/null
is "$?" 1 "fsck after the repair still exits 1 (what could not be repaired)"
is "$(unrepaired "$TEST_DIR/after.json")" "$(unrepaired "$TEST_DIR/repair.json")" \
	"fsck after --repair reports exactly what --repair said it could not repair"
like "$(unrepaired "$TEST_DIR/after.json")" "nodir.*broken|broken.*nodir" "among them: the missing git dir and the broken repo"
like "$(unrepaired "$TEST_DIR/after.json")" "LFS object referenced by a commit is missing\",\"$OTHER_SO" \
	"and other's quarantined object, which a commit references"

# the git dir restored from a "backup": fsck no longer reports it
mv "$TEST_DIR/nodir.git.saved" "$REPOS/alice/nodir.git"
khub fsck --json >"$TEST_DIR/restored.json" 2>/dev/null
is "$(jq '[.problems[] | select(.repo == "kernels/alice/nodir")] | length' "$TEST_DIR/restored.json")" 0 \
	"once its git dir is back, fsck reports nothing about alice/nodir"
done_testing
