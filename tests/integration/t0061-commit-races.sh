#!/bin/bash
# t0061-commit-races.sh -- concurrent commits and crashes (write contract
# §4.6): two clients with the same parentCommit → exactly one 200 and one
# 412 and one new commit per round; 8 clients without parentCommit all land,
# serialised; concurrent create_pr=1 get distinct PR numbers; SIGKILL while a
# commit body arrives and right after it ended → the branch is at the old or
# the new commit, git fsck --strict is clean, a restarted server (reusing the
# embedded PostgreSQL left running) takes new commits.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"

command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }

khub_setup
# After a kill -9 the embedded cluster keeps running until a restarted
# server stops it; stop it here if the test ends before that.
pg_leftover_stop() {
	local d=$KHUB_DATA_DIR/pg/data bindir=${KHUB_PG_BINDIR:-/usr/lib/postgresql/15/bin} owner
	[ -f "$d/postmaster.pid" ] || return 0
	owner=$(stat -c %U "$d")
	if [ "$owner" = "$(id -un)" ]; then
		"$bindir/pg_ctl" stop -m immediate -D "$d"
	else
		su -s /bin/sh "$owner" -c "'$bindir/pg_ctl' stop -m immediate -D '$d'"
	fi >/dev/null 2>&1
}
trap 'khub_stop; pg_leftover_stop; khub_teardown' EXIT

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
V1=$(khub import "$SRC" --repo acme/relu --branch v1 2>>"$TEST_DIR/setup.log")
khub admin user create bob >>"$TEST_DIR/setup.log" 2>&1
khub admin member set acme bob write >>"$TEST_DIR/setup.log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$TEST_DIR/setup.log" | tail -n 1)
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
like "$V1" '^[0-9a-f]{40}$' "seeded acme/relu v1"
khub_start

API=$KHUB_URL/api/kernels/acme/relu
head_of() { git --git-dir="$GITDIR" rev-parse "refs/heads/${1:-v1}"; }
commit_to() {	# commit_to REV BODY OUT -> writes "STATUS" + body into OUT
	curl -s -o "$3.body" -w '%{http_code}\n' -X POST -H "Authorization: Bearer $BOB" \
		-H 'Content-Type: application/x-ndjson' --data-binary @"$2" "$API/commit/$1" >"$3"
}
fsck_clean() { local out; out=$(git --git-dir="$GITDIR" fsck --strict --no-dangling 2>&1) && [ -z "$out" ]; }

# ---- same parentCommit, two clients at once ---------------------------------------
ROUNDS=6
RACE_OK=0
for r in $(seq 1 $ROUNDS); do
	OLD=$(head_of)
	for c in a b; do
		head -c 400000 /dev/urandom >"$TEST_DIR/race-$c.bin"
		/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "race $r $c" --parent "$OLD" \
			--file "race/$r-$c.bin=$TEST_DIR/race-$c.bin" >"$TEST_DIR/race-$c.ndjson"
	done
	commit_to v1 "$TEST_DIR/race-a.ndjson" "$TEST_DIR/st-a" &
	pa=$!
	commit_to v1 "$TEST_DIR/race-b.ndjson" "$TEST_DIR/st-b" &
	pb=$!
	wait $pa $pb
	GOT=$(sort "$TEST_DIR/st-a" "$TEST_DIR/st-b" | tr '\n' ' ')
	NEW=$(head_of)
	COUNT=$(git --git-dir="$GITDIR" rev-list --count "$OLD..$NEW")
	LOSER=a; [ "$(cat "$TEST_DIR/st-a")" = 412 ] || LOSER=b
	MSG=$(/usr/bin/python3 -c "import json; print(json.load(open('$TEST_DIR/st-$LOSER.body'))['error'])" 2>/dev/null)
	if [ "$GOT" = "200 412 " ] && [ "$COUNT" = 1 ] && [[ "$MSG" == "The branch was updated since"* ]]; then
		RACE_OK=$((RACE_OK + 1))
	else
		diag "round $r: statuses '$GOT', $COUNT new commits, loser says '$MSG'"
	fi
done
is "$RACE_OK" "$ROUNDS" "same parentCommit from two clients at once: one 200, one 412 (JSON error), one new commit ($ROUNDS rounds)"
ok $(fsck_clean; echo $?) "git fsck --strict clean after the races"

