#!/bin/bash
# t0278-web-pages-look.sh -- every page kind of the web UI (from `khub routes
# --pages --json`), at a desktop and a phone width, in the light and the dark
# colour scheme: axe-core finds no violation (contrast included) and nothing
# scrolls the page sideways. Driven by tests/web/pages_check.mjs in Debian's
# chromium; screenshots under tests/web/artifacts/pages/ (git-ignored).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP $CHROMIUM not installed (apt-get install chromium)"; exit 0; }
WEB_DIR="$KHUB_SRC/tests/web"
if [ ! -d "$WEB_DIR/node_modules/axe-core" ]; then
	command -v npm >/dev/null 2>&1 || { echo "1..0 # SKIP npm not installed"; exit 0; }
	(cd "$WEB_DIR" && npm ci --silent --no-audit --no-fund >/dev/null 2>&1) ||
		{ echo "1..0 # SKIP npm ci failed in $WEB_DIR (offline?)"; exit 0; }
fi

khub_setup
khub admin org create acme >/dev/null 2>&1
khub admin user create root --site-admin >/dev/null 2>&1
khub admin member set acme root admin >/dev/null 2>&1
khub admin worker add pages-worker-1 >/dev/null 2>&1
ROOT=$(khub admin token create root --scope write 2>/dev/null)
khub routes --pages --json >"$TEST_DIR/pages.json"
khub_start --download-stats-flush-ms 200

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" ROOT_TOKEN="$ROOT" ROUTES_JSON="$TEST_DIR/pages.json" \
	CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" timeout 900 node tests/web/pages_check.mjs 2>&1)
rc=$?
tap_relay "$out"
[ "$rc" -ne 0 ] && diag "node exited with status $rc"
done_testing
