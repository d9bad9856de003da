#!/bin/bash
# t0230-db-blip-reads.sh -- a database blip is no read outage: three khub
# nodes on one PostgreSQL behind deploy/haproxy-khub.cfg as shipped, under a
# bounded read load through HAProxy (public resolve, tree and revision, and
# a private repo with a token used before), while PostgreSQL is stopped
# (fast shutdown) and held down for ~8 s, then started again by khub's
# watchdog. Every read answers 200: /api/health stays 200 ("degraded",
# "database":"down: …"), so HAProxy keeps every node. Meanwhile writes answer
# 503 with Retry-After (never 401/400/500), a token no node has seen answers
# 503 (not 401), a token revoked before the outage is not honoured, /metrics
# says khub_database_up 0; afterwards writes work again and a token honoured
# from the cache during the outage is refused on every node as soon as it is
# revoked.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/haproxy.sh"

for tool in haproxy curl /usr/bin/python3; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
H=$TEST_DIR/haproxy
mkdir -p "$H"
# token_cache_ttl_ms stays at its 2 s: the outage outlasts it, so a private
# read during it is the outage cache's (outage_cache_s) doing
export KHUB_MAX_CONNECTIONS_PER_IP=0
NODE_PIDS=() NODE_PORTS=() HAPROXY_PID= LOAD_PIDS=()
stop_all() {
	for p in "${LOAD_PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	[ -n "$HAPROXY_PID" ] && kill "$HAPROXY_PID" 2>/dev/null && wait "$HAPROXY_PID" 2>/dev/null
	for p in "${NODE_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	return 0
}
trap 'stop_all; khub_teardown' EXIT

log=$TEST_DIR/setup.log
khub admin user create alice >>"$log" 2>&1
khub admin user create root --site-admin >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
LATER=$(khub admin token create alice --scope read 2>"$TEST_DIR/later.err" | tail -n 1)
LATER_ID=$(sed -n 's/^token id \([0-9]*\) .*/\1/p' "$TEST_DIR/later.err")
GONE=$(khub admin token create alice --scope read 2>"$TEST_DIR/gone.err" | tail -n 1)
GONE_ID=$(sed -n 's/^token id \([0-9]*\) .*/\1/p' "$TEST_DIR/gone.err")
ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
UNSEEN=$(khub admin token create alice --scope read 2>>"$log" | tail -n 1)

wait_health() {	# wait_health URL WANT_STATUS [BODY_REGEX] (polls through http_request, no curl each)
	local body
	for _ in $(seq 1 600); do
		http_request GET "$1/api/health" "$TEST_DIR/health.h" "$TEST_DIR/health.b" -
		body="$(<"$TEST_DIR/health.b") $HTTP_STATUS"
		[ "${body##* }" = "$2" ] && [[ "$body" =~ ${3:-.} ]] && return 0
		sleep 0.1
	done
	return 1
}
start_node() {	# start_node INDEX
	local port
	port=$(free_port)
	KHUB_LISTEN=127.0.0.1:$port "$KHUB_BIN" serve >>"$TEST_DIR/node$1.log" 2>&1 &
	NODE_PIDS[$1]=$!
	NODE_PORTS[$1]=$port
	wait_health "http://127.0.0.1:$port" 200 '"database":"ok"' || bail "node $1 did not start"
}
node() { echo "http://127.0.0.1:${NODE_PORTS[$1]}"; }
for i in 1 2 3; do start_node $i; done
ok 0 "three nodes on ports ${NODE_PORTS[*]}"

LB_PORT=$(free_port)
LB=http://127.0.0.1:$LB_PORT
haproxy_shipped_config "$LB_PORT" "$H/haproxy.cfg" "${NODE_PORTS[1]}" "${NODE_PORTS[2]}" "${NODE_PORTS[3]}"
haproxy -c -f "$H/haproxy.cfg" >"$H/check.out" 2>&1
ok $? "haproxy accepts deploy/haproxy-khub.cfg" || sed 's/^/# /' "$H/check.out"
haproxy -db -f "$H/haproxy.cfg" >>"$H/haproxy.log" 2>&1 &
HAPROXY_PID=$!
wait_health "$LB" 200
ok $? "khub answers /api/health through HAProxy"

