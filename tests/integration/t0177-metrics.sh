#!/bin/bash
# t0177-metrics.sh -- /metrics as operations read it: request counters,
# bytes and latency histograms by route pattern move with requests (buckets
# cumulative, +Inf = _count = the route's requests); the database pool and
# work queues show their configured sizes; the LFS store's size follows
# objects other processes add (a background scan, not per scrape); the build
# queue's depth and oldest age follow queued jobs; mirror lag and air-gap
# imports follow their tables. Who may read it: a site admin's token of any
# scope; anonymous and dead tokens 401, other accounts 403 (metrics_public
# shows anonymous callers public repo counts only). Every metric the Grafana
# dashboard (deploy/grafana-khub.json) queries exists in a live scrape.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }
command -v psql >/dev/null 2>&1 || { echo "1..0 # SKIP psql not installed"; exit 0; }

khub_setup
log=$TEST_DIR/setup.log
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
khub import "$SRC" --repo acme/relu --branch main >>"$log" 2>&1
mkdir -p "$TEST_DIR/small"
printf '[general]\nname = "small"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["b.cpp"]\n' \
	>"$TEST_DIR/small/build.toml"
printf 'x = 1\n' >"$TEST_DIR/small/small.py"
khub import "$TEST_DIR/small" --repo acme/small --type kernel >>"$log" 2>&1
khub admin user create root --site-admin >>"$log" 2>&1
for u in bob mallory; do khub admin user create $u >>"$log" 2>&1; done
khub admin member set acme bob admin >>"$log" 2>&1
token() { khub admin token create "$1" --scope "$2" 2>>"$log" | tail -n 1; }
ROOT_READ=$(token root read)
DEAD=$(token root admin)
khub admin token revoke "$(khub admin token list root 2>>"$log" | grep -F "${DEAD:0:7}" | cut -f1)" >>"$log" 2>&1
BOB=$(token bob write)
BOB_READ=$(token bob read)
MALLORY=$(token mallory write)
like "$MALLORY" '^hf_' "site admin root (a read token, a revoked admin one), bob (acme admin), mallory (no org)"

khub_start --metrics-lfs-scan-s 1 --db-pool-size 7 --work-queue-max 33
M=$TEST_DIR/metrics
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
scrape() { curl -s -o "$M" -w '%{http_code}' -H "Authorization: Bearer $ROOT_READ" "$KHUB_URL/metrics"; }
# value SAMPLE: the value of the sample named exactly so (labels included), 0 when absent
value() { scrape >/dev/null; awk -v s="$1" 'index($0, s " ") == 1 { v = $2 } END { print v == "" ? 0 : v }' "$M"; }
# poll SAMPLE TEST: scrape until the value passes TEST (a python expression on v), 60 s at most
poll() {
	local v
	for _ in $(seq 1 120); do
		v=$(value "$1")
		/usr/bin/python3 -c "import sys; v = float(sys.argv[1]); sys.exit(0 if ($2) else 1)" "$v" && break
		sleep 0.5
	done
	echo "$v"
}

# ---- who may read it -------------------------------------------------------------------------
code() {	# code [TOKEN]: the status /metrics answers
	local auth=()
	[ -n "$1" ] && auth=(-H "Authorization: Bearer $1")
	curl -s -o /dev/null -w '%{http_code}' "${auth[@]}" "$KHUB_URL/metrics"
}
is "$(code "")" 401 "anonymous: 401"
is "$(code "$MALLORY")" 403 "a user in no org (write token): 403"
is "$(code "$BOB_READ")" 403 "an org admin's read-scoped token: 403 (site admins only)"
is "$(code "$DEAD")" 401 "a site admin's revoked token: 401"
is "$(scrape)" 200 "a site admin's read-scoped token: 200"
check "the answer is Prometheus text (HELP and TYPE lines)" -- grep -q '^# TYPE khub_http_requests_total counter' "$M"

# ---- requests by route ------------------------------------------------------------------------
ROUTE='/api/{type}/{ns}/{name}'
REQ="khub_http_requests_total{route=\"$ROUTE\",status=\"200\"}"
BYTES="khub_http_response_bytes_total{route=\"$ROUTE\"}"
COUNT="khub_http_request_duration_seconds_count{route=\"$ROUTE\"}"
R0=$(value "$REQ")
B0=$(value "$BYTES")
body=0
for _ in 1 2 3; do
	n=$(curl -s -o "$TEST_DIR/info" -w '%{size_download}' -H "Authorization: Bearer $BOB" "$KHUB_URL/api/kernels/acme/relu")
	body=$((body + n))
