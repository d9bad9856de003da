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
TLS_PORT=$(free_port)
HTTP_PORT=$(free_port)
PUB=https://127.0.0.1:$TLS_PORT
N=$TEST_DIR/nginx
mkdir -p "$N/tmp"
chmod 777 "$N/tmp"
NGINX_PID=
stop_nginx() { [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null; NGINX_PID=; }
trap 'stop_nginx; khub_teardown' EXIT

# ---- a bad entry -------------------------------------------------------------------------
OUT=$(khub serve -n --trusted-proxies "127.0.0.1, 10.0.0.0/33" 2>&1)
ok $([ $? -eq 1 ] && echo 0 || echo 1) "serve -n with trusted_proxies = '127.0.0.1, 10.0.0.0/33' exits 1"
like "$OUT" "trusted_proxies: '10.0.0.0/33' is not an address or a CIDR range" "and names the bad entry"
khub serve --trusted-proxies proxy.example >"$TEST_DIR/bad-serve.log" 2>&1
ok $([ $? -ne 0 ] && grep -q "'proxy.example' is not an address" "$TEST_DIR/bad-serve.log" && echo 0 || echo 1) \
	"serve refuses to start with a host name in trusted_proxies"

# ---- nginx as shipped ----------------------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
	-keyout "$N/hub.key" -out "$N/hub.crt" >/dev/null 2>&1
CA=$N/hub.crt
sed -e '/listen \[::\]/d' \
	-e "s|listen 80;|listen 127.0.0.1:$HTTP_PORT;|" \
	-e "s|listen 443 ssl http2;|listen 127.0.0.1:$TLS_PORT ssl http2;|" \
	-e 's|server_name hub.example.com;|server_name 127.0.0.1;|' \
	-e "s|/etc/ssl/khub/hub.example.com.crt|$N/hub.crt|" -e "s|/etc/ssl/khub/hub.example.com.key|$N/hub.key|" \
	-e "s|proxy_pass http://127.0.0.1:8080;|proxy_pass http://127.0.0.1:$KHUB_PORT;|" \
	"$KHUB_SRC/deploy/nginx-khub.conf" >"$N/khub.conf"
grep -q 'X-Forwarded-For $proxy_add_x_forwarded_for' "$N/khub.conf"
ok $? "deploy/nginx-khub.conf appends the client to X-Forwarded-For"
{
	[ "$(id -u)" -eq 0 ] && echo "user root;"
	cat <<EOC
worker_processes 1;
pid $N/nginx.pid;
error_log $N/error.log;
events { worker_connections 256; }
http {
	access_log $N/access.log;
	client_body_temp_path $N/tmp/body;
	proxy_temp_path $N/tmp/proxy;
	fastcgi_temp_path $N/tmp/fastcgi;
	uwsgi_temp_path $N/tmp/uwsgi;
	scgi_temp_path $N/tmp/scgi;
	include $N/khub.conf;
}
EOC
} >"$N/nginx.conf"
nginx -t -p "$N" -c "$N/nginx.conf" >"$N/check.out" 2>&1
ok $? "nginx accepts deploy/nginx-khub.conf" || sed 's/^/# /' "$N/check.out"
nginx -p "$N" -c "$N/nginx.conf" -g 'daemon off;' >>"$N/error.log" 2>&1 &
NGINX_PID=$!

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
