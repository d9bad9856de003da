#!/bin/bash
# t0136-build-farm-background.sh -- the build farm keeps slow work off the
# request threads and keeps its own state true: (1) a job's source tar is
# made on the work queue, once per repo and commit however many workers ask
# at the same time (counted by /metrics), while the server's one request
# thread goes on answering other requests; it is cached on disk under its
# final name only once whole, served from there, temp files of a crashed run
# removed at start, old tars trimmed to build_source_cache_mb; the lease and
# LFS rules still hold. (2) A lapsed lease is requeued by the server's timer
# with nobody claiming (GET /api/builds/{id} and the admin list show it),
# and the worker's last heartbeat is left as it was. (3) A worker at the
# concurrency it registered gets nothing from a claim, concurrent claims
# included.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

V1=torch211-cxx11-cpu-x86_64-linux
V2=torch210-cxx11-cpu-x86_64-linux
V4=torch212-cxx11-cpu-x86_64-linux
BIG_MB=${BIG_MB:-256}
NFILES=${NFILES:-4000}
# one HTTP thread: a tar made on it would hold every other request
# leases of 20 s: a source tar made with the CPUs saturated takes longer than a few seconds
# of heartbeats through one HTTP thread; the lapses below are polled, not slept
export KHUB_THREADS=1 KHUB_BUILD_LEASE_SECONDS=20 KHUB_BUILD_HEARTBEAT_SECONDS=1 KHUB_BUILD_MAX_ATTEMPTS=2
log=$TEST_DIR/setup.log
khub admin org create acme >>"$log" 2>&1
khub admin user create alice >>"$log" 2>&1
khub admin user create root --site-admin >>"$log" 2>&1
khub admin member set acme alice admin >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
W1=$(khub admin worker add w1 2>>"$log" | tail -n 1)
W2=$(khub admin worker add w2 2>>"$log" | tail -n 1)
W3=$(khub admin worker add w3 2>>"$log" | tail -n 1)
W4=$(khub admin worker add w4 2>>"$log" | tail -n 1)
like "$W4" '^khw_' "four worker tokens"

# a kernel source whose tar is slow to make: many LFS files and a big one
BIGSRC=$TEST_DIR/bigsrc
mkdir -p "$BIGSRC/data"
printf '[general]\nname = "big"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["b.cpp"]\n' >"$BIGSRC/build.toml"
/usr/bin/python3 - "$BIGSRC/data" "$NFILES" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, "blob%05d.bin" % i), "wb") as f:
        f.write(b"\0" + os.urandom(1500))