HD=$TEST_DIR/headers
B=$TEST_DIR/body
header() { grep -i "^$1:" "$HD" | head -1 | cut -d' ' -f2- | tr -d '\r'; }
req() {	# req BASE TOKEN METHOD PATH [BODY [CONTENT-TYPE]] -> status (headers in $HD, body in $B)
	local base=$1 tok=$2 method=$3 path=$4 data=${5-} ctype=${6:-application/json} args
	args=(-s -D "$HD" -o "$B" -w '%{http_code}' -X "$method")
	[ -n "$tok" ] && args+=(-H "Authorization: Bearer $tok")
	[ -n "$data" ] && args+=(-H "Content-Type: $ctype" --data-binary "$data")
	curl "${args[@]}" "$base$path"
}
README=$(printf '# blip\n' | base64 -w0)
for r in pub priv; do
	priv=false; [ $r = priv ] && priv=true
	is "$(req "$LB" "$ALICE" POST /api/repos/create "{\"name\":\"$r\",\"type\":\"kernel\",\"private\":$priv,\"files\":[{\"path\":\"README.md\",\"content\":\"$README\",\"encoding\":\"base64\"}]}")" 200 \
		"alice creates alice/$r (private=$priv) through HAProxy"
done
commit_body() {
	printf '{"key":"header","value":{"summary":"%s"}}\n{"key":"file","value":{"content":"%s","path":"%s.txt","encoding":"base64"}}\n' \
		"$1" "$(printf '%s' "$1" | base64 -w0)" "$1"
}

