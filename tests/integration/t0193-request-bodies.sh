#!/bin/bash
# t0193-request-bodies.sh -- a request body khub keeps in memory is decided
# from the headers before a byte of it is read: 40 anonymous slow POSTs to
# /api/repos/create announcing 16 MiB each are answered 401 at once and the
# server's memory does not grow with what they send; Expect: 100-continue
# with a Content-Length of 10^12 gets a final 401 (anonymous) or 413 (a
# write token), never 100 Continue; a write token's body over
# max_body_bytes is 413 before it is sent; a body trickled a byte a second
# is cut at body_timeout (408); bodies past body_buffer_max_mb together
# get 503 with Retry-After, and one is let in again once the others end.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
[ -x /usr/bin/python3 ] || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }
khub_setup
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)

# raw PORT SCRIPT: run a Python snippet with port, token and helpers:
# connect(), head(method, path, headers) -> bytes, first_answer(s, wait)
# (the first status line, or "none" when nothing came within wait seconds)
raw() {
	/usr/bin/python3 - "$KHUB_PORT" "$ALICE" "$TEST_DIR" <<PY
import os, socket, sys, time
port, token, tdir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def connect():
    return socket.create_connection(("127.0.0.1", port))
def head(method, path, headers):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: x"] + headers
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
def first_answer(s, wait):
    s.settimeout(wait)
    try:
        data = s.recv(4096)
    except (socket.timeout, OSError):
        return "none"
    return data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed"
$1
PY
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$KHUB_PID/status"; }

khub_start
before=$(rss_kb)
# (a) 40 anonymous POSTs announcing 16 MiB - 1 (under max_body_bytes): each
# is asked for its answer before it sends anything, then sends 4 MiB of
# body, a piece every 0.1 s, while all 40 stay open.
raw '
conns = []
for i in range(40):
    s = connect()
    s.sendall(head("POST", "/api/repos/create", ["Content-Type: application/json", "Content-Length: 16777215"]))
    conns.append(s)
deadline = time.monotonic() + 5
answers = [first_answer(s, max(0.1, deadline - time.monotonic())) for s in conns]
piece = b"x" * (256 * 1024)
for _ in range(16):
    for s in conns:
        try:
            s.sendall(piece)
        except OSError:
            pass
    time.sleep(0.1)
open(tdir + "/a.answers", "w").write("\n".join(answers) + "\n")
open(tdir + "/a.ready", "w").close()
while not os.path.exists(tdir + "/a.measured"):
    time.sleep(0.1)
for s in conns:
    s.close()
' &
RAW=$!
for _ in $(seq 1 600); do [ -e "$TEST_DIR/a.ready" ] && break; sleep 0.1; done
after=$(rss_kb)
touch "$TEST_DIR/a.measured"
wait $RAW
is "$(sort "$TEST_DIR/a.answers" | uniq -c | sed 's/^ *//')" "40 HTTP/1.1 401 Unauthorized" \
	"40 anonymous POSTs of 16 MiB to /api/repos/create: each answered 401 before its body"
growth=$(( (after - before) / 1024 ))
diag "server RSS before ${before} kB, with 40 bodies being sent ${after} kB (+${growth} MiB)"
[ "$growth" -lt 64 ]
ok $? "... and the server holds none of the 160 MiB they sent (RSS +${growth} MiB, under 64)"

# (b) Expect: 100-continue with a Content-Length of 10^12.
raw '
s = connect()
s.sendall(head("POST", "/api/repos/create", ["Expect: 100-continue", "Content-Length: 1000000000000"]))
print(first_answer(s, 10))
' >"$TEST_DIR/b1"
is "$(cat "$TEST_DIR/b1")" "HTTP/1.1 401 Unauthorized" \
	"Expect: 100-continue, Content-Length 10^12, anonymous: a final 401, no 100 Continue"
raw '
s = connect()
s.sendall(head("POST", "/api/repos/create", ["Authorization: Bearer " + token, "Expect: 100-continue",
                                             "Content-Length: 1000000000000"]))
print(first_answer(s, 10))
' >"$TEST_DIR/b2"
like "$(cat "$TEST_DIR/b2")" "^HTTP/1.1 413 " \
	"Expect: 100-continue, Content-Length 10^12, a write token: a final 413, no 100 Continue"
raw '
s = connect()
s.sendall(head("DELETE", "/api/repos/delete", ["Expect: 100-continue", "Content-Length: 1000000"]))
print(first_answer(s, 10))
' >"$TEST_DIR/b3"
is "$(cat "$TEST_DIR/b3")" "HTTP/1.1 401 Unauthorized" "anonymous delete with a body: 401 before the body"

# (c) a write token, a body over max_body_bytes, no Expect: 413 before it is sent
raw '
s = connect()
s.sendall(head("POST", "/api/repos/create", ["Authorization: Bearer " + token, "Content-Length: 16777217"]))
print(first_answer(s, 10))
' >"$TEST_DIR/c"
like "$(cat "$TEST_DIR/c")" "^HTTP/1.1 413 " \
	"a write token announcing max_body_bytes + 1: 413 before a byte of the body"
out=$(curl -s -w ' %{http_code}' -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	--data '{"name":"fine","organization":"acme","type":"kernel"}' "$KHUB_URL/api/repos/create")
like "$out" '"id":"acme/fine".* 200$' "a body within the limits is read and served as before"
khub_stop

# (d) and (e): a short body deadline and a 1 MiB bound on kept bodies.
KHUB_BODY_TIMEOUT=2 KHUB_BODY_BUFFER_MAX_MB=1 khub_start
raw '
s = connect()
s.sendall(head("POST", "/api/repos/create", ["Authorization: Bearer " + token, "Content-Length: 100"]))
start = time.monotonic()
s.settimeout(1)
got, sent = b"", 0
while time.monotonic() - start < 60 and sent < 100:
    try:
        s.sendall(b"x")
        sent += 1
        data = s.recv(4096)
        if not data:
            break
        got += data
    except socket.timeout:
        continue
    except OSError:
        try:
            got += s.recv(4096)
        except OSError:
            pass
        break
print(sent, got.split(b"\r\n", 1)[0].decode(errors="replace"))
' >"$TEST_DIR/d"
read -r sent status <"$TEST_DIR/d"
is "$status" "HTTP/1.1 408 Request Timeout" "a body trickled a byte a second: 408 at body_timeout (2 s)"
[ "${sent:-100}" -lt 40 ]
ok $? "... and the connection was closed after ${sent} of its 100 bytes"
grep -q 'request body not complete in 2 s (body_timeout)' "$TEST_DIR/server.log"
ok $? "... logged, naming body_timeout"

raw '
held = connect()
held.sendall(head("POST", "/api/repos/create", ["Authorization: Bearer " + token, "Content-Length: 800000"]))
held.sendall(b"{")
time.sleep(0.5)
s = connect()
s.sendall(head("POST", "/api/repos/create", ["Authorization: Bearer " + token, "Content-Length: 800000"]))
s.settimeout(10)
data = b""
try:
    while b"\r\n\r\n" not in data:
        b = s.recv(4096)
        if not b:
            break
        data += b
except OSError:
    pass
print(data.split(b"\r\n", 1)[0].decode(errors="replace"))
print("retry-after" if b"\r\nretry-after:" in data.lower() else "no retry-after")
held.close()
' >"$TEST_DIR/e"
is "$(sed -n 1p "$TEST_DIR/e")" "HTTP/1.1 503 Service Unavailable" \
	"a second 800 KB body while one is held, body_buffer_max_mb = 1: 503 before it is read"
is "$(sed -n 2p "$TEST_DIR/e")" "retry-after" "... with Retry-After"
sleep 1
out=$(curl -s -w ' %{http_code}' -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	--data '{"name":"after","organization":"acme","type":"kernel"}' "$KHUB_URL/api/repos/create")
like "$out" '"id":"acme/after".* 200$' "once the held body is gone, the next is read and served"
khub_stop
done_testing
