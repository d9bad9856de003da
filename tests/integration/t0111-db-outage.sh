#!/bin/bash
# t0111-db-outage.sh -- a database outage is never an answer about the
# caller: with the embedded PostgreSQL's postmaster killed (kill -9), a
# valid token gets 503 with Retry-After on the JSON API, git and LFS (never
# the 401 that makes git credential helpers erase the password), and
# /api/health says the node is degraded, the database down (200: the node
# still serves reads; t0230 has the reads); khub's watchdog restarts the
# cluster and the same requests succeed without restarting khub. Then the
# other half of the policy: an invalid (revoked, expired, garbage) token is
# 401 "Invalid credentials in Authorization header" everywhere, public
# repos included.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
# no token is honoured from the outage cache here (t0230 has that): every
# token lookup during the outage needs the database
export KHUB_OUTAGE_CACHE_S=0

log=$TEST_DIR/setup.log
khub admin user create alice >>"$log" 2>&1
TOKEN=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
EXPIRED=$(khub admin token create alice --scope write --expires-in-days 0.00001 2>>"$log" | tail -n 1)
REVOKED=$(khub admin token create alice --scope write 2>"$TEST_DIR/revoked.err" | tail -n 1)
REVOKED_ID=$(sed -n 's/^token id \([0-9]*\) .*/\1/p' "$TEST_DIR/revoked.err")
khub admin token revoke "$REVOKED_ID" >>"$log" 2>&1
GARBAGE=hf_notarealtoken0123456789abcdefghij
khub_start
KHUB_STARTED_PID=$KHUB_PID

H=$TEST_DIR/headers
B=$TEST_DIR/body
# req TOKEN METHOD PATH [BODY [CONTENT-TYPE]] -> status (headers in $H, body in $B)
req() {
	local tok=$1 method=$2 path=$3 data=${4-} ctype=${5:-application/json} args
	args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$method")
	[ -n "$tok" ] && args+=(-H "Authorization: Bearer $tok")
	[ -n "$data" ] && args+=(-H "Content-Type: $ctype" --data-binary "$data")
	curl "${args[@]}" "$KHUB_URL$path"
}
README=$(printf '# outage\n' | base64 -w0)
for r in pub priv; do
	priv=false; [ $r = priv ] && priv=true
	is "$(req "$TOKEN" POST /api/repos/create "{\"name\":\"$r\",\"type\":\"kernel\",\"private\":$priv,\"files\":[{\"path\":\"README.md\",\"content\":\"$README\",\"encoding\":\"base64\"}]}")" 200 \
		"alice creates alice/$r (private=$priv)"
done
commit_body() {
	printf '{"key":"header","value":{"summary":"%s"}}\n{"key":"file","value":{"content":"%s","path":"%s.txt","encoding":"base64"}}\n' \
		"$1" "$(printf '%s' "$1" | base64 -w0)" "$1"
}
LFS_BATCH='{"operation":"download","transfers":["basic"],"objects":[{"oid":"'"$(printf x | sha256sum | cut -c1-64)"'","size":1}]}'
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
unset GIT_DIR GIT_WORK_TREE GIT_CONFIG_GLOBAL
mkdir -p "$HOME"
HOSTPORT=127.0.0.1:$KHUB_PORT

# the requests of both halves: NAME TOKEN -> "status" lines
round() {	# round TOKEN TAG: every request once, "name status retry-after" per line
	local tok=$1 s
	s=$(req "$tok" GET /api/whoami-v2);				echo "whoami $s $(header Retry-After)"
	s=$(req "$tok" GET /api/kernels/alice/priv);			echo "private-info $s $(header Retry-After)"
	s=$(req "$tok" POST /api/kernels/alice/priv/commit/main "$(commit_body "c$2")" application/x-ndjson)
	echo "commit $s $(header Retry-After)"
	s=$(curl -s -D "$H" -o "$B" -w '%{http_code}' -u "x:$tok" "$KHUB_URL/kernels/alice/priv.git/info/refs?service=git-upload-pack")
	echo "git-info-refs $s $(header Retry-After)"
	s=$(req "$tok" POST /kernels/alice/priv.git/info/lfs/objects/batch "$LFS_BATCH" application/vnd.git-lfs+json)
	echo "lfs-batch $s $(header Retry-After)"
}

