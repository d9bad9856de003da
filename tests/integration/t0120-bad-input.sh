#!/bin/bash
# t0120-bad-input.sh -- requests that must be refused, as a table: HTTP
# framing a proxy could read differently (request smuggling), connection
# floods and slowloris, pushes that break the commit API's rules, and
# writes past the caller's rights. Each row checks the answer (status, JSON
# error, X-Error-Code) and that nothing was written (refs of every bare
# repo, the repos and benchmark_runs rows).
#
# Adding a row: pick the row kind that fits and add one line in the table at
# the bottom (after "---- the table"):
#   http_row  DESC STATUS ERROR_REGEX X-ERROR-CODE -- CURL_ARGS...   (API request)
#   raw_row   DESC STATUS ERROR_REGEX MAX_SECONDS FILE               (raw bytes on one connection;
#                                                                      exactly one answer allowed)
#   push_row  DESC STDERR_REGEX -- GIT_PUSH_ARGS...                  (git push from $WORK, refused)
#   header_row DESC HEADER VALUE -- CURL_ARGS...                     (a header every answer carries)
# ERROR_REGEX or X-ERROR-CODE may be "" (not checked). A new kind is a new
# *_row function here: one TAP line per row, "nothing changed" included.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }
command -v psql >/dev/null 2>&1 || { echo "1..0 # SKIP psql not installed"; exit 0; }

khub_setup
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
SETUP_LOG=$TEST_DIR/setup.log
V1=$(khub import "$SRC" --repo acme/relu --branch main 2>>"$SETUP_LOG")
khub import "$SRC" --repo acme/secret --branch main --private >>"$SETUP_LOG" 2>&1
khub admin user create root --site-admin >>"$SETUP_LOG" 2>&1
for u in bob rita mallory; do khub admin user create $u >>"$SETUP_LOG" 2>&1; done
khub admin member set acme bob write >>"$SETUP_LOG" 2>&1
khub admin member set acme rita read >>"$SETUP_LOG" 2>&1
token() { khub admin token create "$1" --scope "$2" 2>>"$SETUP_LOG" | tail -n 1; }
ROOT=$(token root admin)
BOB=$(token bob write)
BOB_READ=$(token bob read)
RITA=$(token rita read)
MALLORY=$(token mallory write)
WORKER=$(khub admin worker add w1 2>>"$SETUP_LOG" | tail -n 1)
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
git --git-dir="$GITDIR" tag rel1 "$V1"
like "$V1" '^[0-9a-f]{40}$' "seeded acme/relu (tag rel1) and private acme/secret"

HEADER_TIMEOUT=2 PER_IP=8
khub_start --header-timeout $HEADER_TIMEOUT --max-connections-per-ip $PER_IP --download-stats-flush-ms 200
HOSTPORT=127.0.0.1:$KHUB_PORT
H=$TEST_DIR/headers
B=$TEST_DIR/body

# ---- helpers --------------------------------------------------------------------------------
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print($1)"; }
snapshot() {	# everything a refused request must leave alone
	local g
	for g in "$KHUB_DATA_DIR"/repos/*/*/*.git; do
		echo "${g#"$KHUB_DATA_DIR"/repos/}"
		git --git-dir="$g" for-each-ref --format='%(refname) %(objectname)'
	done
	sql "SELECT type, namespace, name, private FROM repos ORDER BY id"
	sql "SELECT count(*) FROM benchmark_runs"
}
error_matches() {	# error_matches REGEX: $B is {"error": "<matches REGEX>"}
	/usr/bin/python3 - "$B" "$1" <<'PY'
import json, re, sys
try:
    d = json.load(open(sys.argv[1], "rb"))
except Exception:
    sys.exit(1)
e = d.get("error") if isinstance(d, dict) else None
sys.exit(0 if isinstance(e, str) and re.search(sys.argv[2], e) else 1)
PY
}
# One TAP line from the reasons collected in $why.
report() {	# report DESC
	ok $([ -z "$why" ]; echo $?) "$1"
	[ -z "$why" ] || diag "  $why"
}

