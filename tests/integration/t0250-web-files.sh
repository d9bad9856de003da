#!/bin/bash
# t0250-web-files.sh -- the web UI's file page and refs: tests/web/web_files.mjs
# in Debian's chromium (highlighted source with line anchors, JSON, TOML,
# Markdown, hostile HTML/SVG shown as text, binary and LFS cards, a folder's
# README, the last-commit column, a branch release/v1.2 written plainly, the
# branch/tag switcher, a private repo), then curl: the file page's access
# rule (anonymous, non-member, member) and the routes' answers.
# Screenshots go to tests/web/artifacts/ (git-ignored).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP $CHROMIUM not installed (apt-get install chromium)"; exit 0; }
WEB_DIR="$KHUB_SRC/tests/web"
[ -d "$WEB_DIR/node_modules/playwright-core" ] || { echo "1..0 # SKIP playwright-core not installed in $WEB_DIR"; exit 0; }

khub_setup
khub admin org create acme >/dev/null 2>&1
khub admin user create root --site-admin >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin user create eve >/dev/null 2>&1
khub admin member set acme alice read >/dev/null 2>&1
ROOT=$(khub admin token create root --scope write 2>/dev/null)
ALICE=$(khub admin token create alice --scope read 2>/dev/null)
EVE=$(khub admin token create eve --scope read 2>/dev/null)
khub_start
HOSTPORT=${KHUB_URL#http://}

# A binary file that is not LFS can only come by git (the commit API stores
# binary content as LFS).
api POST /api/repos/create -H "Authorization: Bearer $ROOT" -H 'Content-Type: application/json' \
	-d '{"name": "files", "organization": "acme", "type": "kernel"}'
is "$STATUS" 200 "acme/files created"
W=$TEST_DIR/work
git clone -q "http://root:$ROOT@$HOSTPORT/kernels/acme/files" "$W" >"$TEST_DIR/err" 2>&1
ok $? "git clone acme/files" || sed 's/^/#   /' "$TEST_DIR/err"
printf 'BINMARKER\0\1\2\3\4\5\6' >"$W/blob.dat"
(cd "$W" && git add blob.dat && git -c user.name=root -c user.email=root@example.test commit -qm "binary file by git" &&
	git push -q origin HEAD:main) >"$TEST_DIR/err" 2>&1
ok $? "git push of blob.dat (binary, not LFS)" || sed 's/^/#   /' "$TEST_DIR/err"
is "$(curl -s "$KHUB_URL/api/kernels/acme/files/tree/main" | jq -r '.[] | select(.path == "blob.dat") | has("lfs")')" false \
	"blob.dat is a plain git blob"

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" ROOT_TOKEN="$ROOT" ALICE_TOKEN="$ALICE" EVE_TOKEN="$EVE" \
	CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" timeout 600 node tests/web/web_files.mjs 2>&1)
tap_relay "$out" $?

# The access rule with curl: a session of each (sign-in form, CSRF, token).
session_of() {	# session_of TOKEN: the khub_session cookie value
	local jar=$TEST_DIR/jar.$RANDOM csrf
	csrf=$(curl -s -c "$jar" "$KHUB_URL/login" | grep -o 'name="csrf" value="[0-9a-f]*"' | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -D - -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$1" "$KHUB_URL/login" |
		tr -d '\r' | grep -i '^set-cookie: khub_session=' | sed 's/.*khub_session=\([0-9a-f]*\).*/\1/'
}
ALICE_S=$(session_of "$ALICE")
EVE_S=$(session_of "$EVE")
ok $([ -n "$ALICE_S" ] && [ -n "$EVE_S" ] && echo 0 || echo 1) "sessions for alice (member) and eve (non-member)"
P=/kernels/acme/privfiles/blob/main/secret.py
code() { curl -s -o "$TEST_DIR/page" -w '%{http_code}' "$@"; }
is "$(code "$KHUB_URL$P")" 404 "private file page: 404 signed out"
is "$(grep -c "TOKEN = " "$TEST_DIR/page")" 0 "  and nothing of the file in it"
is "$(code -b "khub_session=$EVE_S" "$KHUB_URL$P")" 404 "private file page: 404 for a non-member's session"
is "$(code -b "khub_session=$ALICE_S" "$KHUB_URL$P")" 200 "private file page: 200 for a member's session"
like "$(cat "$TEST_DIR/page")" "TOKEN = <span class=\"tok-str\">&#39;private&#39;</span>" "  with the file's line, escaped and highlighted"
is "$(code -b "khub_session=$ALICE_S" "$KHUB_URL/kernels/acme/privfiles/tree/main")" 200 "  and its tree page"
is "$(code -b "khub_session=$EVE_S" "$KHUB_URL/kernels/acme/privfiles/tree/main")" 404 "  which is 404 for the non-member"
curl -s -D "$TEST_DIR/h" -o /dev/null "$KHUB_URL/kernels/acme/files/blob/main/page.html"
like "$(tr -d '\r' <"$TEST_DIR/h" | grep -i '^content-security-policy:')" "script-src 'self';" "the file page keeps the CSP that forbids inline script"
is "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$KHUB_URL/kernels/acme/files/blob/main/docs")" \
	"303 $KHUB_URL/kernels/acme/files/tree/main/docs" "a folder's file page sends to its listing"
is "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$KHUB_URL/kernels/acme/files/tree/release/v1.2/RELEASE.md")" \
	"303 $KHUB_URL/kernels/acme/files/blob/release/v1.2/RELEASE.md" "a file's tree page sends to its file page"
done_testing