# The reads of the load: "TOKEN PATH" (TOKEN "-": anonymous).
READS=(
	"- /kernels/alice/pub/resolve/main/README.md"
	"- /api/kernels/alice/pub/tree/main"
	"- /api/kernels/alice/pub/revision/main"
	"$ALICE /api/kernels/alice/priv/revision/main"
	"$ALICE /kernels/alice/priv/resolve/main/README.md"
	"$LATER /api/kernels/alice/priv/tree/main"
)
# Every node sees every read (records and tokens in its caches): the count
# of 200s, from each node directly.
warm_nodes() {
	local i r tok warm=0
	for i in 1 2 3; do
		for r in "${READS[@]}"; do
			tok=${r%% *}; [ "$tok" = - ] && tok=
			[ "$(req "$(node $i)" "$tok" GET "${r#* }")" = 200 ] && warm=$((warm + 1))
		done
	done
	echo "$warm"
}
is "$(warm_nodes)" $((3 * ${#READS[@]})) "every read answers 200 on every node before the outage"
for i in 1 2 3; do req "$(node $i)" "$GONE" GET /api/kernels/alice/pub >/dev/null; done
khub admin token revoke "$GONE_ID" >>"$log" 2>&1
ok $? "a token every node has cached is revoked before the outage"
# A token change empties every node's token cache: the load's tokens are
# looked up again on every node (through HAProxy one node might see none
# of a token's reads before the outage), the admin's after.
is "$(warm_nodes)" $((3 * ${#READS[@]})) "after the revocation, every read answers 200 on every node again"
is "$(req "$(node 3)" "$ROOT" GET /api/whoami-v2)" 200 "the site admin's token is used on node 3 before the outage"

# ---- the load: 3 loops through HAProxy, bounded in count -----------------------------------
STOP=$TEST_DIR/stop-load
load_loop() {	# load_loop N: "STATUS PATH" lines in $TEST_DIR/load-N
	local n=0 r tok hdrs
	HTTPC_PID=	# a client process of this loop's own (http_request), not the test's
	export KHUB_HTTP_TIMEOUT=30	# as curl --max-time 30
	while [ ! -e "$STOP" ] && [ $n -lt 4000 ]; do
		r=${READS[$(( (n + $1) % ${#READS[@]} ))]}
		tok=${r%% *}
		hdrs=()
		[ "$tok" != - ] && hdrs+=("Authorization: Bearer $tok")
		http_request GET "$LB${r#* }" /dev/null /dev/null - "${hdrs[@]}"
		echo "$HTTP_STATUS ${r#* }" >>"$TEST_DIR/load-$1"
		n=$((n + 1))
		sleep 0.05	# a read load, bounded in rate as a curl's start bounded it
	done
	kill "$HTTPC_PID"
}
for l in 1 2 3; do
	: >"$TEST_DIR/load-$l"
	load_loop $l &
	LOAD_PIDS+=($!)
done
loaded() { cat "$TEST_DIR"/load-? | wc -l; }
for _ in $(seq 1 100); do [ "$(loaded)" -ge 30 ] && break; sleep 0.1; done

# ---- stop PostgreSQL, hold it down ~8 s ------------------------------------------------------
# Holding the cluster's start lock keeps khub's watchdog from starting it
# again until we let go (as t0111 does).
PIDFILE=$KHUB_DATA_DIR/pg/data/postmaster.pid
exec 9>>"$KHUB_DATA_DIR/pg/start.lock"
flock -x 9
PM=$(head -n 1 "$PIDFILE")
BEFORE_OUTAGE=$(loaded)
kill -INT "$PM"	# fast shutdown: sessions end, the postmaster exits
for _ in $(seq 1 300); do kill -0 "$PM" 2>/dev/null || break; sleep 0.1; done
ok $([ ! -e /proc/$PM ]; echo $?) "PostgreSQL stopped (postmaster $PM gone, after $BEFORE_OUTAGE reads)"
OUTAGE_START=$(date +%s)

degraded=0
for i in 1 2 3; do
	wait_health "$(node $i)" 200 '"status":"degraded"' && degraded=$((degraded + 1))
done
is "$degraded" 3 "every node's /api/health answers 200 with status degraded"
s=$(req "$(node 1)" "" GET /api/health)
like "$(cat "$B")" '"database":"down: ' "  … and says the database is down: $(head -c 160 "$B")"
is "$(req "$(node 2)" "" GET /api/health/live)" 200 "/api/health/live answers 200 during the outage"
sleep 2.5	# past token_cache_ttl_ms: token lookups reach for the database

s=$(req "$LB" "$ALICE" POST /api/kernels/alice/priv/commit/main "$(commit_body during)" application/x-ndjson)
is "$s $(header Retry-After)" "503 5" "a commit during the outage → 503 with Retry-After"
s=$(req "$LB" "$ALICE" POST /api/repos/create '{"name":"new","type":"kernel"}')
is "$s $(header Retry-After)" "503 5" "a repo creation during the outage → 503 with Retry-After"
s=$(req "$LB" "$ALICE" PUT /api/kernels/alice/pub/settings '{"private":true}')
is "$s $(header Retry-After)" "503 5" "a settings change during the outage → 503 with Retry-After"
s=$(req "$LB" "$UNSEEN" GET /api/kernels/alice/pub/revision/main)
is "$s $(header Retry-After)" "503 5" "a token no node has seen → 503 with Retry-After (not 401)"
for i in 1 2 3; do
	s=$(req "$(node $i)" "$GONE" GET /api/kernels/alice/pub/revision/main)
	isnt200=$([ "$s" != 200 ] && [ "$s" != 500 ]; echo $?)
	ok "$isnt200" "node $i: the token revoked before the outage is not honoured ($s)"
done
s=$(req "$(node 3)" "$ROOT" GET /metrics)
is "$s" 200 "/metrics answers a site admin (token seen before) during the outage"
like "$(cat "$B")" $'(^|\n)khub_database_up 0(\n|$)' "  … with khub_database_up 0"
like "$(cat "$B")" $'khub_outage_cache_hits_total\\{cache="token"\\} [1-9]' "  … and token lookups answered by the outage cache"

while [ $(( $(date +%s) - OUTAGE_START )) -lt 8 ]; do sleep 0.5; done
DURING_OUTAGE=$(( $(loaded) - BEFORE_OUTAGE ))
flock -u 9
exec 9>&-

# ---- PostgreSQL back ---------------------------------------------------------------------------
back=0
for i in 1 2 3; do
	wait_health "$(node $i)" 200 '"database":"ok"' && back=$((back + 1))
done
is "$back" 3 "khub's watchdog starts PostgreSQL again: every node's health says database ok"
ok $([ "$DURING_OUTAGE" -gt 0 ]; echo $?) "the load read during the outage ($DURING_OUTAGE reads)"
touch "$STOP"
wait "${LOAD_PIDS[@]}"
LOAD_PIDS=()
TOTAL=$(loaded)
FAILED=$(cat "$TEST_DIR"/load-? | grep -vc '^200 ')
is "$FAILED" 0 "no read failed: $TOTAL reads through HAProxy, all 200"
[ "$FAILED" = 0 ] || cat "$TEST_DIR"/load-? | grep -v '^200 ' | sort | uniq -c | head | sed 's/^/# /'
grep -q 'Server khub_nodes/node[0-9] is DOWN' "$H/haproxy.log"
ok $(( ! $? )) "HAProxy never took a node out" || grep 'is DOWN' "$H/haproxy.log" | head -3 | sed 's/^/# /'

committed=0
for _ in $(seq 1 20); do
	s=$(req "$LB" "$ALICE" POST /api/kernels/alice/priv/commit/main "$(commit_body after)" application/x-ndjson)
	[ "$s" = 200 ] && { committed=1; break; }
	[ "$s" = 503 ] || break
	sleep 0.5
done
is "$committed $s" "1 200" "after the restart a commit works again"
is "$(req "$LB" "$ALICE" POST /api/repos/create '{"name":"after","type":"kernel"}')" 200 "… and a repo creation"

# LATER was honoured from the outage cache; once the database answers, that
# cache is no answer: with no request using it for longer than
# token_cache_ttl_ms, a read right after its revocation is refused on every
# node whether or not the NOTIFY has arrived yet.
sleep 2.5
khub admin token revoke "$LATER_ID" >>"$log" 2>&1
for i in 1 2 3; do
	is "$(req "$(node $i)" "$LATER" GET /api/kernels/alice/priv/tree/main)" 401 \
		"node $i: the token honoured during the outage is refused once revoked"
done
done_testing
