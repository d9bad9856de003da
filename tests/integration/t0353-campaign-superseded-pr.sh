#!/bin/bash
# t0353-campaign-superseded-pr.sh -- a superseded campaign pull request reads
# as closed (docs/build-farm.md, "Fleet rebuilds"): campaign 1 stages build
# J1 on PR1, a new commit's campaign 2 stages J2 on PR2 and J1 is
# superseded. Then PR1 is "closed", pointing at J2, everywhere a user looks:
# GET /api/admin/campaigns/{id} (pr_status, superseded_by), GET /api/builds/J1
# (superseded_by), the refs list the Hub clients read (include_prs=1:
# "status", "supersededBy"; refs/pr/N itself kept at its commit), the builds
# page of J1's commit, the kernel page and /admin (through real sessions):
# no Merge form for it, a link to J2; PR2 reads open with its Merge form.
# Merging PR1 still answers 409 (the API and the web form) and v1 stays;
# once PR2 is merged it reads merged and PR1 stays closed.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/campaign.sh"
campaign_fixture
campaign_build
C1=$CID J1=$J
build_it
PR1=$(kernel_field "$C1" pr)
PR1_HEAD=$(head_of "$PR1")
OLD=$(head_of refs/heads/main)
api "$ALICE" POST /api/kernels/acme/relu/commit/main "$(printf '{"key":"header","value":{"summary":"readme"}}\n{"key":"file","value":{"content":"%s","path":"README.md","encoding":"base64"}}\n' "$(printf hi | b64)")"
is "$ST" 200 "a new commit on main"
campaign_build
C2=$CID J2=$J
build_it
PR2=$(kernel_field "$C2" pr)
is "$(state_of "$J1") $(state_of "$J2")" "superseded staged" "build #$J1 ($PR1) is superseded by #$J2 ($PR2), staged"

# ---- the APIs ------------------------------------------------------------------------------------------
api "$ROOT" GET "/api/admin/campaigns/$C1"
is "$(jq -c '.kernels[0] | [.pr, .pr_status, .superseded_by, .state]' "$B")" "[\"$PR1\",\"closed\",$J2,\"superseded\"]" \
	"campaign #$C1: $PR1 closed, superseded by build #$J2"
api "$ROOT" GET "/api/admin/campaigns/$C2"
is "$(jq -c '.kernels[0] | [.pr, .pr_status, .superseded_by]' "$B")" "[\"$PR2\",\"open\",null]" "campaign #$C2: $PR2 open"
api "$ALICE" GET "/api/builds/$J1"
is "$(jq -c '[.state, .superseded_by]' "$B")" "[\"superseded\",$J2]" "GET /api/builds/$J1: superseded_by $J2"
api "$ALICE" GET "/api/kernels/acme/relu/refs?include_prs=1"
is "$(jq -c --arg r "$PR1" '.pullRequests[] | select(.ref == $r) | [.targetCommit, .status, .supersededBy]' "$B")" \
	"[\"$PR1_HEAD\",\"closed\",$J2]" "the refs list: $PR1 kept at its commit, status closed, supersededBy $J2"
is "$(jq -c --arg r "$PR2" '.pullRequests[] | select(.ref == $r) | [.status, .supersededBy]' "$B")" '["open",null]' \
	"… $PR2 open"

# ---- the pages -------------------------------------------------------------------------------------------
login() {	# login NAME TOKEN: a session in $TEST_DIR/NAME.jar; its CSRF token in $CSRF
	local jar=$TEST_DIR/$1.jar
	curl -s -c "$jar" -o "$TEST_DIR/login.html" "$KHUB_URL/login"
	CSRF=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/login.html" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$CSRF" --data-urlencode "token=$2" "$KHUB_URL/login"
	curl -s -b "$jar" -o "$TEST_DIR/tokens.html" "$KHUB_URL/settings/tokens"
	CSRF=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/tokens.html" | head -1 | sed 's/.*value="//; s/"//')
}
page() { curl -s -b "$TEST_DIR/$1.jar" -o "$B" -w '%{http_code}' "$KHUB_URL$2"; }
CLOSED="<span class=\"campaign-pr\" data-pr-status=\"closed\">pull request <code>$PR1</code> closed: superseded by <a class=\"superseded-by\" href=\"/kernels/acme/relu/builds/$J2/log\">build #$J2</a></span>"
OPEN="<span class=\"campaign-pr\" data-pr-status=\"open\">pull request <code>$PR2</code> open</span>"
MERGE1="action=\"/kernels/acme/relu/campaigns/$C1/merge\""
MERGE2="action=\"/kernels/acme/relu/campaigns/$C2/merge\""
login alice "$ALICE"; ALICE_CSRF=$CSRF
is "$(page alice "/kernels/acme/relu/builds?commit=$OLD")" 200 "alice's builds page of the first commit"
grep -qF "$CLOSED" "$B"
ok $? "… build #$J1: $PR1 closed, superseded by build #$J2 (linked)"
grep -qF "$MERGE1" "$B"
is "$?" 1 "… no Merge form for $PR1"
is "$(page alice /kernels/acme/relu/builds)" 200 "alice's builds page"
grep -qF "$CLOSED" "$B" && grep -qF "$OPEN" "$B" && grep -qF "$MERGE2" "$B" && ! grep -qF "$MERGE1" "$B"
ok $? "… $PR1 closed without a Merge form, $PR2 open with one"
is "$(page alice /kernels/acme/relu)" 200 "alice's kernel page"
grep -qF "$OPEN" "$B" && ! grep -qF "$MERGE1" "$B"
ok $? "… the head's build: $PR2 open; no Merge form for $PR1"
login root "$ROOT"
page root /admin >/dev/null
grep -qF "$CLOSED" "$B" && grep -qF "$MERGE2" "$B" && ! grep -qF "$MERGE1" "$B"
ok $? "/admin: $PR1 closed (superseded by build #$J2), no Merge form for it; $PR2's Merge form"

# ---- merging it is still refused ---------------------------------------------------------------------------
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$C1/merge"
is "$ST" 409 "the API's merge of $PR1: 409"
ST=$(curl -s -b "$TEST_DIR/alice.jar" -o "$B" -w '%{http_code}' --data-urlencode "csrf=$ALICE_CSRF" \
	--data-urlencode "back=/kernels/acme/relu/builds" "$KHUB_URL/kernels/acme/relu/campaigns/$C1/merge")
is "$ST" 409 "the form's POST for $PR1 (crafted): 409"
is "$(head_of refs/heads/v1) $(head_of "$PR1")" "$V1_START $PR1_HEAD" "v1 did not move; $PR1 is kept"
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$C2/merge"
is "$ST" 200 "merging $PR2"
api "$ALICE" GET "/api/kernels/acme/relu/refs?include_prs=1"
is "$(jq -c --arg a "$PR1" --arg b "$PR2" '[.pullRequests[] | select(.ref == $a or .ref == $b) | [.ref, .status]] | sort' "$B")" \
	"$(jq -nc --arg a "$PR1" --arg b "$PR2" '[[$a, "closed"], [$b, "merged"]] | sort')" "then $PR2 reads merged, $PR1 still closed"
khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
