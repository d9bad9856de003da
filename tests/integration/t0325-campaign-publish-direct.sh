#!/bin/bash
# t0325-campaign-publish-direct.sh -- the repo setting that publishes a
# fleet rebuild's results directly (docs/build-farm.md, "Fleet rebuilds";
# PUT …/settings {"campaignPublish"}): a read member may not set it, a
# value other than "pr" or "direct" is refused, and so is a request with
# one bad setting beside it, which writes nothing; with "direct" a campaign's
# build (claimed and uploaded through the real worker routes) lands on v1
# itself: no refs/pr/N, the campaign's kernel says publish "direct" with no
# pull request, v1 holds the variant, and there is nothing to merge.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/campaign.sh"
campaign_fixture

# ---- the setting ---------------------------------------------------------------------------------
api "$BOB" PUT /api/kernels/acme/relu/settings '{"campaignPublish":"direct"}'
is "$ST" 403 "a read member may not set campaignPublish"
api "$ALICE" PUT /api/kernels/acme/relu/settings '{"campaignPublish":"sometimes"}'
is "$ST" 400 "campaignPublish \"sometimes\" is refused: 400"
api "$ALICE" PUT /api/kernels/acme/relu/settings '{"campaignPublish":"direct","benchmarkAfterPublish":"yes"}'
is "$ST $(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "SELECT campaign_publish FROM repos WHERE name = 'relu'")" \
	"400 pr" "a request with one bad setting changes none: campaignPublish stays \"pr\""
api "$ALICE" PUT /api/kernels/acme/relu/settings '{"campaignPublish":"direct"}'
is "$ST" 200 "a writer sets campaignPublish to direct"

# ---- a campaign, built through the worker routes ------------------------------------------------
api "$ROOT" POST /api/admin/campaigns "{\"variant\":\"$V1\"}"
CID=$(jq -r '.campaigns[0].id' "$B")
is "$ST" 201 "a site admin starts a campaign of $V1 (#$CID)"
for _ in $(seq 1 600); do
	[ "$(kernel_field "$CID" state)" = queued ] && break
	sleep 0.2
done
is "$(kernel_field "$CID" state) $(kernel_field "$CID" publish)" "queued direct" "acme/relu's build is queued, to publish directly"
J=$(kernel_field "$CID" build)
build_it
api "$ALICE" GET "/api/builds/$J"
is "$(jq -r '.state + " " + .published.branch' "$B")" "succeeded v1" "build #$J succeeded, published on v1"
PUBLISHED=$(jq -r .published.commit "$B")
V1_HEAD=$(head_of refs/heads/v1)
ok "$([ -n "$V1_HEAD" ] && [ "$V1_HEAD" != "$V1_START" ]; echo $?)" "v1 moved from ${V1_START:0:12} to ${V1_HEAD:0:12}"
is "$PUBLISHED" "$V1_HEAD" "… at the build's publishing commit"
api "$ALICE" GET "/api/kernels/acme/relu/refs?include_prs=1"
is "$(jq '(.pullRequests // []) | length' "$B")" 0 "no pull request ref was made"
is "$(kernel_field "$CID" pr)" "" "the campaign's kernel names no pull request"
ST=$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/kernels/acme/relu/resolve/v1/build/$V1/metadata.json")
is "$ST $(jq -r .version "$B")" "200 1" "v1 holds build/$V1/metadata.json"
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$CID/merge"
is "$ST" 404 "nothing to merge: 404"
is "$(head_of refs/heads/v1)" "$V1_HEAD" "v1 did not move"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
