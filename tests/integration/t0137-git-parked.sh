#!/bin/bash
# t0137-git-parked.sh -- git smart HTTP holds no server thread while git
# works: on a server with ONE request thread, (1) a push whose pre-receive
# hook is held (git busy before it answers) leaves the thread free: the Hub
# API, another clone and info/refs answer meanwhile, then the push lands;
# (2) a push of a pack far larger than a pipe's buffer, fed while
# metadata requests run beside it, lands byte-identical; (3) a clone of it
# reads back the same bytes. (4) A Hub API commit stuck in its apply step
# (its LFS link waits for a table lock held by another session) runs on the
# work queue: the one thread answers metadata meanwhile; the commit lands
# once the lock is gone. (5) An LFS
# upload is checked on the request thread and stored (fsync, rename, repo
# link) on the work queue: a wrong body is refused with nothing stored, a
# right one is stored, verified and served back.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }

khub_setup
export KHUB_THREADS=1
log=$TEST_DIR/setup.log
khub admin org create acme >>"$log" 2>&1
khub admin user create bob >>"$log" 2>&1
khub admin member set acme bob write >>"$log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
khub import "$SRC" --repo acme/relu --branch main >>"$log" 2>&1
khub_start
HOSTPORT=${KHUB_URL#http://}
REPO_URL=http://bob:$BOB@$HOSTPORT/kernels/acme/relu

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
unset GIT_DIR GIT_WORK_TREE GIT_CONFIG_GLOBAL
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
git config --global advice.detachedHead false
# without git-lfs's filters: this test is about the pipes, not LFS
git config --global --unset-all filter.lfs.process 2>/dev/null || true

W=$TEST_DIR/work
mkdir -p "$W"
GIT_LFS_SKIP_SMUDGE=1 git -c filter.lfs.smudge= -c filter.lfs.process= -c filter.lfs.required=false \
	clone -q "$REPO_URL" "$W/c" >"$TEST_DIR/err" 2>&1
ok $? "clone through the one-thread server"

# ---- (1) a push held in its pre-receive hook ------------------------------------
# The server rewrote data_dir/hooks at start; wrap its pre-receive so that
# it waits for a go file (git http-backend answers nothing meanwhile).
HOOK=$KHUB_DATA_DIR/hooks/pre-receive
cp "$HOOK" "$HOOK.khub"
cat >"$HOOK" <<SH
#!/bin/sh
touch '$TEST_DIR/hook-started'
while [ ! -e '$TEST_DIR/go' ]; do sleep 0.05; done
exec '$HOOK.khub' "\$@"
SH
chmod 755 "$HOOK"

git -C "$W/c" checkout -q -b held
printf 'held push\n' >"$W/c/held.txt"
git -C "$W/c" add held.txt
git -C "$W/c" -c core.hooksPath=/dev/null commit -q -m "held push"
HELD=$(git -C "$W/c" rev-parse HEAD)
git -C "$W/c" -c filter.lfs.process= push -q origin held >"$TEST_DIR/push1.err" 2>&1 &
PUSH_PID=$!
for _ in $(seq 1 200); do [ -e "$TEST_DIR/hook-started" ] && break; sleep 0.05; done
check "the push reached its pre-receive hook" -- test -e "$TEST_DIR/hook-started"

code=$(curl -s -o "$TEST_DIR/info.json" -w '%{http_code}' --max-time 5 "$KHUB_URL/api/kernels/acme/relu")
is "$code" 200 "GET /api/kernels/acme/relu answers while the push waits in git"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
	"$KHUB_URL/kernels/acme/relu/info/refs?service=git-upload-pack")
is "$code" 200 "info/refs answers while the push waits in git"
GIT_LFS_SKIP_SMUDGE=1 timeout 20 git -c filter.lfs.smudge= -c filter.lfs.process= -c filter.lfs.required=false \
	clone -q "$REPO_URL" "$W/c2" >"$TEST_DIR/err" 2>&1
