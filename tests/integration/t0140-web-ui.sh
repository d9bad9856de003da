#!/bin/bash
# t0140-web-ui.sh -- the web UI end to end: a real khub, data published
# through the API by tests/web/web_ui.mjs, and Debian's chromium (headless)
# driven by playwright-core: sign in, listing filters against /api/kernels,
# the variant matrix and compliance against the API, "will it load" against
# /variants?compatible=true, benchmark charts, tokens, private repos, CSRF, a
# hostile README, and no API route answering HTML. Screenshots go to
# tests/web/artifacts/ (git-ignored).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP $CHROMIUM not installed (apt-get install chromium)"; exit 0; }
WEB_DIR="$KHUB_SRC/tests/web"
if [ ! -d "$WEB_DIR/node_modules/playwright-core" ]; then
	command -v npm >/dev/null 2>&1 || { echo "1..0 # SKIP npm not installed"; exit 0; }
	(cd "$WEB_DIR" && npm ci --silent --no-audit --no-fund >/dev/null 2>&1) ||
		{ echo "1..0 # SKIP npm ci failed in $WEB_DIR (offline?)"; exit 0; }
fi

khub_setup
khub admin org create acme >/dev/null 2>&1
khub admin org create other >/dev/null 2>&1
khub admin user create root --site-admin >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin user create mallory >/dev/null 2>&1
khub admin member set acme alice write >/dev/null 2>&1
khub admin member set acme mallory read >/dev/null 2>&1
khub admin member set other root admin >/dev/null 2>&1
khub admin worker add ui-worker-1 >/dev/null 2>&1	# the build farm section of /admin lists it
ROOT=$(khub admin token create root --scope write 2>/dev/null)
ROOT_ADMIN=$(khub admin token create root --scope admin 2>/dev/null)
ALICE=$(khub admin token create alice --scope write 2>/dev/null)
khub admin user create eve >/dev/null 2>&1
EVE=$(khub admin token create eve --scope write 2>/dev/null)
khub routes --json >"$TEST_DIR/routes.json"
# revocation must show at once: no token lookup is reused
khub_start --download-stats-flush-ms 200 --token-cache-ttl-ms 0

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" ROOT_TOKEN="$ROOT" ROOT_ADMIN_TOKEN="$ROOT_ADMIN" ALICE_TOKEN="$ALICE" MALLORY_TOKEN="$EVE" \
	ROUTES_JSON="$TEST_DIR/routes.json" CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" \
	timeout 600 node tests/web/web_ui.mjs 2>&1)
rc=$?
results=0
plan=
while IFS= read -r line; do
	if [[ "$line" =~ ^ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
		results=$((results + 1))
		ok 0 "${BASH_REMATCH[1]}"
	elif [[ "$line" =~ ^not\ ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
		results=$((results + 1))
		ok 1 "${BASH_REMATCH[1]}"
	elif [[ "$line" =~ ^1\.\.([0-9]+) ]]; then
		plan=${BASH_REMATCH[1]}
	elif [[ "$line" =~ ^# ]]; then
		echo "$line"
	elif [ -n "$line" ]; then
		echo "# node: $line"
	fi
done <<<"$out"
is "$plan" "$results" "the node script ran its whole plan"
[ "$rc" -ne 0 ] && diag "node exited with status $rc"
# Behind https (public_url), both cookies are Secure; plain http they cannot be.
cookie_flags() {	# cookie_flags NAME: the Set-Cookie of a sign-in, by cookie name
	local jar=$TEST_DIR/jar html=$TEST_DIR/login.html csrf
	curl -s -c "$jar" -D "$TEST_DIR/h1" -o "$html" "$KHUB_URL/login"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$html" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -D "$TEST_DIR/h2" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$ALICE" \
		"$KHUB_URL/login"
	cat "$TEST_DIR/h1" "$TEST_DIR/h2" | tr -d '\r' | grep -i "^set-cookie: $1=" | head -1
}
like "$(cookie_flags khub_session)" "HttpOnly; SameSite=Lax$" "plain http: the session cookie is HttpOnly, SameSite=Lax, not Secure"
khub_stop
# web_root: templates and static files from disk (working on the UI), only
# the files the binary knows by name
mkdir -p "$TEST_DIR/webroot"
cp -r "$KHUB_SRC/web/templates" "$KHUB_SRC/web/static" "$TEST_DIR/webroot/"
echo "/* edited on disk */" >>"$TEST_DIR/webroot/static/khub.css"
echo "not served" >"$TEST_DIR/webroot/static/extra.css"
khub_start --public-url https://hub.example.test --web-root "$TEST_DIR/webroot"
like "$(curl -s "$KHUB_URL/-/static/khub.css" | tail -1)" "edited on disk" "web_root: static files come from disk"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/-/static/extra.css")" 404 "web_root: a file the binary does not know is not served"
is "$(curl -s --path-as-is -o /dev/null -w '%{http_code}' "$KHUB_URL/-/static/../../web/web.h")" 404 "no way out of the static files (..)"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/-/static/..%2F..%2Fweb.h")" 404 "nor with an encoded .."
like "$(curl -s "$KHUB_URL/-/static/vendor/uPlot-LICENSE.txt" | head -3)" "MIT|Permission|Copyright" "the chart library's license is served"
like "$(cookie_flags khub_session)" "HttpOnly; SameSite=Lax; Secure$" "public_url https: the session cookie is Secure"
like "$(cookie_flags khub_login)" "SameSite=Strict; Secure$" "public_url https: the sign-in cookie is Secure"
session=$(grep -i "^set-cookie: khub_session=" "$TEST_DIR/h2" | sed 's/.*khub_session=\([0-9a-f]*\).*/\1/' | tr -d '\r')
is "$(curl -s -o /dev/null -w '%{http_code}' -b "khub_session=$session" "$KHUB_URL/settings/tokens")" 200 "a fresh session opens /settings/tokens"
psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qc \
	"UPDATE web_sessions SET expires_at = now() - interval '1 second'" >/dev/null 2>&1
is "$(curl -s -o /dev/null -w '%{http_code}' -b "khub_session=$session" "$KHUB_URL/settings/tokens")" 401 "an expired session is signed out"
is "$(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "SELECT count(*) FROM web_sessions WHERE id_sha256 = '$session'")" 0 \
	"the database keeps only the session id's hash"
status=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data "token=$ALICE" "$KHUB_URL/login")
is "$status" 403 "a sign-in POST without its CSRF token is refused"

shots=$(ls "$WEB_DIR/artifacts"/*.png 2>/dev/null | wc -l)
ok $([ "$shots" -ge 8 ] && echo 0 || echo 1) "screenshots of each page saved ($shots in tests/web/artifacts)"
done_testing