# ---- before: everything works --------------------------------------------------------------
round "$TOKEN" 0 >"$TEST_DIR/before"
is "$(awk '{print $1, $2}' "$TEST_DIR/before" | tr '\n' ' ')" \
	"whoami 200 private-info 200 commit 200 git-info-refs 200 lfs-batch 200 " "before the outage every request answers 200"

# ---- the outage ------------------------------------------------------------------------------
# Hold the cluster's start lock (as another khub process starting or stopping
# it would) so that the outage lasts until we let the watchdog restart it.
PIDFILE=$KHUB_DATA_DIR/pg/data/postmaster.pid
exec 9>>"$KHUB_DATA_DIR/pg/start.lock"
flock -x 9
PM=$(head -n 1 "$PIDFILE")
like "$PM" '^[0-9]+$' "the postmaster's pid is the first line of $PIDFILE"
kill -9 "$PM"
ok $? "kill -9 the postmaster ($PM)"
down=0
for _ in $(seq 1 50); do
	[ "$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/api/health")" = 200 ] && grep -q degraded "$B" && { down=1; break; }
	sleep 0.2
done
is "$down" 1 "/api/health answers 200 degraded once the postmaster is gone (reads are still served)"
like "$(cat "$B")" '"status":"degraded"' "  … with status degraded"
like "$(cat "$B")" '"database":"down: ' "  … and names the database: $(head -c 200 "$B")"
sleep 2.5	# past the token cache (token_cache_ttl_ms, 2 s): lookups reach the database

round "$TOKEN" 1 >"$TEST_DIR/during"
while read -r name status retry; do
	is "$status" 503 "outage: $name with a valid token → 503 (not 401)"
	like "$retry" '^[0-9]+$' "outage: $name carries Retry-After"
done <"$TEST_DIR/during"
req "$TOKEN" GET /api/whoami-v2 >/dev/null
is "$(cat "$B")" '{"error":"database unavailable, retry later"}' "outage: the 503 is a JSON error"
out=$(git ls-remote "http://x:$TOKEN@$HOSTPORT/kernels/alice/priv" 2>&1)
rc=$?
isnt_auth=1; grep -qiE 'Authentication failed|401' <<<"$out" && isnt_auth=0
ok $((rc == 0)) "outage: git ls-remote with the token fails"
is "$isnt_auth" 1 "outage: … and not as an authentication failure (git keeps the password): $(head -n 1 <<<"$out")"
s=$(curl -s -D "$H" -o "$B" -w '%{http_code}' "$KHUB_URL/kernels?search=outage")
is "$s" 503 "outage: the web UI's kernel listing → 503"
like "$(cat "$H")" 'Retry-After: [0-9]+' "  … with Retry-After"
like "$(cat "$B")" '<p>The database is unavailable; try again shortly.</p>' "  … as the one database page"
is "$(kill -0 "$KHUB_STARTED_PID" 2>/dev/null && echo alive)" alive "khub still runs during the outage"

# ---- the restart ------------------------------------------------------------------------------
flock -u 9
exec 9>&-
up=0
for _ in $(seq 1 60); do
	[ "$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/api/health")" = 200 ] && grep -q '"database":"ok"' "$B" && { up=1; break; }
	sleep 0.5
