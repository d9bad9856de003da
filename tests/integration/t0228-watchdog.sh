#!/bin/bash
# t0228-watchdog.sh -- systemd's watchdog (WatchdogSec= in debian's
# khub.service): khub serve started with NOTIFY_SOCKET and WATCHDOG_USEC
# sends WATCHDOG=1, from its main PID, every half interval while its HTTP
# loops turn; when the only loop is stuck (a request's query waits for a
# table lock another session holds) the pings stop and the log says which
# loop; once it turns again they resume.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

for tool in /usr/bin/python3 psql; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
check "debian's khub.service sets WatchdogSec=" -- grep -qE '^WatchdogSec=[0-9]+' "$KHUB_SRC/debian/khub.service"
make_kernel_tree "$TEST_DIR/src" relu
khub import "$TEST_DIR/src" --repo acme/relu --branch main >"$TEST_DIR/import.log" 2>&1
ok $? "acme/relu imported"

SOCK=$TEST_DIR/notify.sock
NOTIFY_LOG=$TEST_DIR/notify.log
: >"$NOTIFY_LOG"
/usr/bin/python3 "$KHUB_SRC/tests/integration/lib/notify_listen.py" "$SOCK" "$NOTIFY_LOG" &
LISTENER=$!
HOLDER=
PSQL=(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt)
cleanup() {
	[ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null
	"${PSQL[@]}" -c "select pg_terminate_backend(pid) from pg_stat_activity
		where query like '%pg_sleep(600)%' and pid <> pg_backend_pid()" >/dev/null 2>&1
	kill "$LISTENER" 2>/dev/null
	khub_teardown
}
trap cleanup EXIT
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done

wait_for() {	# wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 when it never did
	local end=$((SECONDS + $1)); shift
	until "$@"; do [ $SECONDS -lt "$end" ] || return 1; sleep 0.2; done
}
pings() { grep -c " WATCHDOG=1$" "$NOTIFY_LOG"; }
pings_above() { [ "$(pings)" -gt "$1" ]; }

# one HTTP loop; repo records always read from the database
NOTIFY_SOCKET=$SOCK WATCHDOG_USEC=2000000 khub_start --threads 1 --repo-cache-ttl-ms 0
wait_for 60 pings_above 1
ok $? "WATCHDOG=1 arrives (WATCHDOG_USEC=2000000: every second)"
is "$(grep " WATCHDOG=1$" "$NOTIFY_LOG" | cut -d' ' -f1 | sort -u)" "$KHUB_PID" "from khub's main PID"
like "$(cat "$TEST_DIR/server.log")" 'watchdog: WATCHDOG=1 every 1.0 s' "the log says the watchdog runs"

# ---- the only loop stuck ----------------------------------------------------------------------------------
"${PSQL[@]}" -c "begin" -c "lock table repos in access exclusive mode" -c "select pg_sleep(600)" >/dev/null 2>&1 &
HOLDER=$!
locked() {
	[ "$("${PSQL[@]}" -c "select count(*) from pg_locks l join pg_class c on c.oid = l.relation
		where c.relname = 'repos' and l.mode = 'AccessExclusiveLock' and l.granted")" = 1 ]
}
wait_for 30 locked
ok $? "another session holds repos in access exclusive mode"
curl -s -o /dev/null -w '%{http_code}' --max-time 600 "$KHUB_URL/api/kernels/acme/relu" >"$TEST_DIR/stuck.code" &
CURL=$!
wait_for 60 grep -q 'watchdog: HTTP loop 0 has not turned' "$TEST_DIR/server.log"
ok $? "the loop waits on the lock: the log says WATCHDOG=1 is withheld"
stalled=$(pings)
sleep 4	# four intervals of one second
is "$(pings)" "$stalled" "no WATCHDOG=1 while the loop is stuck"

# ---- it turns again ---------------------------------------------------------------------------------------
kill "$HOLDER" 2>/dev/null
"${PSQL[@]}" -c "select pg_terminate_backend(pid) from pg_stat_activity
	where query like '%pg_sleep(600)%' and pid <> pg_backend_pid()" >/dev/null
HOLDER=
wait "$CURL"
is "$(cat "$TEST_DIR/stuck.code")" 200 "the stuck request is answered once the lock is gone"
wait_for 60 grep -q 'watchdog: every HTTP loop turns again' "$TEST_DIR/server.log"
ok $? "the log says the loop turns again"
wait_for 60 pings_above "$stalled"
ok $? "WATCHDOG=1 resumes"
khub_stop
check "STOPPING=1 on shutdown" -- grep -q " STOPPING=1$" "$NOTIFY_LOG"
done_testing
