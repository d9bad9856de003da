#!/bin/bash
# t0272-webhooks-builds.sh -- repo.build deliveries (docs/webhooks.md): a
# build job's state changes, driven through the real user and worker
# routes (enqueue, claim, cancel), each deliver a signed POST to a real
# receiver with the build object (id, state queued/building/cancelled,
# variant, commit) and the repo; and with webhooks_allow_private back to 0,
# a delivery to the hook's loopback URL is refused when it connects (the
# attempt logged with the reason, nothing received).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/farm_hooks.sh"
V1=torch211-cxx11-cpu-x86_64-linux
farm_hooks_hub w1 1h "$V1"	# $ALICE, worker w1 ($W1), the receiver ($RECV_PORT)
farm_hooks_kernel $'from ._ops import ops\n'	# acme/relu at $C1
is "$CREATE_STATUS" 200 "acme/relu created with build.toml"
SECRET=build-hook-secret-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)
api POST /api/kernels/acme/relu/webhooks -H "Authorization: Bearer $ALICE" --json "{\"url\":\"http://127.0.0.1:$RECV_PORT/builds\",\"secret\":\"$SECRET\",\"scopes\":[\"repo.build\"]}"
is "$STATUS" 201 "a repo.build hook to the receiver"
HOOK=$(jq -r .webhook.id "$B")
api POST /api/workers/register -H "Authorization: Bearer $W1" --json "{\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
is "$STATUS" 200 "w1 registers"

# build_event N STATE: request N is the signed repo.build delivery of job $J in STATE
build_event() {
	recv_wait "$1"
	ok $? "the receiver got POST $1"
	recv_signed "$1" "$SECRET"
	ok $? "POST $1 is signed with the hook's secret (openssl)"
	is "$(jq -c '[.event.scope, .repo.name, .repo.type, .repo.headSha, .build.id, .build.state, .build.variant, .build.commit]' \
		"$RECV/body.$1")" "[\"repo.build\",\"acme/relu\",\"kernel\",\"$C1\",$J,\"$2\",\"$V1\",\"$C1\"]" \
		"POST $1: build $J $2 ($(recv_get "$1" '.headers["x-khub-event"]'))"
}

api POST /api/kernels/acme/relu/builds -H "Authorization: Bearer $ALICE" --json "{\"variants\":[\"$V1\"]}"
is "$STATUS" 202 "enqueue → 202"
J=$(jq -r '.builds[0].id' "$B")
build_event 1 queued
api POST /api/workers/claim -H "Authorization: Bearer $W1" --json "{\"variants\":[\"$V1\"],\"wait_seconds\":0}"
is "$STATUS" 200 "w1 claims it"
build_event 2 building
api POST "/api/builds/$J/cancel" -H "Authorization: Bearer $ALICE" --json '{}'
is "$STATUS $(jq -r .state "$B")" "200 canceled" "alice cancels it"
build_event 3 cancelled
api POST "/api/builds/$J/heartbeat" -H "Authorization: Bearer $W1" --json '{}'
is "$STATUS" 200 "its worker's heartbeat (no state change)"
api POST /api/kernels/acme/relu/commit/main -H "Authorization: Bearer $ALICE" --json "$(printf '{"key":"header","value":{"summary":"readme"}}\n{"key":"file","value":{"content":"%s","path":"README.md","encoding":"base64"}}\n' "$(printf hi | b64)")"
is "$STATUS" 200 "a commit (a repo.content event, which this hook does not take)"

# ---- webhooks_allow_private = 0 again: refused when connecting -----------------------------------
khub_stop
KHUB_WEBHOOKS_ALLOW_PRIVATE=0 khub_start
api POST "/api/builds/$J/retry" -H "Authorization: Bearer $ALICE" --json '{}'
is "$STATUS" 200 "alice retries the build: queued again"
for _ in $(seq 1 600); do
	api GET "/api/kernels/acme/relu/webhooks/$HOOK/deliveries" -H "Authorization: Bearer $ALICE"
	[ "$(jq '[.deliveries[] | select(.error != null)] | length' "$B")" -ge 1 ] && break
	sleep 0.1
done
like "$(jq -r '[.deliveries[] | select(.error != null)][0].error' "$B")" '^refused: 127\.0\.0\.1 is a loopback' \
	"the attempt to the loopback URL is refused when it connects, and logged"
is "$(jq -r '[.deliveries[] | select(.error != null)][0].statusCode' "$B")" null "with no status code"
is "$(recv_count)" 3 "the receiver got only the three build events (no heartbeat, no content event, nothing refused)"
done_testing
