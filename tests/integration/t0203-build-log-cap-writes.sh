#!/bin/bash
# t0203-build-log-cap-writes.sh -- a build log over its cap
# (build_log_max_kb, docs/build-farm.md) never writes the bytes the cap
# drops to the database: through the worker protocol (claim, heartbeats,
# chunks, the tail with tail=1, fail) a log 20x and one 100x the cap write
# exactly the head and the tail to build_log_chunks, the same bytes for
# both, nothing deleted; a hostile worker posting every byte, or flooding
# tail chunks, writes no more; what is read is head + one cut line + tail.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v psql >/dev/null 2>&1 || { echo "1..0 # SKIP psql not installed"; exit 0; }
khub_setup

V=torch211-cxx11-cpu-x86_64-linux
log=$TEST_DIR/setup.log
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
W=$(khub admin worker add w1 2>>"$log" | tail -n 1)
export KHUB_BUILD_LOG_MAX_KB=16	# the least: 8 KiB of head, 8 KiB of tail
CAP=16384 HEAD=8192 TAIL=8192
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
api() {
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
hdr() { header "$@"; }	# tests/lib/khub-test.sh
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt -c "$1"; }
# logpost OFFSET FILE [tail]: status/length
logpost() {
	local q="offset=$1&attempt=$ATTEMPT${3:+&tail=1}"
	echo "$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $W" --data-binary "@$2" \
		"$KHUB_URL/api/builds/$JOB/log?$q")/$(jq -r '.length // empty' "$B" 2>/dev/null)"
}
beat() { api "$W" POST "/api/builds/$JOB/heartbeat" '{}'; [ "$ST" = 200 ] || HB_BAD=$((HB_BAD + 1)); }

# every byte written to build_log_chunks (rows inserted or updated) and
# every row deleted, counted by a trigger: exact, whatever the statistics
# collector and autovacuum do
sql "CREATE TABLE t0203_writes (bytes bigint NOT NULL, deleted bigint NOT NULL);
     INSERT INTO t0203_writes VALUES (0, 0);
     CREATE FUNCTION t0203_count() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
       IF TG_OP = 'DELETE' THEN UPDATE t0203_writes SET deleted = deleted + 1; RETURN OLD; END IF;
       UPDATE t0203_writes SET bytes = bytes + length(NEW.data); RETURN NEW; END \$\$;
     CREATE TRIGGER t0203_count AFTER INSERT OR UPDATE OR DELETE ON build_log_chunks
       FOR EACH ROW EXECUTE FUNCTION t0203_count();" >>"$log" 2>&1
is "$(sql 'SELECT bytes FROM t0203_writes')" 0 "a trigger counts the bytes written to build_log_chunks"

files=$(printf '{"path":"build.toml","content":"%s","encoding":"base64"}' "$(printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' | base64 -w0)")
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[$files]}"
is "$ST" 200 "acme/relu"
api "$W" POST /api/workers/register "{\"name\":\"w1\",\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V\"],\"torch\":\"2.11\",\"cxx11_abi\":true,\"python\":\"3.11\"}]}"

# claim_job: a new job claimed; its attempt line's size in P, the claim's
# log_cap in CAP_HEAD/CAP_TAIL; the counter set to 0
claim_job() {
	api "$ALICE" POST /api/kernels/acme/relu/builds "{\"revision\":\"main\",\"variants\":[\"$V\"],\"force\":true}"
	api "$W" POST /api/workers/claim "{\"variants\":[\"$V\"],\"wait_seconds\":0}"
	JOB=$(jq -r '.build.id' "$B") ATTEMPT=$(jq -r '.build.attempt' "$B")
	CAP_HEAD=$(jq -r '.build.log_cap.head' "$B") CAP_TAIL=$(jq -r '.build.log_cap.tail' "$B")
	curl -s -o "$TEST_DIR/prefix" "$KHUB_URL/api/builds/$JOB/log"
	P=$(stat -c %s "$TEST_DIR/prefix")
	sql "UPDATE t0203_writes SET bytes = 0, deleted = 0" >/dev/null
}
# make_log N: N bytes of output that do not compress, in $TEST_DIR/out.log
make_log() { head -c "$1" /dev/urandom | base64 -w 99 | head -c "$1" >"$TEST_DIR/out.log"; }
# post_chunks FROM TO: the log's bytes [FROM, TO) in 64 KiB chunks, a
# heartbeat after each; BAD counts answers not 200 with the length
post_chunks() {
	local at=$1 n
	while [ "$at" -lt "$2" ]; do
		n=$(($2 - at < 65536 ? $2 - at : 65536))
		tail -c +$((at + 1)) "$TEST_DIR/out.log" | head -c "$n" >"$TEST_DIR/chunk"
		[ "$(logpost "$at" "$TEST_DIR/chunk")" = "200/$((at + n))" ] || BAD=$((BAD + 1))
		at=$((at + n))
		beat
	done
}
# check_read SIZE WHAT: the whole log read is its first 8 KiB, one cut
# line, its last 8 KiB
check_read() {
	cat "$TEST_DIR/prefix" "$TEST_DIR/out.log" >"$TEST_DIR/whole.log"
	curl -s -D "$H" -o "$TEST_DIR/read" "$KHUB_URL/api/builds/$JOB/log"
	local cut=$((P + $1 - CAP))
	local line
	line=$(printf '[khub: %s cut from this log]' "$(awk -v n=$cut 'BEGIN { if (n >= 1e6) printf "%.1f MB", n / 1e6; else printf "%.1f kB", n / 1e3 }')")
	{ head -c "$HEAD" "$TEST_DIR/whole.log"; printf '\n%s\n' "$line"; tail -c "$TAIL" "$TEST_DIR/whole.log"; } >"$TEST_DIR/want"
	cmp -s "$TEST_DIR/read" "$TEST_DIR/want"
	ok $? "$2: the log read is its first 8 KiB, \"$line\", its last 8 KiB"
	is "$(hdr X-Log-Length)" "$((P + $1))" "$2: X-Log-Length counts every byte"
}

