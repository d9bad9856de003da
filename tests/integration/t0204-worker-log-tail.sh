#!/bin/bash
# t0204-worker-log-tail.sh -- the real khub-worker under a small log cap
# (build_log_max_kb, docs/build-farm.md): a build printing some 40 times
# the cap sends its head as it comes, holds the rest and sends only the
# last bytes (tail=1) when it ends, so build_log_chunks gets the head and
# the tail and nothing else (no row deleted), and the log read is head +
# one cut line + a tail that ends with the worker's last line.
#
# The source is examples/relu with a binding that fails to compile with
# thousands of #error lines; the toolchain Debian's python3-torch
# (KHUB_TEST_TOOLCHAINS: another toolchains.json).
. "$(dirname "$0")/../lib/khub-test.sh"

command -v psql >/dev/null 2>&1 || { echo "1..0 # SKIP psql not installed"; exit 0; }
. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs	# $WORKER_BIN
KSRC=$KHUB_SRC/examples/relu
[ -f "$KSRC/build.toml" ] || { echo "1..0 # SKIP no kernel source with build.toml at $KSRC"; exit 0; }

khub_setup
export KHUB_BUILD_LOG_MAX_KB=16	# 8 KiB of head, 8 KiB of tail
CAP=16384 HEAD=8192 TAIL=8192
W=$TEST_DIR/worker
mkdir -p "$W/work"
if [ -n "${KHUB_TEST_TOOLCHAINS:-}" ]; then
	cp "$KHUB_TEST_TOOLCHAINS" "$W/toolchains.json"
else
	worker_toolchain "$W/toolchains.json" ', "cmake": "cmake", "ninja": "ninja", "env": {}'
fi
worker_check "$W/toolchains.json"	# $VARIANT, or a skip
[ -n "$VARIANT" ] || { echo "1..0 # SKIP no CPU variant in the toolchain"; exit 0; }

khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
khub admin worker add w1 2>/dev/null | tail -n 1 >"$W/w1.token"
chmod 600 "$W/w1.token"
# the kernel, its binding made to fail with a flood of compiler errors
cp -r "$KSRC" "$TEST_DIR/src"
rm -rf "$TEST_DIR/src/build"
{ for i in $(seq 1 3000); do printf '#error "error %04d: this build prints far more than its log keeps"\n' "$i"; done
  cat "$KSRC/torch-ext/torch_binding.cpp"; } >"$TEST_DIR/src/torch-ext/torch_binding.cpp"
khub import "$TEST_DIR/src" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt -c "$1"; }
# every byte written to build_log_chunks and every row deleted, counted by a trigger
sql "CREATE TABLE t0204_writes (bytes bigint NOT NULL, deleted bigint NOT NULL);
     INSERT INTO t0204_writes VALUES (0, 0);
     CREATE FUNCTION t0204_count() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
       IF TG_OP = 'DELETE' THEN UPDATE t0204_writes SET deleted = deleted + 1; RETURN OLD; END IF;
       UPDATE t0204_writes SET bytes = bytes + length(NEW.data); RETURN NEW; END \$\$;
     CREATE TRIGGER t0204_count AFTER INSERT OR UPDATE OR DELETE ON build_log_chunks
       FOR EACH ROW EXECUTE FUNCTION t0204_count();" >/dev/null 2>&1
is "$(sql 'SELECT bytes FROM t0204_writes')" 0 "a trigger counts the bytes written to build_log_chunks"

curl -s -o "$B" -X POST -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	-d "{\"revision\": \"main\", \"variants\": [\"$VARIANT\"], \"force\": true}" "$KHUB_URL/api/kernels/acme/relu/builds"
ID=$(jq -r '.builds[0].id' "$B")
like "$ID" '^[0-9]+$' "build #$ID of $VARIANT queued"
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work" --once 2>>"$W/w1.log"
is "$?" 0 "khub-worker --once ran the build"
curl -s -o "$B" "$KHUB_URL/api/builds/$ID"
is "$(jq -r .state "$B")" failed "the build failed (its compile errors)"
curl -s -D "$H" -o "$TEST_DIR/read" "$KHUB_URL/api/builds/$ID/log"
LEN=$(grep -i '^x-log-length:' "$H" | tr -d '\r' | cut -d' ' -f2)
[ "$LEN" -gt $((20 * CAP)) ]
ok $? "the build printed $LEN bytes, over 20 times the cap"
written=$(sql 'SELECT bytes || $$/$$ || deleted FROM t0204_writes')
is "$written" "$CAP/0" "build_log_chunks got $CAP bytes (khub's line, the head, the tail), none deleted"
is "$(sql "SELECT sum(length(data)) FROM build_log_chunks WHERE build_id = $ID")" "$CAP" "and holds them"
head -c "$HEAD" "$TEST_DIR/read" | head -1 | grep -q '^\[khub\] attempt 1 of [0-9]* on worker w1$'
ok $? "the log starts with khub's attempt line"
is "$(grep -c '^\[khub: .* cut from this log\]$' "$TEST_DIR/read")" 1 "one cut line"
cut_at=$(grep -b '^\[khub: .* cut from this log\]$' "$TEST_DIR/read" | cut -d: -f1)
is "$cut_at" $((HEAD + 1)) "after the 8 KiB head (and its newline)"
line=$(grep '^\[khub: .* cut from this log\]$' "$TEST_DIR/read")
is "$(($(stat -c %s "$TEST_DIR/read") - HEAD - ${#line} - 2))" "$TAIL" "then the 8 KiB tail"
like "$(tail -n 1 "$TEST_DIR/read")" '^\[khub-worker\] build failed' "which ends with the worker's last line"
done_testing