ok $? "a whole clone runs while the push waits in git"
check "the held push is still running" -- kill -0 "$PUSH_PID"
touch "$TEST_DIR/go"
wait "$PUSH_PID"
ok $? "the push lands once its hook goes on"
sha=$(curl -s "$KHUB_URL/api/kernels/acme/relu/revision/held" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
is "$sha" "$HELD" "the held branch's head is the pushed commit"
mv "$HOOK.khub" "$HOOK"

# ---- (2) a pack much larger than a pipe, with metadata requests beside it -------
git -C "$W/c" checkout -q -b big main
head -c 6000000 /dev/urandom >"$W/c/blob.bin"
# a pack of many files too: git's indexing keeps the pipe full a while
mkdir -p "$W/c/many"
for i in $(seq 1 300); do head -c 3000 /dev/urandom >"$W/c/many/f$i.txt"; done
git -C "$W/c" add blob.bin many
git -C "$W/c" -c core.hooksPath=/dev/null commit -q -m "a large push"
BIG=$(git -C "$W/c" rev-parse HEAD)
git -C "$W/c" -c filter.lfs.process= -c http.postBuffer=65536 push -q origin big >"$TEST_DIR/push2.err" 2>&1 &
PUSH_PID=$!
fails=0 n=0
while kill -0 "$PUSH_PID" 2>/dev/null && [ $n -lt 200 ]; do
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$KHUB_URL/api/kernels/acme/relu/revision/main")
	[ "$code" = 200 ] || fails=$((fails + 1))
	n=$((n + 1))
done
wait "$PUSH_PID"
rc=$?
[ $rc -eq 0 ] || sed 's/^/# /' "$TEST_DIR/push2.err"
ok $rc "a push of a 7 MB pack lands ($n metadata requests beside it)"
is "$fails" 0 "every metadata request beside the push answered 200"
sha=$(curl -s "$KHUB_URL/api/kernels/acme/relu/revision/big" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
is "$sha" "$BIG" "the big branch's head is the pushed commit"

# ---- (3) read back ----------------------------------------------------------------
GIT_LFS_SKIP_SMUDGE=1 git -c filter.lfs.smudge= -c filter.lfs.process= -c filter.lfs.required=false \
	clone -q -b big "$REPO_URL" "$W/c3" >"$TEST_DIR/err" 2>&1
ok $? "clone of the big branch"
check "blob.bin comes back byte-identical" -- cmp "$W/c/blob.bin" "$W/c3/blob.bin"
check "the 300 small files come back identical" -- diff -r "$W/c/many" "$W/c3/many"
curl -s "$KHUB_URL/kernels/acme/relu/resolve/big/blob.bin" -o "$TEST_DIR/blob.api"
check "the API serves the pushed blob.bin identical" -- cmp "$W/c/blob.bin" "$TEST_DIR/blob.api"
check "git fsck of the server's repo" -- git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/relu.git" fsck --no-progress

# ---- (4) a commit applied on the work queue ---------------------------------------
# Applying a commit links its LFS content to the repo (an INSERT into
# lfs_repo_objects) before the ref moves. Another session holds a lock that
# makes that INSERT wait: the commit is stuck in its apply step, on the work
# queue, and the one request thread must go on answering.
PSQL=(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt)
if command -v psql >/dev/null 2>&1; then
	"${PSQL[@]}" -c "begin" -c "lock table lfs_repo_objects in share mode" -c "select pg_sleep(60)" \
		>/dev/null 2>&1 &
	HOLDER=$!
	held=1
	for _ in $(seq 1 50); do
		[ "$("${PSQL[@]}" -c "select count(*) from pg_locks l join pg_class c on c.oid = l.relation
			where c.relname = 'lfs_repo_objects' and l.mode = 'ShareLock' and l.granted")" = 1 ] && { held=0; break; }
		sleep 0.1
	done
	ok $held "another session holds a lock on lfs_repo_objects"
	# binary content (NUL bytes): stored as LFS, linked when the commit is applied
	/usr/bin/python3 - "$TEST_DIR/lfs-commit.ndjson" <<'PY'
import base64, json, os, sys
with open(sys.argv[1], "w") as out:
    out.write(json.dumps({"key": "header", "value": {"summary": "binary while the link table is locked"}}) + "\n")
    content = base64.b64encode(b"\0" * 64 + os.urandom(200000)).decode()
    out.write(json.dumps({"key": "file", "value": {"path": "held/blob.bin", "content": content,
                                                   "encoding": "base64"}}) + "\n")
PY
	curl -s -o "$TEST_DIR/commit.json" -w '%{http_code}' -H "Authorization: Bearer $BOB" \
		-H 'Content-Type: application/x-ndjson' --data-binary @"$TEST_DIR/lfs-commit.ndjson" \
		"$KHUB_URL/api/kernels/acme/relu/commit/main" >"$TEST_DIR/commit.code" 2>/dev/null &
	COMMIT_PID=$!
	# the commit waits in its apply step (its INSERT waits for the lock)
	waiting=1
	for _ in $(seq 1 100); do
		[ "$("${PSQL[@]}" -c "select count(*) from pg_stat_activity
			where wait_event_type = 'Lock' and query like 'INSERT INTO lfs_repo_objects%'")" -ge 1 ] && { waiting=0; break; }
		sleep 0.1
	done
	ok $waiting "the commit's apply step waits on the lock"
	answered=0
	for _ in 1 2 3 4 5; do
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$KHUB_URL/api/kernels/acme/relu/revision/big")
		[ "$code" = 200 ] && answered=$((answered + 1))
	done
	is "$answered" 5 "metadata is answered while the commit is applied (one request thread)"
	check "the commit is still waiting" -- kill -0 "$COMMIT_PID"
	kill "$HOLDER" 2>/dev/null
	"${PSQL[@]}" -c "select pg_terminate_backend(pid) from pg_stat_activity
		where query like '%pg_sleep(60)%' and pid <> pg_backend_pid()" >/dev/null 2>&1
	wait "$COMMIT_PID"
	is "$(cat "$TEST_DIR/commit.code")" 200 "the commit lands once the lock is gone"
	oid=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["commitOid"])' "$TEST_DIR/commit.json")
	curl -s "$KHUB_URL/kernels/acme/relu/resolve/$oid/held/blob.bin" -o "$TEST_DIR/held.bin"
	/usr/bin/python3 - "$TEST_DIR/lfs-commit.ndjson" "$TEST_DIR/held.bin" <<'PY'
import base64, json, sys
lines = open(sys.argv[1]).read().splitlines()
want = base64.b64decode(json.loads(lines[1])["value"]["content"])
sys.exit(0 if open(sys.argv[2], "rb").read() == want else 1)
PY
	ok $? "its binary file reads back identical"
else
	skip_n=6
	for _ in $(seq 1 $skip_n); do TAP_COUNT=$((TAP_COUNT + 1)); echo "ok $TAP_COUNT # SKIP psql not installed"; done
fi

# ---- (5) LFS basic-transfer upload ---------------------------------------------------
head -c 3000000 /dev/urandom >"$TEST_DIR/obj.bin"
OID=$(sha256sum "$TEST_DIR/obj.bin" | cut -d' ' -f1)
SIZE=$(stat -c %s "$TEST_DIR/obj.bin")
curl -s -u "bob:$BOB" -H 'Content-Type: application/vnd.git-lfs+json' \
	--data "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$OID\",\"size\":$SIZE}]}" \
	"$KHUB_URL/kernels/acme/relu.git/info/lfs/objects/batch" >"$TEST_DIR/batch.json"
read -r PUT_URL VERIFY_URL < <(/usr/bin/python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))["objects"][0]["actions"]
print(o["upload"]["href"], o["verify"]["href"])' "$TEST_DIR/batch.json")
like "$PUT_URL" '/api/lfs/upload/' "the batch hands out an upload URL"
head -c "$SIZE" /dev/zero >"$TEST_DIR/wrong.bin"
code=$(curl -s -o "$TEST_DIR/put.out" -w '%{http_code}' -X PUT --data-binary @"$TEST_DIR/wrong.bin" "$PUT_URL")
like "$code $(cat "$TEST_DIR/put.out")" "^400 .*hashes to .*not $OID" "a body of the announced size with other content is refused"
is "$(find "$KHUB_DATA_DIR/lfs" -name "$OID" | wc -l)" 0 "nothing was stored for it"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary @"$TEST_DIR/obj.bin" "$PUT_URL")
is "$code" 200 "the right body is stored"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/vnd.git-lfs+json' \
	--data "{\"oid\":\"$OID\",\"size\":$SIZE}" "$VERIFY_URL")
is "$code" 200 "verify finds it stored and linked to the repo"
check "the stored object is byte-identical" -- cmp "$TEST_DIR/obj.bin" "$(find "$KHUB_DATA_DIR/lfs" -name "$OID" | head -1)"
is "$(find "$KHUB_DATA_DIR/lfs/tmp" -type f | wc -l)" 0 "no upload temp file is left in the LFS store"

done_testing
