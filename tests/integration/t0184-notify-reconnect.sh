#!/bin/bash
# t0184-notify-reconnect.sh -- the cache coherence listener
# (storage/db/db_listen.c) after a PostgreSQL restart: two nodes on one
# embedded cluster with ten-minute cache TTLs; a token revoked behind the
# triggers' back (a notification every node missed, as one sent while the
# listeners were disconnected would be) stays cached on both; the postmaster
# is killed and restarted by the watchdog; each node reconnects, drops every
# cache and refuses the token; a revocation after the restart reaches both
# nodes again (the LISTEN was renewed).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v psql >/dev/null 2>&1 || { echo "1..0 # SKIP psql not installed"; exit 0; }
khub_setup
export KHUB_TOKEN_CACHE_TTL_MS=600000 KHUB_REPO_CACHE_TTL_MS=600000
B_PID=
stop_b() { [ -n "$B_PID" ] && kill -TERM "$B_PID" 2>/dev/null && wait "$B_PID" 2>/dev/null; B_PID=; }
trap 'stop_b; khub_teardown' EXIT

khub admin user create carol >/dev/null 2>&1
T1=$(khub admin token create carol --scope read 2>/dev/null | tail -n 1)
T2=$(khub admin token create carol --scope read 2>/dev/null | tail -n 1)
khub_start
B_PORT=$(free_port)
B_URL=http://127.0.0.1:$B_PORT
KHUB_LISTEN=127.0.0.1:$B_PORT "$KHUB_BIN" serve >>"$TEST_DIR/node-b.log" 2>&1 &
B_PID=$!
for _ in $(seq 1 300); do curl -sf "$B_URL/api/health" >/dev/null && break; sleep 0.1; done
ok $(curl -sf "$B_URL/api/health" >/dev/null; echo $?) "a second node on the same data dir answers"

status_of() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" "$2/api/whoami-v2"; }
poll_status() {	# poll_status TOKEN URL WANT: up to 10 s
	for _ in $(seq 1 200); do [ "$(status_of "$1" "$2")" = "$3" ] && return 0; sleep 0.05; done
	return 1
}
for u in "$KHUB_URL" "$B_URL"; do
	is "$(status_of "$T1" "$u")" 200 "carol's first token works on $u (now cached)"
	is "$(status_of "$T2" "$u")" 200 "carol's second token works on $u (now cached)"
done
SQL="host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub"
psql "$SQL" -qc "ALTER TABLE tokens DISABLE TRIGGER tokens_cache_notify;
	UPDATE tokens SET revoked_at = now() WHERE token_sha256 = encode(sha256(convert_to('$T1', 'UTF8')), 'hex');
	ALTER TABLE tokens ENABLE TRIGGER tokens_cache_notify" >"$TEST_DIR/psql.out" 2>&1
ok $? "the first token revoked without a notification" || sed 's/^/#   /' "$TEST_DIR/psql.out"
sleep 1	# a notification would have arrived by now; none was sent
is "$(status_of "$T1" "$KHUB_URL")" 200 "node A still answers from its cache (the missed notification)"
is "$(status_of "$T1" "$B_URL")" 200 "node B too"

# ---- PostgreSQL restarts ----------------------------------------------------------------------
PIDFILE=$KHUB_DATA_DIR/pg/data/postmaster.pid
PM=$(head -n 1 "$PIDFILE")
kill -9 "$PM"
ok $? "kill -9 the postmaster ($PM)"
up=0
for _ in $(seq 1 120); do
	NEWPM=$(head -n 1 "$PIDFILE" 2>/dev/null)
	[ -n "$NEWPM" ] && [ "$NEWPM" != "$PM" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/health")" = 200 ] &&
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$B_URL/api/health")" = 200 ] && { up=1; break; }
	sleep 0.5
done
is "$up" 1 "a watchdog restarted the postmaster and both nodes are healthy"
poll_status "$T1" "$KHUB_URL" 401
ok $? "node A reconnected its listener, dropped its caches and refuses the first token"
poll_status "$T1" "$B_URL" 401
ok $? "node B too"
ok $(grep -q "listening again; dropping every cache" "$TEST_DIR/server.log" "$TEST_DIR/node-b.log"; echo $?) \
	"the log says the listener reconnected and dropped every cache"

# ---- the LISTEN was renewed ------------------------------------------------------------------
for u in "$KHUB_URL" "$B_URL"; do
	is "$(status_of "$T2" "$u")" 200 "the second token works on $u (cached again)"
done
T2_ID=$(psql "$SQL" -Atc "SELECT id FROM tokens WHERE token_sha256 = encode(sha256(convert_to('$T2', 'UTF8')), 'hex')")
khub admin token revoke "$T2_ID" >>"$TEST_DIR/setup.log" 2>&1
ok $? "khub admin token revoke $T2_ID"
poll_status "$T2" "$KHUB_URL" 401
ok $? "node A refuses it (the notification arrived on the new connection)"
poll_status "$T2" "$B_URL" 401
ok $? "node B refuses it"

stop_b
done_testing