# http_row DESC STATUS ERROR_REGEX CODE -- CURL_ARGS...
http_row() {
	local desc=$1 want=$2 re=$3 code=$4 before after status
	shift 5
	before=$(snapshot)
	status=$(curl -s -D "$H" -o "$B" -w '%{http_code}' "$@")
	after=$(snapshot)
	why=
	[ "$status" = "$want" ] || why="status $status, want $want;"
	[ -z "$re" ] || error_matches "$re" || why="$why error $(head -c 300 "$B") does not match /$re/;"
	[ -z "$code" ] || [ "$(header X-Error-Code)" = "$code" ] || why="$why X-Error-Code '$(header X-Error-Code)', want $code;"
	[ "$before" = "$after" ] || why="$why something changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -3 | tr '\n' ' ');"
	report "$desc → $want${code:+ $code}"
}

# The raw client: sends FILE's bytes on one connection (from BIND), reads
# until the server closes or TIMEOUT, prints one JSON object: the answers
# parsed, the seconds until the first answer, whether the server closed.
cat >"$TEST_DIR/raw.py" <<'PY'
import json, socket, sys, time
host, port, bind, timeout, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5]
s = socket.socket()
s.bind((bind, 0))
s.connect((host, port))
start = time.monotonic()
s.sendall(open(path, "rb").read())
s.settimeout(0.2)
data, closed, first = b"", False, None
while time.monotonic() - start < timeout:
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        continue
    except ConnectionError:
        closed = True
        break
    if not chunk:
        closed = True
        break
    if first is None:
        first = time.monotonic() - start
    data += chunk
answers = []
while data.startswith(b"HTTP/1."):
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    n = int(headers.get("content-length", "0"))
    answers.append({"status": int(lines[0].split()[1]), "headers": headers, "body": rest[:n].decode("utf-8", "replace")})
    data = rest[n:]
print(json.dumps({"answers": answers, "first": first, "closed": closed, "extra": data.decode("latin-1")}))
PY
raw() { /usr/bin/python3 "$TEST_DIR/raw.py" 127.0.0.1 "$KHUB_PORT" "${BIND:-127.0.0.1}" "$@"; }

# raw_row DESC STATUS ERROR_REGEX MAX_SECONDS FILE: exactly one answer (no
# second request read from the same bytes), in time, and the connection closed.
raw_row() {
	local desc=$1 want=$2 re=$3 max=$4 file=$5 before after out
	before=$(snapshot)
	out=$(raw "$((max + 2))" "$file")
	sleep 0.3	# a smuggled request would be handled by now
	after=$(snapshot)
	why=$(/usr/bin/python3 - "$out" "$want" "$re" "$max" <<'PY'
import json, re, sys
r, want, rx, mx = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
a = r["answers"]
why = []
if len(a) != 1:
    why.append(f"{len(a)} answers {[x['status'] for x in a]}, want exactly 1")
if a and a[0]["status"] != want:
    why.append(f"status {a[0]['status']}, want {want}")
if a:
    try:
        e = json.loads(a[0]["body"]).get("error", "")
    except Exception:
        e = None
    if rx and not (isinstance(e, str) and re.search(rx, e)):
        why.append(f"error {a[0]['body'][:200]!r} does not match /{rx}/")
if r["first"] is None or r["first"] > mx:
    why.append(f"first answer after {r['first']} s, want < {mx} s")
if not r["closed"]:
    why.append("connection left open")
print("; ".join(why))
PY
)
	[ "$before" = "$after" ] || why="$why something changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -3 | tr '\n' ' ');"
	report "$desc → $want, one answer, connection closed"
}

# header_row DESC HEADER VALUE -- CURL_ARGS...
header_row() {
	local desc=$1 name=$2 value=$3
	shift 4
	curl -s -D "$H" -o "$B" "$@"
	why=
	[ "$(header "$name")" = "$value" ] || why="$name: '$(header "$name")', want '$value'"
	report "$desc"
}

