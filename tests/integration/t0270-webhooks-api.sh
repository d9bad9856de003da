#!/bin/bash
# t0270-webhooks-api.sh -- managing a repo's webhooks (docs/webhooks.md):
# GET/POST /api/kernels/{ns}/{name}/webhooks, DELETE …/webhooks/{id} and
# GET …/webhooks/{id}/deliveries answer those who may change the repo's
# settings, exactly as PUT …/settings does for the same caller (anonymous,
# a non-member, a read-scoped token, a revoked token, a bogus one, the
# org's admin; a public and a private repo); a hook's secret is answered
# once when the server made it and never again (not by the list, not by
# the create answer when the caller gave it, not by the delivery log);
# only http and https URLs are taken, and while webhooks_allow_private is 0
# (the default) none naming a loopback, private, link-local or reserved
# address, nor localhost, nor one carrying credentials.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
khub_accounts	# alice, admin of acme, and $ALICE (write)
log=$TEST_DIR/setup.log
khub admin user create bob >>"$log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
ALICE_RO=$(khub admin token create alice --scope read 2>>"$log" | tail -n 1)
DEAD=$(khub admin token create alice --scope write 2>"$TEST_DIR/dead.err" | tail -n 1)
DEAD_ID=$(sed -n 's/^token id \([0-9]*\) .*/\1/p' "$TEST_DIR/dead.err")
khub admin token revoke "$DEAD_ID" >>"$log" 2>&1
ok $? "a token of alice's, revoked"
BOGUS=hf_$(head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 34)
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
# call TOKEN METHOD PATH [BODY] -> $ST, body in $B
call() {
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
for r in pub priv; do
	priv=false; [ $r = priv ] && priv=true
	call "$ALICE" POST /api/repos/create "{\"name\":\"$r\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":$priv}"
	is "$ST" 200 "acme/$r (private: $priv) created"
done

# ---- creating, listing, the secret ----------------------------------------------------------
HOOKS=/api/kernels/acme/pub/webhooks
call "$ALICE" POST $HOOKS '{"url":"https://hooks.example.com/khub"}'
is "$ST $(jq -r '.webhook.url, (.webhook.scopes | join(","))' "$B" | tr '\n' ' ')" \
	"201 https://hooks.example.com/khub repo.content,repo.build " "create without a secret → 201, both scopes"
MADE=$(jq -r .webhook.secret "$B")
ID1=$(jq -r .webhook.id "$B")
like "$MADE" '^[0-9a-f]{64}$' "the server made a secret and answered it, this once"
GIVEN=given-secret-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)
call "$ALICE" POST $HOOKS "{\"url\":\"http://hooks.example.com/b\",\"secret\":\"$GIVEN\",\"scopes\":[\"repo.build\"]}"
is "$ST $(jq -r '.webhook.scopes | join(",")' "$B")" "201 repo.build" "create with a secret and one scope → 201"
ID2=$(jq -r .webhook.id "$B")
ok "$(grep -c -- "$GIVEN" "$B")" "the create answer does not repeat a secret the caller gave"
call "$ALICE" GET $HOOKS
is "$ST $(jq -r '[.webhooks[].id] | map(tostring) | join(",")' "$B")" "200 $ID1,$ID2" "the list: both hooks"
is "$(jq -r '[.webhooks[] | has("secret")] | any' "$B")" false "no hook of the list has a secret"
ok "$(grep -c -e "$MADE" -e "$GIVEN" "$B")" "neither secret is anywhere in the list's answer"
call "$ALICE" GET "$HOOKS/$ID1/deliveries"
is "$ST $(jq -c .deliveries "$B")" "200 []" "the delivery log of a new hook: empty"
ok "$(grep -c -e "$MADE" -e "$GIVEN" "$B")" "nor in the delivery log"
call "$ALICE" POST $HOOKS '{"url":"https://hooks.example.com/x","secret":"short"}'
is "$ST" 400 "a secret under 16 bytes → 400"
call "$ALICE" POST $HOOKS '{"url":"https://hooks.example.com/x","scopes":["repo.discussion"]}'
is "$ST" 400 "an unknown scope → 400"
call "$ALICE" POST $HOOKS '{"url":"https://hooks.example.com/x","scopes":[]}'
is "$ST" 400 "no scope → 400"
call "$ALICE" POST $HOOKS '{}'
is "$ST" 400 "no url → 400"

