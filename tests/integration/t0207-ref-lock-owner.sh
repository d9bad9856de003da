#!/bin/bash
# t0207-ref-lock-owner.sh -- a ref's .lock file left by a writer that died
# inside its update does not block the branch: the next commit clears it at
# once (a khub writer's, whose owner record names a dead process, and a bare
# one as git writes it, some seconds old), while a live writer's lock (its
# owner file flock()ed, or its recorded process alive on this host) answers
# 503 with Retry-After, never 500.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
khub_start

GD=$KHUB_DATA_DIR/repos/kernels/acme/lk.git
H=$TEST_DIR/headers
N=0
commit() {	# commit -> $STATUS, headers in $H: one new file on main
	N=$((N + 1))
	STATUS=$(printf '{"key":"header","value":{"summary":"c%s","description":""}}\n{"key":"file","value":{"content":"%s","path":"f%s.txt","encoding":"base64"}}\n' \
		"$N" "$(printf 'n%s' "$N" | base64)" "$N" |
		curl -s -o "$TEST_DIR/body" -D "$H" -w '%{http_code}' -X POST -H "Authorization: Bearer $ALICE" \
			-H "Content-Type: application/x-ndjson" --data-binary @- "$KHUB_URL/api/kernels/acme/lk/commit/main")
}
head_sha() { git --git-dir="$GD" rev-parse -q --verify refs/heads/main; }
# what libgit2 leaves in a ref's lock: the new value it was writing
stale_lock() { head_sha >"$GD/refs/heads/main.lock"; }
start_of() { sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20; }	# field 22 of /proc/PID/stat

STATUS=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $ALICE" \
	-H "Content-Type: application/json" --data '{"name":"lk","organization":"acme","type":"kernel"}' "$KHUB_URL/api/repos/create")
is "$STATUS" 200 "repo created"
commit
is "$STATUS" 200 "a first commit (khub records its ref writes in khub-ref-owner)"
check "the owner record is empty between updates" -- test ! -s "$GD/khub-ref-owner"

# ---- a khub process killed inside its ref update ---------------------------------
sleep 0 &
DEAD=$!
wait "$DEAD"
stale_lock
printf '%s %s 12345 refs/heads/main\n' "$(hostname)" "$DEAD" >"$GD/khub-ref-owner"
BEFORE=$(head_sha)
commit
is "$STATUS" 200 "a fresh lock whose recorded owner is dead is cleared at once: the commit lands"
ok $([ "$(head_sha)" != "$BEFORE" ] && [ ! -e "$GD/refs/heads/main.lock" ]; echo $?) "main moved and no lock is left"

# ---- a bare lock, as git writes it, left by a killed git -----------------------
stale_lock
: >"$GD/khub-ref-owner"
touch -d '30 seconds ago' "$GD/refs/heads/main.lock"
commit
is "$STATUS" 200 "a bare lock of no khub owner, 30 s old, is cleared: the commit lands"

# ---- a live holder: 503 with Retry-After, never 500 -----------------------------
stale_lock
touch -d '10 minutes ago' "$GD/refs/heads/main.lock"
/usr/bin/python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(600)' "$GD/khub-ref-owner" "$TEST_DIR/held" &
HOLDER=$!
for _ in $(seq 1 600); do [ -e "$TEST_DIR/held" ] && break; sleep 0.1; done
printf '%s %s %s refs/heads/main\n' "$(hostname)" "$HOLDER" "$(start_of "$HOLDER")" >"$GD/khub-ref-owner"
commit
is "$STATUS/$(header Retry-After)" "503/2" "while a live writer holds the owner file (flock): 503 with Retry-After"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
commit
is "$STATUS" 200 "once that writer is dead, its lock is cleared at once: the commit lands"

# the recorded owner alive on this host without the flock (flock() over
# NFS is per process: a thread of a live process) is live too
stale_lock
printf '%s %s %s refs/heads/main\n' "$(hostname)" "$$" "$(start_of $$)" >"$GD/khub-ref-owner"
commit
is "$STATUS/$(header Retry-After)" "503/2" "a recorded owner alive on this host: 503 with Retry-After"
check "its lock is left alone" -- test -e "$GD/refs/heads/main.lock"
printf '%s %s %s refs/heads/main\n' "$(hostname)" "$$" "1" >"$GD/khub-ref-owner"
commit
is "$STATUS" 200 "a reused pid (another start time) is not the owner: the lock is cleared"

check "git fsck finds the repo sound" -- git --git-dir="$GD" fsck --no-progress
done_testing