# A short parentCommit (PY accepts ≥5 hex) that is stale is a 412 too.
printf 'x\n' >"$TEST_DIR/x.txt"
/usr/bin/python3 "$LIB/commit_body.py" ndjson --parent "${V1:0:7}" --file x.txt="$TEST_DIR/x.txt" >"$TEST_DIR/stale.ndjson"
commit_to v1 "$TEST_DIR/stale.ndjson" "$TEST_DIR/st"
is "$(cat "$TEST_DIR/st")" 412 "a stale abbreviated parentCommit: 412"
H=$(head_of)
/usr/bin/python3 "$LIB/commit_body.py" ndjson --parent "${H:0:7}" --file x.txt="$TEST_DIR/x.txt" >"$TEST_DIR/fresh.ndjson"
commit_to v1 "$TEST_DIR/fresh.ndjson" "$TEST_DIR/st"
is "$(cat "$TEST_DIR/st")" 200 "the current head, abbreviated to 7 hex: 200"

# ---- 8 clients, no parentCommit: all land, one after the other --------------------------
OLD=$(head_of)
pids=()
for c in $(seq 1 8); do
	head -c 200000 /dev/urandom | base64 -w 76 >"$TEST_DIR/p$c.txt"
	/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "parallel $c" --file "parallel/p$c.txt=$TEST_DIR/p$c.txt" \
		>"$TEST_DIR/p$c.ndjson"
done
for c in $(seq 1 8); do
	commit_to v1 "$TEST_DIR/p$c.ndjson" "$TEST_DIR/stp$c" &
	pids+=($!)
done
wait "${pids[@]}"
is "$(cat "$TEST_DIR"/stp? | sort | uniq -c | sed 's/^ *//')" "8 200" "8 parallel commits without parentCommit: all 200"
NEW=$(head_of)
is "$(git --git-dir="$GITDIR" rev-list --count "$OLD..$NEW")" 8 "v1 has exactly 8 new commits (git rev-list --count)"
is "$(git --git-dir="$GITDIR" rev-list --first-parent --count "$OLD..$NEW")/$(git --git-dir="$GITDIR" rev-list --merges --count "$OLD..$NEW")" \
	"8/0" "a straight line: each commit on top of the previous"
OIDS_RESP=$(for c in $(seq 1 8); do /usr/bin/python3 -c "import json; print(json.load(open('$TEST_DIR/stp$c.body'))['commitOid'])"; done | sort)
is "$OIDS_RESP" "$(git --git-dir="$GITDIR" rev-list "$OLD..$NEW" | sort)" "the 8 commitOids answered are exactly the 8 new commits"
is "$(git --git-dir="$GITDIR" ls-tree --name-only "$NEW" parallel/ | wc -l)" 8 "the last commit has all 8 files"
BAD=0
for c in $(seq 1 8); do
	cmp -s <(git --git-dir="$GITDIR" cat-file blob "$NEW:parallel/p$c.txt") "$TEST_DIR/p$c.txt" || BAD=$((BAD + 1))
done
is "$BAD" 0 "every file has its own content"

# ---- concurrent create_pr=1: distinct PR numbers, branch untouched --------------------------
OLD=$(head_of)
pids=()
for c in 1 2 3 4; do
	commit_to "v1?create_pr=1" "$TEST_DIR/p$c.ndjson" "$TEST_DIR/stpr$c" &
	pids+=($!)
done
wait "${pids[@]}"
is "$(cat "$TEST_DIR"/stpr? | sort | uniq -c | sed 's/^ *//')" "4 200" "4 concurrent create_pr=1 commits: all 200"
PRS=$(for c in 1 2 3 4; do /usr/bin/python3 -c "import json; print(json.load(open('$TEST_DIR/stpr$c.body'))['prNum'])"; done | sort -n | tr '\n' ' ')
is "$PRS" "1 2 3 4 " "they got PR numbers 1..4"
MATCH=0
for c in 1 2 3 4; do
	n=$(/usr/bin/python3 -c "import json; d=json.load(open('$TEST_DIR/stpr$c.body')); print(d['prNum'], d['commitOid'])")
	[ "$(git --git-dir="$GITDIR" rev-parse "refs/pr/${n% *}")" = "${n#* }" ] && MATCH=$((MATCH + 1))
