#!/bin/bash
# t0296-build-log-follow.sh -- a build's log followed live (docs/build-farm.md,
# "Live logs"): a worker driven by hand appends log chunks; `curl -N
# .../log?follow=1` gets the first chunk while the build runs (before the
# second is posted), then the second, and ends cleanly when the build fails,
# with exactly what the log route answers (escape sequences dropped, a \r\n
# cut between two chunks kept one line end). The log page's event stream
# answers server-sent events ending with "end". Access: anonymous, a
# non-member, a read-scoped and a revoked token get on the follow route what
# the log route answers them (a private repo's build), and the event stream
# answers anonymous callers and non-members as the log page does. More
# followers than build_log_followers_max are refused (503, saying so); a
# follower that gains nothing for build_log_follow_idle_s is cut.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
log=$TEST_DIR/setup.log
for cmd in "org create acme" "user create alice" "user create bob" "user create eve" "member set acme alice write" \
	"member set acme bob read"; do
	khub admin $cmd >>"$log" 2>&1 || bail "khub admin $cmd failed"
done
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
ALICE_READ=$(khub admin token create alice --scope read 2>>"$log" | tail -n 1)
DEAD=$(khub admin token create alice --token-name dead --scope write 2>>"$log" | tail -n 1)
BOB=$(khub admin token create bob --scope read 2>>"$log" | tail -n 1)
EVE=$(khub admin token create eve --scope write 2>>"$log" | tail -n 1)
W=$(khub admin worker add w1 --private 2>>"$log" | tail -n 1)
khub import "$KHUB_SRC/examples/relu" --repo acme/relu --type kernel >>"$log" 2>&1 || bail "import acme/relu"
khub import "$KHUB_SRC/examples/relu" --repo acme/secret --type kernel --private >>"$log" 2>&1 || bail "import acme/secret"
dead_id=$(khub admin token list alice 2>>"$log" | grep -w dead | grep -oE '^[[:space:]]*[0-9]+' | tr -d ' ' | head -1)
khub admin token revoke "$dead_id" >>"$log" 2>&1
export KHUB_BUILD_LOG_FOLLOWERS_MAX=2
khub_start

