#!/bin/bash
# t0274-kernel-charts.sh -- the kernel page's benchmark and download charts
# tell the truth (issue 35): tests/web/kernel_charts.mjs publishes runs on 1
# and 4 GPUs over several versions and downloads of 1 and 60 days (with
# gaps) to a real khub, then checks in Debian's chromium (headless, driven by
# playwright-core) what each chart drew against what was submitted, at 1366
# and 390 px. Screenshots go to tests/web/artifacts/ (git-ignored).
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
ROOT=$(khub admin token create root --scope write 2>/dev/null)
khub_start --download-stats-flush-ms 200

out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" ROOT_TOKEN="$ROOT" CHROMIUM="$CHROMIUM" ARTIFACTS="$WEB_DIR/artifacts" \
	PG_CONN="host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" timeout 600 node tests/web/kernel_charts.mjs 2>&1)
rc=$?
tap_relay "$out" "$rc"
# The aggregate's spread and the downloads' zeros come from the API, for
# every client, not only the page.
agg=$(curl -s -H "Authorization: Bearer $ROOT" "$KHUB_URL/api/kernels/acme/one/benchmarks/aggregate?workload=Relu.small")
is "$(jq -c '.results[0] | [.count, .minMeanMs, .p25MeanMs, .medianMeanMs, .p75MeanMs, .maxMeanMs]' <<<"$agg")" \
	"[3,0.9,0.95,1,1.125,1.25]" "aggregate: min, p25, median, p75, max of the runs' means (0.9, 1, 1.25)"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/kernels/acme/one/benchmarks/aggregate?by=gpu")" 400 \
	"aggregate: by= other than revision is refused"
dl=$(curl -s "$KHUB_URL/api/kernels/acme/one/downloads?days=7")
is "$(jq -c '[(.variants[0].days | length), (.variants[0].days | map(.count) | add), .variants[0].days[0].day == .since]' <<<"$dl")" \
	"[7,1,true]" "downloads: every day of the range, oldest first from since, 0 where none"
khub_stop
done_testing
