#!/bin/bash
# t0226-trusted-proxies-nginx.sh -- khub with trusted_proxies = 127.0.0.1
# behind Debian's nginx with deploy/nginx-khub.conf as shipped (TLS, names,
# ports and certificate paths replaced): nginx appends the client to the
# X-Forwarded-For it got ($proxy_add_x_forwarded_for, one line), and the
# audit row and the JSON access line name the client (curl --interface
# 127.0.0.7), the line's proxy the peer; a forged X-Forwarded-For in front
# of it is ignored; a bad trusted_proxies entry stops serve and is named by
# serve -n.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

for tool in nginx openssl curl jq psql; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
. "$KHUB_SRC/tests/lib/nginx-proxy.sh"
trap 'stop_nginx; khub_teardown' EXIT

# ---- a bad entry -------------------------------------------------------------------------
OUT=$(khub serve -n --trusted-proxies "127.0.0.1, 10.0.0.0/33" 2>&1)
ok $([ $? -eq 1 ] && echo 0 || echo 1) "serve -n with trusted_proxies = '127.0.0.1, 10.0.0.0/33' exits 1"
like "$OUT" "trusted_proxies: '10.0.0.0/33' is not an address or a CIDR range" "and names the bad entry"
khub serve --trusted-proxies proxy.example >"$TEST_DIR/bad-serve.log" 2>&1
ok $([ $? -ne 0 ] && grep -q "'proxy.example' is not an address" "$TEST_DIR/bad-serve.log" && echo 0 || echo 1) \
	"serve refuses to start with a host name in trusted_proxies"

# ---- nginx as shipped ----------------------------------------------------------------------
nginx_proxy_start
grep -q 'X-Forwarded-For $proxy_add_x_forwarded_for' "$N/khub.conf"
ok $? "deploy/nginx-khub.conf appends the client to X-Forwarded-For"

export KHUB_PUBLIC_URL=$PUB KHUB_MAX_CONNECTIONS_PER_IP=0 KHUB_TRUSTED_PROXIES=127.0.0.1 KHUB_LOG_FORMAT=json
khub admin user create alice >/dev/null 2>&1
khub admin org create acme >/dev/null 2>&1
khub admin member set acme alice write >/dev/null 2>&1
TOK=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
khub_start
up=1
for _ in $(seq 1 300); do
	curl -sf --cacert "$CA" "$PUB/api/health" >/dev/null 2>&1 && { up=0; break; }
	sleep 0.1
done
ok $up "khub answers through nginx over TLS"

create() {	# create FROM NAME [curl args]: the status of creating acme/NAME through nginx from FROM
	local from=$1 name=$2
	shift 2
	curl -s --cacert "$CA" -o "$TEST_DIR/create.out" -w '%{http_code}' --interface "$from" -X POST \
		-H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' "$@" \
		--data-binary "{\"name\":\"$name\",\"organization\":\"acme\",\"type\":\"kernel\"}" "$PUB/api/repos/create"
}
audit_addr() {
	psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc \
		"SELECT remote_addr FROM audit_log WHERE action = 'repo.create' AND target = 'kernels/acme/$1'" 2>/dev/null
}

is "$(create 127.0.0.7 plain)" 200 "create through nginx from 127.0.0.7"
is "$(audit_addr plain)" 127.0.0.7 "the audit row names the client, not nginx"
is "$(create 127.0.0.8 forged -H 'X-Forwarded-For: 6.6.6.6, 127.0.0.1')" 200 \
	"create through nginx with a forged X-Forwarded-For (nginx appends to it)"
is "$(audit_addr forged)" 127.0.0.8 "the right-most untrusted entry wins: the real client"
is "$(jq -r 'select(.msg == "request" and .route == "/api/repos/create") | "\(.remote_addr) \(.proxy)"' \
	"$TEST_DIR/server.log" 2>/dev/null | sort | tr '\n' ';')" "127.0.0.7 127.0.0.1;127.0.0.8 127.0.0.1;" \
	"the JSON access lines: remote_addr the client, proxy the peer"

stop_nginx
khub_stop
done_testing
