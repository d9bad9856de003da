#!/bin/bash
# t0271-webhooks-delivery.sh -- repo.content deliveries to a real receiver
# (tests/lib/webhook_receiver.py; docs/webhooks.md): a commit by the API, a
# git push and a `khub import` (another process, while the server runs)
# each deliver one POST whose X-Khub-Signature-256 is the HMAC-SHA256 of
# the body under the hook's secret, recomputed with openssl, with the
# Hub's payload shape (event, repo with headSha, updatedRefs); a receiver
# answering 500 twice then 200 gets three attempts of the same delivery
# (X-Khub-Attempt 1, 2, 3, the same body), each in the delivery log with
# its status; a delivery whose receiver is down stays queued across a
# restart of the server and is delivered by the new process once the
# receiver is back; the secret is in no answer.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
export KHUB_WEBHOOKS_ALLOW_PRIVATE=1 KHUB_WEBHOOK_POLL_MS=100 KHUB_WEBHOOK_RETRY_DELAYS=1s,1s
khub_fixture	# acme/relu at $RELU_SHA, $ALICE
. "$KHUB_SRC/tests/lib/webhooks.sh"
recv_start
H=$TEST_DIR/h
B=$TEST_DIR/b
call() {	# call METHOD PATH [BODY [CONTENT-TYPE]] as alice -> $ST, body in $B
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $ALICE")
	[ -n "${3-}" ] && args+=(-H "Content-Type: ${4:-application/json}" --data-binary "$3")
	ST=$(curl "${args[@]}" "$KHUB_URL$2")
}
commit() {	# commit PATH TEXT: an API commit on main; its sha in $SHA
	call POST /api/kernels/acme/relu/commit/main "$(printf '{"key":"header","value":{"summary":"%s"}}\n{"key":"file","value":{"content":"%s","path":"%s","encoding":"base64"}}\n' \
		"add $1" "$(printf '%s' "$2" | base64 -w0)" "$1")" application/x-ndjson
	SHA=$(jq -r .commitOid "$B")
}
head_of() { git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/relu.git" rev-parse main; }

SECRET=the-hooks-secret-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)
call POST /api/kernels/acme/relu/webhooks "{\"url\":\"http://127.0.0.1:$RECV_PORT/hook\",\"secret\":\"$SECRET\",\"scopes\":[\"repo.content\"]}"
is "$ST" 201 "a repo.content hook to the receiver (webhooks_allow_private = 1)"
HOOK=$(jq -r .webhook.id "$B")

# ---- an API commit ---------------------------------------------------------------------------
commit api.txt "by the API"
is "$ST" 200 "an API commit"
recv_wait 1
ok $? "the receiver got a POST"
is "$(recv_get 1 '.path, .headers["content-type"], .headers["x-khub-event"], .headers["x-khub-attempt"], .headers["x-khub-webhook-id"]' | tr '\n' ' ')" \
	"/hook application/json repo.content.update 1 $HOOK " "path, Content-Type, X-Khub-Event, X-Khub-Attempt, X-Khub-Webhook-Id"
recv_signed 1 "$SECRET"
ok $? "X-Khub-Signature-256 is the HMAC-SHA256 of the body under the secret (openssl)"
recv_signed 1 "not-$SECRET"
is "$?" 1 "and does not verify under another secret"
is "$(jq -c '[.event.action, .event.scope, .repo.type, .repo.name, .repo.private, .repo.headSha,
	.updatedRefs[0].ref, .updatedRefs[0].oldSha, .updatedRefs[0].newSha]' "$RECV/body.1")" \
	"[\"update\",\"repo.content\",\"kernel\",\"acme/relu\",false,\"$SHA\",\"refs/heads/main\",\"$RELU_SHA\",\"$SHA\"]" \
	"the payload: event, repo (headSha: the new commit), updatedRefs"

# ---- a git push ---------------------------------------------------------------------------
log=$TEST_DIR/git.log
OLD=$(head_of)
git clone -q "http://x:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu" "$TEST_DIR/clone" >>"$log" 2>&1
(cd "$TEST_DIR/clone" && git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m "pushed" &&
	git push -q origin main) >>"$log" 2>&1
ok $? "git push"
PUSHED=$(head_of)
recv_wait 2
ok $? "the receiver got a second POST"
recv_signed 2 "$SECRET"
ok $? "the push's delivery is signed"
is "$(jq -c '[.repo.headSha, .updatedRefs[0].ref, .updatedRefs[0].oldSha]' "$RECV/body.2")" \
	"[\"$PUSHED\",\"refs/heads/main\",\"$OLD\"]" "its payload names the pushed commit and where main was"