# push_row DESC STDERR_REGEX -- GIT_PUSH_ARGS...: run in $WORK, must fail.
push_row() {
	local desc=$1 re=$2 before after rc
	shift 3
	before=$(snapshot)
	(cd "$WORK" && git push "$@") >"$TEST_DIR/push.err" 2>&1
	rc=$?
	after=$(snapshot)
	why=
	[ $rc -ne 0 ] || why="git push succeeded;"
	grep -qE -- "$re" "$TEST_DIR/push.err" || why="$why stderr does not match /$re/: $(grep khub: "$TEST_DIR/push.err" | head -2 | tr '\n' ' ');"
	[ "$before" = "$after" ] || why="$why something changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -3 | tr '\n' ' ');"
	report "$desc: push refused"
}

# ---- raw requests -----------------------------------------------------------------------------
CREATE_SMUGGLED='{"name":"smuggled","organization":"acme","type":"kernel"}'
SMUGGLED="POST /api/repos/create HTTP/1.1\r\nHost: $HOSTPORT\r\nAuthorization: Bearer $BOB\r\nContent-Type: application/json\r\nContent-Length: ${#CREATE_SMUGGLED}\r\n\r\n$CREATE_SMUGGLED"
SMUGGLED_LEN=$(printf "$SMUGGLED" | wc -c)
printf "GET /api/health HTTP/1.1\r\nHost: $HOSTPORT\r\nContent-Length: 0\r\nContent-Length: $SMUGGLED_LEN\r\n\r\n$SMUGGLED" \
	>"$TEST_DIR/dup-cl.raw"
CREATE_CHUNKED='{"name":"chunked","organization":"acme","type":"kernel"}'
printf "POST /api/repos/create HTTP/1.1\r\nHost: $HOSTPORT\r\nAuthorization: Bearer $BOB\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" \
	"${#CREATE_CHUNKED}" "$CREATE_CHUNKED" >"$TEST_DIR/cl-te.raw"
printf "POST /api/repos/create HTTP/1.1\r\nHost: $HOSTPORT\r\nAuthorization: Bearer $BOB\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\nxyz" \
	>"$TEST_DIR/te-gzip.raw"
printf "POST /api/repos/create HTTP/1.1\r\nHost: $HOSTPORT\r\nContent-Length: +5\r\n\r\n{\"x\"}" >"$TEST_DIR/cl-plus.raw"
printf "POST /api/repos/create HTTP/1.1\r\nHost: $HOSTPORT\r\nContent-Length: 5, 5\r\n\r\n{\"x\"}" >"$TEST_DIR/cl-list.raw"
printf "GET /api/whoami-v2 HTTP/1.1\r\nHost: $HOSTPORT\r\nAuthorization: Bearer $BOB\000x\r\nAccept: */*\r\n\r\n" >"$TEST_DIR/nul-value.raw"
printf "GET /api/health HTTP/1.1\r\nHost: $HOSTPORT\r\nX-Note: a\000hidden\r\n\r\n" >"$TEST_DIR/nul-last.raw"
printf "GET /api/health HTTP/1.1\r\nHost: $HOSTPORT\r\nX-Note: a\rX-Injected: 1\r\n\r\n" >"$TEST_DIR/cr-value.raw"

# ---- connection limits (a function each: they need several sockets) --------------------------
per_ip_cap_row() {
	why=$(/usr/bin/python3 - "$KHUB_PORT" "$PER_IP" <<'PY'
import socket, sys, time
port, cap = int(sys.argv[1]), int(sys.argv[2])
def conn(addr):
    s = socket.socket()
    s.bind((addr, 0))
    s.connect(("127.0.0.1", port))
    return s
def ask(s, wait=2.0):	# GET /api/health; the status, or None when closed unanswered
    s.settimeout(wait)
    try:
        s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = s.recv(4096)
    except (ConnectionError, socket.timeout):
        return None
    return int(data.split()[1]) if data.startswith(b"HTTP/1.") else None
why = []
idle = [conn("127.0.0.7") for _ in range(cap)]
time.sleep(0.3)
extra = ask(conn("127.0.0.7"))
if extra is not None:
    why.append(f"connection {cap + 1} from 127.0.0.7 was answered {extra}, want closed")
other = ask(conn("127.0.0.8"))
if other != 200:
    why.append(f"127.0.0.8 got {other}, want 200 while 127.0.0.7 is at its cap")
for s in idle:
    s.close()
time.sleep(0.3)
again = ask(conn("127.0.0.7"))
if again != 200:
    why.append(f"127.0.0.7 after closing its connections got {again}, want 200")
print("; ".join(why))
PY
)
	report "$((PER_IP + 1)) connections from one address: the extra one is closed unanswered, another address still gets through"
}

