#!/bin/bash
# t0254-web-commits.sh -- the web UI's commit history and commit page (its
# diff against the first parent) end to end: tests/web/web_commits.mjs
# pushes a series of commits through the API and git and checks in Debian's
# chromium (headless) what the pages show (exact lines and line numbers,
# escaped HTML, LFS and binary size changes, a deleted file, the root commit,
# the limits, links, 390 px); here, with curl, a private repo's commit page
# is a 404 page anonymously and for a non-member, 200 for a member's session.
# Screenshots go to tests/web/artifacts/ (git-ignored).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP $CHROMIUM not installed (apt-get install chromium)"; exit 0; }
WEB_DIR="$KHUB_SRC/tests/web"
[ -d "$WEB_DIR/node_modules/playwright-core" ] || { echo "1..0 # SKIP playwright-core not installed in $WEB_DIR"; exit 0; }

khub_setup
khub admin org create acme >/dev/null 2>&1
khub admin user create root --site-admin >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin user create mallory >/dev/null 2>&1
khub admin member set acme alice read >/dev/null 2>&1
ROOT=$(khub admin token create root --scope write 2>/dev/null)
ALICE=$(khub admin token create alice --scope read 2>/dev/null)
MALLORY=$(khub admin token create mallory --scope read 2>/dev/null)
khub_start

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
mkdir -p "$HOME"
out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" ROOT_TOKEN="$ROOT" ALICE_TOKEN="$ALICE" SHAS_JSON="$TEST_DIR/shas.json" \
	CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" timeout 600 node tests/web/web_commits.mjs 2>&1)
rc=$?
tap_relay "$out" "$rc"

# ---- a private repo's commit page: who may read the repo only ----------------
session() {	# session TOKEN: a signed-in session id
	local jar=$TEST_DIR/jar.$RANDOM csrf
	csrf=$(curl -s -c "$jar" "$KHUB_URL/login" | grep -o 'name="csrf" value="[0-9a-f]*"' | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$1" "$KHUB_URL/login"
	awk '$6 == "khub_session" { print $7 }' "$jar"
}
HIDDEN=$(jq -r .hidden "$TEST_DIR/shas.json" 2>/dev/null)
PAGE="$KHUB_URL/kernels/acme/hidden/commit/$HIDDEN"
like "$HIDDEN" '^[0-9a-f]{40}$' "the private repo's commit is known"
code() { curl -s -o "$TEST_DIR/body" -w '%{http_code}' "$@"; }
is "$(code "$PAGE")" 404 "anonymous: the private repo's commit page is a 404"
check "anonymous: the 404 page shows nothing of the commit" -- bash -c "! grep -q 's3cret\|secret change' '$TEST_DIR/body'"
is "$(code -H "Authorization: Bearer $MALLORY" "$PAGE")" 404 "a non-member's token (pages ignore it): 404"
S_MALLORY=$(session "$MALLORY")
like "$S_MALLORY" '^[0-9a-f]{20,}$' "mallory signed in"
is "$(code -b "khub_session=$S_MALLORY" "$PAGE")" 404 "a non-member's session: 404"
check "the non-member's 404 page shows nothing of the commit" -- bash -c "! grep -q 's3cret\|secret change' '$TEST_DIR/body'"
S_ALICE=$(session "$ALICE")
is "$(code -b "khub_session=$S_ALICE" "$PAGE")" 200 "a member's session: 200"
check "the member sees the diff" -- grep -q 's3cret' "$TEST_DIR/body"
is "$(code -b "khub_session=$S_ALICE" "$KHUB_URL/kernels/acme/hidden/commit/0123456789")" 404 \
	"a member's session, an unknown sha: 404"
is "$(code -I "$KHUB_URL/kernels/acme/diffs/commit/$(jq -r .text "$TEST_DIR/shas.json")")" 200 "HEAD of a commit page: 200"

khub_stop
sanitizer_reports
ok $? "no sanitizer report from the server (leaks included)"
done_testing
