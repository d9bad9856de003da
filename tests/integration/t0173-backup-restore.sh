#!/bin/bash
# t0173-backup-restore.sh -- khub backup while a client commits in a loop
# (each commit adds an LFS file and moves main), khub restore into a fresh
# data dir with a fresh embedded database, khub serve on it: fsck clean,
# every LFS pointer linked (refs and database agree), every commit
# acknowledged before the backup started present, main at a commit the
# client saw acknowledged (no half commit), LFS content served back whole.
# A second backup into the same dir copies only the new LFS objects, a third
# none; restore refuses a non-empty data dir and an unfinished backup.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

for tool in /usr/bin/python3 git curl jq psql base64; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
khub_start
W=$TEST_DIR/work
mkdir -p "$W"
khub admin user create alice >/dev/null 2>&1
TOK=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
make_kernel_tree "$W/loop" loop
khub import "$W/loop" --repo alice/loop >/dev/null 2>"$TEST_DIR/import.log"
ok $? "alice/loop imported"
count_lfs() { find "$1" -type f -path '*/objects/*' 2>/dev/null | wc -l; }

# ---- a client committing in a loop -------------------------------------------------
# commit I: add data/fI.bin (LFS by .gitattributes) and move main; "I sha" appended
# to acked once the server answered 200
commit_one() {
	local i=$1 body=$W/c$1.ndjson
	head -c 65536 /dev/urandom >"$W/f$i.bin"
	printf '{"key":"header","value":{"summary":"commit %s"}}\n{"key":"file","value":{"path":"data/f%s.bin","content":"%s","encoding":"base64"}}\n' \
		"$i" "$i" "$(base64 -w0 "$W/f$i.bin")" >"$body"
	curl -s -o "$W/r$i.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOK" \
		-H 'Content-Type: application/x-ndjson' --data-binary @"$body" "$KHUB_URL/api/kernels/alice/loop/commit/main"
}
writer() {
	local i=0
	while [ ! -e "$W/stop" ]; do
		i=$((i + 1))
		if [ "$(commit_one $i)" = 200 ]; then
			echo "$i $(jq -r .commitOid "$W/r$i.json")" >>"$W/acked"
		fi
	done
}
: >"$W/acked"
writer &
WRITER=$!
wait_acked() {	# wait_acked N: until at least N commits were acknowledged
	for _ in $(seq 1 1200); do
		[ "$(wc -l <"$W/acked")" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
wait_acked 3
ok $? "the client's commits are acknowledged"

cp "$W/acked" "$W/acked-before"
khub backup "$TEST_DIR/bk" >"$TEST_DIR/backup1.out" 2>&1
is "$?" 0 "khub backup exits 0 while the client commits"
AFTER=$(wc -l <"$W/acked")
wait_acked $((AFTER + 2))
ok $? "the client's commits go on after the backup"
touch "$W/stop"
wait $WRITER
BEFORE=$(wc -l <"$W/acked-before")
diag "$BEFORE commits acknowledged before the backup, $(( $(wc -l <"$W/acked") - BEFORE )) after it started"
cp -a "$TEST_DIR/bk" "$TEST_DIR/bk1"

M=$TEST_DIR/bk/manifest.json
is "$(jq -c '[.format, .complete, .database.file, (.repos >= 1), (.lfs.objects == .lfs.copied + .lfs.already_present)]' "$M")" \
	'[1,true,"db.dump",true,true]' "the manifest: format 1, complete, the dump, counts"
like "$(jq -r .khub_version "$M")/$(jq -r .created "$M")" '^[0-9][^/]*/20[0-9-]+T' "the manifest names the khub version and the time"
ok $([ -s "$TEST_DIR/bk/db.dump" ] && [ -s "$TEST_DIR/bk/secret" ] && [ -d "$TEST_DIR/bk/repos/kernels/alice/loop.git" ]; echo $?) \
	"the backup holds the dump, the secret and the repo"

khub backup "$KHUB_DATA_DIR/lfs/bk" >"$TEST_DIR/backup-inside.out" 2>&1
is "$?" 2 "a backup into the data dir is refused"

# ---- incremental ---------------------------------------------------------------------
N1=$(count_lfs "$TEST_DIR/bk/lfs")
LIVE=$(count_lfs "$KHUB_DATA_DIR/lfs")
FIRST=$(find "$TEST_DIR/bk/lfs/objects" -type f | head -n 1)
INODE=$(stat -c %i "$FIRST")
khub backup "$TEST_DIR/bk" >"$TEST_DIR/backup2.out" 2>&1
is "$?" 0 "a second backup into the same dir"
is "$(jq -c '[.lfs.copied, .lfs.already_present]' "$M")" "[$((LIVE - N1)),$N1]" \
	"the second backup copied only the LFS objects made since the first ($((LIVE - N1)))"
is "$(stat -c %i "$FIRST")" "$INODE" "an object of the first backup was not written again"
khub backup "$TEST_DIR/bk" >"$TEST_DIR/backup3.out" 2>&1
is "$(jq -c '[.lfs.copied, .lfs.already_present, .git.files_copied]' "$M")" "[0,$LIVE,0]" \
	"a third backup with no write in between copies no LFS object and no git object"

# ---- restore into a configured database (database_url), here a new one in the running cluster
RUN=$KHUB_DATA_DIR/pg/run
psql "host=$RUN dbname=khub user=khub" -qc "CREATE DATABASE restored" >/dev/null 2>&1
URL="postgresql://khub:unused-secret@/restored?host=$RUN"
KHUB_DATABASE_URL=$URL KHUB_DATA_DIR=$TEST_DIR/data4 khub restore "$TEST_DIR/bk1" >"$TEST_DIR/restore-url.out" 2>&1
is "$?" 0 "restore into an empty configured database (database_url with a password)"
KHUB_DATABASE_URL=$URL KHUB_DATA_DIR=$TEST_DIR/data4 khub fsck >"$TEST_DIR/fsck-url.out" 2>&1
is "$?" 0 "fsck of that restore is clean"
is "$(psql "host=$RUN dbname=restored user=khub" -tAc "SELECT count(*) FROM repos WHERE name = 'loop'")" 1 \
	"the restored database holds the repo"
KHUB_DATABASE_URL="host=$RUN dbname=khub user=khub" KHUB_DATA_DIR=$TEST_DIR/data5 khub restore "$TEST_DIR/bk1" \
	>"$TEST_DIR/restore-full.out" 2>&1
is "$?" 2 "restore into a configured database that is not empty is refused"
like "$(cat "$TEST_DIR/restore-full.out")" "database is not empty" "and says why"
ok $([ -z "$(find "$TEST_DIR/data5" -type f 2>/dev/null)" ]; echo $?) "and copies nothing"
khub_stop

# ---- restore ---------------------------------------------------------------------------
export KHUB_DATA_DIR=$TEST_DIR/data2
khub restore "$TEST_DIR/bk1" >"$TEST_DIR/restore.out" 2>&1
is "$?" 0 "khub restore into an empty data dir with a fresh embedded database"
khub restore "$TEST_DIR/bk1" >"$TEST_DIR/restore2.out" 2>&1
is "$?" 2 "restore into a non-empty data dir is refused"
like "$(cat "$TEST_DIR/restore2.out")" "not empty" "and says why"
mkdir -p "$TEST_DIR/half" && cp -a "$TEST_DIR/bk1/." "$TEST_DIR/half/" && rm "$TEST_DIR/half/manifest.json"
KHUB_DATA_DIR=$TEST_DIR/data3 khub restore "$TEST_DIR/half" >"$TEST_DIR/restore3.out" 2>&1
is "$?" 2 "a backup without its manifest (unfinished) is refused"
ok $([ ! -e "$TEST_DIR/data3" ]; echo $?) "and nothing was written"

KHUB_PORT=$(free_port)
export KHUB_LISTEN="127.0.0.1:$KHUB_PORT"
KHUB_URL="http://127.0.0.1:$KHUB_PORT"
khub_start
khub fsck --json >"$TEST_DIR/fsck.json" 2>"$TEST_DIR/fsck.err"
is "$?" 0 "fsck of the restored hub is clean"
is "$(jq -c '[.damaged, .complete]' "$TEST_DIR/fsck.json")" "[0,true]" "nothing damaged, the check complete"
khub check lfs-pointers >"$TEST_DIR/check.out" 2>&1
is "$?" 0 "every LFS pointer of the restored repos is linked to its repo (refs and database agree)"

GIT=$KHUB_DATA_DIR/repos/kernels/alice/loop.git
missing=0
while read -r i sha; do
	git --git-dir="$GIT" merge-base --is-ancestor "$sha" main 2>/dev/null || { missing=$((missing + 1)); diag "commit $i ($sha) missing"; }
done <"$W/acked-before"
is "$missing" 0 "every commit acknowledged before the backup started is in the restored main"
HEAD=$(git --git-dir="$GIT" rev-parse main)
ok $(grep -q " $HEAD\$" "$W/acked"; echo $?) "the restored main is a commit the client saw acknowledged (no half commit)"
bad=0
for ref in $(git --git-dir="$GIT" for-each-ref --format='%(objectname)'); do
	git --git-dir="$GIT" rev-list --objects "$ref" >/dev/null 2>&1 || bad=1
done
ok $bad "every restored ref points at a complete commit"

LAST=$(tail -n 1 "$W/acked-before" | cut -d' ' -f1)
curl -s -o "$W/got.bin" -H "Authorization: Bearer $TOK" "$KHUB_URL/kernels/alice/loop/resolve/main/data/f$LAST.bin"
is "$(sha256sum <"$W/got.bin" | cut -d' ' -f1)" "$(sha256sum <"$W/f$LAST.bin" | cut -d' ' -f1)" \
	"the restored hub serves the LFS file of the last commit acknowledged before the backup (the token restored too)"
is "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOK" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$W/c1.ndjson" "$KHUB_URL/api/kernels/alice/loop/commit/main")" 200 "the restored hub takes a commit"
done_testing