slowloris_row() {
	why=$(/usr/bin/python3 - "$KHUB_PORT" "$HEADER_TIMEOUT" <<'PY'
import select, socket, sys, time
port, limit = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket()
s.bind(("127.0.0.9", 0))
s.connect(("127.0.0.1", port))
start = time.monotonic()
s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
closed = None
while time.monotonic() - start < limit + 10:
    try:
        s.sendall(b"a")	# one byte every 0.4 s: never idle for long
    except ConnectionError:
        closed = time.monotonic() - start
        break
    r, _, _ = select.select([s], [], [], 0.4)
    if r:
        try:
            data = s.recv(4096)
        except ConnectionError:
            data = b""
        if not data:
            closed = time.monotonic() - start
            break
why = []
if closed is None:
    why.append(f"still open after {limit + 10} s of trickled headers")
elif not (limit - 0.5 <= closed <= limit + 3):
    why.append(f"closed after {closed:.1f} s, want about {limit} s")
print("; ".join(why))
PY
)
	report "slowloris (one header byte every 0.4 s) is dropped after header_timeout = ${HEADER_TIMEOUT} s"
}

# ---- a clone to push from (no git-lfs filters: big files stay plain blobs) --------------------
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
unset GIT_DIR GIT_WORK_TREE GIT_CONFIG_GLOBAL
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
WORK=$TEST_DIR/work
GIT_LFS_SKIP_SMUDGE=1 git clone -q "http://bob:$BOB@$HOSTPORT/kernels/acme/relu" "$WORK" >>"$SETUP_LOG" 2>&1
(cd "$WORK" && printf 'more\n' >>README.md && git commit -qam "another commit" && git tag -f rel1 HEAD >/dev/null &&
	head -c $((12 * 1024 * 1024)) /dev/urandom >big.bin && git checkout -q -b big && git add big.bin &&
	git commit -qm "a 12 MB plain blob" && git checkout -q main) >>"$SETUP_LOG" 2>&1
check "bob's clone, with a moved tag rel1 and a branch with a 12 MB plain blob" -- test -n "$(git -C "$WORK" rev-parse -q --verify big)"

# ---- bodies for the API rows --------------------------------------------------------------------
b64() { printf '%s' "$1" | base64 -w0; }
{
	printf '%s\n' '{"key":"header","value":{"summary":"conf twice","description":""}}'
	printf '{"key":"file","value":{"content":"%s","path":"conf","encoding":"base64"}}\n' "$(b64 a)"
	printf '{"key":"file","value":{"content":"%s","path":"conf/x","encoding":"base64"}}\n' "$(b64 b)"
} >"$TEST_DIR/conf-conf-x.ndjson"
{
	printf '%s\n' '{"key":"header","value":{"summary":"lib twice","description":""}}'
	printf '{"key":"file","value":{"content":"%s","path":"lib/ops/x.py","encoding":"base64"}}\n' "$(b64 a)"
	printf '{"key":"file","value":{"content":"%s","path":"lib/ops","encoding":"base64"}}\n' "$(b64 b)"
} >"$TEST_DIR/lib-ops.ndjson"
BENCH_BODY='{"results":[{"workload":"A.b","timingResults":{"mean_ms":1,"std_ms":0,"min_ms":1,"max_ms":1,"q1_ms":1,"q3_ms":1,"iqr_ms":0,"outliers":0,"iterations":1}}],"machineInfo":{"gpu":"g","backend":"CPU","pytorchVersion":"N/A","os":"Linux 6","cpu":"x"},"kernelCommitSha":"'"$V1"'","benchmarkScriptPath":"benchmarks"}'
API=$KHUB_URL/api
JSON=(-H 'Content-Type: application/json')

