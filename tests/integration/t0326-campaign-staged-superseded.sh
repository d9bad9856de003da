#!/bin/bash
# t0326-campaign-staged-superseded.sh -- a fleet rebuild's states
# (farm/build_states.c; docs/build-farm.md, "The job's states"): a
# campaign's build, claimed and uploaded through the real worker routes,
# ends staged on refs/pr/N (not succeeded: v1 has not got it); after a new
# commit on main a second campaign stages a build of it, and the first
# build becomes superseded ("superseded by build #N"), its campaign's
# kernel says so, and merging its pull request is refused (409) with v1
# unchanged; a third campaign at the same commit builds nothing (the staged
# build counts as built); merging the second moves v1 and makes its build
# succeeded. `khub builds states` has the three rows.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/campaign.sh"
campaign_fixture

# ---- the table ------------------------------------------------------------------------------------
khub builds states >"$TEST_DIR/states.txt" 2>&1
for row in 'running *stage *staged *worker' 'staged *merge *succeeded *owner' 'staged *supersede *superseded *system'; do
	grep -qE "^$row" "$TEST_DIR/states.txt"
	ok $? "khub builds states: $row"
done

# ---- the first campaign: staged ----------------------------------------------------------------------
campaign_build
C1=$CID J1=$J
is "$(kernel_field "$C1" state)" queued "campaign #$C1 queued build #$J1 of acme/relu"
build_it
is "$(state_of "$J1")" staged "build #$J1 is staged, not succeeded"
PR1=$(kernel_field "$C1" pr)
like "$PR1" '^refs/pr/[0-9]+$' "on a pull request ($PR1)"
is "$(kernel_field "$C1" state)" staged "the campaign's kernel says staged"
is "$(head_of refs/heads/v1)" "$V1_START" "v1 did not move"

# ---- a new commit, a second campaign: the first is superseded -------------------------------------------
api "$ALICE" POST /api/kernels/acme/relu/commit/main "$(printf '{"key":"header","value":{"summary":"readme"}}\n{"key":"file","value":{"content":"%s","path":"README.md","encoding":"base64"}}\n' "$(printf hi | b64)")"
is "$ST" 200 "a new commit on main"
campaign_build
C2=$CID J2=$J
is "$(kernel_field "$C2" state)" queued "campaign #$C2 queued build #$J2 of the new commit"
build_it
is "$(state_of "$J2")" staged "build #$J2 is staged"
PR2=$(kernel_field "$C2" pr)
PR2_HEAD=$(head_of "$PR2")
like "$PR2" '^refs/pr/[0-9]+$' "on its own pull request ($PR2)"
api "$ALICE" GET "/api/builds/$J1"
is "$(jq -r '.state + ": " + .error' "$B")" "superseded: superseded by build #$J2" "build #$J1 is superseded by build #$J2"
is "$(kernel_field "$C1" state)" superseded "campaign #$C1's kernel says superseded"
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$C1/merge"
is "$ST" 409 "merging the superseded $PR1: 409"
like "$(jq -r .error "$B")" "superseded by a newer build" "… saying why"
is "$(head_of refs/heads/v1)" "$V1_START" "v1 did not move"
campaign_build
is "$(kernel_field "$CID" state)" skipped "a third campaign at the same commit builds nothing"
like "$(kernel_field "$CID" skipped)" "build #$J2" "… build #$J2 (staged) counts as built"

# ---- the merge of the newer one -----------------------------------------------------------------------
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$C2/merge"
is "$ST $(jq -r .targetCommit "$B")" "200 $PR2_HEAD" "merging $PR2 moves v1 to its head"
is "$(head_of refs/heads/v1)" "$PR2_HEAD" "the refs API agrees"
is "$(state_of "$J2") $(state_of "$J1")" "succeeded superseded" "build #$J2 succeeded, #$J1 stays superseded"
api "$ROOT" GET "/api/admin/campaigns/$C1"
is "$(jq -r '[.built, .merged] | map(tostring) | join(" ")' "$B")" "1 0" "campaign #$C1: 1 built, none merged"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
