#!/bin/bash
# t0229-mirror-run-fence.sh -- `khub mirror run` with log_format = json
# writes nothing but JSON lines (its pass summaries, the database's
# messages, its children's output); and fencing: two daemons share the
# mirror's database, the active one (A) holds the mirror-run lock on its
# database connection. When that connection is terminated
# (pg_terminate_backend), the lock is gone and the standby (B) takes it
# within 2 s: A must log that it lost the lock and stop pulling at once
# (no further request reaches the upstream from A while B pulls), then
# stand by; once B stops, A takes the lock again and pulls.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 git curl jq psql; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

hubs_setup
hub_init up
hub_init mirror
hub_spawn up
hub_spawn mirror
hub_wait up
hub_wait mirror
UP=$(hub_url up)

make_kernel_tree "$TEST_DIR/src" relu
hub up import "$TEST_DIR/src" --repo acme/relu --branch main >"$TEST_DIR/import.log" 2>&1
ok $? "upstream: acme/relu imported"

# A pulls through the proxy (its access log is A's upstream traffic); B directly.
proxy_start "$UP"
mirror_config() {	# mirror_config URL: a selection pulled every second
	printf '{"upstreams": [{"name": "up", "url": "%s"}], "selections": [{"name": "acme", "upstream": "up",
	  "type": "kernel", "repos": ["acme/relu"], "refs": ["main"], "interval": 1, "policy": "mirror"}]}\n' "$1"
}
mirror_config "$PROXY_URL" >"$TEST_DIR/a.json"
mirror_config "$UP" >"$TEST_DIR/b.json"
passes() { grep -c 'khub mirror: acme:' "$1"; }
wait_for() {	# wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 when it never did
	local end=$((SECONDS + $1)); shift
	until "$@"; do [ $SECONDS -lt "$end" ] || return 1; sleep 0.2; done
}
at_least() { [ "$(passes "$1")" -ge "$2" ]; }

# ---- A pulls, logging JSON --------------------------------------------------------------------------
A_LOG=$TEST_DIR/a.log
hub_bg mirror "$A_LOG" "$A_LOG" mirror run --mirror-config "$TEST_DIR/a.json" --log-format json
A=$BG_PID
wait_for 120 at_least "$A_LOG" 2
ok $? "A (khub mirror run) makes passes over the selection"
check "A mirrored acme/relu" -- curl -sf "$(hub_url mirror)/api/kernels/acme/relu"

# ---- B stands by ------------------------------------------------------------------------------------
B_LOG=$TEST_DIR/b.log
hub_bg mirror "$B_LOG" "$B_LOG" mirror run --mirror-config "$TEST_DIR/b.json"
B=$BG_PID
wait_for 60 grep -q 'standing by' "$B_LOG"
ok $? "B stands by while A holds the mirror-run lock"

# ---- A's lock-holding connection is terminated ------------------------------------------------------------
PSQL=(psql "host=$(hub_data mirror)/pg/run dbname=khub user=khub" -qAt)
HOLDER="select pid from pg_locks where locktype = 'advisory' and classid = 8 and objid = 4 and granted"
pid=$("${PSQL[@]}" -c "$HOLDER")
like "$pid" '^[0-9]+$' "the mirror-run lock (DB_LOCK_JOB, DB_JOB_MIRROR_RUN) is held by backend $pid"
"${PSQL[@]}" -c "select pg_terminate_backend($pid)" >/dev/null
wait_for 60 grep -q 'lost the mirror-run lock' "$A_LOG"
ok $? "A logs that it lost the mirror-run lock"
wait_for 60 grep -q 'this khub mirror run pulls now' "$B_LOG"
ok $? "B takes the lock"
wait_for 120 at_least "$B_LOG" 1
ok $? "B pulls"
a_requests=$(lines "$PROXY_LOG")
a_passes=$(passes "$A_LOG")
b_passes=$(passes "$B_LOG")
wait_for 120 at_least "$B_LOG" $((b_passes + 2))
ok $? "B goes on pulling (two more passes)"
is "$(lines "$PROXY_LOG")" "$a_requests" "A sent the upstream nothing while B pulled"
is "$(passes "$A_LOG")" "$a_passes" "A made no pass while B pulled"
lost_at=$(grep -n 'lost the mirror-run lock' "$A_LOG" | head -1 | cut -d: -f1)
is "$(tail -n +"$lost_at" "$A_LOG" | grep -c 'khub mirror: acme:')" 0 "no pass summary from A after the loss"
check "A stands by again" -- bash -c "tail -n +$lost_at '$A_LOG' | grep -q 'standing by'"
check "A is still running" -- kill -0 "$A"

# ---- B stops: A takes over again ---------------------------------------------------------------------------
kill -TERM "$B"
wait "$B" 2>/dev/null
wait_for 60 bash -c "[ \$(grep -c 'this khub mirror run pulls now' '$A_LOG') -ge 1 ]"
ok $? "once B stopped, A takes the lock again"
wait_for 120 at_least "$A_LOG" $((a_passes + 1))
ok $? "and pulls again"
kill -TERM "$A"
wait "$A" 2>/dev/null

# ---- every line A wrote is JSON -------------------------------------------------------------------------
total=$(wc -l <"$A_LOG")
bad=0
while IFS= read -r line; do
	printf '%s\n' "$line" | jq -e 'type == "object" and has("time") and has("level") and has("msg")' >/dev/null 2>&1 ||
		{ bad=$((bad + 1)); [ $bad -le 5 ] && diag "not JSON: ${line:0:160}"; }
done <"$A_LOG"
like "$total" '^[1-9][0-9]*$' "A wrote $total lines"
is "$bad" 0 "with log_format = json every line of khub mirror run's output is a JSON object (time, level, msg)"
done_testing
