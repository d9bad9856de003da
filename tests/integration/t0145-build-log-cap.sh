#!/bin/bash
# t0145-build-log-cap.sh -- a build's log is capped (build_log_max_kb,
# docs/build-farm.md): a worker posting megabytes keeps its first and last
# halves with a line saying how much was cut, the database holds no more
# than the cap, the worker's offsets keep working; terminal escape
# sequences and control bytes in a log are dropped or escaped when served.
# Like a real worker it renews its lease (a heartbeat before every post) and
# reads JSON with jq: nothing here depends on how long an interpreter takes
# to start or on a lease outliving a slow machine.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

V=torch211-cxx11-cpu-x86_64-linux
log=$TEST_DIR/setup.log
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
W=$(khub admin worker add w1 2>>"$log" | tail -n 1)
export KHUB_BUILD_LOG_MAX_KB=64
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
api() {
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
j() { jq -r "$1" "$B" 2>/dev/null; }
hdr() { header "$@"; }	# tests/lib/khub-test.sh
b64() { base64 -w0 "$@"; }
# The worker protocol's heartbeat (docs/build-farm.md); one that is not 200
# is noted in $TEST_DIR/lost-beats, which must stay empty.
beat() {
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $W" -H 'Content-Type: application/json' \
		--data-binary '{}' "$KHUB_URL/api/builds/$1/heartbeat")
	[ "$code" = 200 ] || echo "job $1: heartbeat answered $code" >>"$TEST_DIR/lost-beats"
}
logpost() {
	beat "$1"
	curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $W" --data-binary "@$3" "$KHUB_URL/api/builds/$1/log?offset=$2"
}

files=$(printf '{"path":"build.toml","content":"%s","encoding":"base64"}' "$(printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' | b64)")
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[$files]}"
is "$ST" 200 "acme/relu (public)"
api "$W" POST /api/workers/register "{\"name\":\"w1\",\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V\"],\"torch\":\"2.11\",\"cxx11_abi\":true,\"python\":\"3.11\"}]}"
claim_job() {
	api "$ALICE" POST /api/kernels/acme/relu/builds "{\"revision\":\"main\",\"variants\":[\"$V\"],\"force\":true}"
	api "$W" POST /api/workers/claim "{\"variants\":[\"$V\"],\"wait_seconds\":0}"
	JOB=$(j .build.id)
}

# ---- a huge log ------------------------------------------------------------------------------------
claim_job
# the claim wrote khub's own "[khub] attempt N of M on worker W" line; the
# worker's offsets count from after it, the log's own from before it
curl -s -o "$TEST_DIR/prefix" "$KHUB_URL/api/builds/$JOB/log"
P=$(stat -c %s "$TEST_DIR/prefix")
like "$(cat "$TEST_DIR/prefix")" '^\[khub\] attempt 1 of [0-9]+ on worker w1$' "the claim starts the log with khub's attempt line"
awk 'BEGIN { for (i = 0; i < 250000; i++) printf "line %07d\n", i }' >"$TEST_DIR/huge.log"	# 3 MB
SIZE=$(stat -c %s "$TEST_DIR/huge.log")
split -b 65536 -d -a 3 "$TEST_DIR/huge.log" "$TEST_DIR/part."
at=0 bad=0
for p in "$TEST_DIR"/part.*; do
	code=$(logpost "$JOB" "$at" "$p")
	at=$((at + $(stat -c %s "$p")))
	[ "$code/$(j .length)" = "200/$at" ] || bad=$((bad + 1))