# ---- khub-worker's way: the head live, then the length as it grows, the tail at the end ----------
claim_job
is "$CAP_HEAD/$CAP_TAIL" "$((HEAD - P))/$TAIL" "the claim tells the worker its log's cap: the head left after khub's line, the tail"
SMALL=$((20 * CAP))
make_log "$SMALL"
BAD=0 HB_BAD=0
post_chunks 0 "$CAP_HEAD"
for k in 65536 131072 196608 262144 "$SMALL"; do
	printf '' >"$TEST_DIR/empty"
	[ "$(logpost "$k" "$TEST_DIR/empty")" = "200/$k" ] || BAD=$((BAD + 1))	# "N bytes so far"
	beat
done
is "$BAD/$HB_BAD" 0/0 "a worker sends its head and then only the length as it grows (heartbeats kept)"
curl -s -D "$H" -o "$TEST_DIR/live" "$KHUB_URL/api/builds/$JOB/log"
cmp -s "$TEST_DIR/live" <(cat "$TEST_DIR/prefix" "$TEST_DIR/out.log" | head -c "$HEAD")
ok $? "a live read while the tail is held shows the head"
is "$(hdr X-Log-Length) $(hdr X-Log-Next-Offset)" "$((P + SMALL)) $HEAD" "… with the length so far, and reads on where the head ends"
tail -c "$TAIL" "$TEST_DIR/out.log" >"$TEST_DIR/tail"
is "$(logpost $((SMALL - TAIL)) "$TEST_DIR/tail" 1)" "200/$SMALL" "at its end the worker sends the last 8 KiB with tail=1"
api "$W" POST "/api/builds/$JOB/fail" '{"error":"done","retry":false}'
is "$ST" 200 "the job ends"
WRITTEN_SMALL=$(sql 'SELECT bytes || $$/$$ || deleted FROM t0203_writes')
is "$WRITTEN_SMALL" "$((CAP - P))/0" "a $SMALL-byte log writes its head and tail only ($((CAP - P)) bytes), deletes nothing"
check_read "$SMALL" "20x the cap"

# ---- a hostile (or older) worker: every byte posted live, 100x the cap ------------------------------
claim_job
size_before=$(sql "SELECT pg_total_relation_size('build_log_chunks')")
BIG=$((100 * CAP))
make_log "$BIG"
BAD=0 HB_BAD=0
post_chunks 0 "$BIG"
is "$BAD/$HB_BAD" 0/0 "a worker posts $BIG bytes live in 64 KiB chunks (heartbeats kept): every one answered with the length"
is "$(sql 'SELECT bytes || $$/$$ || deleted FROM t0203_writes')" "$((HEAD - P))/0" "the bytes past the head are counted, not written"
tail -c "$TAIL" "$TEST_DIR/out.log" >"$TEST_DIR/tail"
is "$(logpost $((BIG - TAIL)) "$TEST_DIR/tail" 1)" "200/$BIG" "the tail at the end"
api "$W" POST "/api/builds/$JOB/fail" '{"error":"done","retry":false}'
WRITTEN_BIG=$(sql 'SELECT bytes || $$/$$ || deleted FROM t0203_writes')
is "$WRITTEN_BIG" "$WRITTEN_SMALL" "a log 5 times bigger writes the same bytes ($WRITTEN_BIG): bounded by the cap, not the log"
grown=$(( $(sql "SELECT pg_total_relation_size('build_log_chunks')") - size_before ))
[ "$grown" -lt $((BIG / 10)) ]
ok $? "build_log_chunks grew $grown bytes for a $BIG-byte log"
check_read "$BIG" "100x the cap"

# ---- a hostile worker flooding tail chunks -----------------------------------------------------------
claim_job
make_log $((40 * CAP))
BAD=0
post_chunks 0 "$CAP_HEAD"
at=$((20 * CAP)) codes=
for i in $(seq 1 12); do
	tail -c +$((at + 1)) "$TEST_DIR/out.log" | head -c 4096 >"$TEST_DIR/chunk"
	r=$(logpost "$at" "$TEST_DIR/chunk" 1)
	codes="$codes ${r%%/*}"
	at=$((at + 4096))
	beat
done
is "$codes" " 200 200 200 413 409 409 409 409 409 409 409 409" \
	"tail chunks: the tail's share and 4 KiB taken, then 413; later ones would leave a second gap: 409"
head -c 4096 "$TEST_DIR/out.log" >"$TEST_DIR/chunk"
is "$(logpost $((30 * CAP)) "$TEST_DIR/chunk" 1)" "409/$((20 * CAP + 3 * 4096))" "a second tail after a gap is refused (409)"
written=$(sql 'SELECT bytes FROM t0203_writes')
[ "$written" -le $((HEAD - P + TAIL + 4096)) ]
ok $? "written: $written bytes, at most the head, the tail and 4 KiB"
api "$W" POST "/api/builds/$JOB/fail" '{"error":"done","retry":false}'
done_testing
