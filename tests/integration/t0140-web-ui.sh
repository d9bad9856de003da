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
shots=$(ls "$WEB_DIR/artifacts"/*.png 2>/dev/null | wc -l)
ok $([ "$shots" -ge 8 ] && echo 0 || echo 1) "screenshots of each page saved ($shots in tests/web/artifacts)"
done_testing