done
is "$bad" 0 "a worker posts $SIZE bytes in 64 KiB chunks: every one answered 200 with the length so far"
head -c 1000000 "$TEST_DIR/huge.log" >"$TEST_DIR/again"
is "$(logpost "$JOB" 0 "$TEST_DIR/again")/$(j .length)" "200/$SIZE" "a chunk sent again is ignored (the length is every byte received)"
printf 'last words\n' >"$TEST_DIR/last"
is "$(logpost "$JOB" "$SIZE" "$TEST_DIR/last")/$(j .length)" "200/$((SIZE + 11))" "and the log goes on at its offset"
cat "$TEST_DIR/last" >>"$TEST_DIR/huge.log"
SIZE=$((SIZE + 11))
# past the head khub stores only the tail the worker sends at its end
# (tail=1, khub-worker's way: docs/build-farm.md)
tail -c 32768 "$TEST_DIR/huge.log" >"$TEST_DIR/tail"
is "$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $W" --data-binary "@$TEST_DIR/tail" "$KHUB_URL/api/builds/$JOB/log?offset=$((SIZE - 32768))&tail=1")/$(j '.length')" "200/$SIZE" "the worker sends the log's last 32 KiB as its tail"
cat "$TEST_DIR/prefix" "$TEST_DIR/huge.log" >"$TEST_DIR/whole.log"	# the log as khub has it
curl -s -D "$H" -o "$TEST_DIR/read" "$KHUB_URL/api/builds/$JOB/log"
is "$(hdr X-Log-Length) $(hdr X-Log-Next-Offset)" "$((P + SIZE)) $((P + SIZE))" "X-Log-Length is every byte received (khub's line too); X-Log-Next-Offset the end"
CUT=$((P + SIZE - 65536))
want_line=$(awk -v cut="$CUT" 'BEGIN { printf "[khub: %.1f MB cut from this log]\n", cut / 1e6 }')
like "$(sed -n '/^\[khub: /p' "$TEST_DIR/read")" "^\\[khub: [0-9.]+ MB cut from this log\\]$" "the read says what was cut: $want_line"
is "$(grep -c '^\[khub: ' "$TEST_DIR/read")" 1 "… once"
cmp -s <(head -c 32768 "$TEST_DIR/read") <(head -c 32768 "$TEST_DIR/whole.log")
ok $? "the first 32 KiB are the log's head"
cmp -s <(tail -c 32768 "$TEST_DIR/read") <(tail -c 32768 "$TEST_DIR/huge.log")
ok $? "the last 32 KiB are the log's tail"
is "$(stat -c %s "$TEST_DIR/read")" "$((65536 + ${#want_line} + 2))" "nothing else: head + the line + tail"
got=$(curl -s -D "$H" "$KHUB_URL/api/builds/$JOB/log?offset=100000" | head -2)
is "$got" $'\n'"$want_line" "a read from inside the cut part starts with the line, then the tail"
curl -s -D "$H" -o "$TEST_DIR/read2" "$KHUB_URL/api/builds/$JOB/log?offset=$((P + SIZE - 11))"
is "$(cat "$TEST_DIR/read2")" "last words" "a read from inside the tail is the tail's bytes"
if command -v psql >/dev/null 2>&1; then
	stored=$(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt -c "SELECT sum(length(data)) FROM build_log_chunks WHERE build_id = $JOB")
	is "$stored" 65536 "the database holds 64 KiB of it, not $SIZE bytes"
else
	ok 0 "# SKIP psql not installed"
fi

# ---- escape sequences --------------------------------------------------------------------------------
api "$W" POST "/api/builds/$JOB/fail" '{"error":"done with it"}'
claim_job
printf '\033[31merror:\033[0m x\n\033]0;owned\007\033]8;;http://evil/\033\\click\033]8;;\033\\\n50%%\r100%%\r\nbell\007 c1 \302\233 raw \233 nul \000 end\n' >"$TEST_DIR/esc.log"
is "$(logpost "$JOB" 0 "$TEST_DIR/esc.log")" 200 "a worker posts a log with colours, an OSC title, a hyperlink, \\r, BEL, C1 and NUL"
curl -s -D "$H" -o "$TEST_DIR/esc.read" "$KHUB_URL/api/builds/$JOB/log"
is "$(sed 1d "$TEST_DIR/esc.read")" $'error: x\nclick\n50%\n100%\nbell\\x07 c1 \\xc2\\x9b raw \\x9b nul \\x00 end' \
	"served with the sequences dropped and the other controls escaped"
is "$(LC_ALL=C tr -d '\011\012\040-\377' <"$TEST_DIR/esc.read" | wc -c)" 0 "no ESC or other C0 control but \\n and \\t in the answer"
is "$(hdr Content-Type)" "text/plain; charset=utf-8" "text/plain; charset=utf-8"
is "$(cat "$TEST_DIR/lost-beats" 2>/dev/null)" "" "every heartbeat kept the lease (the job was never taken back mid-test)"
done_testing
