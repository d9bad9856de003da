#!/bin/bash
# t0174-tls-proxy.sh -- khub behind Debian's nginx terminating TLS, with
# deploy/nginx-khub.conf as shipped (names, ports and certificate paths
# replaced) and a self-signed certificate made here, public_url https: the
# TLS is real (no CA, no connection); absolute links (Link pagination,
# commitUrl, repo url), LFS batch action hrefs and nginx's http->https
# redirect are https; the web sign-in redirects to a local path and sets
# Secure cookies that work through the proxy; the real clients work through
# it: curl --cacert, the @huggingface/hub JS client (NODE_EXTRA_CA_CERTS;
# uploads through the LFS hrefs), git clone + git lfs pull and git push
# (GIT_SSL_CAINFO).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

for tool in nginx openssl curl jq git node; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
[ -d "$KHUB_SRC/tests/js/node_modules/@huggingface/hub" ] || { echo "1..0 # SKIP tests/js/node_modules missing"; exit 0; }
git lfs version >/dev/null 2>&1 || { echo "1..0 # SKIP git-lfs not installed"; exit 0; }

khub_setup
. "$KHUB_SRC/tests/lib/nginx-proxy.sh"
trap 'stop_nginx; khub_teardown' EXIT

# ---- the certificate and nginx --------------------------------------------------------
nginx_proxy_start

export KHUB_PUBLIC_URL=$PUB KHUB_MAX_CONNECTIONS_PER_IP=0
khub admin user create alice >/dev/null 2>&1
TOK=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
khub_start
up=1
for _ in $(seq 1 300); do
	curl -sf --cacert "$CA" "$PUB/api/health" >/dev/null 2>&1 && { up=0; break; }
	sleep 0.1
done
ok $up "khub answers through nginx over TLS (curl --cacert)"
curl -s -o /dev/null "$PUB/api/health" 2>/dev/null
ok $([ $? -eq 60 ] && echo 0 || echo 1) "without the CA, curl refuses the certificate (the TLS is real)"
LOC=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "http://127.0.0.1:$HTTP_PORT/api/health?x=1")
is "$LOC" "301 $PUB/api/health?x=1" "plain http through nginx redirects to https"

