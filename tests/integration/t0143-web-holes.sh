#!/bin/bash
# t0143-web-holes.sh -- the web UI holes of issue 22 in a real browser
# (tests/web/web_holes.mjs: Debian's chromium driven by playwright-core): no
# open redirect through /login?next=, a private repo's README images and
# links for members only (the page route -/resolve, tested as anonymous,
# non-member, read-scoped member and dead session) while the API ignores the
# cookie, and README views that count no download.
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
khub admin user create root --site-admin >/dev/null 2>&1
for u in alice mallory rita dora; do khub admin user create $u >/dev/null 2>&1; done
khub admin member set acme alice write >/dev/null 2>&1
khub admin member set acme rita read >/dev/null 2>&1
khub admin member set acme dora write >/dev/null 2>&1
ROOT=$(khub admin token create root --scope write 2>/dev/null)
ALICE=$(khub admin token create alice --scope write 2>/dev/null)
MALLORY=$(khub admin token create mallory --scope write 2>/dev/null)
READER=$(khub admin token create rita --scope read 2>/dev/null)
DEAD=$(khub admin token create dora --scope write 2>"$TEST_DIR/dead.err")
DEAD_ID=$(sed -n 's/^token id \([0-9]*\) .*/\1/p' "$TEST_DIR/dead.err")
khub_start --download-stats-flush-ms 200 --token-cache-ttl-ms 0

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" KHUB_BIN="$KHUB_BIN" ROOT_TOKEN="$ROOT" ALICE_TOKEN="$ALICE" \
	MALLORY_TOKEN="$MALLORY" READER_TOKEN="$READER" DEAD_TOKEN="$DEAD" DEAD_TOKEN_ID="$DEAD_ID" CHROMIUM="$CHROMIUM" \
	timeout 600 node tests/web/web_holes.mjs 2>&1)
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
done_testing