done
is "$(poll "$REQ" "v >= $R0 + 3")" $((R0 + 3)) "three reads of acme/relu: $REQ moved by 3"
is "$(value "$BYTES")" $((B0 + body)) "…and the route's bytes by the $body bytes the client got"
NF0=$(value 'khub_http_requests_total{route="unmatched",status="404"}')
curl -s -o /dev/null "$KHUB_URL/no/such/endpoint"
is "$(poll 'khub_http_requests_total{route="unmatched",status="404"}' "v >= $NF0 + 1")" $((NF0 + 1)) \
	"a path no route matches counts under route=\"unmatched\", status 404"
P0=$(value "khub_http_requests_total{route=\"$ROUTE\",status=\"404\"}")
curl -s -o /dev/null -H "Authorization: Bearer $BOB" "$KHUB_URL/api/kernels/acme/missing"
is "$(poll "khub_http_requests_total{route=\"$ROUTE\",status=\"404\"}" "v >= $P0 + 1")" $((P0 + 1)) \
	"a missing repo counts under the route's pattern with status 404 (not its path)"
check "no path appears as a route label" -- bash -c "! grep -q 'acme/relu\"\\|/no/such' '$M'"

# histograms: per route, buckets cumulative (le ascending), +Inf = _count, _count = the route's requests
scrape >/dev/null
/usr/bin/python3 - "$M" >"$TEST_DIR/hist" 2>&1 <<'PY'
import re, sys
buckets, counts, sums, requests = {}, {}, {}, {}
sample = re.compile(r'^(\w+)\{(.*)\} (\S+)$')
for line in open(sys.argv[1]):
    m = sample.match(line.strip())
    if not m:
        continue
    name, labels, v = m.group(1), dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2))), float(m.group(3))
    r = labels.get('route')
    if name == 'khub_http_request_duration_seconds_bucket':
        le = float('inf') if labels['le'] == '+Inf' else float(labels['le'])
        buckets.setdefault(r, []).append((le, v))
    elif name == 'khub_http_request_duration_seconds_count':
        counts[r] = v
    elif name == 'khub_http_request_duration_seconds_sum':
        sums[r] = v
    elif name == 'khub_http_requests_total':
        requests[r] = requests.get(r, 0) + v
bad = []
for r, b in buckets.items():
    les = [le for le, _ in b]
    vals = [v for _, v in b]
    if les != sorted(les) or les[-1] != float('inf'):
        bad.append('%s: le not ascending to +Inf' % r)
    if any(x > y for x, y in zip(vals, vals[1:])):
        bad.append('%s: buckets not cumulative %s' % (r, vals))
    if vals[-1] != counts.get(r):
        bad.append('%s: +Inf %s != _count %s' % (r, vals[-1], counts.get(r)))
    if r not in sums:
        bad.append('%s: no _sum' % r)
print('routes %d bad %d' % (len(buckets), len(bad)))
for x in bad:
    print(x)
print('count %s requests %s' % (counts.get('/api/{type}/{ns}/{name}'), requests.get('/api/{type}/{ns}/{name}')))
PY
like "$(head -1 "$TEST_DIR/hist")" '^routes [3-9][0-9]* bad 0$' "every route's histogram: le ascending to +Inf, cumulative, +Inf = _count, a _sum"
sed -n '2,6p' "$TEST_DIR/hist" | grep -v '^count' | sed 's/^/# /'
like "$(tail -1 "$TEST_DIR/hist")" '^count ([0-9]+)\.0 requests \1\.0$' "$ROUTE: _count = its requests over every status"

# ---- pools and queues ---------------------------------------------------------------------------
is "$(value khub_db_pool_size)" 7 "khub_db_pool_size = db_pool_size"
like "$(value khub_db_pool_open)" '^[1-7]$' "khub_db_pool_open: 1 to 7 connections open"
is "$(value 'khub_work_queue_max{pool="work"}')" 33 "khub_work_queue_max{pool=\"work\"} = work_queue_max"
is "$(value 'khub_work_queue_depth{pool="work"}')" 0 "khub_work_queue_depth{pool=\"work\"}: nothing queued when idle"

