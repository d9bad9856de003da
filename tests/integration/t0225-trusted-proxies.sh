#!/bin/bash
# t0225-trusted-proxies.sh -- the client's real address behind a reverse
# proxy: khub with trusted_proxies = 127.0.0.1 behind Debian's HAProxy with
# deploy/haproxy-khub.cfg as shipped (addresses replaced). Clients on
# distinct loopback addresses (curl --interface) create repos through the
# balancer: the audit row and the access log name the client, not the
# balancer, also when the client forges X-Forwarded-For (HAProxy appends the
# real one on its own line). A client that is not a trusted proxy cannot
# choose its address with the header; malformed, IPv6 and huge headers from
# the trusted address give the peer or the right address and never hurt
# the server; two clients behind the one balancer count as two downloads.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/haproxy.sh"

for tool in haproxy curl psql /usr/bin/python3; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
H=$TEST_DIR/haproxy
mkdir -p "$H"
HAPROXY_PID=
stop_haproxy() {
	[ -n "$HAPROXY_PID" ] && kill "$HAPROXY_PID" 2>/dev/null && wait "$HAPROXY_PID" 2>/dev/null
	return 0
}
trap 'stop_haproxy; khub_teardown' EXIT

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
V1=$(khub import "$SRC" --repo acme/relu --branch v1 2>>"$TEST_DIR/setup.log")
khub admin user create bob >>"$TEST_DIR/setup.log" 2>&1
khub admin member set acme bob write >>"$TEST_DIR/setup.log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$TEST_DIR/setup.log" | tail -n 1)
khub_start --trusted-proxies "127.0.0.1, ::1" --max-connections-per-ip 0 --download-stats-flush-ms 100

# ---- HAProxy with deploy/haproxy-khub.cfg, one node -------------------------------------
grep -q '^[[:space:]]*option forwardfor' "$KHUB_SRC/deploy/haproxy-khub.cfg"
ok $? "deploy/haproxy-khub.cfg has option forwardfor"
LB_PORT=$(free_port)
LB=http://127.0.0.1:$LB_PORT
haproxy_shipped_config "$LB_PORT" "$H/haproxy.cfg" "$KHUB_PORT"
haproxy -c -f "$H/haproxy.cfg" >"$H/check.out" 2>&1
ok $? "haproxy accepts deploy/haproxy-khub.cfg" || sed 's/^/# /' "$H/check.out"
haproxy -db -f "$H/haproxy.cfg" >>"$H/haproxy.log" 2>&1 &
HAPROXY_PID=$!
for _ in $(seq 1 300); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$LB/api/health")" = 200 ] && break
	sleep 0.1
done
is "$(curl -s -o /dev/null -w '%{http_code}' "$LB/api/health")" 200 "khub answers through HAProxy"

sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
audit_addr() {	# audit_addr REPO: the address of its repo.create audit row
	sql "SELECT remote_addr FROM audit_log WHERE action = 'repo.create' AND target = 'kernels/acme/$1'"
}
create() {	# create BASE FROM NAME [curl args]: the status of creating acme/NAME from address FROM
	local base=$1 from=$2 name=$3
	shift 3
	curl -s -o "$TEST_DIR/create.out" -w '%{http_code}' --interface "$from" -X POST \
		-H "Authorization: Bearer $BOB" -H 'Content-Type: application/json' "$@" \
		--data-binary "{\"name\":\"$name\",\"organization\":\"acme\",\"type\":\"kernel\"}" "$base/api/repos/create"
}

# ---- a write through the balancer is recorded with the client's address ------------------
is "$(create "$LB" 127.0.0.7 via-lb)" 200 "create through HAProxy from 127.0.0.7"
is "$(audit_addr via-lb)" 127.0.0.7 "the audit row names the client (127.0.0.7), not the balancer"
grep -q '127\.0\.0\.7 POST /api/repos/create 200' "$TEST_DIR/server.log"
ok $? "so does the access log"

# ---- a client behind the balancer forging X-Forwarded-For ---------------------------------
is "$(create "$LB" 127.0.0.8 forged -H 'X-Forwarded-For: 6.6.6.6')" 200 "create through HAProxy with a forged X-Forwarded-For"
is "$(audit_addr forged)" 127.0.0.8 "the right-most untrusted entry wins: the real client, not 6.6.6.6"
is "$(create "$LB" 127.0.0.8 forged-trusted -H 'X-Forwarded-For: 6.6.6.6, 127.0.0.1')" 200 \
	"create through HAProxy with a forged entry naming the trusted proxy"