done
is "$MATCH" 4 "each refs/pr/N points at the commit answered with prNum N"
is "$(head_of)" "$OLD" "v1 did not move"

# ---- SIGKILL while the body is arriving ---------------------------------------------------------
# A 300 MiB body (one 225 MiB file), sent at 40 MB/s; kill when the server
# has spooled 32 MiB of it.
head -c $((225 << 20)) /dev/urandom >"$TEST_DIR/huge.bin"
/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "huge" --file build/huge.so="$TEST_DIR/huge.bin" >"$TEST_DIR/huge.ndjson"
rm -f "$TEST_DIR/huge.bin"
diag "huge body: $(stat -c %s "$TEST_DIR/huge.ndjson") bytes"
OLD=$(head_of)
TMPDIR_LFS=$KHUB_DATA_DIR/lfs/tmp
TMP_BEFORE=$(find "$TMPDIR_LFS" -type f | wc -l)
curl -s -o /dev/null -w '%{http_code}' --limit-rate 40M -X POST -H "Authorization: Bearer $BOB" \
	-H 'Content-Type: application/x-ndjson' --data-binary @"$TEST_DIR/huge.ndjson" "$API/commit/v1" \
	>"$TEST_DIR/st-huge" 2>/dev/null &
CURL=$!
SPOOLED=0
for _ in $(seq 1 300); do
	SPOOLED=$(find "$TMPDIR_LFS" -type f -printf '%s\n' 2>/dev/null | sort -n | tail -1)
	[ "${SPOOLED:-0}" -ge $((32 << 20)) ] && break
	sleep 0.05
done
STARTS=$(grep -c 'embedded database: starting' "$TEST_DIR/server.log")
kill -9 "$KHUB_PID"
wait "$KHUB_PID" 2>/dev/null
KHUB_PID=
wait $CURL
diag "killed the server with ${SPOOLED:-0} bytes of the file spooled; curl saw HTTP $(cat "$TEST_DIR/st-huge")"
ok $([ "${SPOOLED:-0}" -ge $((32 << 20)) ]; echo $?) "the server was killed in the middle of the body"
check "the embedded PostgreSQL outlived the server" -- test -f "$KHUB_DATA_DIR/pg/data/postmaster.pid"
is "$(head_of)" "$OLD" "after kill -9 mid-body: v1 is at the old commit"
ok $(fsck_clean; echo $?) "git fsck --strict clean"
khub_start
is "$(grep -c 'embedded database: starting' "$TEST_DIR/server.log")" "$STARTS" "the restarted server reused the running cluster (did not start one)"
LEFT=$(find "$TMPDIR_LFS" -type f | wc -l)
# TODO: the dead server's partial spool file stays in lfs/tmp forever.
ok $([ "$LEFT" -le "$TMP_BEFORE" ]; echo $?) "no partial spool file left in lfs/tmp after the restart ($LEFT files)"
/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "after crash 1" --file after1.txt="$TEST_DIR/x.txt" >"$TEST_DIR/after1.ndjson"
commit_to v1 "$TEST_DIR/after1.ndjson" "$TEST_DIR/st"
is "$(cat "$TEST_DIR/st")" 200 "a new commit works after the restart"
is "$(git --git-dir="$GITDIR" rev-parse "$(head_of)^")" "$OLD" "and lands on the old head"