# ---- LFS store --------------------------------------------------------------------------------
store_bytes() { find "$KHUB_DATA_DIR/lfs/objects" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
S0=$(store_bytes)
is "$(poll khub_lfs_store_bytes "v == $S0")" "$S0" "khub_lfs_store_bytes = the store's objects ($S0 bytes)"
make_kernel_tree "$TEST_DIR/src2" gelu
khub import "$TEST_DIR/src2" --repo acme/gelu --branch main >>"$log" 2>&1
S1=$(store_bytes)
ok $((S1 > S0 ? 0 : 1)) "another process (khub import) adds LFS objects ($S0 -> $S1 bytes)"
is "$(poll khub_lfs_store_bytes "v == $S1")" "$S1" "…and a later scan counts them"
is "$(value khub_lfs_store_objects)" "$(find "$KHUB_DATA_DIR/lfs/objects" -type f | wc -l)" "khub_lfs_store_objects = the files in the store"

# ---- build queue ----------------------------------------------------------------------------------
is "$(value khub_build_queue_depth)" 0 "no build queued yet"
V1=torch211-cxx11-cpu-x86_64-linux V2=torch210-cxx11-cpu-x86_64-linux
ST=$(curl -s -o "$TEST_DIR/enq" -w '%{http_code}' -H "Authorization: Bearer $BOB" -H 'Content-Type: application/json' \
	--data-binary "{\"revision\":\"main\",\"variants\":[\"$V1\",\"$V2\"]}" "$KHUB_URL/api/kernels/acme/small/builds")
is "$ST" 202 "two builds of acme/small queued"
is "$(value khub_build_queue_depth)" "$(sql "SELECT count(*) FROM builds WHERE state = 'queued'")" \
	"khub_build_queue_depth = the queued jobs"
is "$(value khub_build_queue_depth)" 2 "…which are 2"
sql "UPDATE builds SET created_at = now() - interval '1 hour' WHERE id = (SELECT min(id) FROM builds)" >/dev/null
AGE=$(value khub_build_queue_oldest_age_seconds)
ok "$(/usr/bin/python3 -c "import sys; sys.exit(0 if 3600 <= float(sys.argv[1]) < 3600 + 600 else 1)" "$AGE"; echo $?)" \
	"khub_build_queue_oldest_age_seconds: the oldest queued job's age ($AGE s)"

# ---- mirror lag and air-gap imports (as their tables say) ------------------------------------------
is "$(value khub_mirror_lag_max_seconds)" 0 "no mirrored repo: khub_mirror_lag_max_seconds 0"
sql "INSERT INTO mirror_repos (repo_id, selection, upstream_name, upstream_url, upstream_repo, last_success)
     SELECT id, 'sel', 'up', 'http://up.invalid', 'acme/relu', now() - interval '100 seconds'
     FROM repos WHERE name = 'relu'" >/dev/null
LAG=$(value 'khub_mirror_lag_seconds{repo="acme/relu",selection="sel"}')
ok "$(/usr/bin/python3 -c "import sys; sys.exit(0 if 100 <= float(sys.argv[1]) < 700 else 1)" "$LAG"; echo $?)" \
	"khub_mirror_lag_seconds of a repo pulled 100 s ago: $LAG"
ok "$(/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 100 else 1)" "$(value khub_mirror_lag_max_seconds)"; echo $?)" \
	"khub_mirror_lag_max_seconds covers it"
is "$(value khub_sync_imports_total)" 0 "no air-gap import yet"
sql "INSERT INTO sync_imports (exporter, sequence, bundle, key_id, hub, operator, state, finished_at)
     VALUES (gen_random_uuid(), 1, gen_random_uuid(), 'k', 'h', 'o', 'done', to_timestamp(1700000000))" >/dev/null
is "$(value khub_sync_imports_total)" 1 "an import done: khub_sync_imports_total 1"
is "$(value khub_sync_import_last_timestamp_seconds)" 1700000000 "khub_sync_import_last_timestamp_seconds = when it finished"

# ---- the dashboard's metrics exist --------------------------------------------------------------
scrape >/dev/null
/usr/bin/python3 - "$KHUB_SRC/deploy/grafana-khub.json" "$M" >"$TEST_DIR/dash" 2>&1 <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
exprs = [t['expr'] for p in dash['panels'] for t in p.get('targets', [])]
used = set(n for e in exprs for n in re.findall(r'\bkhub_[a-z0-9_]+', e))
have = set()
for line in open(sys.argv[2]):
    if line.startswith('# TYPE '):
        have.add(line.split()[2])
    elif line.startswith('khub_'):
        have.add(re.match(r'khub_[a-z0-9_]+', line).group(0))
missing = sorted(used - have)
print('panels %d names %d missing %s' % (len(dash['panels']), len(used), ' '.join(missing) or '-'))
assert any(v.get('type') == 'datasource' for v in dash['templating']['list']), 'no datasource variable'
PY
like "$(cat "$TEST_DIR/dash")" '^panels [0-9]+ names [0-9]+ missing -$' \
	"every metric deploy/grafana-khub.json queries is in a live scrape; it has a datasource variable"

# ---- metrics_public: public repo counts, nothing else -------------------------------------------
khub_stop
khub_start --metrics-public 1
curl -s -o "$M" "$KHUB_URL/metrics"
check "metrics_public = 1: anonymous callers get no request, pool, queue or store figures" -- \
	bash -c "! grep -q 'khub_http_\\|khub_db_pool\\|khub_build_queue\\|khub_lfs_store\\|khub_mirror_lag' '$M'"
is "$(code "$DEAD")" 401 "…and a dead token is still 401"
done_testing
