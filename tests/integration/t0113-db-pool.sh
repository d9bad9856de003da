#!/bin/bash
# t0113-db-pool.sh -- the server's database connections are a bounded pool
# (db_pool_size): with a pool of 2, many concurrent requests (token lookups,
# repo reads, listings, commits that hold a repo's write lock and so keep
# their connection) all answer, 200 or 503 with Retry-After, never a hang
# or a 401; PostgreSQL never sees more than 2 connections from khub; once the
# storm is over every connection is back in the pool (a commit and reads
# succeed again).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v psql >/dev/null 2>&1 || { echo "1..0 # SKIP psql not installed"; exit 0; }
command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }
LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")/lib" && pwd)

khub_setup
log=$TEST_DIR/setup.log
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
khub import "$SRC" --repo acme/relu --branch main >>"$log" 2>&1
khub admin user create bob >>"$log" 2>&1
khub admin member set acme bob write >>"$log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
# (the build farm's lease timer and the job scheduler, which also take a
# pooled connection, run their first round only after their interval: a
# long one here)
KHUB_BUILD_LEASE_CHECK_MS=600000 KHUB_JOBS_POLL_MS=600000 KHUB_THREADS=16 KHUB_DB_POOL_SIZE=2 KHUB_DB_POOL_WAIT_MS=2000 khub_start
PSQL=(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt)
# khub's pooled connections to its database (not this psql session, nor the
# one coordination session outside the pool: LISTEN and job locks)
count_sql="select count(*) from pg_stat_activity where datname = 'khub' and backend_type = 'client backend'
	and pid <> pg_backend_pid() and application_name <> 'khub-coordination'"
is "$("${PSQL[@]}" -c "$count_sql")" 1 "at start: one connection (pool of 2, only one needed yet)"

# Sample the connection count every 20 ms while the storm runs.
( while [ ! -e "$TEST_DIR/stop" ]; do "${PSQL[@]}" -c "$count_sql"; sleep 0.02; done ) >"$TEST_DIR/counts" 2>/dev/null &
SAMPLER=$!

# One request: "<status> <retry-after>" on a line of its own file.
cat >"$TEST_DIR/one.sh" <<SH
#!/bin/bash
i=\$1
case \$((i % 5)) in
0) args=(-H "Authorization: Bearer $BOB" "$KHUB_URL/api/whoami-v2") ;;
1) args=(-H "Authorization: Bearer $BOB" "$KHUB_URL/api/kernels/acme/relu") ;;
2) args=("$KHUB_URL/api/kernels?limit=5") ;;
3) args=(-H "Authorization: Bearer $BOB" "$KHUB_URL/api/kernels/acme/relu/tree/main") ;;
4) args=(-H "Authorization: Bearer $BOB" -H "Content-Type: application/x-ndjson" --data-binary @"$TEST_DIR/c\$((i % 4)).ndjson"
	"$KHUB_URL/api/kernels/acme/relu/commit/main") ;;
esac
out=\$(curl -s --max-time 30 -D "$TEST_DIR/h\$i" -o /dev/null -w '%{http_code}' "\${args[@]}")
ra=\$(grep -i '^retry-after:' "$TEST_DIR/h\$i" | tr -d '\r' | cut -d' ' -f2)
echo "\$((i % 5)) \$out \${ra:--}" >"$TEST_DIR/r\$i"
SH
chmod +x "$TEST_DIR/one.sh"
for c in 0 1 2 3; do
	echo "pool $c" >"$TEST_DIR/p$c.txt"
	/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "pool $c" --file "pool/p$c.txt=$TEST_DIR/p$c.txt" \
		>"$TEST_DIR/c$c.ndjson"
done
N=300
storm() {	# storm TAG: N requests, 48 at a time; results in $TEST_DIR/results.TAG
	rm -f "$TEST_DIR"/r[0-9]*
	seq 1 $N | xargs -P 48 -n 1 "$TEST_DIR/one.sh"
	cat "$TEST_DIR"/r[0-9]* >"$TEST_DIR/results.$1"
	local res=$TEST_DIR/results.$1
	is "$(wc -l <"$res")" $N "$1: every one of $N concurrent requests answered"
	bad=$(awk '!(($2 == 200) || ($2 == 503 && $3 != "-"))' "$res" | sort | uniq -c)
	is "$bad" "" "$1: each is 200, or 503 with Retry-After (no 401, no hang, no 500)"
	ok200=$(awk '$2 == 200' "$res" | wc -l)
	n503=$(awk '$2 == 503' "$res" | wc -l)
	ok "$([ "$ok200" -gt 0 ] && echo 0 || echo 1)" "$1: some succeed ($ok200 of $N 200, $n503 503)"
	diag "by kind (0 whoami, 1 info, 2 list, 3 tree, 4 commit): $(awk '{print $1 ":" $2}' "$res" | sort | uniq -c | tr '\n' ' ')"
}
storm "pool of 2"
touch "$TEST_DIR/stop"
wait "$SAMPLER" 2>/dev/null
max=$(sort -n "$TEST_DIR/counts" | tail -1)
ok "$([ -n "$max" ] && [ "$max" -le 2 ] && echo 0 || echo 1)" \
	"PostgreSQL never saw more than 2 khub connections ($(wc -l <"$TEST_DIR/counts") samples, at most $max)"
grep -c 'every database connection is in use' "$TEST_DIR/server.log" | sed 's/^/# pool exhausted, logged: /'

# Every connection went back: a commit (which holds the repo lock) and
# reads succeed.
/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "after" --file "pool/after.txt=$TEST_DIR/p0.txt" >"$TEST_DIR/after.ndjson"
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $BOB" -H "Content-Type: application/x-ndjson" \
	--data-binary @"$TEST_DIR/after.ndjson" "$KHUB_URL/api/kernels/acme/relu/commit/main")" 200 "a commit after the storm"
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $BOB" "$KHUB_URL/api/whoami-v2")" 200 \
	"whoami after the storm"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/health")" 200 "health after the storm"
n=$("${PSQL[@]}" -c "$count_sql")
ok "$([ "$n" -le 2 ] && echo 0 || echo 1)" "still at most 2 connections ($n)"
# No advisory lock is left behind by a returned connection.
is "$("${PSQL[@]}" -c "select count(*) from pg_locks where locktype = 'advisory'")" 0 "no advisory lock left held"

# A pool of 1 and no waiting: requests that find it taken answer 503 with
# Retry-After at once (a token lookup among them: never 401).
khub_stop
KHUB_THREADS=16 KHUB_DB_POOL_SIZE=1 KHUB_DB_POOL_WAIT_MS=0 khub_start
storm "pool of 1, no wait"
ok "$([ "$n503" -gt 0 ] && echo 0 || echo 1)" "pool of 1, no wait: some find every connection taken ($n503 503)"
is "$("${PSQL[@]}" -c "$count_sql")" 1 "pool of 1: one connection"
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $BOB" "$KHUB_URL/api/whoami-v2")" 200 \
	"whoami after the second storm"
done_testing