done
is "$up" 1 "the watchdog restarts the embedded PostgreSQL (health 200 within 30 s)"
is "$(cat "$B")" '{"status":"ok","database":"ok"}' "health: status ok, database ok"
NEWPM=$(head -n 1 "$PIDFILE" 2>/dev/null)
ok $([ -n "$NEWPM" ] && [ "$NEWPM" != "$PM" ]; echo $?) "a new postmaster runs ($NEWPM, was $PM)"
round "$TOKEN" 2 >"$TEST_DIR/after"
is "$(awk '{print $1, $2}' "$TEST_DIR/after" | tr '\n' ' ')" \
	"whoami 200 private-info 200 commit 200 git-info-refs 200 lfs-batch 200 " "after the restart the same requests answer 200"
git ls-remote "http://x:$TOKEN@$HOSTPORT/kernels/alice/priv" >"$TEST_DIR/ls-remote" 2>>"$log"
ok $? "after the restart git ls-remote with the token works"
is "$(kill -0 "$KHUB_STARTED_PID" 2>/dev/null && echo alive)" alive "… served by the same khub process"
grep -q 'embedded database: the postmaster (pid [0-9]*) is gone' "$TEST_DIR/server.log"
ok $? "the server log says the postmaster was gone"
grep -q 'embedded database: running again' "$TEST_DIR/server.log"
ok $? "the server log says it runs again"

# ---- invalid tokens: 401 everywhere --------------------------------------------------------------
INVALID='{"error":"Invalid credentials in Authorization header"}'
for kind in revoked expired garbage; do
	case $kind in revoked) tok=$REVOKED ;; expired) tok=$EXPIRED ;; garbage) tok=$GARBAGE ;; esac
	for ep in "GET /api/kernels/alice/pub" "GET /kernels/alice/pub/resolve/main/README.md" "GET /api/kernels" \
		  "GET /api/kernels/alice/pub/refs"; do
		s=$(req "$tok" ${ep% *} "${ep#* }")
		is "$s $(cat "$B")" "401 $INVALID" "$kind token × $ep → 401 with the Hub's JSON error"
	done
	s=$(req "$tok" POST /kernels/alice/pub.git/info/lfs/objects/batch "$LFS_BATCH" application/vnd.git-lfs+json)
	is "$s $(header WWW-Authenticate)" '401 Basic realm="khub"' "$kind token × LFS batch of a public repo → 401, Basic challenge"
	s=$(curl -s -D "$H" -o "$B" -w '%{http_code}' -u "x:$tok" "$KHUB_URL/kernels/alice/pub.git/info/refs?service=git-upload-pack")
	is "$s $(header WWW-Authenticate)" '401 Basic realm="khub"' "$kind token × git info/refs of a public repo → 401, Basic challenge"
	# git sends a URL's password only after a challenge, which a public
	# repo never gives; a token configured as a header is sent at once
	basic=$(printf 'x:%s' "$tok" | base64 -w0)
	out=$(git -c http.extraHeader="Authorization: Basic $basic" ls-remote "http://$HOSTPORT/kernels/alice/pub" 2>&1)
	rc=$?
	ok $((rc == 0)) "$kind token × git ls-remote of a public repo (token sent as a header) fails"
	like "$out" 'Authentication failed|401|could not read Username' "  … with an authentication error: $(head -n 1 <<<"$out")"
done
s=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $GARBAGE" "$KHUB_URL/api/health")
is "$s" 200 "/api/health does not read Authorization"
s=$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/api/kernels/alice/pub")
is "$s" 200 "without a token the public repo still answers 200"
s=$(curl -s -o /dev/null -w '%{http_code}' -X OPTIONS -H "Authorization: Bearer $GARBAGE" "$KHUB_URL/api/kernels/alice/pub")
is "$s" 204 "an OPTIONS preflight is answered whatever the token"

grep -E 'runtime error|AddressSanitizer' "$TEST_DIR/server.log" | head -5 | sed 's/^/# server: /'
check "server log has no sanitizer reports" -- bash -c "! grep -qE 'runtime error|AddressSanitizer' '$TEST_DIR/server.log'"
done_testing