PY
head -c $((BIG_MB * 1024 * 1024)) /dev/urandom >"$BIGSRC/weights.bin"
BIG_OID=$(sha256sum "$BIGSRC/weights.bin" | cut -d' ' -f1)
khub import "$BIGSRC" --repo acme/big --type kernel >>"$log" 2>&1
ok $? "khub import of acme/big ($NFILES small LFS files and a $BIG_MB MiB one)"
mkdir -p "$TEST_DIR/smallsrc"
printf '[general]\nname = "small"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["b.cpp"]\n' >"$TEST_DIR/smallsrc/build.toml"
printf 'x = 1\n' >"$TEST_DIR/smallsrc/small.py"
khub import "$TEST_DIR/smallsrc" --repo acme/small --type kernel >>"$log" 2>&1
ok $? "khub import of acme/small"
BIG_SHA=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/big.git" rev-parse main)
SMALL_SHA=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/small.git" rev-parse main)
CACHE=$KHUB_DATA_DIR/build-source-cache
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
api() {
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
j() { jq -rc "$1" "$B" 2>/dev/null; }	# j JQ-FILTER: on the last body
metric() { curl -s -H "Authorization: Bearer $ROOT" "$KHUB_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
reg() {	# reg TOKEN CONCURRENCY
	api "$1" POST /api/workers/register "{\"version\":\"t\",\"concurrency\":$2,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\",\"$V2\",\"$V4\"]}]}"
}
claim() { api "$1" POST /api/workers/claim "{\"variants\":$2,\"wait_seconds\":${3:-0}}"; }
enqueue() { api "$ALICE" POST "/api/kernels/acme/$1/builds" "{\"revision\":\"main\",\"variants\":$2}"; }
beat() { (while sleep 0.8; do curl -s -o /dev/null -X POST -H "Authorization: Bearer $1" "$KHUB_URL/api/builds/$2/heartbeat"; done) & }

reg "$W1" 2 && reg "$W2" 2
is "$ST" 200 "w1 and w2 register (concurrency 2)"

# ---- (1) one tar for two workers on one commit, made off the request thread ----------------
enqueue big "[\"$V1\",\"$V2\"]"
is "$ST $(j '.builds | length')" "202 2" "two jobs of acme/big's main ($V1, $V2)"
claim "$W1" "[\"$V1\"]"
J1=$(j '.build.id')
claim "$W2" "[\"$V2\"]"
J2=$(j '.build.id')
like "$J1/$J2" '^[0-9]+/[0-9]+$' "w1 holds $J1, w2 holds $J2"
beat "$W1" "$J1"
BEAT1=$!
beat "$W2" "$J2"
BEAT2=$!
MADE0=$(metric khub_build_source_tars_made_total)
is "$MADE0" 0 "/metrics (site admin): no source tar made yet"
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $W1" "$KHUB_URL/api/builds/$J2/source")" 409 \
	"w1 asks for w2's job's source → 409 (only the lease holder)"
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$J1/source")" 403 \
	"a user token (repo admin) → 403"

curl -s -o "$TEST_DIR/a.tar" -w '%{http_code}' -H "Authorization: Bearer $W1" "$KHUB_URL/api/builds/$J1/source" >"$TEST_DIR/a.code" &
PA=$!
seen=0
for _ in $(seq 1 1500); do
	compgen -G "$CACHE/.tmp-*" >/dev/null && { seen=1; break; }
	kill -0 $PA 2>/dev/null || break
	sleep 0.02
done
is "$seen" 1 "w1's request: the tar is being written under a temp name in data_dir/build-source-cache"
curl -s -o "$TEST_DIR/b.tar" -w '%{http_code}' -H "Authorization: Bearer $W2" "$KHUB_URL/api/builds/$J2/source" >"$TEST_DIR/b.code" &
PB=$!
sleep 0.05
META=$(curl -s -o "$B" -m 20 -w '%{http_code} %{time_total}' -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$J1")
kill -0 $PA 2>/dev/null && kill -0 $PB 2>/dev/null
a_running=$?
is "${META%% *} $(j '.state') $a_running" "200 running 0" \
	"GET /api/builds/$J1 answered (in ${META#* } s) on the one request thread while both source requests still wait"
INFO=$(curl -s -o /dev/null -m 20 -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/kernels/acme/small")
kill -0 $PA 2>/dev/null
is "$INFO $?" "200 0" "… and repo info of another repo too, the tar still being made"
wait $PA $PB
is "$(cat "$TEST_DIR/a.code") $(cat "$TEST_DIR/b.code")" "200 200" "both source requests → 200"
cmp -s "$TEST_DIR/a.tar" "$TEST_DIR/b.tar"
ok $? "… with the same bytes"
is "$(metric khub_build_source_tars_made_total)" 1 "one tar made for both (single-flight per repo and commit)"
mkdir -p "$TEST_DIR/unpacked" && tar -xf "$TEST_DIR/a.tar" -C "$TEST_DIR/unpacked"
is "$(sha256sum "$TEST_DIR/unpacked/weights.bin" | cut -d' ' -f1) $(find "$TEST_DIR/unpacked/data" -type f | wc -l)" \
	"$BIG_OID $NFILES" "the tar holds the LFS content (the big file and $NFILES small ones)"
cmp -s "$TEST_DIR/unpacked/data/blob01234.bin" "$BIGSRC/data/blob01234.bin"
ok $? "… byte for byte"
REPO_ID=$(ls "$CACHE" | sed -n "s/^\([0-9]*\)-$BIG_SHA\.tar\$/\1/p")
like "$REPO_ID" '^[0-9]+$' "cached as <repo id>-<sha>.tar"
is "$(ls -A "$CACHE" | grep -c '^\.tmp-')" 0 "no temp file left"
rm -rf "$TEST_DIR/unpacked" "$TEST_DIR/b.tar"

HITS0=$(metric khub_build_source_cache_hits_total)
code=$(curl -s -o "$TEST_DIR/c.tar" -w '%{http_code}' -H "Authorization: Bearer $W2" "$KHUB_URL/api/builds/$J2/source")
cmp -s "$TEST_DIR/a.tar" "$TEST_DIR/c.tar"
is "$code $? $(metric khub_build_source_tars_made_total) $(metric khub_build_source_cache_hits_total)" "200 0 1 $((HITS0 + 1))" \
	"asked again: served from the cache, nothing made"
rm -f "$TEST_DIR/a.tar" "$TEST_DIR/c.tar"
kill $BEAT1 $BEAT2 2>/dev/null
wait $BEAT1 $BEAT2 2>/dev/null
for id in $J1 $J2; do api "$ALICE" POST "/api/builds/$id/cancel" '{}'; done
is "$ST" 200 "(both jobs canceled, out of the way)"
rm -rf "$BIGSRC"

# ---- a crashed run's temp file, a smaller bound: trimmed at start and after each tar ----------
khub_stop
printf 'half a tar' >"$CACHE/.tmp-$REPO_ID-$BIG_SHA-crashed"
export KHUB_THREADS=4 KHUB_BUILD_SOURCE_CACHE_MB=300
khub_start
is "$(ls -A "$CACHE" | grep -c '^\.tmp-')" 0 "at start the crashed run's temp file is removed"
test -f "$CACHE/$REPO_ID-$BIG_SHA.tar"
ok $? "… the whole tar (under the 300 MiB bound) is kept"
reg "$W1" 2 && reg "$W2" 2 && reg "$W3" 1 && reg "$W4" 1
is "$ST" 200 "workers register again (w3, w4: concurrency 1)"
khub_stop
export KHUB_BUILD_SOURCE_CACHE_MB=1
khub_start
test ! -e "$CACHE/$REPO_ID-$BIG_SHA.tar"
ok $? "restarted with build_source_cache_mb = 1: the big tar is trimmed away"
enqueue small "[\"$V4\"]"
JS=$(j '.builds[0].id')
claim "$W1" "[\"$V4\"]"
is "$(j '.build.id')" "$JS" "w1 claims a job of acme/small"
mkdir -p "$TEST_DIR/small"
curl -s -H "Authorization: Bearer $W1" "$KHUB_URL/api/builds/$JS/source" | tar -xf - -C "$TEST_DIR/small"
is "$(cat "$TEST_DIR/small/small.py") $(metric khub_build_source_tars_made_total)" "x = 1 1" "its source tar is made"
ls "$CACHE" | grep -q -- "-$SMALL_SHA\.tar\$"
ok $? "… and cached"

# ---- (2) a lapsed lease is requeued with nobody claiming ---------------------------------------
api "$ROOT" GET /api/admin/workers
HB1=$(j '.workers[] | select(.name == "w1") | .last_heartbeat')
is "$(j '.workers[] | select(.name == "w1") | [.jobs[].id]')" "[$JS]" "the admin list shows $JS on w1"
api "$ALICE" GET "/api/builds/$JS"
is "$(j '"\(.state) \(.worker)"')" "running w1" "w1 goes silent holding $JS (lease 20 s: long enough for a saturated machine to ask)"
state=
for _ in $(seq 1 1200); do	# bounded, not a margin: the timer's turn comes later on a busy machine
	sleep 0.25
	api "$ALICE" GET "/api/builds/$JS"
	state=$(j '.state')
	[ "$state" = queued ] && break
done
is "$(j '"\(.state) \(.attempt) \(.worker) \(.lease_expires_at) \(has("worker") and has("lease_expires_at"))"')" "queued 1 null null true" \
	"polling GET /api/builds/$JS alone: queued again after the lease lapsed, attempt counted"
like "$(j '.error')" "^lease expired" "… saying why"
NB=$(j '.not_before')
STARTED=$(j '.started_at')
# by the server's times, not this machine's: the lease lapsed at least 20 s
# after the claim, and the backoff (5 s) runs from the lapse
[ $(( $(date -u -d "$NB" +%s) - $(date -u -d "$STARTED" +%s) )) -ge 24 ]
ok $? "… with its backoff (claimed $STARTED, not before $NB)"
api "$ROOT" GET /api/admin/workers
is "$(j '.workers[] | select(.name == "w1") | [.jobs[].id]') $(j '.workers[] | select(.name == "w1") | .last_heartbeat')" \
	"[] $HB1" "the admin list: w1 holds nothing, its last heartbeat unchanged"
is "$(metric khub_build_leases_expired_total)" 1 "/metrics counts one lapsed lease"
is "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $W1" "$KHUB_URL/api/builds/$JS/heartbeat")" 409 \
	"w1's late heartbeat → 409"
for _ in $(seq 1 600); do	# the backoff (5 s), polled
	claim "$W2" "[\"$V4\"]"
	[ "$ST" = 200 ] && break
	sleep 0.5
done
is "$(j '.build | "\(.id) \(.attempt)"')" "$JS 2" "w2 claims it after the backoff (attempt 2)"
for _ in $(seq 1 1200); do
	sleep 0.25
	api "$ALICE" GET "/api/builds/$JS"
	[ "$(j '.state')" = failed ] && break
done
is "$(j '"\(.state) \(.finished_at != null)"')" "failed true" "its second lapse (max_attempts 2): failed, by the timer too"

# ---- (3) a worker's concurrency, enforced by the server ------------------------------------------
enqueue small "[\"$V1\",\"$V2\"]"
is "$ST $(j '.builds | length')" "202 2" "two jobs of acme/small queued"
claim "$W3" "[\"$V1\",\"$V2\"]"
JA=$(j '.build.id')
like "$ST/$JA" '^200/[0-9]+$' "w3 (concurrency 1) claims one"
beat "$W3" "$JA"	# held until it fails below, whatever the checks between cost
BEATA=$!
claim "$W3" "[\"$V1\",\"$V2\"]"
is "$ST" 204 "its second claim: nothing (it runs as many as it declared)"
start=$(date +%s%N)
claim "$W3" "[\"$V1\",\"$V2\"]" 2
el=$((($(date +%s%N) - start) / 1000000))
[ "$ST" = 204 ] && [ $el -ge 1900 ]
ok $? "… a long poll too: waits its 2 s and answers 204 ($el ms)"
api "$ALICE" GET "/api/kernels/acme/small/builds?state=queued"
JB=$(j '[.builds[] | select(.id != '"$JA"') | .id][0] // empty')
is "$(j '.builds | length')" 1 "the other job ($JB) was ready all along"
api "$W3" POST "/api/builds/$JA/fail" '{"error":"done","retry":false}'
kill $BEATA 2>/dev/null
wait $BEATA 2>/dev/null
claim "$W3" "[\"$V1\",\"$V2\"]"
is "$ST $(j '.build.id')" "200 $JB" "once its job ended, w3 gets the other"
api "$W3" POST "/api/builds/$JB/fail" '{"error":"done","retry":false}'

# concurrent claims of one worker: the server lets one through
enqueue small "[\"$V1\",\"$V2\",\"$V4\"]"
is "$(j '.builds | length')" 3 "three jobs queued"
pids=()
for i in 1 2 3 4; do
	curl -s -o "$TEST_DIR/race$i" -w '%{http_code}\n' -H "Authorization: Bearer $W4" \
		--data-binary "{\"variants\":[\"$V1\",\"$V2\",\"$V4\"],\"wait_seconds\":0}" "$KHUB_URL/api/workers/claim" >"$TEST_DIR/race$i.code" &
	pids+=($!)
done
wait "${pids[@]}"
is "$(cat "$TEST_DIR"/race?.code | sort | tr '\n' ' ')" "200 204 204 204 " "w4 (concurrency 1) sends four claims at once: one job"
beat "$W4" "$(cat "$TEST_DIR"/race? | jq -r '.build.id // empty' 2>/dev/null | head -1)"	# w4 keeps that job
BEATW4=$!
api "$ROOT" GET /api/admin/workers
is "$(j '.workers[] | select(.name == "w4") | .jobs | length')" 1 "the admin list shows w4 with one job"
reg "$W4" 2
claim "$W4" "[\"$V1\",\"$V2\",\"$V4\"]"
is "$ST" 200 "registered again with concurrency 2: a second claim gets one"
kill $BEATW4 2>/dev/null
wait $BEATW4 2>/dev/null

khub_stop
server_and_sanitizer_logs | grep -E 'runtime error|AddressSanitizer' | head -5 | sed 's/^/# server: /'
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
