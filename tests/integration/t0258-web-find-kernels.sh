#!/bin/bash
# t0258-web-find-kernels.sh -- finding kernels and the kernel page, end to
# end: a real khub, kernels published through the API by
# tests/web/find_kernels.mjs, and Debian's chromium (headless) driven by
# playwright-core: README cards, the listing's description, tags and license,
# search over cards and README text (API and page; private READMEs only for
# members), the metadata-invalid reason, badge and rows that agree, keyboard-
# scrollable snippets, and "Will it load for me?" without JavaScript; then a
# repo written before cards existed is read by the catch-up at start.
# Screenshots go to tests/web/artifacts/ (git-ignored).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP $CHROMIUM not installed (apt-get install chromium)"; exit 0; }
WEB_DIR="$KHUB_SRC/tests/web"
[ -d "$WEB_DIR/node_modules/playwright-core" ] || { echo "1..0 # SKIP no playwright-core in $WEB_DIR (npm ci)"; exit 0; }

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

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" ROOT_TOKEN="$ROOT" ALICE_TOKEN="$ALICE" EVE_TOKEN="$EVE" \
	CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" timeout 600 node tests/web/find_kernels.mjs 2>&1)
rc=$?
tap_relay "$out" "$rc"

# A repo whose card was never read (written before cards existed, as after
# the upgrade to 0034): the catch-up, which a listing asks for, reads it.
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1"; }
# (Deleted and counted in one statement: a catch-up already under way may
# write the card again at once, which is what the next checks wait for.)
is "$(sql "WITH d AS (DELETE FROM kernel_cards WHERE repo_id = (SELECT id FROM repos WHERE name = 'adam') RETURNING 1)
	SELECT count(*) FROM d")" 1 "adam's card is gone"
found=
for _ in $(seq 1 100); do
	found=$(curl -s "$KHUB_URL/api/kernels?search=fused%20adam" | jq -c '[.[].id]')
	[ "$found" = '["acme/adam"]' ] && break
	sleep 0.2
done
is "$found" '["acme/adam"]' "the catch-up reads the missing card, and search finds it again"
is "$(sql "SELECT description FROM kernel_cards k JOIN repos r ON r.id = k.repo_id WHERE r.name = 'adam'")" \
	"Fused Adam optimizer step in one kernel." "the card row is back"
done_testing
