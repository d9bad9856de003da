#!/bin/bash
# t0186-connection-memory.sh -- connection_memory_kb is what each connection
# has for a request's headers: under it a request is served, over it the
# answer is 431 in JSON (khub's, not libmicrohttpd's HTML page) and the next
# request on a new connection is served as ever; a request line too long
# (414) never cuts another client still sending its headers on the same
# loop; a larger setting admits larger headers; a small one still serves the
# hub clients' requests (a HEAD answered from the kept answer, a JSON body
# posted).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }
khub_setup
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
S=$TEST_DIR/src
make_kernel_tree "$S" relu
khub import "$S" --repo acme/relu --branch main >/dev/null 2>"$TEST_DIR/import.err" || bail "import failed"

# status_with_header BYTES: the status of a revision request carrying an
# X-Padding header of BYTES bytes
status_with_header() {
	local pad
	pad=$(head -c "$1" /dev/zero | tr '\0' 'a')
	curl -s -o /dev/null -w '%{http_code}' -H "X-Padding: $pad" "$KHUB_URL/api/kernels/acme/relu/revision/main"
}

khub_start
is "$(khub serve -n 2>/dev/null | grep -c '^connection_memory_kb = 16$')" 1 "the default: 16 KiB a connection"
is "$(status_with_header 4000)" 200 "default: a 4 KB header is served"
is "$(status_with_header 40000)" 431 "default: a 40 KB header: 431 Request Header Fields Too Large"
pad=$(head -c 40000 /dev/zero | tr '\0' 'a')
curl -s -D "$TEST_DIR/431.h" -o "$TEST_DIR/431.body" -H "X-Padding: $pad" "$KHUB_URL/api/kernels/acme/relu/revision/main"
is "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"])' "$TEST_DIR/431.body" 2>&1)" \
	"request headers larger than connection_memory_kb allows" "... answered in JSON, naming the setting"
check "... as application/json" -- grep -qi '^Content-Type: application/json' "$TEST_DIR/431.h"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/kernels/acme/relu/revision/main")" 200 \
	"... and the next request is served"
khub_stop

# A request line too long (414) while another client, on the same (only)
# loop, is still sending its headers: that client is not the one refused
# and still gets its answer.
KHUB_THREADS=1 khub_start
/usr/bin/python3 - "$KHUB_PORT" "$TEST_DIR" >"$TEST_DIR/slow.out" 2>&1 <<'PY' &
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /api/kernels/acme/relu/revision/main HTTP/1.1\r\nHost: x\r\n")
open(os.path.join(sys.argv[2], "slow.ready"), "w").close()
for _ in range(600):               # the long request line comes meanwhile
    if os.path.exists(os.path.join(sys.argv[2], "slow.go")):
        break
    time.sleep(0.1)
s.sendall(b"Connection: close\r\n\r\n")
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.split(b"\r\n", 1)[0].decode("latin-1"))
PY
SLOW=$!
for _ in $(seq 600); do [ -e "$TEST_DIR/slow.ready" ] && break; sleep 0.1; done
sleep 0.5	# khub reads its request line (had it not, the check below passes without testing)
long=$(head -c 40000 /dev/zero | tr '\0' 'a')
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/kernels/acme/$long")" 414 \
	"a 40 KB request line: 414"
touch "$TEST_DIR/slow.go"
wait "$SLOW"
is "$(cat "$TEST_DIR/slow.out")" "HTTP/1.1 200 OK" "... and a client still sending its headers meanwhile is answered 200"
khub_stop

KHUB_CONNECTION_MEMORY_KB=128 khub_start
is "$(status_with_header 40000)" 200 "connection_memory_kb = 128: the 40 KB header is served"
khub_stop

KHUB_CONNECTION_MEMORY_KB=4 khub_start
is "$(status_with_header 200)" 200 "connection_memory_kb = 4: a request with small headers is served"
U="$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu/__init__.py"
codes=$(curl -s -o /dev/null -o /dev/null -o /dev/null -w '%{http_code} ' -I "$U" "$U" "$U" -H "Authorization: Bearer $ALICE" \
	-H 'User-Agent: huggingface_hub/0.26.0; python/3.12.3; torch/2.11.0; session_id/0123456789abcdef0123456789abcdef')
is "$codes" "200 200 200 " "... three HEADs on one connection with a hub client's headers (the kept answer)"
body=$(/usr/bin/python3 -c 'import json; print(json.dumps({"description": "x" * 20000}))')
st=$(curl -s -o "$TEST_DIR/post.out" -w '%{http_code}' -X POST -H "Authorization: Bearer $ALICE" \
	-H 'Content-Type: application/json' --data-binary "$body" "$KHUB_URL/api/repos/create")
like "$st" '^(200|400|409|422)$' "... a 20 KB JSON body read through the small buffer gets a JSON answer ($st)"
ok "$(/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TEST_DIR/post.out"; echo $?)" "... which parses"
khub_stop
out=$(KHUB_CONNECTION_MEMORY_KB=2 "$KHUB_BIN" serve -n 2>&1)
like "$out" 'connection_memory_kb' "connection_memory_kb = 2 (under 4) is refused at start, naming the key"
done_testing