# ---- URLs refused (SSRF) --------------------------------------------------------------------
for url in http://127.0.0.1:9/hook http://127.1.2.3/ http://localhost:8080/ http://api.localhost/ "http://[::1]:80/" \
	http://10.0.0.1/ http://192.168.1.1/ http://172.16.0.1/ http://169.254.169.254/latest/meta-data \
	"http://[fe80::1]/" "http://[::ffff:127.0.0.1]/" http://0.0.0.0/ http://100.64.0.1/ \
	ftp://hooks.example.com/ file:///etc/passwd gopher://hooks.example.com/ "http://u:p@hooks.example.com/" \
	hooks.example.com/nothing "http://"; do
	call "$ALICE" POST $HOOKS "{\"url\":\"$url\"}"
	is "$ST" 400 "url $url refused (400): $(jq -r .error "$B" | cut -c1-70)"
done
call "$ALICE" GET $HOOKS
is "$(jq '.webhooks | length' "$B")" 2 "nothing refused was stored"

# ---- who may: the same answers as PUT …/settings -------------------------------------------------
declare -A TOKENS=([anonymous]="" [non-member]="$BOB" [read-scoped]="$ALICE_RO" [revoked]="$DEAD" [bogus]="$BOGUS")
declare -A WANT_pub=([anonymous]=401 [non-member]=403 [read-scoped]=403 [revoked]=401 [bogus]=401)
declare -A WANT_priv=([anonymous]=401 [non-member]=404 [read-scoped]=403 [revoked]=401 [bogus]=401)
for r in pub priv; do
	base=/api/kernels/acme/$r
	for who in anonymous non-member read-scoped revoked bogus; do
		t=${TOKENS[$who]}
		want=WANT_$r[$who]
		call "$t" PUT $base/settings '{}'
		settings=$ST
		call "$t" GET $base/webhooks
		list=$ST
		ok "$(grep -c -e "$MADE" -e "hooks.example.com" "$B")" "$who × list acme/$r: no hook shown"
		call "$t" POST $base/webhooks '{"url":"https://evil.example.com/"}'
		create=$ST
		call "$t" DELETE "$base/webhooks/$ID1"
		delete=$ST
		call "$t" GET "$base/webhooks/$ID1/deliveries"
		deliveries=$ST
		is "$list $create $delete $deliveries" "$settings $settings $settings $settings" \
			"$who × acme/$r: list, create, delete, deliveries answer as settings do ($settings)"
		is "$settings" "${!want}" "$who × acme/$r: $settings"
	done
done
call "$ALICE" GET $HOOKS
is "$(jq -r '[.webhooks[].url] | join(",")' "$B")" "https://hooks.example.com/khub,http://hooks.example.com/b" \
	"no caller refused added or removed a hook"

# ---- deleting ----------------------------------------------------------------------------------
call "$ALICE" DELETE "/api/kernels/acme/priv/webhooks/$ID1"
is "$ST" 404 "a hook of another repo cannot be deleted through this one (404)"
call "$ALICE" GET "/api/kernels/acme/priv/webhooks/$ID1/deliveries"
is "$ST" 404 "nor its log read (404)"
call "$ALICE" DELETE "$HOOKS/$ID1"
is "$ST $(jq -r .deleted "$B")" "200 true" "the org's admin deletes a hook"
call "$ALICE" DELETE "$HOOKS/$ID1"
is "$ST" 404 "deleting it again → 404"
call "$ALICE" DELETE "$HOOKS/notanumber"
is "$ST" 404 "a hook id that is no number → 404"
call "$ALICE" GET $HOOKS
is "$(jq -r '[.webhooks[].id] | map(tostring) | join(",")' "$B")" "$ID2" "one hook left"

# ---- webhooks_allow_private = 1: an operator's choice ---------------------------------------------
khub_stop
KHUB_WEBHOOKS_ALLOW_PRIVATE=1 khub_start
call "$ALICE" POST $HOOKS '{"url":"http://127.0.0.1:9/hook"}'
is "$ST" 201 "with webhooks_allow_private = 1, a loopback URL is taken"
call "$ALICE" POST $HOOKS '{"url":"ftp://127.0.0.1/"}'
is "$ST" 400 "but still only http and https"
done_testing
