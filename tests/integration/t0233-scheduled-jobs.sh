#!/bin/bash
# t0233-scheduled-jobs.sh -- the periodic jobs of khub serve run from one
# place across nodes. Two nodes on one PostgreSQL with schedules of
# seconds: gc, repack, scrub and backup each run, and no run of a job ever
# starts before its interval has passed since the previous run ended (on
# either node), so one node runs each round; both nodes' /metrics show the
# same last success of each job; scheduled backups rotate to backup_keep
# generations; khub backup --verify passes on a generation and fails,
# naming the file, on a tampered or a missing file; khub jobs run NAME runs
# one now; a node SIGKILLed in the middle of a (slow) scrub pass does not
# block the next round: the other node takes the job's lock and runs it,
# and the dead node's run is recorded as abandoned.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

for tool in curl git jq psql; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
NODE_PIDS=() NODE_PORTS=()
stop_nodes() {
	for p in "${NODE_PIDS[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	NODE_PIDS=()
	return 0
}
trap "stop_nodes; khub_teardown" EXIT	# KEEP_TEST_DIR=1 keeps the test's files
start_node() {	# start_node INDEX
	local port
	port=$(free_port)
	KHUB_LISTEN=127.0.0.1:$port "$KHUB_BIN" serve >>"$TEST_DIR/node$1.log" 2>&1 &
	NODE_PIDS[$1]=$!
	NODE_PORTS[$1]=$port
	for _ in $(seq 1 300); do	# polled through http_request: no curl per poll
		http_request GET "http://127.0.0.1:$port/api/health" /dev/null /dev/null -
		[[ "$HTTP_STATUS" == [23]?? ]] && return 0	# curl -f: answered, below 400
		sleep 0.1
	done
	bail "node $1 did not start"
}
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>>"$TEST_DIR/psql.err"; }
metric() {	# metric NODE NAME JOB
	curl -s -H "Authorization: Bearer $ROOT" "http://127.0.0.1:${NODE_PORTS[$1]}/metrics" | awk -v m="$2{job=\"$3\"}" '$1 == m { print $2 }'
}
successes() { khub jobs --json 2>/dev/null | jq -r --arg j "$1" '.[] | select(.name == $j) | .successes'; }
wait_successes() {	# wait_successes JOB N SECONDS (once a second: each look starts a khub and a jq)
	for _ in $(seq 1 "$3"); do
		[ "$(successes "$1")" -ge "$2" ] 2>/dev/null && return 0
		sleep 1
	done
	return 1
}

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
head -c 4500000 /dev/urandom >"$SRC/build/torch-cpu/weights.bin"	# 4.3 MiB: a slow scrub at 1 MiB/s
khub import "$SRC" --repo acme/relu --branch main >>"$TEST_DIR/setup.log" 2>&1 || bail "import failed"
khub admin user create root --site-admin >>"$TEST_DIR/setup.log" 2>&1
ROOT=$(khub admin token create root --scope read 2>>"$TEST_DIR/setup.log" | tail -n 1)	# /metrics in full

# ---- two nodes, short schedules ---------------------------------------------------------------
BK=$TEST_DIR/backups
export KHUB_SCHEDULE_GC=3s KHUB_SCHEDULE_REPACK=3s KHUB_SCHEDULE_SCRUB=3s KHUB_SCRUB_MB_PER_S=1000
export KHUB_SCHEDULE_BACKUP=5s KHUB_BACKUP_DIR=$BK KHUB_BACKUP_KEEP=2
start_node 1
start_node 2
ok 0 "two nodes serve on ports ${NODE_PORTS[1]} and ${NODE_PORTS[2]}"
# Reads through node 1 all along, while repack rewrites the repo's packs every round.
(HTTPC_PID=	# the reader's own client process (http_request), not the test's
i=0; while [ ! -e "$TEST_DIR/stop-reading" ]; do
	i=$((i + 1))
	http_request GET "http://127.0.0.1:${NODE_PORTS[1]}/kernels/acme/relu/resolve/main/README.md?r=$i" /dev/null /dev/null -
	echo "$HTTP_STATUS"
	http_request GET "http://127.0.0.1:${NODE_PORTS[1]}/api/kernels/acme/relu/tree/main?r=$i" /dev/null /dev/null -
	echo "$HTTP_STATUS"
	sleep 0.05
done >"$TEST_DIR/reads"; kill "$HTTPC_PID") &
READER=$!
wait_successes backup 4 300
ok $? "four scheduled backups succeeded"
for j in gc repack scrub; do
	wait_successes $j 3 120
	ok $? "$j ran at least three times"
