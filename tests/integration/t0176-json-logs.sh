#!/bin/bash
# t0176-json-logs.sh -- log_format = json: every line the server writes is
# one JSON object (time in RFC 3339 UTC with milliseconds, level, msg);
# request lines carry the request id the client got, the method, the route
# pattern (never the path: a signed LFS URL's signature, a query string or
# a token must not reach the log), status, bytes, duration, user and repo.
# Hostile bytes (a quote, a newline, a backslash, bytes that are not UTF-8)
# in a path or a header never break a line, nor does what git http-backend
# writes to its stderr. Text logs are unchanged.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }

khub_setup
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
SETUP_LOG=$TEST_DIR/setup.log
khub import "$SRC" --repo acme/relu --branch main >>"$SETUP_LOG" 2>&1
khub admin user create bob >>"$SETUP_LOG" 2>&1
khub admin member set acme bob write >>"$SETUP_LOG" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$SETUP_LOG" | tail -n 1)
DEAD=$(khub admin token create bob --scope read 2>>"$SETUP_LOG" | tail -n 1)
DEAD_ID=$(khub admin token list bob 2>>"$SETUP_LOG" | grep -F "${DEAD:0:7}" | cut -f1)
khub admin token revoke "$DEAD_ID" >>"$SETUP_LOG" 2>&1
like "$BOB" '^hf_' "bob has a write token (and a revoked one)"

khub_start --log-format json --token-cache-ttl-ms 0
LOG=$TEST_DIR/server.log
H=$TEST_DIR/headers

# ---- requests -----------------------------------------------------------------------------
curl -s -D "$H" -o "$TEST_DIR/info" -H "Authorization: Bearer $BOB" "$KHUB_URL/api/kernels/acme/relu"
OK_ID=$(grep -i '^X-Request-Id:' "$H" | cut -d' ' -f2 | tr -d '\r')
OK_BYTES=$(stat -c %s "$TEST_DIR/info")
like "$OK_ID" '^[0-9a-f]{16,}$' "bob reads acme/relu (X-Request-Id $OK_ID)"

# a quote, a newline, a backslash and a byte that is not UTF-8, percent-encoded in the path
curl -s -o /dev/null "$KHUB_URL/api/kernels/a%22b%0Ac%5Cd%FF/x?token=QUERYSECRET123"
# the same raw on the wire: a quote in the request line
/usr/bin/python3 - "$KHUB_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b'GET /api/kernels/q"uote/x\\y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
while s.recv(65536):
    pass
PY
# a server error (501) whose message holds a header value with a quote,
# a backslash and a byte that is not UTF-8
printf 'POST /api/repos/create HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gz"ip\\\xff\r\nConnection: close\r\n\r\n' >"$TEST_DIR/te"
/usr/bin/python3 - "$KHUB_PORT" "$TEST_DIR/te" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(open(sys.argv[2], "rb").read())
while s.recv(65536):
    pass
PY
DEAD_STATUS=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $DEAD" "$KHUB_URL/api/kernels/acme/relu")
is "$DEAD_STATUS" 401 "a revoked token: 401"

# a signed LFS download URL: its path carries the signature
OID=$(sha256sum "$SRC/build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so" | cut -d' ' -f1)
SIZE=$(stat -c %s "$SRC/build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so")
curl -s -H "Authorization: Bearer $BOB" -H 'Content-Type: application/vnd.git-lfs+json' \
	-d "{\"operation\":\"download\",\"objects\":[{\"oid\":\"$OID\",\"size\":$SIZE}]}" \
	"$KHUB_URL/kernels/acme/relu.git/info/lfs/objects/batch" >"$TEST_DIR/batch"