# ---- the table ----------------------------------------------------------------------------------
raw_row "GET with Content-Length 0 and a second, differing Content-Length covering a smuggled POST" \
	400 'Content-Length' 3 "$TEST_DIR/dup-cl.raw"
raw_row "POST with both Content-Length and Transfer-Encoding: chunked" \
	400 'Content-Length.*Transfer-Encoding' 3 "$TEST_DIR/cl-te.raw"
raw_row "POST with Transfer-Encoding: gzip (answered at once, not at the connection timeout)" \
	501 'Transfer-Encoding' 5 "$TEST_DIR/te-gzip.raw"
# libmicrohttpd refuses these before khub sees them and wrote its answer's
# status line and headers twice: one answer, then close. NUL and bare CR
# inside a header value are refused, not truncated or passed on.
raw_row "POST with Content-Length: +5" 400 'Content-Length' 3 "$TEST_DIR/cl-plus.raw"
raw_row "POST with Content-Length: 5, 5" 400 'Content-Length' 3 "$TEST_DIR/cl-list.raw"
raw_row "GET with a NUL byte inside a header value" 400 'NUL' 3 "$TEST_DIR/nul-value.raw"
raw_row "GET with a NUL byte inside the last header value" 400 'NUL' 3 "$TEST_DIR/nul-last.raw"
raw_row "GET with a bare CR inside a header value" 400 'control character' 3 "$TEST_DIR/cr-value.raw"
per_ip_cap_row
slowloris_row

push_row "a 12 MB file as a plain git blob (not LFS)" 'git lfs' -- origin big
push_row "git push -f moving an existing tag" 'tags cannot be moved' -- -f origin refs/tags/rel1
push_row "git push deleting a tag" 'tags cannot be deleted' -- origin :refs/tags/rel1
push_row "git push of a branch named HEAD" 'invalid name' -- origin main:refs/heads/HEAD
push_row "git push of a branch named refs/heads/x (refs/heads/refs/heads/x)" 'invalid name' -- origin main:refs/heads/refs/heads/x

http_row "API: create a branch named HEAD" 400 'Invalid reference' "" -- \
	-X POST -H "Authorization: Bearer $BOB" "${JSON[@]}" --data-binary '{}' "$API/kernels/acme/relu/branch/HEAD"
http_row "API: create a branch named ORIG_HEAD" 400 'Invalid reference' "" -- \
	-X POST -H "Authorization: Bearer $BOB" "${JSON[@]}" --data-binary '{}' "$API/kernels/acme/relu/branch/ORIG_HEAD"
http_row "commit with both conf and conf/x" 400 'conf.*both a file and the folder' "" -- \
	-X POST -H "Authorization: Bearer $BOB" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$TEST_DIR/conf-conf-x.ndjson" "$API/kernels/acme/relu/commit/main"
http_row "commit with lib/ops/x.py and then lib/ops" 400 'lib/ops.*both a file and the folder' "" -- \
	-X POST -H "Authorization: Bearer $BOB" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$TEST_DIR/lib-ops.ndjson" "$API/kernels/acme/relu/commit/main"
http_row "an org write member moves a private org repo into their own namespace" 403 'needs admin of "acme"' "" -- \
	-X POST -H "Authorization: Bearer $BOB" "${JSON[@]}" \
	--data-binary '{"fromRepo":"acme/secret","toRepo":"bob/secret","type":"kernel"}' "$API/repos/move"
http_row "/metrics anonymous" 401 '' "" -- "$KHUB_URL/metrics"
http_row "/metrics as a user who is not a site admin" 403 'site administrators' "" -- \
	-H "Authorization: Bearer $MALLORY" "$KHUB_URL/metrics"
http_row "benchmark upload with a read-scoped token (of a write member)" 403 'write token' "" -- \
	-X POST -H "Authorization: Bearer $BOB_READ" "${JSON[@]}" --data-binary "$BENCH_BODY" "$API/kernels/acme/relu/benchmarks"
