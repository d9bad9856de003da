#!/bin/bash
# t0324-webhooks-lapse-take-back.sh -- the build changes nobody asked for
# fire repo.build too (docs/webhooks.md; farm/build_states.c's lapse and
# take_back): a worker that stops heartbeating loses its lease and the
# job's signed delivery says queued, transition lapse, with the reason;
# `khub admin worker scope` (another process) narrowing the worker's scope
# takes its running job back (queued, take_back); a repo made private
# under a running job is taken back by the worker's own next request (the
# lease check) with the same event. Each delivery is signed (openssl).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/farm_hooks.sh"
V1=torch211-cxx11-cpu-x86_64-linux
V2=torch212-cxx11-cpu-x86_64-linux
# a short lease first: the worker below never heartbeats
KHUB_BUILD_LEASE_SECONDS=2 KHUB_BUILD_HEARTBEAT_SECONDS=1 farm_hooks_hub w1 1s "$V1" "$V2"	# $ALICE, w1 ($W1), $RECV_PORT
khub admin org create other >>"$log" 2>&1
api() {	# api TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
farm_hooks_kernel $'from ._ops import ops\n'	# acme/relu
is "$CREATE_STATUS" 200 "acme/relu created with build.toml"
SECRET=lapse-hook-secret-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)
api "$ALICE" POST /api/kernels/acme/relu/webhooks "{\"url\":\"http://127.0.0.1:$RECV_PORT/builds\",\"secret\":\"$SECRET\",\"scopes\":[\"repo.build\"]}"
is "$ST" 201 "a repo.build hook to the receiver"
api "$W1" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":2,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\",\"$V2\"]}]}"
is "$ST" 200 "w1 registers"

# event_of JOB TRANSITION [AFTER]: wait (at most 120 s) for a delivery numbered above AFTER about JOB
# with TRANSITION; its number in $N
event_of() {
	N=
	for _ in $(seq 1 1200); do
		for f in "$RECV"/body.*; do
			[ -f "$f" ] && [ "${f##*.}" -gt "${3:-0}" ] || continue
			if jq -e --argjson j "$1" --arg t "$2" '.build.id == $j and .build.transition == $t' "$f" >/dev/null 2>&1; then
				N=${f##*.}
				return 0
			fi
		done
		sleep 0.1
	done
	diag "no $2 delivery of build $1: $(cat "$RECV"/body.* 2>/dev/null | jq -c '.build' | tr '\n' ' ')"
	return 1
}
# checked N JOB STATE TRANSITION REASON-REGEX ERROR-REGEX: delivery N is signed and says so
checked() {
	recv_signed "$1" "$SECRET"
	ok $? "delivery $1 is signed with the hook's secret (openssl)"
	is "$(jq -c '[.event.scope, .repo.name, .build.id, .build.state, .build.transition]' "$RECV/body.$1")" \
		"[\"repo.build\",\"acme/relu\",$2,\"$3\",\"$4\"]" "delivery $1: build $2 $3 by $4"
	like "$(jq -r .build.reason "$RECV/body.$1")" "$5" "with the reason"
	like "$(jq -r .build.error "$RECV/body.$1")" "$6" "and the job's error"
}
claim() {	# claim VARIANT: w1 claims it; the job's id in $J
	api "$W1" POST /api/workers/claim "{\"variants\":[\"$1\"],\"wait_seconds\":30}"
	J=$(jq -r '.build.id // empty' "$B")
}

# ---- a lease that lapses -----------------------------------------------------------------------
api "$ALICE" POST /api/kernels/acme/relu/builds "{\"variants\":[\"$V1\"]}"
like "$ST" "^20[02]$" "enqueue $V1 (or it was queued by the push already)"
claim "$V1"
is "$ST" 200 "w1 claims it (build $J) and then says nothing"
event_of "$J" lapse
ok $? "a lapse delivery of build $J came"
checked "$N" "$J" queued lapse 'lease lapsed.*stopped heartbeating' '^lease expired \(attempt 1 of '
is "$(curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$J" | jq -r .state)" queued "the job is queued again"

# ---- the admin narrows the worker's scope: taken back ------------------------------------------
khub_stop
export KHUB_BUILD_LEASE_SECONDS=600 KHUB_BUILD_LEASE_CHECK_MS=600000	# no lapse, and the timer idle
khub_start
api "$ALICE" POST /api/kernels/acme/relu/builds "{\"variants\":[\"$V2\"]}"
like "$ST" "^20[02]$" "enqueue $V2 (or it was queued by the push already)"
claim "$V2"
is "$ST" 200 "w1 claims it (build $J)"
J2=$J
out=$(khub admin worker scope w1 --org other 2>&1)
like "$out" "taken back" "khub admin worker scope w1 --org other takes it back"
event_of "$J2" take_back
ok $? "a take_back delivery of build $J2 came"
checked "$N" "$J2" queued take_back "taken back.*scope no longer covers" '^taken back from worker w1: its scope no longer covers acme/relu'

# ---- the repo made private: the worker's next request takes it back -----------------------------
khub admin worker scope w1 --org acme >>"$log" 2>&1
ok $? "w1's scope covers acme again (public repos only)"
claim "$V2"
is "$ST $J" "200 $J2" "w1 claims build $J2 again"
api "$ALICE" PUT /api/kernels/acme/relu/settings '{"private":true}'
is "$ST" 200 "alice makes acme/relu private"
api "$W1" POST "/api/builds/$J2/heartbeat" '{}'
is "$ST $(jq -r .state "$B")" "409 queued" "w1's heartbeat is refused: its scope no longer covers the repo, taken back"
event_of "$J2" take_back "$N"
ok $? "a second take_back delivery of build $J2 came (the lease check's)"
checked "$N" "$J2" queued take_back "taken back.*scope no longer covers" 'covers acme/relu \(private\)$'

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
