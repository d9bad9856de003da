# nginx-proxy.sh -- Debian's nginx in front of the test's khub with
# deploy/nginx-khub.conf as shipped (names, ports and certificate paths
# replaced) and a self-signed certificate for 127.0.0.1 made here (t0174,
# t0226). Source it after khub_setup; nginx_proxy_start needs KHUB_PORT and
# sets N (its folder), CA, PUB (https://127.0.0.1:TLS_PORT), HTTP_PORT and
# NGINX_PID; stop_nginx stops it (call it from the test's EXIT trap).
TLS_PORT=$(free_port)
HTTP_PORT=$(free_port)
PUB=https://127.0.0.1:$TLS_PORT
N=$TEST_DIR/nginx
CA=$N/hub.crt
NGINX_PID=
stop_nginx() { [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null; NGINX_PID=; }

# The certificate, the site and nginx.conf, checked (two TAP lines), then
# nginx started in the background.
nginx_proxy_start() {
	mkdir -p "$N/tmp"
	chmod 777 "$N/tmp"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
		-keyout "$N/hub.key" -out "$N/hub.crt" >/dev/null 2>&1
	ok $? "a self-signed certificate for 127.0.0.1"
	sed -e '/listen \[::\]/d' \
		-e "s|listen 80;|listen 127.0.0.1:$HTTP_PORT;|" \
		-e "s|listen 443 ssl http2;|listen 127.0.0.1:$TLS_PORT ssl http2;|" \
		-e 's|server_name hub.example.com;|server_name 127.0.0.1;|' \
		-e "s|return 301 https://\$host\$request_uri;|return 301 https://\$host:$TLS_PORT\$request_uri;|" \
		-e "s|/etc/ssl/khub/hub.example.com.crt|$N/hub.crt|" -e "s|/etc/ssl/khub/hub.example.com.key|$N/hub.key|" \
		-e "s|proxy_pass http://127.0.0.1:8080;|proxy_pass http://127.0.0.1:$KHUB_PORT;|" \
		"$KHUB_SRC/deploy/nginx-khub.conf" >"$N/khub.conf"
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
}