http_row "benchmark upload with a read-scoped token (of a read member)" 403 'write token' "" -- \
	-X POST -H "Authorization: Bearer $RITA" "${JSON[@]}" --data-binary "$BENCH_BODY" "$API/kernels/acme/relu/benchmarks"

# JSON bodies (ROUTE_JSON): read by the server after the access check, so a
# caller who may not call the route learns nothing from a malformed body;
# one route of each access kind.
BAD='{"tag": "v1",'
http_row "repo-write: tag create with a malformed body" 400 '^invalid JSON body: ' "" -- \
	-X POST -H "Authorization: Bearer $BOB" "${JSON[@]}" --data-binary "$BAD" "$API/kernels/acme/relu/tag/main"
http_row "repo-write: tag create with a body that is not an object" 400 '^invalid JSON body: not an object$' "" -- \
	-X POST -H "Authorization: Bearer $BOB" "${JSON[@]}" --data-binary '["v1"]' "$API/kernels/acme/relu/tag/main"
http_row "repo-write: tag create, anonymous, malformed body" 401 '' "" -- \
	-X POST "${JSON[@]}" --data-binary "$BAD" "$API/kernels/acme/relu/tag/main"
http_row "repo-write: tag create, a read member, malformed body" 403 '' "" -- \
	-X POST -H "Authorization: Bearer $RITA" "${JSON[@]}" --data-binary "$BAD" "$API/kernels/acme/relu/tag/main"
http_row "repo-write: tag create in a private repo, a stranger, malformed body" 404 '' RepoNotFound -- \
	-X POST -H "Authorization: Bearer $MALLORY" "${JSON[@]}" --data-binary "$BAD" "$API/kernels/acme/secret/tag/main"
http_row "repo-manage: settings with a malformed body" 400 '^invalid JSON body: ' "" -- \
	-X PUT -H "Authorization: Bearer $BOB" "${JSON[@]}" --data-binary '{"private": tru}' "$API/kernels/acme/relu/settings"
http_row "repo-manage: settings, anonymous, malformed body" 401 '' "" -- \
	-X PUT "${JSON[@]}" --data-binary '{"private": tru}' "$API/kernels/acme/relu/settings"
http_row "site-admin: mirror config with a malformed body" 400 '^invalid JSON body: ' "" -- \
	-X PUT -H "Authorization: Bearer $ROOT" "${JSON[@]}" --data-binary '{"upstreams": [' "$API/admin/mirror/config"
http_row "site-admin: mirror config, anonymous, malformed body" 401 '' "" -- \
	-X PUT "${JSON[@]}" --data-binary '{"upstreams": [' "$API/admin/mirror/config"
http_row "site-admin: mirror config, not a site admin, malformed body" 403 'site administrators' "" -- \
	-X PUT -H "Authorization: Bearer $MALLORY" "${JSON[@]}" --data-binary '{"upstreams": [' "$API/admin/mirror/config"
http_row "worker: claim with a malformed body" 400 '^invalid JSON body: ' "" -- \
	-X POST -H "Authorization: Bearer $WORKER" "${JSON[@]}" --data-binary '{"variants": ' "$API/workers/claim"
http_row "worker: claim, anonymous, malformed body" 401 '' "" -- \
	-X POST "${JSON[@]}" --data-binary '{"variants": ' "$API/workers/claim"
http_row "worker: claim with a user's token, malformed body" 403 'worker token' "" -- \
	-X POST -H "Authorization: Bearer $BOB" "${JSON[@]}" --data-binary '{"variants": ' "$API/workers/claim"
http_row "namespace-write: move with a malformed body" 400 '^invalid JSON body: ' "" -- \
	-X POST -H "Authorization: Bearer $BOB" "${JSON[@]}" --data-binary '{"fromRepo": "acme/relu"' "$API/repos/move"
http_row "namespace-write: move with a read-scoped token, malformed body" 403 'read-only token' "" -- \
	-X POST -H "Authorization: Bearer $BOB_READ" "${JSON[@]}" --data-binary '{"fromRepo": "acme/relu"' "$API/repos/move"
http_row "git: LFS batch with a malformed body" 400 '^invalid JSON body: ' "" -- \
	-X POST -H 'Content-Type: application/vnd.git-lfs+json' --data-binary '{"operation": "download"' \
	"$KHUB_URL/kernels/acme/relu.git/info/lfs/objects/batch"

