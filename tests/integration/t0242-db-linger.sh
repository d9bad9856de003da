#!/bin/bash
# t0242-db-linger.sh -- embedded_db_linger_s: the last khub command leaves
# a lingerer (pg/linger.pid) that keeps the embedded PostgreSQL for the next
# command (same postmaster, no start), does not hold the command's output
# open, stops the cluster once unused for that long or at once on SIGTERM,
# and leaves it to a khub serve that still uses it; 0 (the default) stops
# it with the last command.
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

PG=$KHUB_DATA_DIR/pg
LINGER=$PG/linger.pid
PMFILE=$PG/data/postmaster.pid
postmaster() { head -1 "$PMFILE" 2>/dev/null; }
alive() {	# alive PID: a running process (a postmaster nobody reaps stays a zombie)
	[ -n "$1" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) [ZX] ' "/proc/$1/stat" 2>/dev/null
}
run() {	# run LINGER_S ARGS...: khub with that linger time, stderr in $TEST_DIR/err
	local s=$1; shift
	KHUB_EMBEDDED_DB_LINGER_S=$s "$KHUB_BIN" "$@" 2>"$TEST_DIR/err"
}
wait_gone() {	# wait_gone FILE: until FILE is removed (60 s at most)
	for _ in $(seq 1 600); do [ -e "$1" ] || return 0; sleep 0.1; done
	return 1
}

# ---- the default: the last command stops the cluster ----------------------------
run 0 admin user create alice >/dev/null
ok $? "linger 0: admin user create works"
ok $([ ! -e "$LINGER" ] && [ ! -e "$PMFILE" ]; echo $?) "linger 0: no lingerer, and the cluster stopped with the command"

# ---- a lingerer keeps the cluster for the next command -----------------------------
# $(...) returns at the command's end: the lingerer holds none of its output
OUT=$(timeout 120 bash -c "KHUB_EMBEDDED_DB_LINGER_S=600 '$KHUB_BIN' admin user create bob 2>&1; echo rc=\$?")
like "$OUT" "rc=0$" "linger 600: the command's output ends with the command (not with the lingerer)"
LP=$(cat "$LINGER" 2>/dev/null)
PM=$(postmaster)
ok $(alive "$LP"; echo $?) "a lingerer runs (pid $LP in pg/linger.pid)"
is "$(cat "/proc/$LP/comm" 2>/dev/null)" khub-db-linger "named khub-db-linger"
is "$(ls -l "/proc/$LP/fd" 2>/dev/null | grep -c -- '-> /dev/null')" 3 "its stdin, stdout and stderr are /dev/null"
ok $(alive "$PM"; echo $?) "and the postmaster ($PM) still runs after the command exited"
run 600 admin token create bob >/dev/null
ok $? "the next command works"
is "$(postmaster)" "$PM" "on the same postmaster"
ok $(! grep -q "embedded database: starting" "$TEST_DIR/err"; echo $?) "without starting PostgreSQL"
is "$(cat "$LINGER")" "$LP" "and the same lingerer (one at a time)"

# ---- a server beside the lingerer -----------------------------------------------------
KHUB_EMBEDDED_DB_LINGER_S=0 "$KHUB_BIN" serve >>"$TEST_DIR/server.log" 2>&1 &
KHUB_PID=$!
for _ in $(seq 1 300); do curl -sf "$KHUB_URL/api/health" >/dev/null 2>&1 && break; sleep 0.1; done
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/health")" 200 "khub serve starts beside the lingerer"
is "$(postmaster)" "$PM" "on the same postmaster"
kill -TERM "$LP"
wait_gone "$LINGER"
ok $? "SIGTERM: the lingerer ends"
ok $(alive "$PM"; echo $?) "leaving the cluster to the server that still uses it"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/whoami-v2")" 401 "which still answers from the database"
khub_stop
ok $([ ! -e "$PMFILE" ] && ! alive "$PM"; echo $?) "the server, now the last user (linger 0), stops the cluster"

# ---- SIGTERM stops an idle cluster at once ------------------------------------------
run 600 admin user create carol >/dev/null
LP=$(cat "$LINGER" 2>/dev/null) PM=$(postmaster)
ok $(alive "$LP" && alive "$PM"; echo $?) "a new lingerer and postmaster"
kill -TERM "$LP"
wait_gone "$LINGER"
ok $? "SIGTERM: the lingerer ends"
ok $([ ! -e "$PMFILE" ] && ! alive "$PM"; echo $?) "and stopped the cluster first"

# ---- unused for linger_s: stopped -----------------------------------------------------
run 1 admin user create dave >/dev/null
LP=$(cat "$LINGER" 2>/dev/null) PM=$(postmaster)
ok $(alive "$LP" && alive "$PM"; echo $?) "linger 1: a lingerer and the postmaster"
wait_gone "$LINGER"
ok $? "the lingerer ends on its own once the cluster is unused for a second"
ok $([ ! -e "$PMFILE" ] && ! alive "$PM"; echo $?) "and stopped the cluster"
like "$(run 0 admin token list bob)" . "the token made beside the lingerer is there"
done_testing
