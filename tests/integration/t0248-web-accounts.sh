#!/bin/bash
# t0248-web-accounts.sh -- the web UI's org and token pages (docs/web-ui.md),
# driven with curl, a cookie jar and each session's CSRF token. Orgs: an
# org's admin adds and removes members from the org page; a member who is
# not an admin sees no such form, and her crafted POST is a 403 that changes
# and audits nothing; the last admin cannot demote herself (409, a banner).
# Tokens: "Create" is post, redirect, get: the token is shown once by the
# GET after the redirect, never again on a reload, and a reload creates
# nothing; revoking asks first (a confirmation page); "Last used" shows when
# a token was used.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
log=$TEST_DIR/setup.log
for u in alice carol dave; do khub admin user create $u >>"$log" 2>&1; done
khub admin org create acme >>"$log" 2>&1
khub admin member set acme alice admin >>"$log" 2>&1
khub admin member set acme carol write >>"$log" 2>&1
tok() { khub admin token create "$@" 2>>"$log" | tail -n 1; }
ALICE=$(tok alice --scope write) CAROL=$(tok carol --scope write)
khub_start

sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
role_of() {
	sql "SELECT coalesce((SELECT m.role FROM memberships m JOIN accounts o ON o.id = m.org_id JOIN accounts u
	     ON u.id = m.user_id WHERE o.name = 'acme' AND u.name = '$1'), 'none')"
}
audits() { sql "SELECT count(*) FROM audit_log"; }
B=$TEST_DIR/b H=$TEST_DIR/h
sign_in() {	# sign_in NAME TOKEN: a session in $TEST_DIR/NAME.jar
	local jar=$TEST_DIR/$1.jar csrf
	curl -s -c "$jar" -o "$B" "$KHUB_URL/login"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$B" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$2" "$KHUB_URL/login"
}
csrf_of() {	# the session's CSRF token, from a page that has no one-time message
	curl -s -b "$TEST_DIR/$1.jar" "$KHUB_URL/kernels" | grep -o 'name="csrf" value="[0-9a-f]*"' | head -1 |
		sed 's/.*value="//; s/"//'
}
form() {	# form NAME PATH FIELD=VALUE... -> $ST, the body in $B, headers in $H
	local jar=$TEST_DIR/$1.jar path=$2 csrf args=()
	csrf=$(csrf_of "$1")
	shift 2
	for f in "$@"; do args+=(--data-urlencode "$f"); done
	ST=$(curl -s -b "$jar" -D "$H" -o "$B" -w '%{http_code}' --data-urlencode "csrf=$csrf" "${args[@]}" "$KHUB_URL$path")
}
get() { ST=$(curl -s -b "$TEST_DIR/$1.jar" -o "$B" -w '%{http_code}' "$KHUB_URL$2"); }
sign_in alice "$ALICE"
sign_in carol "$CAROL"
# ---- orgs: add and remove members ------------------------------------------------------------------
get alice /acme
is "$ST" 200 "alice (acme's admin) opens /acme"
check "  she sees the Add member form, labelled" -- grep -q '<label for="m-user">Username</label><input id="m-user"' "$B"
check "  and a Remove button per member" -- grep -q 'aria-label="Remove carol">Remove</button>' "$B"
get carol /acme
check "carol (a write member) sees no Add member form" -- bash -c "! grep -q 'id=\"add-member\"' '$B'"
check "  nor a Remove button" -- bash -c "! grep -q '>Remove</button>' '$B'"
form alice /acme/-/members user=dave role=read
is "$ST/$(role_of dave)" "303/read" "alice adds dave as read"
form alice /acme/-/members user=dave role=none
is "$ST/$(role_of dave)" "303/none" "alice removes dave (Remove: role none)"
form alice /acme/-/members user=nobody role=read
is "$ST" 400 "adding a user who does not exist: 400"
like "$(cat "$B")" 'class="problem" role="alert">Give the username of an existing user' "  with a banner that says why"

# ---- orgs: a crafted POST by a member who is not an admin -------------------------------------------
before=$(audits)
form carol /acme/-/members user=dave role=admin
is "$ST/$(role_of dave)" "403/none" "carol's crafted POST adding dave as admin: 403, dave not added"
form carol /acme/-/members user=carol role=admin
is "$ST/$(role_of carol)" "403/write" "carol cannot make herself admin"
form carol /acme/-/members user=alice role=none
is "$ST/$(role_of alice)" "403/admin" "nor remove the admin"
is "$(audits)" "$before" "nothing refused was audited"
ST=$(curl -s -b "$TEST_DIR/alice.jar" -o /dev/null -w '%{http_code}' --data-urlencode user=dave \
	--data-urlencode role=read "$KHUB_URL/acme/-/members")
