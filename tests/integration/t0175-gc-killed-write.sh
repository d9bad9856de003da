#!/bin/bash
# t0175-gc-killed-write.sh -- what a really killed write leaves, and khub gc:
# a commit whose server is killed (SIGKILL) while libgit2 writes its pack
# leaves objects/pack/pack_git2_*; a git push whose receive-pack is killed (SIGKILL) while its pack streams
# in leaves git's quarantine (objects/tmp_objdir-incoming-*) behind; the repo's refs
# and fsck are untouched by it; gc --dry-run names it, gc removes it (it is
# older than the grace period) and keeps everything the refs use; a young
# one stays. An LFS object whose upload was killed half way never reaches
# the store (only lfs/tmp, which gc cleans).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

for tool in git curl jq /usr/bin/python3; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
khub_start
W=$TEST_DIR/work
mkdir -p "$W"
khub admin user create alice >/dev/null 2>&1
TOK=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
make_kernel_tree "$W/relu" relu
khub import "$W/relu" --repo alice/relu >/dev/null 2>"$TEST_DIR/import.log"
ok $? "alice/relu imported"
GIT=$KHUB_DATA_DIR/repos/kernels/alice/relu.git
OLD=$(git --git-dir="$GIT" rev-parse main)

# ---- a push killed while its pack streams in ----------------------------------------------
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
git clone -q --bare "$GIT" "$W/local.git" 2>/dev/null
git init -q "$W/wt" && git -C "$W/wt" fetch -q "$W/local.git" main && git -C "$W/wt" checkout -q FETCH_HEAD
head -c 3000000 /dev/urandom >"$W/wt/big.dat"
git -C "$W/wt" add big.dat && git -C "$W/wt" -c user.name=a -c user.email=a@example.com commit -qm big
NEW=$(git -C "$W/wt" rev-parse HEAD)
# the receive-pack request by hand, so that curl can send it slowly
/usr/bin/python3 - "$W/push.req" "$OLD" "$NEW" <<'PY'
import sys
path, old, new = sys.argv[1:]
line = f"{old} {new} refs/heads/main\0report-status\n".encode()
open(path, "wb").write(b"%04x" % (len(line) + 4) + line + b"0000")
PY
printf '%s\n^%s\n' "$NEW" "$OLD" | git -C "$W/wt" pack-objects --revs --stdout -q >>"$W/push.req"
ok $([ "$(stat -c %s "$W/push.req")" -gt 2000000 ]; echo $?) "a push request with a 3 MB pack"
# chunked (no Content-Length): git http-backend streams it to receive-pack
# instead of reading it whole first
curl -s -o /dev/null --limit-rate 50k -u "alice:$TOK" -H 'Content-Type: application/x-git-receive-pack-request' \
	-H 'Transfer-Encoding: chunked' \
	--data-binary @"$W/push.req" "$KHUB_URL/kernels/alice/relu.git/git-receive-pack" &
CURL=$!
incoming=1
for _ in $(seq 1 1200); do
	[ -n "$(find "$GIT/objects" -maxdepth 1 -name 'tmp_objdir-incoming-*' 2>/dev/null)" ] && { incoming=0; break; }
	sleep 0.1
done
ok $incoming "receive-pack is writing the pack into its quarantine (objects/tmp_objdir-incoming-*)"
# kill -9 git's processes under this test's server (by pid: http-backend, receive-pack, index-pack)
descendants() { local c; for c in $(ps -o pid= --ppid "$1"); do echo "$c"; descendants "$c"; done; }
killed=0
for pid in $(descendants "$KHUB_PID"); do
	case "$(cat "/proc/$pid/comm" 2>/dev/null)" in git*) kill -9 "$pid" 2>/dev/null && killed=$((killed + 1)) ;; esac
done
ok $([ $killed -ge 1 ]; echo $?) "the push's git processes killed with SIGKILL ($killed)"
kill $CURL 2>/dev/null
wait $CURL 2>/dev/null
LEFT=$(find "$GIT/objects" -maxdepth 1 -name 'tmp_objdir-incoming-*' | head -n 1)
ok $([ -n "$LEFT" ]; echo $?) "the killed push left its quarantine behind: $(basename "${LEFT:-none}")"
is "$(git --git-dir="$GIT" rev-parse main)" "$OLD" "main did not move"
khub fsck >"$TEST_DIR/fsck1.out" 2>&1
is "$?" 0 "fsck: the leftover is no damage"

# ---- a killed LFS upload --------------------------------------------------------------------
head -c 2000000 /dev/urandom >"$W/up.bin"
UOID=$(sha256sum "$W/up.bin" | cut -d' ' -f1)
HREF=$(curl -s -u "alice:$TOK" -H 'Content-Type: application/vnd.git-lfs+json' \
	--data "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$UOID\",\"size\":2000000}]}" \
	"$KHUB_URL/kernels/alice/relu.git/info/lfs/objects/batch" | jq -r '.objects[0].actions.upload.href')