done
is "$(khub jobs --json | jq -r '[.[] | select(.failures > 0) | .name] | join(",")')" "" "no job failed"
touch "$TEST_DIR/stop-reading"; wait $READER
is "$(sort "$TEST_DIR/reads" | uniq -c | awk '{ printf "%s ", $2 }')" "200 " \
	"$(wc -l <"$TEST_DIR/reads") reads during the repacks: every one 200"
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
is "$(git --git-dir="$GITDIR" count-objects -v | awk '$1 == "packs:" || $1 == "count:" { printf "%s%s ", $1, $2 }')" \
	"count:0 packs:1 " "repack left one pack and no loose object"
check "git fsck of the repacked repo is clean" -- git -c safe.directory='*' --git-dir="$GITDIR" fsck --no-progress

# One run per round: no run of a job starts before its interval has passed
# since the previous run ended, whichever node ran either.
declare -A IVL=([gc]=3 [repack]=3 [scrub]=3 [backup]=5)
for j in gc repack scrub backup; do
	EARLY=$(sql "SELECT count(*) FROM (SELECT started_at - lag(finished_at) OVER (ORDER BY id) AS gap
		FROM scheduled_job_runs WHERE job = '$j') g WHERE gap < interval '${IVL[$j]} seconds'")
	is "$EARLY" 0 "$j: no run began within its interval of the previous one's end (an overlap or a second run per round)"
done
is "$(sql "SELECT count(DISTINCT node) > 0 AND bool_and(ok) FROM scheduled_job_runs WHERE finished_at IS NOT NULL")" t \
	"every finished run is recorded ok with its node"
diag "runs per node: $(sql "SELECT string_agg(job || '@' || split_part(node, ' ', 2) || '=' || n, ' ') FROM
	(SELECT job, node, count(*) n FROM scheduled_job_runs GROUP BY 1, 2 ORDER BY 1, 2) x" | tr '\n' ' ')"

# ---- the same state on both nodes' /metrics ---------------------------------------------------
for j in gc repack scrub backup; do
	M1=$(metric 1 khub_job_last_success_timestamp_seconds $j)
	M2=$(metric 2 khub_job_last_success_timestamp_seconds $j)
	DB=$(sql "SELECT extract(epoch FROM last_success_at)::bigint FROM scheduled_jobs WHERE name = '$j'")
	ok "$(awk -v a="$M1" -v b="$M2" -v d="$DB" 'BEGIN { exit !(a >= d - 60 && b >= a && a > 0) }'; echo $?)" \
		"$j: both nodes report its last success ($M1, $M2; database $DB)"
done
like "$(metric 1 khub_job_last_duration_seconds backup)" '^[0-9.]+$' "khub_job_last_duration_seconds{job=backup} on node 1"
is "$(metric 2 khub_job_failures_total gc)" "0.000" "khub_job_failures_total{job=gc} on node 2: 0"