is "$ST/$(role_of dave)" "403/none" "alice's own POST without the CSRF token: 403, nothing added"

# ---- orgs: the last admin --------------------------------------------------------------------------
form alice /acme/-/members user=alice role=write
is "$ST/$(role_of alice)" "409/admin" "the only admin cannot demote herself (409, still admin)"
like "$(cat "$B")" 'class="problem" role="alert">that would leave the organization without an admin' \
	"  the org page says why in a banner"
form alice /acme/-/members user=alice role=none
is "$ST/$(role_of alice)" "409/admin" "nor leave the org"
is "$(audits)" "$before" "no refused change was audited"

# ---- tokens: post, redirect, get --------------------------------------------------------------------
ntok() { sql "SELECT count(*) FROM tokens t JOIN accounts a ON a.id = t.user_id WHERE a.name = 'alice'"; }
n0=$(ntok)
form alice /settings/tokens name=prg scope=read days=0
is "$ST" 303 "POST /settings/tokens answers 303"
like "$(grep -i '^location:' "$H")" '^[Ll]ocation: /settings/tokens' "  to /settings/tokens"
check "  the token is not in the redirect's URL" -- bash -c "! grep -qi '^location:.*hf_' '$H'"
check "  nor in the POST's answer" -- bash -c "! grep -q 'hf_' '$B'"
get alice /settings/tokens
is "$ST" 200 "the GET after the redirect"
new=$(grep -o '<code id="new-token" data-copy="new token">hf_[A-Za-z0-9]*' "$B" | sed 's/.*>//')
like "$new" '^hf_' "  shows the new token"
check "  with copy.js for its Copy button (a module, no inline script)" -- \
	grep -qE '<script type="module" src="/-/static/copy\.[0-9a-f]{12}\.js"' "$B"
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $new" "$KHUB_URL/api/whoami-v2")" 200 \
	"  the token shown works"
check "the flash is stored encrypted: the token is nowhere in web_sessions" -- \
	bash -c "! psql 'host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub' -tAc 'SELECT * FROM web_sessions' | grep -q '$new'"
get alice /settings/tokens
is "$ST" 200 "reloading the page"
check "  shows the token no more" -- bash -c "! grep -q '$new' '$B' && ! grep -q 'id=\"new-token\"' '$B'"
get alice /settings/tokens
is "$(ntok)" "$((n0 + 1))" "one POST, one token: the reloads created nothing"

# ---- tokens: revoke asks first ----------------------------------------------------------------------
id=$(sql "SELECT id FROM tokens WHERE name = 'prg'")
check "the tokens page links to a confirmation, not a revoking form" -- \
	grep -q "href=\"/settings/tokens/revoke?id=$id\" aria-label=\"Revoke token prg\">Revoke…</a>" "$B"
get alice "/settings/tokens/revoke?id=$id"
is "$ST" 200 "GET the confirmation page"
like "$(cat "$B")" 'Revoke token <q>prg</q>\?' "  it asks: Revoke token prg?"
check "  with the Revoke button and a Cancel link" -- \
	bash -c "grep -q 'id=\"revoke-confirm\">Revoke</button>' '$B' && grep -q '<a href=\"/settings/tokens\">Cancel</a>' '$B'"
is "$(sql "SELECT revoked_at IS NULL FROM tokens WHERE id = $id")" t "  opening it revoked nothing"
get carol "/settings/tokens/revoke?id=$id"
is "$ST" 404 "carol's confirmation page for alice's token: 404"
form alice /settings/tokens/revoke id="$id"
is "$ST/$(sql "SELECT revoked_at IS NOT NULL FROM tokens WHERE id = $id")" "303/t" "confirmed: revoked"

# ---- tokens: last used ------------------------------------------------------------------------------
get alice /settings/tokens
form alice /settings/tokens name=used scope=read days=0
get alice /settings/tokens
used=$(grep -o '<code id="new-token" data-copy="new token">hf_[A-Za-z0-9]*' "$B" | sed 's/.*>//')
uid=$(sql "SELECT id FROM tokens WHERE name = 'used'")
row() { grep -o "<tr data-token-id=\"$uid\">.*" "$B" | sed 's#</tr>.*##'; }
like "$(row)" '<td class="last-used">never</td>' "a new token: last used never"
curl -s -o /dev/null -H "Authorization: Bearer $used" "$KHUB_URL/api/whoami-v2"
get alice /settings/tokens
like "$(row)" "<td class=\"last-used\">$(date -u +%Y-%m-%d) [0-9]{2}:[0-9]{2} UTC</td>" \
	"used once through the API: Last used shows today's date and time"
check "the Last used column has its header" -- grep -q '<th scope="col">Last used</th>' "$B"

done_testing