curl -s -o /dev/null --limit-rate 50k -X PUT --data-binary @"$W/up.bin" "$HREF" &
UP=$!
partial=1
for _ in $(seq 1 1200); do
	[ -n "$(find "$KHUB_DATA_DIR/lfs/tmp" -type f -size +1k 2>/dev/null)" ] && { partial=0; break; }
	sleep 0.1
done
ok $partial "the upload is being written to lfs/tmp"
kill -9 $UP
wait $UP 2>/dev/null
gone=1
for _ in $(seq 1 300); do	# the server sees the connection end and drops the partial file
	[ -z "$(find "$KHUB_DATA_DIR/lfs/tmp" -type f -size +1k 2>/dev/null)" ] && { gone=0; break; }
	sleep 0.1
done
ok $([ ! -e "$KHUB_DATA_DIR/lfs/objects/${UOID:0:2}/${UOID:2:2}/$UOID" ]; echo $?) \
	"the killed upload's object never reached the store"
[ $gone -eq 0 ] || diag "a partial upload file is still in lfs/tmp (gc removes it after the grace period)"

# ---- a commit killed while its pack is written ------------------------------------------------
# 66 regular (non-LFS) text files (a pack from 64 objects on): the accepted commit's objects go to the
# repo as one pack, which libgit2 writes as objects/pack/pack_git2_*; the
# server is killed (SIGKILL) while that file exists
/usr/bin/python3 - "$W/many.ndjson" <<'PY'
import base64, os, sys
with open(sys.argv[1], "w") as out:
    out.write('{"key":"header","value":{"summary":"many files"}}\n')
    for i in range(66):
        text = os.urandom(400000).hex().encode()
        out.write('{"key":"file","value":{"path":"text/f%d.txt","content":"%s","encoding":"base64"}}\n'
                  % (i, base64.b64encode(text).decode()))
PY
curl -s -o /dev/null -X POST -H "Authorization: Bearer $TOK" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$W/many.ndjson" "$KHUB_URL/api/kernels/alice/relu/commit/main" &
COMMIT=$!
packing=1
for _ in $(seq 1 6000); do
	[ -n "$(find "$GIT/objects/pack" -name '*_git2_*' 2>/dev/null)" ] && { packing=0; break; }
	sleep 0.02
done
kill -9 "$KHUB_PID"
wait "$KHUB_PID" 2>/dev/null
KHUB_PID=
wait $COMMIT 2>/dev/null
ok $packing "the commit's pack was being written (objects/pack/*_git2_*) when khub serve was killed"
KILLED=$(find "$GIT/objects/pack" -name '*_git2_*' | head -n 1)
ok $([ -n "$KILLED" ]; echo $?) "the killed commit left its temporary pack: $(basename "${KILLED:-none}")"
khub_start
is "$(git --git-dir="$GIT" rev-parse main)" "$OLD" "main did not move (the commit was never acknowledged)"
khub fsck >"$TEST_DIR/fsck-commit.out" 2>&1
is "$?" 0 "fsck: the leftover pack is no damage"

# ---- gc -----------------------------------------------------------------------------------
khub gc --dry-run >"$TEST_DIR/gc-dry.out" 2>&1
ok $([ -d "$LEFT" ] && [ -f "$KILLED" ]; echo $?) "gc (default grace) keeps the fresh leftovers: a write may still be running"
touch -d '3 days ago' "$LEFT" "$KILLED"
mkdir -p "$GIT/objects/tmp_objdir-incoming-young1"
: >"$GIT/objects/tmp_objdir-incoming-young1/tmp_obj_x"
khub gc --dry-run >"$TEST_DIR/gc-dry2.out" 2>&1
like "$(cat "$TEST_DIR/gc-dry2.out")" "would remove git temp $LEFT" "gc --dry-run names the killed push's quarantine"
like "$(cat "$TEST_DIR/gc-dry2.out")" "would remove git temp $KILLED" "and the killed commit's pack"
khub gc >"$TEST_DIR/gc.out" 2>&1
is "$?" 0 "gc exits 0"
ok $([ ! -e "$LEFT" ]; echo $?) "gc removed the killed push's quarantine"
ok $([ ! -e "$KILLED" ]; echo $?) "gc removed the killed commit's temporary pack"
ok $([ -d "$GIT/objects/tmp_objdir-incoming-young1" ]; echo $?) "and kept a young one"
like "$(tail -n 1 "$TEST_DIR/gc.out")" "[1-9][0-9]* temp files \([1-9][0-9]* bytes\)" "gc reports the bytes it freed"
is "$(git --git-dir="$GIT" rev-parse main)" "$OLD" "main is where it was"
khub fsck >"$TEST_DIR/fsck2.out" 2>&1
is "$?" 0 "fsck after gc is clean (nothing the refs use was removed)"
rm -rf "$GIT/objects/tmp_objdir-incoming-young1"
done_testing
