#!/bin/bash
# t0346-repo-settings-one-owner.sh -- a repo's settings change through one
# owner (accounts_repo_settings_set, storage's table of settings), whether
# the API (PUT …/settings), the web UI's settings form or `khub admin repo
# settings` asks: the same change writes the same audit entry
# (repo.settings, {key: value}) through each; a bad value of each type (bool, enum) is a 400 (JSON from the API,
# the form's page from the web UI) that changes nothing, also when a valid
# value of another setting comes with it; anonymous callers, non-members,
# read members, read-scoped tokens and revoked tokens are refused as they
# were (401/403), nothing written (docs/api.md, docs/operations.md).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_fixture
log=$TEST_DIR/setup.log
khub admin user create bob >>"$log" 2>&1
khub admin member set acme bob read >>"$log" 2>&1
khub admin user create mallory >>"$log" 2>&1
tok() { khub admin token create "$@" 2>>"$log" | tail -n 1; }
BOB=$(tok bob --scope write) MALLORY=$(tok mallory --scope write) ALICE_READ=$(tok alice --scope read)
DEAD=$(tok alice --scope write)
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
khub admin token revoke "$(sql "SELECT max(id) FROM tokens")" >>"$log" 2>&1
state() { sql "SELECT private, build_on_push, campaign_publish, benchmark_after_publish FROM repos WHERE name = 'relu'"; }
entries() { sql "SELECT count(*) FROM audit_log WHERE action = 'repo.settings'"; }
last() { sql "SELECT actor_name || '|' || action || '|' || target || '|' || details::text FROM audit_log
	      WHERE action = 'repo.settings' ORDER BY id DESC LIMIT 1"; }
B=$TEST_DIR/b H=$TEST_DIR/h
put() {	# put TOKEN JSON -> $ST, body in $B, headers in $H
	local args=(-s -o "$B" -D "$H" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' --data-binary "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	ST=$(curl "${args[@]}" "$KHUB_URL/api/kernels/acme/relu/settings")
}
sign_in() {	# sign_in NAME TOKEN: a session in $TEST_DIR/NAME.jar
	local jar=$TEST_DIR/$1.jar csrf
	curl -s -c "$jar" -o "$B" "$KHUB_URL/login"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$B" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$2" "$KHUB_URL/login"
}
form() {	# form NAME FIELD=VALUE... -> $ST: the settings form's POST with the session's CSRF token
	local jar=$TEST_DIR/$1.jar csrf args=() f
	shift
	curl -s -b "$jar" -o "$B" "$KHUB_URL/settings/tokens"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$B" | head -1 | sed 's/.*value="//; s/"//')
	for f in "$@"; do args+=(--data-urlencode "$f"); done
	ST=$(curl -s -b "$jar" -o "$B" -w '%{http_code}' --data-urlencode "csrf=$csrf" "${args[@]}" \
		"$KHUB_URL/kernels/acme/relu/settings")
}
sign_in alice "$ALICE"
sign_in bob "$BOB"

# ---- the form shows every setting of the table, with its value ---------------------------------
ST=$(curl -s -b "$TEST_DIR/alice.jar" -o "$B" -w '%{http_code}' "$KHUB_URL/kernels/acme/relu/settings")
is "$ST" 200 "web: alice opens the settings form"
for key in private buildOnPush campaignPublish benchmarkAfterPublish; do
	like "$(grep -o "name=\"$key\"" "$B")" "name=\"$key\"" "the form has a field for $key"
done
like "$(tr -d '\n' <"$B" | grep -o 'name="buildOnPush">.\{0,60\}')" '<option selected>true<' "… buildOnPush shows its value (on)"

# the kernel page's tabs link the form for a writer only
curl -s -b "$TEST_DIR/alice.jar" -o "$B" "$KHUB_URL/kernels/acme/relu"
like "$(grep -o '<a href="/kernels/acme/relu/settings"[^>]*>Settings</a>' "$B")" 'Settings</a>' "alice (writer): the kernel page has a Settings tab"
curl -s -b "$TEST_DIR/bob.jar" -o "$B" "$KHUB_URL/kernels/acme/relu"
is "$(grep -c 'href="/kernels/acme/relu/settings"' "$B")" 0 "bob (read member): no Settings tab"

# ---- the same change through the API and the web UI: the same entry -----------------------------
check_same() {	# check_same KEY JSON-VALUE FORM-VALUE RESET-JSON-VALUE
	local before api web
	put "$ALICE" "{\"$1\":$2}"
	api=$(last)
	put "$ALICE" "{\"$1\":$4}"
	before=$(entries)
	form alice "$1=$3"
	web=$(last)
	is "$ST $(( $(entries) - before ))" "303 1" "web: $1=$3 is accepted, one entry"
	is "$web" "$api" "web and API write the same entry for $1 = $2: $api"
}
check_same buildOnPush false false true
check_same benchmarkAfterPublish true true false
check_same campaignPublish '"direct"' direct '"pr"'
check_same private true true false
is "$(state)" "t|f|direct|t" "both front ends changed the same columns"
# … and through the command line (khub admin repo settings), as "cli"
put "$ALICE" '{"buildOnPush":true}'
api=$(last)
put "$ALICE" '{"buildOnPush":false}'
out=$(khub admin repo settings acme/relu buildOnPush=true 2>&1)
is "$? $(last)" "0 ${api/#alice/cli}" "CLI: buildOnPush=true writes the API's entry, as cli"
is "$out" '{"private":true,"buildOnPush":true,"campaignPublish":"direct","benchmarkAfterPublish":true}' \
	"CLI: prints every setting after the change"
n=$(entries)
khub admin repo settings acme/relu campaignPublish=pr buildOnPush=perhaps >/dev/null 2>&1
is "$? $(state) $(entries)" "1 t|t|direct|t $n" "CLI: a bad value exits 1, nothing changed"
put "$ALICE" '{"private":false,"buildOnPush":true,"campaignPublish":"pr","benchmarkAfterPublish":false}'
is "$ST $(jq -c . "$B")" '200 {"private":false,"buildOnPush":true,"benchmarkAfterPublish":false}' \
	"PUT answers the settings it always answered, in the same order"
before=$(entries)
form alice private=false buildOnPush=true campaignPublish=pr benchmarkAfterPublish=false
is "$ST $(entries)" "303 $before" "a form that changes nothing writes no entry"

# ---- a bad value of each type: 400, nothing changed -------------------------------------------
want=$(state) n=$(entries)
for body in '{"buildOnPush":"no"}' '{"benchmarkAfterPublish":1}' '{"private":"yes"}' '{"campaignPublish":"sometimes"}' \
	'{"campaignPublish":5}' '{"campaignPublish":"direct","benchmarkAfterPublish":"yes"}' \
	'{"benchmarkAfterPublish":true,"buildOnPush":0}' '{"private":true,"campaignPublish":"never"}'; do
	put "$ALICE" "$body"
	is "$ST|$(grep -i '^content-type' "$H" | tr -d '\r')|$(jq -r 'has("error")' "$B")|$(state)|$(entries)" \
		"400|Content-Type: application/json; charset=utf-8|true|$want|$n" "API $body: 400 JSON, nothing changed"
done
for f in "buildOnPush=maybe" "campaignPublish=sometimes" "campaignPublish=direct buildOnPush=maybe" \
	"campaignPublish=direct benchmarkAfterPublish=1"; do
	# shellcheck disable=SC2086
	form alice $f
	is "$ST|$(grep -c 'class="problem"' "$B")|$(state)|$(entries)" "400|1|$want|$n" "web $f: 400 with the reason, nothing changed"
done

# ---- who may not: refused as before, nothing written ------------------------------------------
for who in "anonymous::401" "mallory (not a member):$MALLORY:403" "bob (read member):$BOB:403" \
	"alice's read token:$ALICE_READ:403" "a revoked token:$DEAD:401"; do
	IFS=: read -r name token code <<<"$who"
	put "$token" '{"buildOnPush":false,"campaignPublish":"direct"}'
	is "$ST|$(jq -r 'has("error")' "$B")|$(state)|$(entries)" "$code|true|$want|$n" "API, $name: $code, nothing changed"
done
form bob buildOnPush=false
is "$ST|$(state)|$(entries)" "403|$want|$n" "web, bob (read member): 403, nothing changed"
ST=$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/kernels/acme/relu/settings")
ok "$([ "$ST" = 401 ] || [ "$ST" = 403 ] || [ "$ST" = 404 ]; echo $?)" "web, anonymous: the form is not shown ($ST)"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