# ---- khub import: another process publishes, the server delivers ----------------------------
OLD=$(head_of)
printf 'imported\n' >"$SRC/IMPORTED.md"
khub import "$SRC" --repo acme/relu --branch main >>"$log" 2>&1
ok $? "khub import onto main"
recv_wait 3
ok $? "the receiver got a third POST"
recv_signed 3 "$SECRET"
ok $? "the import's delivery is signed"
is "$(jq -c '[.repo.headSha, .updatedRefs[0].oldSha]' "$RECV/body.3")" "[\"$(head_of)\",\"$OLD\"]" \
	"its payload names the imported commit"

# ---- 500, 500, then 200: three attempts, logged ------------------------------------------------
printf '500\n500\n' >"$RECV/statuses"
commit retry.txt "retried"
recv_wait 6
ok $? "three more POSTs"
is "$(for n in 4 5 6; do recv_get $n '.headers["x-khub-attempt"] + ":" + (.status | tostring)'; done | tr '\n' ' ')" \
	"1:500 2:500 3:200 " "attempts 1, 2, 3 answered 500, 500, 200"
is "$(for n in 4 5 6; do recv_get $n '.headers["x-khub-delivery"]'; done | sort -u | wc -l)" 1 "all three are one delivery"
check "the same body each time" -- cmp -s "$RECV/body.4" "$RECV/body.6"
recv_signed 6 "$SECRET"
ok $? "and signed each time"
DELIVERY=$(recv_get 6 '.headers["x-khub-delivery"]')
for _ in $(seq 1 100); do	# the last attempt is logged after its answer
	call GET "/api/kernels/acme/relu/webhooks/$HOOK/deliveries"
	[ "$(jq --argjson d "$DELIVERY" '[.deliveries[] | select(.delivery == $d)] | length' "$B")" -ge 3 ] && break
	sleep 0.1
done
is "$(jq -c --argjson d "$DELIVERY" '[.deliveries[] | select(.delivery == $d) | [.attempt, .statusCode, .state, .event, .error]]' "$B")" \
	'[[3,200,"delivered","repo.content.update",null],[2,500,"delivered","repo.content.update","answered HTTP 500"],[1,500,"delivered","repo.content.update","answered HTTP 500"]]' \
	"the delivery log: attempts 3, 2, 1 with their status codes; delivered"
is "$(jq '(.deliveries | length) as $n | [.deliveries[] | select((.time | test("^20[0-9-]+T[0-9:.]+Z$")) and (.durationMs | type) == "number")] | length == $n' "$B")" \
	true "every attempt has its time and duration"
is "$(jq '[.deliveries[] | select(.state == "delivered" and .statusCode == 200)] | length' "$B")" 4 \
	"four deliveries delivered"
ok "$(grep -c -- "$SECRET" "$B")" "the secret is not in the delivery log"
call GET /api/kernels/acme/relu/webhooks
ok "$(grep -c -- "$SECRET" "$B")" "nor in the list"

# ---- the receiver down, the server restarted: the delivery resumes ------------------------------
khub_stop
export KHUB_WEBHOOK_RETRY_DELAYS=$(printf '1s,%.0s' $(seq 1 19))1s	# 20 retries
khub_start
recv_stop
commit restart.txt "while the receiver is down"
is "$ST" 200 "an API commit while the receiver is down"
for _ in $(seq 1 600); do
	call GET "/api/kernels/acme/relu/webhooks/$HOOK/deliveries"
	[ "$(jq '[.deliveries[] | select(.statusCode == null)] | length' "$B")" -ge 1 ] && break
	sleep 0.1
done
like "$(jq -r '[.deliveries[] | select(.statusCode == null)][0].error' "$B")" '.' \
	"an attempt failed without an answer, logged with its error: $(jq -r '[.deliveries[] | select(.statusCode == null)][0].error' "$B" | cut -c1-60)"
khub_stop
BEFORE=$(recv_count)
recv_start "$RECV_PORT"	# back, after the server that tried has exited
khub_start
recv_wait $((BEFORE + 1))
ok $? "the new server process delivers it"
N=$((BEFORE + 1))
call GET "/api/kernels/acme/relu/webhooks/$HOOK/deliveries"
D=$(recv_get $N '.headers["x-khub-delivery"]')
FAILED=$(jq --argjson d "$D" '[.deliveries[] | select(.delivery == $d and .statusCode == null)] | length' "$B")
is "$(recv_get $N '.headers["x-khub-attempt"]')" "$((FAILED + 1))" "as the attempt after the $FAILED that failed before the restart"
is "$(jq -c '.updatedRefs[0].newSha' "$RECV/body.$N")" "\"$SHA\"" "with the commit made while the receiver was down"
recv_signed $N "$SECRET"
ok $? "signed"
done_testing