header_row "resolve answers X-Content-Type-Options: nosniff" X-Content-Type-Options nosniff -- \
	"$KHUB_URL/kernels/acme/relu/resolve/main/README.md"
header_row "a resolve 404 carries X-Content-Type-Options: nosniff too" X-Content-Type-Options nosniff -- \
	"$KHUB_URL/kernels/acme/relu/resolve/main/no-such-file"

# ---- rows that must write, but only so much --------------------------------------------------
# Repeated GETs of a variant's metadata.json from one address count once.
LOADER_UA='kernels/0.15.2; hf_hub/1.29.0; python/3.11.2'	# only a loader's fetch is a download
downloads_total() { curl -s "$API/kernels/acme/relu/downloads" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])'; }
DL_BEFORE=$(downloads_total)
for _ in 1 2 3 4 5; do
	curl -s -o /dev/null --interface 127.0.0.10 -A "$LOADER_UA" "$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu/metadata.json"
done
curl -s -o /dev/null --interface 127.0.0.11 -A "$LOADER_UA" "$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu/metadata.json"
sleep 1	# two flush intervals and more
is "$(downloads_total)" $((DL_BEFORE + 2)) "5 GETs from one address and 1 from another count 2 downloads (once per address, repo, variant and hour)"

# A signed-in non-member's benchmark is stored as community and left out by default.
RUNS_BEFORE=$(sql "SELECT count(*) FROM benchmark_runs")
curl -s -o "$B" -X POST -H "Authorization: Bearer $MALLORY" "${JSON[@]}" --data-binary "$BENCH_BODY" \
	"$API/kernels/acme/relu/benchmarks"
RUN_ID=$(json 'd.get("id")')
is "$(json 'd.get("source")')/$(sql "SELECT source FROM benchmark_runs WHERE id = ${RUN_ID:-0}")" community/community \
	"a non-member's upload is stored as a community run"
is "$(curl -s "$API/kernels/acme/relu/benchmarks?id=$RUN_ID")" "[]" "…which the default listing leaves out"
aggregate_count() { curl -s "$API/kernels/acme/relu/benchmarks/aggregate$1" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["results"]))'; }
is "$(aggregate_count "")/$(aggregate_count "?source=all")" 0/1 "…and so does the default aggregate (not ?source=all)"
is "$(curl -s "$API/kernels/acme/relu/benchmarks?source=community" | /usr/bin/python3 -c 'import json,sys; print([(r["id"], r["source"]) for r in json.load(sys.stdin)])')" \
	"[($RUN_ID, 'community')]" "…but ?source=community lists it, with its source"
is "$(sql "SELECT count(*) FROM benchmark_runs")" $((RUNS_BEFORE + 1)) "exactly one run stored"

check "the server is still answering" -- curl -sf "$API/health"

# With metrics_public, anyone gets public repo counts, nothing about private repos.
khub_stop
khub_start --metrics-public 1
curl -s -D "$H" -o "$B" "$KHUB_URL/metrics"
# (the database's state too, so an anonymous scraper can alert on an outage)
is "$(grep -v '^#' "$B")" 'khub_database_up 1
khub_database_down_seconds 0
khub_database_outages_total 0
khub_outage_cache_hits_total{cache="token"} 0
khub_outage_cache_hits_total{cache="repo"} 0
khub_repos{type="kernel"} 1' "metrics_public = 1: anonymous /metrics counts the public repo only (acme/secret is private), beside the database's state"
curl -s -o "$B" -H "Authorization: Bearer $ROOT" "$KHUB_URL/metrics"
is "$(grep '^khub_repos' "$B")" 'khub_repos{type="kernel"} 2' "…and a site admin still gets every repo"
grep -E "runtime error|AddressSanitizer" "$TEST_DIR/server.log" | sed 's/^/# /' | head -5
check "no sanitizer report in the server log" -- bash -c "! grep -qE 'runtime error|AddressSanitizer' '$TEST_DIR/server.log'"
done_testing