# ---- backup generations ----------------------------------------------------------------------
stop_nodes
export KHUB_SCHEDULE_GC=0	# for khub jobs run below: nothing else runs gc meanwhile
GENS=$(find "$BK" -mindepth 1 -maxdepth 1 -type d | sort)
is "$(echo "$GENS" | grep -c .)" 2 "backup_keep = 2: two generations left of $(successes backup) backups"
is "$(for g in $GENS; do [ -f "$g/manifest.json" ] && echo y; done | grep -c y)" 2 "both complete (a manifest each)"
NEWEST=$(echo "$GENS" | tail -n 1) OLDER=$(echo "$GENS" | head -n 1)
khub backup --verify "$NEWEST" >"$TEST_DIR/verify.out" 2>&1
ok $? "khub backup --verify passes on the newest generation" || sed 's/^/# /' "$TEST_DIR/verify.out"
PACKED=$(find "$OLDER/repos" -name packed-refs | head -n 1)
REL=${PACKED#"$OLDER/"}
printf 'x' | dd of="$PACKED" bs=1 seek=0 conv=notrunc status=none
khub backup --verify "$OLDER" >"$TEST_DIR/verify-bad.out" 2>&1
RC=$?
ok "$([ $RC -ne 0 ]; echo $?)" "khub backup --verify fails on a tampered file (exit $RC)"
like "$(grep -F "$REL" "$TEST_DIR/verify-bad.out")" "sha256" "and names it: $REL"
OBJ=$(find "$OLDER/lfs/objects" -type f | head -n 1)
printf 'x' | dd of="$OBJ" bs=1 seek=1000 conv=notrunc status=none
khub backup --verify "$OLDER" >"$TEST_DIR/verify-bad2.out" 2>&1
like "$(grep -F "${OBJ#"$OLDER/"}" "$TEST_DIR/verify-bad2.out")" "sha256" "a flipped byte in an LFS object is named too"
rm -f "$NEWEST/secret" "$NEWEST/db.dump"
khub backup --verify "$NEWEST" >"$TEST_DIR/verify-missing.out" 2>&1
ok "$([ $? -ne 0 ]; echo $?)" "khub backup --verify fails when files are missing"
like "$(grep -c -E '(db\.dump|secret): missing' "$TEST_DIR/verify-missing.out")" '^2$' "and names both"

# ---- khub jobs run NAME -----------------------------------------------------------------------
export KHUB_SCHEDULE_REPACK=0 KHUB_SCHEDULE_BACKUP=0 KHUB_SCHEDULE_SCRUB=0
start_node 1
BEFORE=$(successes gc)
timeout 300 "$KHUB_BIN" jobs run gc >"$TEST_DIR/run.out" 2>&1
RC=$?
ok $RC "khub jobs run gc (schedule_gc = 0) runs it now" || { diag "exit $RC, before $BEFORE"; sed 's/^/# /' "$TEST_DIR/run.out"; khub jobs | sed 's/^/# /'; }
is "$(successes gc)" $((BEFORE + 1)) "one more gc run recorded"
like "$(khub jobs)" 'gc +off' "khub jobs shows the schedule table"
KHUB_SCHEDULE_GC=3x khub jobs >/dev/null 2>"$TEST_DIR/bad.err"
ok "$([ $? -ne 0 ]; echo $?)" "schedule_gc = 3x is refused"
like "$(cat "$TEST_DIR/bad.err")" "schedule_gc must be 0 \\(off\\) or an interval" "with the key named"
stop_nodes

# ---- a node killed mid-run ---------------------------------------------------------------------
export KHUB_SCHEDULE_GC=0 KHUB_SCHEDULE_REPACK=0 KHUB_SCHEDULE_BACKUP=0 KHUB_SCRUB_MB_PER_S=1 KHUB_SCHEDULE_SCRUB=2s
DONE=$(successes scrub)
start_node 1
start_node 2
RUNNING=
for _ in $(seq 1 300); do
	RUNNING=$(sql "SELECT id || ' ' || split_part(node, ' ', 2) FROM scheduled_job_runs
		WHERE job = 'scrub' AND finished_at IS NULL")
	[ -n "$RUNNING" ] && break
	sleep 0.1
done
read -r RUN_ID RUN_ADDR <<<"$RUNNING"
VICTIM=1 OTHER=2
[ "$RUN_ADDR" = "127.0.0.1:${NODE_PORTS[2]}" ] && VICTIM=2 OTHER=1
like "$RUN_ADDR" "^127.0.0.1:(${NODE_PORTS[1]}|${NODE_PORTS[2]})$" "a scrub pass is under way on node $VICTIM"
kill -KILL "${NODE_PIDS[$VICTIM]}"; wait "${NODE_PIDS[$VICTIM]}" 2>/dev/null
NODE_PIDS[$VICTIM]=
wait_successes scrub $((DONE + 1)) 120
ok $? "the next round ran on the surviving node (the dead node's session lock went with it)"
is "$(sql "SELECT split_part(node, ' ', 2) FROM scheduled_job_runs WHERE job = 'scrub' AND ok ORDER BY id DESC LIMIT 1")" \
	"127.0.0.1:${NODE_PORTS[$OTHER]}" "node $OTHER ran it"
is "$(sql "SELECT ok, detail FROM scheduled_job_runs WHERE id = $RUN_ID")" "f|abandoned: its node stopped mid-run" \
	"the killed node's run is recorded as abandoned"
like "$(metric $OTHER khub_job_failures_total scrub)" '^1(\.0+)?$' "and counted in khub_job_failures_total{job=scrub}"
stop_nodes

done_testing
