#!/bin/bash
# t0194-request-line.sh -- a request target with a control character (ESC,
# a bare CR, DEL) is refused 400 in JSON and nothing of it reaches the log
# raw (no forged log line, no terminal escape); a header with whitespace
# before its colon ("Content-Length : 60", RFC 9112 5.1) is refused 400 and
# the bytes after it are never read as a second request.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
[ -x /usr/bin/python3 ] || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }
khub_setup
khub_start

# send BYTES (Python bytes literal): every answer the server gives on one
# connection, until it closes it or 5 s pass; one status line per answer.
send() {
	/usr/bin/python3 - "$KHUB_PORT" "$1" <<'PY'
import ast, re, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(ast.literal_eval(sys.argv[2]))
s.settimeout(5)
data = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except OSError:
    pass
for line in re.findall(rb"HTTP/1\.[01] [0-9]{3}[^\r\n]*", data):
    print(line.decode(errors="replace"))
body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
print(body.split(b"\r\n")[0].decode(errors="replace"))
PY
}

FORGED='2026-01-01T00:00:00.000Z info  forged admin login'
out=$(send "b'GET /api/kernels/\\x1b[2J\\x1b]0;owned\\x07 HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'")
is "$(sed -n 1p <<<"$out")" "HTTP/1.1 400 Bad Request" "ESC and BEL in the request target's path: 400"
like "$(sed -n 2p <<<"$out")" '"error":"a control character in the request target"' "... answered in JSON"
out=$(send "b'GET /api/kernels?search=\\x1b[31mred HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'")
is "$(sed -n 1p <<<"$out")" "HTTP/1.1 400 Bad Request" "ESC in the query: 400"
out=$(send "b'GET /api/kernels/a\\r$FORGED HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'")
like "$(sed -n 1p <<<"$out")" '^HTTP/1.1 400 ' "a bare CR in the request target: 400"
out=$(send "b'GET /api/kernels\\x7f HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'")
like "$(sed -n 1p <<<"$out")" '^HTTP/1.1 400 ' "DEL in the request target: 400"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/kernels?search=caf%C3%A9%0d")" 200 \
	"a target with its bytes %-escaped is served as before"
sleep 1	# the access log line is written when the request ends
is "$(LC_ALL=C grep -c $'[\x01-\x08\x0b-\x1f\x7f]' "$TEST_DIR/server.log")" 0 \
	"the server log holds no raw control character (CR, ESC, BEL, DEL)"
is "$(grep -c "^$FORGED" "$TEST_DIR/server.log")" 0 "... and no forged line"
grep -q 'x1b\[2J' "$TEST_DIR/server.log"
ok $? "... the refused target is logged escaped (\\x1b)"

# "Content-Length : 60": the 60 bytes are a second request if the header is
# not taken for the framing it claims.
SMUGGLED='GET /api/whoami-v2 HTTP/1.1\r\nHost: x\r\nX-Pad: 012345678\r\n\r\n'
out=$(send "b'POST /api/repos/create HTTP/1.1\\r\\nHost: x\\r\\nContent-Length : 60\\r\\n\\r\\n$SMUGGLED'")
is "$(sed -n 1p <<<"$out")" "HTTP/1.1 400 Bad Request" "Content-Length with a space before the colon: 400"
is "$(grep -c '^HTTP/' <<<"$out")" 1 "... one answer: the body is never read as a request"
like "$(sed -n 2p <<<"$out")" 'whitespace between a header' "... saying why, in JSON"
out=$(send "b'GET /api/models HTTP/1.1\\r\\nHost: x\\r\\nX-Thing\\t: 1\\r\\nConnection: close\\r\\n\\r\\n'")
is "$(sed -n 1p <<<"$out")" "HTTP/1.1 400 Bad Request" "a tab before a header's colon: 400"
done_testing
