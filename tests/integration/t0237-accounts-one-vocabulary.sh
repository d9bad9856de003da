#!/bin/bash
# t0237-accounts-one-vocabulary.sh -- the same account change made through
# the API, the web UI (a signed-in session, its CSRF token) and `khub admin`
# writes the same audit entry: trust (trust.set, whether or not the flag
# changed, with before/after), an org role (org.member.set) and tokens
# (token.create, token.revoke); and the last-admin rule: an org's only admin
# cannot demote herself nor leave, through any of the three (409, 409, exit
# 1), nothing written; with a second admin she can (docs/operations.md,
# "Audit log").
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
log=$TEST_DIR/setup.log
khub admin user create root --site-admin >>"$log" 2>&1
for u in alice bob; do khub admin user create $u >>"$log" 2>&1; done
khub admin org create acme >>"$log" 2>&1
khub admin org create beta >>"$log" 2>&1
khub admin member set acme alice admin >>"$log" 2>&1
tok() { khub admin token create "$@" 2>>"$log" | tail -n 1; }
ROOT=$(tok root --scope admin) ALICE=$(tok alice --scope write)
khub_start

sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
# the newest audit entry of an action: actor|action|target|its detail keys
last() {
	sql "SELECT actor_name || '|' || action || '|' || target || '|' || coalesce((SELECT string_agg(k, ',' ORDER BY k)
	     FROM jsonb_object_keys(details) k), '') FROM audit_log WHERE action LIKE '$1' ORDER BY id DESC LIMIT 1"
}
count() { sql "SELECT count(*) FROM audit_log WHERE action LIKE '$1'"; }
B=$TEST_DIR/b
api() {	# api TOKEN METHOD PATH [JSON] -> $ST
	local args=(-s -o "$B" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
# sign_in NAME TOKEN: a session in $TEST_DIR/NAME.jar
sign_in() {
	local jar=$TEST_DIR/$1.jar csrf
	curl -s -c "$jar" -o "$B" "$KHUB_URL/login"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$B" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$2" "$KHUB_URL/login"
}
# form NAME PATH FIELD=VALUE... -> $ST: a POST with the session's CSRF token
form() {
	local jar=$TEST_DIR/$1.jar path=$2 csrf args=()
	shift 2
	curl -s -b "$jar" -o "$B" "$KHUB_URL/settings/tokens"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$B" | head -1 | sed 's/.*value="//; s/"//')
	for f in "$@"; do args+=(--data-urlencode "$f"); done
	ST=$(curl -s -b "$jar" -o "$B" -w '%{http_code}' --data-urlencode "csrf=$csrf" "${args[@]}" "$KHUB_URL$path")
}
sign_in root "$ROOT"
sign_in alice "$ALICE"

# ---- trust: the same change, three ways -----------------------------------------------------
khub admin trust set beta >>"$log" 2>&1
ok $? "CLI: khub admin trust set beta"
cli=$(last 'trust.%')
api "$ROOT" PUT /api/admin/trusted-publishers/beta
is "$ST" 200 "API: PUT trusted-publishers/beta (already trusted)"
apie=$(last 'trust.%')
form root /admin/trusted name=beta trusted=true
is "$ST" 303 "web: POST /admin/trusted (already trusted)"
web=$(last 'trust.%')
is "$cli" "cli|trust.set|beta|after,before" "CLI: trust.set with before/after"
is "${apie#root}" "${cli#cli}" "API: the same entry as the CLI's"
is "${web#root}" "${cli#cli}" "web UI: the same entry as the CLI's"
is "$(count 'trust.%')" 3 "three accepted calls, three entries (changed or not)"
is "$(sql "SELECT string_agg(details->>'before' || '>' || (details->>'after'), ' ' ORDER BY id) FROM audit_log WHERE action = 'trust.set'")" \
	"false>true true>true true>true" "before/after say which call changed the flag"
form root /admin/trusted name=beta trusted=false
is "$ST/$(last 'trust.%')" "303/root|trust.unset|beta|after,before" "web: unset is trust.unset"
is "$(count 'trusted_publisher.%')" 0 "no trusted_publisher.* entry"

# ---- an org role: the same change, three ways --------------------------------------------------
khub admin member set acme bob write >>"$log" 2>&1
ok $? "CLI: khub admin member set acme bob write"
cli=$(last 'org.member%')
form alice /acme/-/members user=bob role=read
is "$ST" 303 "web: alice (acme's admin) makes bob read"
web=$(last 'org.member%')
api "$ALICE" PUT /api/organizations/acme/members/bob '{"role":"write"}'
is "$ST" 200 "API: alice makes bob write"
apie=$(last 'org.member%')
is "$cli" "cli|org.member.set|acme|before,role,user" "CLI: org.member.set {user, role, before}"
is "${web#alice}" "${cli#cli}" "web UI: the same entry as the CLI's"
is "${apie#alice}" "${cli#cli}" "API: the same entry as the CLI's"
is "$(sql "SELECT string_agg(details->>'before' || '>' || (details->>'role'), ' ' ORDER BY id) FROM audit_log WHERE action = 'org.member.set' AND details->>'user' = 'bob'")" \
	"none>write write>read read>write" "each records the role before and after"
is "$(count 'org.member_role')" 0 "no org.member_role entry"
api "$(tok bob --scope write)" PUT /api/organizations/acme/members/alice '{"role":"read"}'
is "$ST" 403 "API: a write member (not admin) cannot change roles"

# ---- tokens: created and revoked through the CLI and the web UI --------------------------------
khub admin token create alice --token-name from-cli >"$TEST_DIR/tok.out" 2>&1
ok $? "CLI: token create"
cli=$(last 'token.create')
form alice /settings/tokens name=from-web scope=read days=0
is "$ST" 303 "web: token created (post, redirect, get)"
is "$(last 'token.create')" "alice|token.create|alice|scope,token_id" "web: token.create {token_id, scope}"
is "$cli" "cli|token.create|alice|scope,token_id" "CLI: the same"
cid=$(sql "SELECT id FROM tokens WHERE name = 'from-cli'") wid=$(sql "SELECT id FROM tokens WHERE name = 'from-web'")
khub admin token revoke "$cid" >>"$log" 2>&1
ok $? "CLI: token revoke"
is "$(last 'token.revoke')" "cli|token.revoke|alice|token_id" "CLI: token.revoke names the token's user"
form alice /settings/tokens/revoke id="$wid"
is "$ST" 303 "web: token revoked"
is "$(last 'token.revoke')" "alice|token.revoke|alice|token_id" "web: the same entry"
is "$(sql "SELECT string_agg(details->>'token_id', ' ' ORDER BY id) FROM audit_log WHERE action = 'token.revoke'")" \
	"$cid $wid" "each names the token revoked"

# ---- the last-admin rule, in all three -----------------------------------------------------------
before=$(count '%')
khub admin member set acme alice write >"$TEST_DIR/cli.out" 2>&1
rc=$?
ok $((rc == 0)) "CLI: acme's only admin cannot be made write (exit $rc)"
like "$(cat "$TEST_DIR/cli.out")" "without an admin" "  the CLI says why"
khub admin member set acme alice none >>"$log" 2>&1
ok $(($? == 0)) "CLI: nor taken out"
api "$ALICE" PUT /api/organizations/acme/members/alice '{"role":"read"}'
is "$ST" 409 "API: alice cannot demote herself (409)"
like "$(cat "$B")" "without an admin" "  the API says why"
api "$ROOT" PUT /api/organizations/acme/members/alice '{"role":"none"}'
is "$ST" 409 "API: nor can a site admin take her out (409)"
form alice /acme/-/members user=alice role=write
is "$ST" 409 "web: alice cannot demote herself (409)"
is "$(sql "SELECT m.role FROM memberships m JOIN accounts o ON o.id = m.org_id JOIN accounts u ON u.id = m.user_id WHERE o.name = 'acme' AND u.name = 'alice'")" \
	admin "alice is still acme's admin"
is "$(count '%')" "$before" "no refused change was audited"
api "$ALICE" PUT /api/organizations/acme/members/bob '{"role":"admin"}'
is "$ST" 200 "a second admin..."
api "$ALICE" PUT /api/organizations/acme/members/alice '{"role":"read"}'
is "$ST" 200 "...and then alice may step down"
khub admin member set beta bob read >>"$log" 2>&1
ok $? "an org with no admin yet still takes members (the rule keeps an admin, it makes none)"
done_testing
