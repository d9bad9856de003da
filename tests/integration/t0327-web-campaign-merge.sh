#!/bin/bash
# t0327-web-campaign-merge.sh -- the web's Merge button (docs/build-farm.md,
# "Fleet rebuilds"): a staged campaign build shows a Merge form (CSRF
# field) on the kernel's builds page for a writer and on /admin for a site
# admin; a read member sees none and its POST is refused (403), as are a
# non-member's, an anonymous one (401) and a writer's without the CSRF token,
# v1 unmoved each time; the writer's POST (curl with a real session
# cookie) merges through the API's own operation: v1 moves to the pull
# request's head, the build is succeeded, the audit log says
# campaign.merge, and the form is gone.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/campaign.sh"
campaign_fixture
campaign_build
build_it
is "$(state_of "$J")" staged "campaign #$CID's build #$J is staged"
PR=$(kernel_field "$CID" pr)
PR_HEAD=$(head_of "$PR")
ACTION="/kernels/acme/relu/campaigns/$CID/merge"

# login NAME TOKEN: a session in $TEST_DIR/NAME.jar; its CSRF token in $CSRF
login() {
	local jar=$TEST_DIR/$1.jar
	curl -s -c "$jar" -o "$TEST_DIR/login.html" "$KHUB_URL/login"
	CSRF=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/login.html" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$CSRF" --data-urlencode "token=$2" "$KHUB_URL/login"
	curl -s -b "$jar" -o "$TEST_DIR/tokens.html" "$KHUB_URL/settings/tokens"
	CSRF=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/tokens.html" | head -1 | sed 's/.*value="//; s/"//')
}
page() { curl -s -b "$TEST_DIR/$1.jar" -o "$B" -w '%{http_code}' "$KHUB_URL$2"; }	# page NAME PATH -> body in $B
merge_as() {	# merge_as NAME [CSRF]: POST the Merge form -> $ST
	ST=$(curl -s -b "$TEST_DIR/$1.jar" -o "$B" -w '%{http_code}' --data-urlencode "csrf=${2-}" \
		--data-urlencode "back=/kernels/acme/relu/builds" "$KHUB_URL$ACTION")
}
has_form() { grep -q "<form method=\"post\" class=\"inline campaign-merge\" action=\"$ACTION\">" "$B"; }

# ---- who sees the button ------------------------------------------------------------------------
login alice "$ALICE"; ALICE_CSRF=$CSRF
is "$(page alice /kernels/acme/relu/builds)" 200 "alice's builds page"
has_form
ok $? "alice (a writer) sees the Merge form of $PR"
grep -A3 "campaign-merge\" action=\"$ACTION" "$B" | grep -q "name=\"csrf\" value=\"$ALICE_CSRF\""
ok $? "… with her CSRF token"
login bob "$BOB"; BOB_CSRF=$CSRF
page bob /kernels/acme/relu/builds >/dev/null
has_form
is "$?" 1 "bob (a read member) sees no Merge form"
login root "$ROOT"
page root /admin >/dev/null
has_form
ok $? "/admin shows the site admin the Merge form of acme/relu's staged build"

# ---- refused ------------------------------------------------------------------------------------
merge_as bob "$BOB_CSRF"
is "$ST" 403 "bob's POST: 403"
login carol "$CAROL"
merge_as carol "$CSRF"
is "$ST" 403 "a non-member's POST: 403"
ST=$(curl -s -o "$B" -w '%{http_code}' --data-urlencode "back=/" "$KHUB_URL$ACTION")
is "$ST" 401 "an anonymous POST: 401"
merge_as alice ""
is "$ST" 403 "alice's POST without the CSRF token: 403"
merge_as alice "$BOB_CSRF"
is "$ST" 403 "alice's POST with another session's token: 403"
is "$(head_of refs/heads/v1) $(state_of "$J")" "$V1_START staged" "v1 did not move; the build is still staged"

# ---- the writer merges ----------------------------------------------------------------------------
ST=$(curl -s -b "$TEST_DIR/alice.jar" -o "$B" -D "$TEST_DIR/merge.h" -w '%{http_code}' --data-urlencode "csrf=$ALICE_CSRF" \
	--data-urlencode "back=/kernels/acme/relu/builds" "$KHUB_URL$ACTION")
is "$ST $(grep -i '^location:' "$TEST_DIR/merge.h" | tr -d '\r' | sed 's/^[^:]*: *//')" "303 /kernels/acme/relu/builds" \
	"alice's Merge: 303 back to the builds page"
is "$(head_of refs/heads/v1)" "$PR_HEAD" "v1 moved to $PR's head"
is "$(state_of "$J")" succeeded "build #$J succeeded"
is "$(kernel_field "$CID" merged)" true "the campaign's kernel is merged"
is "$(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc \
	"SELECT actor_name || ' ' || action FROM audit_log WHERE action = 'campaign.merge'" 2>/dev/null)" "alice campaign.merge" \
	"the audit log has alice's campaign.merge (the API's action), once"
page alice /kernels/acme/relu/builds >/dev/null
has_form
is "$?" 1 "the Merge form is gone"
merge_as alice "$ALICE_CSRF"
is "$ST" 409 "a second Merge: 409"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
