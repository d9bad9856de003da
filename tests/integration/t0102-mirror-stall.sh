#!/bin/bash
# t0102-mirror-stall.sh -- an upstream that accepts connections and never
# answers must not hang `khub mirror sync`: JSON requests give up after
# request_timeout, libgit2's ref listing after git_timeout (it has no
# network timeout of its own), the error is recorded and nothing is shown.
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

STALL_PORT=$(free_port)
/usr/bin/python3 - "$STALL_PORT" >"$TEST_DIR/stall.log" 2>&1 <<'PY' &
import socket, sys, threading, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
held = []
while True:
    c, _ = s.accept()
    held.append(c)   # read nothing, answer nothing, close nothing
    print("accepted", flush=True)
PY
STALL_PID=$!
trap 'kill $STALL_PID 2>/dev/null; khub_teardown' EXIT
for _ in $(seq 1 50); do grep -q . "$TEST_DIR/stall.log" 2>/dev/null || /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', $STALL_PORT)).close()" 2>/dev/null && break; sleep 0.1; done

cat >"$TEST_DIR/mirror.json" <<JSON
{"upstreams": [{"name": "stalled", "url": "http://127.0.0.1:$STALL_PORT", "max_retries": 0, "request_timeout": 2}],
 "selections": [{"name": "s", "upstream": "stalled", "repos": ["acme/relu"], "git_timeout": 3}]}
JSON
START=$(date +%s)
timeout 120 "$KHUB_BIN" mirror sync --mirror-config "$TEST_DIR/mirror.json" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
RC=$?
ELAPSED=$(( $(date +%s) - START ))
diag "mirror sync against a silent upstream: exit $RC after $ELAPSED s"
ok $([ "$RC" -ne 0 ] && [ "$RC" -ne 124 ]; echo $?) "the sync ends with an error instead of hanging (exit $RC)"
ok $([ "$ELAPSED" -lt 60 ]; echo $?) "within the configured timeouts ($ELAPSED s)"
like "$(cat "$TEST_DIR/err")" "did not answer the git ref advertisement within 3 s" "the reason is reported"
STATUS=$("$KHUB_BIN" mirror status 2>/dev/null)
like "$STATUS" "acme/relu .*never.*did not answer" "khub mirror status shows the repo never synced, with the error"
REFS=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/relu.git" for-each-ref 2>/dev/null | wc -l)
is "$REFS" 0 "no ref is visible"

# ---- the same configuration through the admin API (stored in the database) -------------
khub admin user create root --site-admin >/dev/null 2>&1
khub admin user create joe >/dev/null 2>&1
ROOT=$(khub admin token create root --scope admin 2>/dev/null)
JOE=$(khub admin token create joe 2>/dev/null)
khub_start
put_config() {	# put_config TOKEN -> HTTP status
	curl -s -o "$TEST_DIR/put.json" -w '%{http_code}' -X PUT -H "Authorization: Bearer $1" \
		--data-binary @"$TEST_DIR/mirror.json" "$KHUB_URL/api/admin/mirror/config"
}
is "$(put_config "$JOE")" 403 "PUT /api/admin/mirror/config needs a site admin"
is "$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data '{"upstreams":1}' -H "Authorization: Bearer $ROOT" \
	"$KHUB_URL/api/admin/mirror/config")" 400 "a configuration without upstreams/selections arrays is refused"
is "$(put_config "$ROOT")" 200 "a site admin stores the configuration"
GOT=$(curl -s -H "Authorization: Bearer $ROOT" "$KHUB_URL/api/admin/mirror/config" |
	/usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["upstreams"][0]["url"], d["selections"][0]["git_timeout"])')
is "$GOT" "http://127.0.0.1:$STALL_PORT 3" "GET /api/admin/mirror/config returns it"
khub_stop
timeout 120 "$KHUB_BIN" mirror sync >"$TEST_DIR/out2" 2>"$TEST_DIR/err2"
RC=$?
ok $([ "$RC" -ne 0 ] && [ "$RC" -ne 124 ]; echo $?) "khub mirror sync without --mirror-config uses the stored configuration (exit $RC)"
like "$(cat "$TEST_DIR/err2")" "did not answer the git ref advertisement within 3 s" "and reports the same stall"
done_testing