# ---- SIGKILL right after the body ended -------------------------------------------------------------
# 300 small files + one 24 MiB binary, so applying takes a moment; the
# client kills the server DELAY seconds after its last byte went out.
mkdir -p "$TEST_DIR/many"
for i in $(seq 1 300); do printf 'v = %d\n' "$i" >"$TEST_DIR/many/f$i.py"; done
head -c $((24 << 20)) /dev/urandom >"$TEST_DIR/many/blob.so"
# Calibrate: how long the server takes from the last body byte to the answer.
printf '0\n' >"$TEST_DIR/many/round.txt"
/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "crash round 0" --dir "$TEST_DIR/many" --prefix "crash/" >"$TEST_DIR/many.ndjson"
RES=$(/usr/bin/python3 "$LIB/post_body.py" "$API/commit/v1" "$TEST_DIR/many.ndjson" "$BOB")
T=$(echo "$RES" | sed -n 's/.* waited=\([^ ]*\).*/\1/p')
is "$(echo "$RES" | cut -d' ' -f1)" status=200 "calibration commit (300 files + 24 MiB) answered in $T s after its last byte"
DELAYS=$(/usr/bin/python3 -c "t=float('${T:-0.5}'); print(' '.join(f'{t*f:.3f}' for f in (0, 0.3, 0.45, 0.6, 0.7, 0.8, 1.5)))")
ROUND=0
for delay in $DELAYS; do
	ROUND=$((ROUND + 1))
	printf '%s\n' "$ROUND" >"$TEST_DIR/many/round.txt"
	/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "crash round $ROUND" --dir "$TEST_DIR/many" --prefix "crash/" \
		>"$TEST_DIR/many.ndjson"
	OLD=$(head_of)
	RES=$(/usr/bin/python3 "$LIB/post_body.py" "$API/commit/v1" "$TEST_DIR/many.ndjson" "$BOB" --kill "$KHUB_PID" --after-send "$delay")
	wait "$KHUB_PID" 2>/dev/null
	KHUB_PID=
	NEW=$(head_of)
	STATUS=$(echo "$RES" | sed -n 's/^status=\([^ ]*\).*/\1/p')
	if [ "$NEW" = "$OLD" ]; then
		STATE=old
	elif [ "$(git --git-dir="$GITDIR" rev-parse "$NEW^")" = "$OLD" ] &&
		[ "$(git --git-dir="$GITDIR" cat-file blob "$NEW:crash/round.txt" 2>/dev/null)" = "$ROUND" ]; then
		STATE=new
	else
		STATE=other
	fi
	diag "kill $delay s after the body: HTTP $STATUS, branch at the $STATE commit"
	ok $([ "$STATE" != other ]; echo $?) "kill -9 ${delay}s after the body: v1 is at the old or the new commit ($STATE)"
	if [ "$STATUS" = 200 ]; then
		is "$STATE" new "a commit answered 200 before the kill survives it"
	fi
	ok $(fsck_clean; echo $?) "git fsck --strict clean (round $ROUND)"
	khub_start
	if [ "$STATE" = new ]; then
		got=$(curl -s "$KHUB_URL/kernels/acme/relu/resolve/v1/crash/blob.so" | sha256sum | cut -d' ' -f1)
		is "$got" "$(sha256sum <"$TEST_DIR/many/blob.so" | cut -d' ' -f1)" "the LFS content of the surviving commit is served"
	fi
done
# A crash inside the ref update itself (libgit2 writes refs/heads/v1.lock,
# then renames it) leaves the lock file behind; simulate that state.
kill -9 "$KHUB_PID"
wait "$KHUB_PID" 2>/dev/null
KHUB_PID=
head_of >"$GITDIR/refs/heads/v1.lock"
touch -d '2 minutes ago' "$GITDIR/refs/heads/v1.lock"	# the crash was a while ago
khub_start
/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "stale lock" --file stale-lock.txt="$TEST_DIR/x.txt" >"$TEST_DIR/lock.ndjson"
commit_to v1 "$TEST_DIR/lock.ndjson" "$TEST_DIR/st"
ok $([ "$(cat "$TEST_DIR/st")" = 200 ]; echo $?) "a commit after a crash that left refs/heads/v1.lock (got $(cat "$TEST_DIR/st"): $(head -c 120 "$TEST_DIR/st.body"))"
rm -f "$GITDIR/refs/heads/v1.lock"
# The restarted server must still take commits on top of whatever is there.
OLD=$(head_of)
/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "after crash 2" --parent "$OLD" --file after2.txt="$TEST_DIR/x.txt" >"$TEST_DIR/after2.ndjson"
commit_to v1 "$TEST_DIR/after2.ndjson" "$TEST_DIR/st"
is "$(cat "$TEST_DIR/st")" 200 "a new commit (with parentCommit = head) works after the crashes"
is "$(git --git-dir="$GITDIR" rev-parse "$(head_of)^")" "$OLD" "on top of the head"
ok $(fsck_clean; echo $?) "git fsck --strict clean at the end"
is "$(server_and_sanitizer_logs | grep -c -e 'ERROR: AddressSanitizer' -e 'runtime error:')" 0 "no sanitizer report in the server log"
done_testing