is "$(audit_addr forged-trusted)" 127.0.0.8 "a client cannot pass itself off as a trusted hop"
is "$(create "$LB" 127.0.0.8 forged-fwd -H 'Forwarded: for=6.6.6.6')" 200 "create through HAProxy with a forged Forwarded"
is "$(audit_addr forged-fwd)" 127.0.0.8 "X-Forwarded-For (written by HAProxy) decides, not the client's Forwarded"

# ---- a client that is not a trusted proxy -------------------------------------------------
is "$(create "$KHUB_URL" 127.0.0.9 direct -H 'X-Forwarded-For: 1.2.3.4' -H 'Forwarded: for=1.2.3.4')" 200 \
	"create straight from 127.0.0.9 with X-Forwarded-For: 1.2.3.4"
is "$(audit_addr direct)" 127.0.0.9 "a peer that is no trusted proxy keeps its own address"

# ---- what a trusted proxy may send, from its address ---------------------------------------
is "$(create "$KHUB_URL" 127.0.0.1 fwd-v6 -H 'Forwarded: for="[2001:db8:cafe::17]:4711";proto=http')" 200 \
	"Forwarded with a bracketed IPv6 address and port"
is "$(audit_addr fwd-v6)" 2001:db8:cafe::17 "is read as that address"
is "$(create "$KHUB_URL" 127.0.0.1 garbage -H 'X-Forwarded-For: <script>, ;;, ]::[')" 200 "garbage X-Forwarded-For"
is "$(audit_addr garbage)" 127.0.0.1 "gives the peer"
is "$(create "$KHUB_URL" 127.0.0.1 fwd-bad -H 'Forwarded: for="[2001:db8::1]:http"')" 200 "Forwarded with a bad port"
is "$(audit_addr fwd-bad)" 127.0.0.1 "gives the peer"
HUGE=$(/usr/bin/python3 -c 'print(", ".join(["127.0.0.1"] * 700))')
is "$(create "$KHUB_URL" 127.0.0.1 huge -H "X-Forwarded-For: 203.0.113.9, $HUGE")" 200 \
	"700 trusted hops in X-Forwarded-For (about 8 KB)"
is "$(audit_addr huge)" 127.0.0.1 "read no further than 16 hops: the peer"
MANY=$(/usr/bin/python3 -c 'print("\n".join("X-Forwarded-For: 6.6.6.%d" % (i % 250) for i in range(100)))')
CURL_LINES=()
while IFS= read -r l; do CURL_LINES+=(-H "$l"); done <<<"$MANY"
is "$(create "$KHUB_URL" 127.0.0.1 many-lines "${CURL_LINES[@]}" -H 'X-Forwarded-For: 203.0.113.9')" 200 \
	"101 X-Forwarded-For lines"
is "$(audit_addr many-lines)" 203.0.113.9 "the last line's address (lines are read in order)"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/health")" 200 "the server is still up"

# ---- download counting: two clients behind the one balancer are two -----------------------
UA='kernels/0.15.2; hf_hub/1.29.0; python/3.11.2; backend/cpu; torch/2.11.0'
META=kernels/acme/relu/resolve/$V1/build/torch-cpu/metadata.json
for from in 127.0.0.7 127.0.0.8 127.0.0.7 127.0.0.8; do
	curl -s -o /dev/null -w '%{http_code}\n' --interface "$from" -A "$UA" "$LB/$META"
done >"$TEST_DIR/dl.codes"
is "$(sort -u "$TEST_DIR/dl.codes")" 200 "four loader GETs through HAProxy from two clients answer 200"
total() { curl -s "$KHUB_URL/api/kernels/acme/relu/downloads" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])'; }
for _ in $(seq 1 100); do
	[ "$(total)" = 2 ] && break
	sleep 0.1
done
is "$(total)" 2 "two real clients count twice, each once an hour (not once for the balancer)"

stop_haproxy
HAPROXY_PID=
khub_stop
if grep -E "runtime error|AddressSanitizer" "$TEST_DIR/server.log" >/dev/null; then
	grep -E "runtime error|AddressSanitizer" "$TEST_DIR/server.log" | head -5 | sed 's/^/# /'
	ok 1 "no sanitizer report in the server log"
else
	ok 0 "no sanitizer report in the server log"
fi
done_testing