HREF=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["objects"][0]["actions"]["download"]["href"])' "$TEST_DIR/batch")
like "$HREF" '/api/lfs/download/' "the batch API hands out a signed download URL"
SIGNED_PATH=${HREF#*/api/lfs/download/}
is "$(curl -s "$HREF" | sha256sum | cut -d' ' -f1)" "$OID" "the signed URL serves the object"

# git http-backend's own stderr (a protocol error) becomes JSON lines too
curl -s -o /dev/null -X POST -H 'Content-Type: application/x-git-upload-pack-request' --data-binary 'garbage' \
	"$KHUB_URL/kernels/acme/relu.git/git-upload-pack"
for _ in $(seq 1 100); do grep -q '"source":"child stderr"' "$LOG" && break; sleep 0.3; done
like "$(grep '"source":"child stderr"' "$LOG")" '"level":"warn",.*"msg":"fatal: protocol error' \
	"git http-backend's stderr line is logged as a JSON line (level warn, source child stderr)"
khub_stop

# ---- every line is JSON ---------------------------------------------------------------------
/usr/bin/python3 - "$LOG" >"$TEST_DIR/parsed" 2>&1 <<'PY'
import json, re, sys
stamp = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$')
bad = 0
for n, raw in enumerate(open(sys.argv[1], 'rb').read().split(b'\n')[:-1], 1):
    try:
        line = json.loads(raw.decode('utf-8'))
        assert isinstance(line, dict), "not an object"
        assert stamp.match(line['time']), "time " + line['time']
        assert line['level'] in ('error', 'warn', 'info', 'debug'), "level"
        assert isinstance(line['msg'], str), "msg"
    except Exception as e:
        bad += 1
        print("line %d: %r: %s" % (n, raw[:200], e))
print("lines", n, "bad", bad)
PY
like "$(tail -1 "$TEST_DIR/parsed")" '^lines [0-9]+ bad 0$' "every server log line is a JSON object with time (RFC 3339 UTC, ms), level and msg"
grep -v '^lines' "$TEST_DIR/parsed" | head -5 | sed 's/^/# /'

# the fields of request lines, by request id or route
field() {	# field FILTER FIELD: FIELD of the request lines FILTER (python expression on l) keeps
	/usr/bin/python3 - "$LOG" "$1" "$2" <<'PY'
import json, sys
for raw in open(sys.argv[1], encoding='utf-8'):
    l = json.loads(raw)
    if l.get('msg') == 'request' and eval(sys.argv[2]):
        print(json.dumps(l.get(sys.argv[3], '(absent)')))
PY
}
OK="l.get('request_id') == '$OK_ID'"
is "$(field "$OK" method)" '"GET"' "request line: method"
is "$(field "$OK" route)" '"/api/{type}/{ns}/{name}"' "request line: the route's pattern"
is "$(field "$OK" status)" 200 "request line: status"
is "$(field "$OK" bytes)" "$OK_BYTES" "request line: bytes = the body the client got"
like "$(field "$OK" duration_ms)" '^[0-9]+(\.[0-9]+)?$' "request line: duration_ms is a number"
is "$(field "$OK" user)" '"bob"' "request line: user"
is "$(field "$OK" repo)" '"acme/relu"' "request line: repo (ns/name)"
is "$(field "l['status'] == 401 and l['repo'] == 'acme/relu'" user)" null "the revoked token's request: status 401, user null"
is "$(field "l['route'] == '/api/health'" repo | sort -u)" null "a route without a repo: repo null"
is "$(field "'a\"b\\nc\\\\d' in (l['repo'] or '')" repo)" '"a\"b\nc\\d\ufffd/x"' \
	"quote, newline and backslash escaped in the repo field; the byte that is not UTF-8 is U+FFFD"
like "$(field "'q\"uote' in (l['repo'] or '')" repo)" '^"q\\"uote/x\\\\y"$' "a raw quote and backslash in the request line: escaped"
is "$(field "l['status'] == 501" route)" null "the refused Transfer-Encoding: a 501 request line (refused before routing: route null)"
is "$(field "l['status'] == 501" level)" '"error"' "…logged at error"
check "its message line (error) holds the header value, escaped" -- /usr/bin/python3 -c '
import json, sys
hits = [l for l in map(json.loads, open(sys.argv[1], encoding="utf-8"))
        if l["level"] == "error" and "Transfer-Encoding gz\"ip\\\ufffd is not supported" in l["msg"]]
sys.exit(0 if hits and hits[0]["request_id"] else 1)' "$LOG"
is "$(field "(l['route'] or '').startswith('/api/lfs/download/')" route)" '"/api/lfs/download/{arg}/{arg}/{arg}/{arg}"' \
	"the signed URL's request line names its pattern"

# nothing secret reaches the log
for secret in "$BOB" "$DEAD" QUERYSECRET123 "$SIGNED_PATH"; do
	check "the log never holds ${secret:0:12}…" -- bash -c "! grep -qF -- '$secret' '$LOG'"
done

# ---- text stays text ----------------------------------------------------------------------------
: >"$LOG"
khub_start
curl -s -o /dev/null -H "Authorization: Bearer $BOB" "$KHUB_URL/api/kernels/acme/relu"
khub_stop
like "$(grep ' GET /api/kernels/acme/relu ' "$LOG")" \
	'^[0-9T:.-]+Z info  \[[0-9a-f]+\] 127\.0\.0\.1 GET /api/kernels/acme/relu 200 [0-9]+ bytes [0-9]+ us user=bob$' \
	"log_format = text (the default): the request line as before"
check "khub serve -n refuses log_format = xml" -- bash -c "! '$KHUB_BIN' serve -n --log-format xml"
done_testing