api() {	# api METHOD PATH [curl args...] -> $STATUS, headers in $H, body in $B
	local m=$1 p=$2
	shift 2
	STATUS=$(curl -s --cacert "$CA" -X "$m" -D "$H" -o "$B" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$@" "$PUB$p")
}
H=$TEST_DIR/h B=$TEST_DIR/b

# ---- absolute links and LFS hrefs -----------------------------------------------------------
api POST /api/repos/create -H 'Content-Type: application/json' --data '{"type":"kernel","name":"tls"}'
is "$STATUS" 200 "a repo created through the proxy"
like "$(jq -r .url "$B")" "^$PUB/kernels/alice/tls\$" "its url is https (public_url)"
head -c 40000 /dev/urandom >"$TEST_DIR/x.bin"
printf '{"key":"header","value":{"summary":"one"}}\n{"key":"file","value":{"path":"x.bin","content":"%s","encoding":"base64"}}\n' \
	"$(base64 -w0 "$TEST_DIR/x.bin")" >"$TEST_DIR/c.ndjson"
api POST /api/kernels/alice/tls/commit/main -H 'Content-Type: application/x-ndjson' --data-binary @"$TEST_DIR/c.ndjson"
is "$STATUS" 200 "a commit through the proxy"
like "$(jq -r .commitUrl "$B")" "^$PUB/" "commitUrl is https"
OID=$(sha256sum "$TEST_DIR/x.bin" | cut -d' ' -f1)
batch() {	# batch OPERATION OID SIZE
	api POST /kernels/alice/tls.git/info/lfs/objects/batch -H 'Content-Type: application/vnd.git-lfs+json' \
		--data "{\"operation\":\"$1\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$2\",\"size\":$3}]}"
}
batch download "$OID" 40000
like "$(jq -r '.objects[0].actions.download.href' "$B")" "^$PUB/api/lfs/" "the LFS batch download href is https"
head -c 30000 /dev/urandom >"$TEST_DIR/y.bin"
YOID=$(sha256sum "$TEST_DIR/y.bin" | cut -d' ' -f1)
batch upload "$YOID" 30000
HREF=$(jq -r '.objects[0].actions.upload.href' "$B")
like "$HREF" "^$PUB/api/lfs/" "the LFS batch upload href is https"
is "$(curl -s --cacert "$CA" -o /dev/null -w '%{http_code}' -X PUT --data-binary @"$TEST_DIR/y.bin" "$HREF")" 200 \
	"the upload href works through the proxy"
api POST /api/repos/create -H 'Content-Type: application/json' --data '{"type":"kernel","name":"tls2"}'
api GET '/api/kernels?limit=1'
like "$(header Link)" "^<$PUB/api/kernels\?" "the Link pagination header is https"

# ---- the web sign-in: redirect and cookies -------------------------------------------------
JAR=$TEST_DIR/jar
curl -s --cacert "$CA" -c "$JAR" -o "$TEST_DIR/login.html" "$PUB/login"
CSRF=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/login.html" | head -1 | sed 's/.*value="//; s/"//')
curl -s --cacert "$CA" -b "$JAR" -c "$JAR" -D "$H" -o /dev/null --data-urlencode "csrf=$CSRF" \
	--data-urlencode "token=$TOK" --data-urlencode "next=/settings/tokens" "$PUB/login"
is "$(head -n 1 "$H" | cut -d' ' -f2)/$(header Location)" "303//settings/tokens" \
	"sign-in redirects to a local path (the browser stays on https)"
like "$(grep -i '^set-cookie: khub_session=' "$H" | tr -d '\r')" "HttpOnly; SameSite=Lax; Secure$" "the session cookie is Secure"
is "$(curl -s --cacert "$CA" -b "$JAR" -o /dev/null -w '%{http_code}' "$PUB/settings/tokens")" 200 \
	"the Secure session cookie signs the browser in through the proxy"

# ---- the JS client ------------------------------------------------------------------------------
khub admin org create acme >/dev/null 2>&1
khub admin member set acme alice write >/dev/null 2>&1
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
head -c $((3 * 1024 * 1024)) /dev/urandom >"$SRC/build/torch-cpu/weights.bin"
out=$(cd "$KHUB_SRC" && env NODE_EXTRA_CA_CERTS="$CA" KHUB_URL="$PUB" TOKEN="$TOK" NS=acme SRC_DIR="$SRC" SRC2_DIR="$SRC" \
	STATE_FILE="$TEST_DIR/state.json" PHASE=publish node tests/js/publish_client.mjs 2>&1)
rc=$?
is "$rc/$(grep -c '^not ok' <<<"$out")" "0/0" "the @huggingface/hub client publishes and reads back through TLS (NODE_EXTRA_CA_CERTS)" ||
	grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# node: /'
like "$(grep -c '^ok' <<<"$out")" '^[1-9][0-9]*$' "its steps ran (createRepo, uploadFiles through the LFS hrefs, listFiles, downloadFile)"

# ---- git and git lfs -------------------------------------------------------------------------
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
unset GIT_DIR GIT_WORK_TREE GIT_CONFIG_GLOBAL GIT_LFS_SKIP_SMUDGE
mkdir -p "$HOME"
git lfs install >/dev/null 2>&1
git clone -q "$PUB/kernels/alice/tls" "$TEST_DIR/nocert" >/dev/null 2>&1
ok $([ $? -ne 0 ]; echo $?) "git without the CA refuses the certificate"
export GIT_SSL_CAINFO=$CA
CLONE=$TEST_DIR/clone
GIT_LFS_SKIP_SMUDGE=1 git clone -q "https://alice:$TOK@127.0.0.1:$TLS_PORT/kernels/acme/js-pub" "$CLONE" >"$TEST_DIR/clone.out" 2>&1
ok $? "git clone over https (GIT_SSL_CAINFO)" || sed 's/^/# /' "$TEST_DIR/clone.out"
(cd "$CLONE" && git lfs pull) >"$TEST_DIR/lfs.out" 2>&1
ok $? "git lfs pull over https (the batch hrefs are https)" || sed 's/^/# /' "$TEST_DIR/lfs.out"
check "clone + lfs pull: the bytes the JS client published" -- diff -r -x .git -x .gitattributes "$SRC" "$CLONE"
head -c 20000 /dev/urandom >"$CLONE/build/torch-cpu/pushed.bin"
(cd "$CLONE" && git add build/torch-cpu/pushed.bin && git -c user.name=a -c user.email=a@example.com commit -qm push &&
	git push -q origin main) >"$TEST_DIR/push.out" 2>&1
ok $? "git push (an LFS upload, then the pack) over https" || sed 's/^/# /' "$TEST_DIR/push.out"
is "$(curl -s --cacert "$CA" -H "Authorization: Bearer $TOK" "$PUB/kernels/acme/js-pub/resolve/main/build/torch-cpu/pushed.bin" | sha256sum | cut -d' ' -f1)" \
	"$(sha256sum <"$CLONE/build/torch-cpu/pushed.bin" | cut -d' ' -f1)" "the pushed LFS file is served back"
done_testing