B=$TEST_DIR/b
CPU=torch211-cxx11-cpu-x86_64-linux
beat() { api POST "/api/builds/$1/heartbeat" -H "Authorization: Bearer $W" --json '{}'; }
# logpost JOB FILE: the file appended at the worker's offset (kept in $TEST_DIR/at.JOB)
logpost() {
	local at
	at=$(cat "$TEST_DIR/at.$1" 2>/dev/null || echo 0)
	beat "$1"
	STATUS=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $W" --data-binary "@$2" \
		"$KHUB_URL/api/builds/$1/log?offset=$at")
	echo $((at + $(stat -c %s "$2"))) >"$TEST_DIR/at.$1"
}
# until_in FILE TEXT: wait (at most 120 s) until FILE holds TEXT
until_in() {
	local i
	for ((i = 0; i < 1200; i++)); do
		grep -qF -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
# until_done PID: wait (at most 120 s) for a background process to end
until_done() {
	local i
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}
claim() {	# claim REPO -> $JOB
	api POST "/api/kernels/$1/builds" -H "Authorization: Bearer $ALICE" --json "{\"variants\":[\"$CPU\"],\"force\":true}"
	[ "$STATUS" = 202 ] || bail "$1's build was not queued: $STATUS $(cat "$B")"
	api POST /api/workers/claim -H "Authorization: Bearer $W" --json "{\"variants\":[\"$CPU\"],\"wait_seconds\":0}"
	JOB=$(jq -r .build.id "$B")
	[ "$(jq -r .build.repo "$B")" = "$1" ] || bail "the claim did not give $1's build: $(cat "$B")"
}
api POST /api/workers/register -H "Authorization: Bearer $W" --json "{\"name\":\"w1\",\"concurrency\":4,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$CPU\"]}]}"
is "$STATUS" 200 "w1 registers ($CPU)"

# ---- curl follows a running build ----------------------------------------------------------------
claim acme/relu
R=$JOB
printf 'first line\n\033[31mred\033[0m <script>window.__pwned=1</script>\n' >"$TEST_DIR/c1"
logpost "$R" "$TEST_DIR/c1"
is "$STATUS" 200 "w1 claims acme/relu's build $R and posts a first chunk"
curl -sN -D "$TEST_DIR/f.h" -o "$TEST_DIR/f.out" "$KHUB_URL/api/builds/$R/log?follow=1" &
F=$!
until_in "$TEST_DIR/f.out" 'first line'
ok $? "curl -N ?follow=1 receives the first chunk"
kill -0 "$F" 2>/dev/null
ok $? "… while the build runs, before a second is posted: the stream stays open"
head -n 1 "$TEST_DIR/f.h" | grep -q '^HTTP/1.1 200' && grep -qi '^transfer-encoding: chunked' "$TEST_DIR/f.h"
ok $? "… 200, chunked"
printf 'second line\nabc\r' >"$TEST_DIR/c2"
logpost "$R" "$TEST_DIR/c2"
until_in "$TEST_DIR/f.out" 'second line'
ok $? "the second chunk reaches the follower as the worker posts it"
kill -0 "$F" 2>/dev/null
ok $? "… which still follows"
printf '\ndef\nlast words\n' >"$TEST_DIR/c3"
logpost "$R" "$TEST_DIR/c3"
until_in "$TEST_DIR/f.out" 'last words'
ok $? "a third chunk (its \\r\\n begun in the second) too"
beat "$R"
api POST "/api/builds/$R/fail" -H "Authorization: Bearer $W" --json '{"error":"compile error","retry":false}'
is "$STATUS" 200 "the worker fails the build"
until_done "$F"
ok $? "the follower ends when the build ends"
wait "$F"
is "$?" 0 "… cleanly (the chunked body's last chunk: curl exits 0)"
curl -s -o "$TEST_DIR/whole" "$KHUB_URL/api/builds/$R/log"
cmp -s "$TEST_DIR/whole" "$TEST_DIR/f.out"
ok $? "what it received is byte for byte the log route's answer"
! grep -q $'\033' "$TEST_DIR/f.out" && grep -q '^abc$' "$TEST_DIR/f.out" && grep -q '^def$' "$TEST_DIR/f.out"
ok $? "… escape sequences dropped, the \\r\\n cut between chunks one line end"

# ---- the log page's event stream -----------------------------------------------------------------
session() {	# session NAME TOKEN: a browser session in $TEST_DIR/NAME.jar
	local jar=$TEST_DIR/$1.jar csrf
	curl -s -c "$jar" -o "$TEST_DIR/$1.html" "$KHUB_URL/login"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/$1.html" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$2" "$KHUB_URL/login"
}
page() {	# page JAR PATH -> $PST, body in $B, headers in $B.h
	PST=$(curl -s -b "$1" -D "$B.h" -o "$B" -w '%{http_code}' -m 120 "$KHUB_URL$2")
}
session bob "$BOB"
session eve "$EVE"
: >"$TEST_DIR/anon.jar"
page "$TEST_DIR/anon.jar" "/kernels/acme/relu/builds/$R/log/events"
is "$PST" 200 "the event stream of acme/relu's ended build (anonymous, public repo): 200"
grep -qi '^content-type: text/event-stream' "$B.h"
ok $? "… text/event-stream"
tail -n 3 "$B" | tr '\n' '|' | grep -qx 'event: end|data: failed||'
ok $? "… its last event is end, with the status failed"
sed -n 's/^data: //p' "$B" | head -n 4 >"$TEST_DIR/sse.lines"
head -n 4 "$TEST_DIR/whole" | cmp -s - "$TEST_DIR/sse.lines"
ok $? "… and its data lines are the log's lines"
grep -q '^id: [0-9]*$' "$B"
ok $? "… each piece with its id, the offset to read on from (Last-Event-ID)"

# ---- access: a private repo's running build ---------------------------------------------------------
claim acme/secret
S=$JOB
printf 'secret line\n' >"$TEST_DIR/s1"
logpost "$S" "$TEST_DIR/s1"
is "$STATUS" 200 "w1 claims acme/secret's build $S (private) and logs a line"
for who in anonymous: eve:$EVE dead:$DEAD; do
	tok=${who#*:}
	auth=()
	[ -n "$tok" ] && auth=(-H "Authorization: Bearer $tok")
	api GET "/api/builds/$S/log" ${tok:+-H "Authorization: Bearer $tok"}
	want=$STATUS
	STATUS=$(curl -s -o "$B" -w '%{http_code}' -m 60 "${auth[@]}" "$KHUB_URL/api/builds/$S/log?follow=1")
	is "$STATUS" "$want" "?follow=1 as ${who%%:*}: $want, as the log route answers (the build running)"
	! grep -q 'secret line' "$B"
	ok $? "… without a byte of the log"
done
session alice "$ALICE"
for who in anon eve; do
	page "$TEST_DIR/$who.jar" "/kernels/acme/secret/builds/$S/log"
	want=$PST
	page "$TEST_DIR/$who.jar" "/kernels/acme/secret/builds/$S/log/events"
	is "$PST" "$want" "the event stream as $who: $want, as the log page answers"
	! grep -q 'secret line' "$B"
	ok $? "… without a byte of the log"
done

# ---- at most build_log_followers_max (2) followers ----------------------------------------------------
curl -sN -H "Authorization: Bearer $ALICE_READ" -o "$TEST_DIR/g1" "$KHUB_URL/api/builds/$S/log?follow=1" &
G1=$!
curl -sN -b "$TEST_DIR/alice.jar" -o "$TEST_DIR/g2" "$KHUB_URL/kernels/acme/secret/builds/$S/log/events" &
G2=$!
until_in "$TEST_DIR/g1" 'secret line' && until_in "$TEST_DIR/g2" 'data: secret line'
ok $? "a read-scoped token follows acme/secret's log, alice's session its event stream"
api GET "/api/builds/$S/log?follow=1" -H "Authorization: Bearer $ALICE"
like "$STATUS $(jq -r .error "$B")" '^503 too many build logs are followed now \(build_log_followers_max, 2\)' \
	"a third follower: 503, saying why"
page "$TEST_DIR/alice.jar" "/kernels/acme/secret/builds/$S/log/events"
is "$PST" 503 "… a third event stream too"
beat "$S"
api POST "/api/builds/$S/fail" -H "Authorization: Bearer $W" --json '{"error":"gave up","retry":false}'
until_done "$G1" && until_done "$G2"
ok $? "both end when the build fails"
tail -n 3 "$TEST_DIR/g2" | tr '\n' '|' | grep -qx 'event: end|data: failed||'
ok $? "… the event stream with end"
curl -s -H "Authorization: Bearer $ALICE_READ" -o "$TEST_DIR/s.whole" "$KHUB_URL/api/builds/$S/log"
cmp -s "$TEST_DIR/g1" "$TEST_DIR/s.whole"
ok $? "… the read-scoped follower with the whole log"
api GET "/api/builds/$S/log?follow=1" -H "Authorization: Bearer $ALICE_READ"
is "$STATUS" 200 "the followers counted are given back: a new follow is answered"
cmp -s "$B" "$TEST_DIR/s.whole"
ok $? "… with the whole log of the ended build, at once"

# ---- an idle follower is cut --------------------------------------------------------------------------
khub_stop
export KHUB_BUILD_LOG_FOLLOW_IDLE_S=5
khub_start
claim acme/relu
I=$JOB
curl -sN -o "$TEST_DIR/i.out" -m 300 "$KHUB_URL/api/builds/$I/log?follow=1"
rc=$?
is "$rc" 18 "a follower of a build that logs nothing for build_log_follow_idle_s is cut (curl: 18, not a clean end)"
grep -q 'attempt 1 of' "$TEST_DIR/i.out"
ok $? "… after the log so far"
khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
