#!/bin/bash
# t0183-nodes.sh -- three khub nodes on one PostgreSQL (the embedded
# cluster they share through the data dir), one repo root and LFS store,
# behind Debian's HAProxy with deploy/haproxy-khub.cfg as shipped (addresses
# replaced): a commit through one node is read at once through the others;
# 50 commits with the same parentCommit spread over the nodes give one 200
# and 49 412s and a linear history; a token revoked and a repo made private
# are refused on every node long before the (raised) cache TTLs; a node
# drained with SIGUSR1 and then stopped fails no request through the
# balancer; the JS client publishes through the balancer while the
# loader's steps load through it; a node SIGKILLed mid-commit leaves no half commit (git fsck and
# khub fsck clean) while the others keep serving.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/haproxy.sh"

for tool in haproxy curl git /usr/bin/python3; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
LIB=$KHUB_SRC/tests/integration/lib
H=$TEST_DIR/haproxy
mkdir -p "$H"
# Caches would keep stale answers for ten minutes without the NOTIFY path.
export KHUB_TOKEN_CACHE_TTL_MS=600000 KHUB_REPO_CACHE_TTL_MS=600000 KHUB_MAX_CONNECTIONS_PER_IP=0
NODE_PIDS=() NODE_PORTS=() HAPROXY_PID=
stop_all() {
	[ -n "$HAPROXY_PID" ] && kill "$HAPROXY_PID" 2>/dev/null && wait "$HAPROXY_PID" 2>/dev/null
	for p in "${NODE_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	return 0
}
trap 'stop_all; khub_teardown' EXIT

wait_health() {	# wait_health URL WANT_STATUS
	for _ in $(seq 1 300); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$1/api/health")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
start_node() {	# start_node INDEX
	local port
	port=$(free_port)
	KHUB_LISTEN=127.0.0.1:$port "$KHUB_BIN" serve >>"$TEST_DIR/node$1.log" 2>&1 &
	NODE_PIDS[$1]=$!
	NODE_PORTS[$1]=$port
	wait_health "http://127.0.0.1:$port" 200 || bail "node $1 did not start"
}
node() { echo "http://127.0.0.1:${NODE_PORTS[$1]}"; }

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
V1=$(khub import "$SRC" --repo acme/relu --branch v1 2>>"$TEST_DIR/setup.log")
khub admin user create bob >>"$TEST_DIR/setup.log" 2>&1
khub admin member set acme bob write >>"$TEST_DIR/setup.log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$TEST_DIR/setup.log" | tail -n 1)
khub admin user create carol >>"$TEST_DIR/setup.log" 2>&1
CAROL=$(khub admin token create carol --scope read 2>>"$TEST_DIR/setup.log" | tail -n 1)
khub admin user create olga >>"$TEST_DIR/setup.log" 2>&1
khub admin member set acme olga admin >>"$TEST_DIR/setup.log" 2>&1
OLGA=$(khub admin token create olga --scope write 2>>"$TEST_DIR/setup.log" | tail -n 1)
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
like "$V1" '^[0-9a-f]{40}$' "seeded acme/relu v1"
for i in 1 2 3; do start_node $i; done
ok 0 "three nodes answer /api/health on ports ${NODE_PORTS[*]}"

# ---- HAProxy with deploy/haproxy-khub.cfg ------------------------------------------------
LB_PORT=$(free_port)
LB=http://127.0.0.1:$LB_PORT
haproxy_shipped_config "$LB_PORT" "$H/haproxy.cfg" "${NODE_PORTS[1]}" "${NODE_PORTS[2]}" "${NODE_PORTS[3]}"
haproxy -c -f "$H/haproxy.cfg" >"$H/check.out" 2>&1
ok $? "haproxy accepts deploy/haproxy-khub.cfg" || sed 's/^/# /' "$H/check.out"
haproxy -db -f "$H/haproxy.cfg" >>"$H/haproxy.log" 2>&1 &
HAPROXY_PID=$!
wait_health "$LB" 200
ok $? "khub answers /api/health through HAProxy"

API=/api/kernels/acme/relu
head_of() { git --git-dir="$GITDIR" rev-parse "refs/heads/${1:-v1}"; }
sha_via() {	# sha_via BASE [TOKEN]: the sha of v1 one node answers
	curl -s ${2:+-H "Authorization: Bearer $2"} "$1$API/revision/v1" |
		/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("sha",""))' 2>/dev/null
}
commit_to() {	# commit_to BASE BODY OUT: "STATUS" in OUT
	curl -s -o "$3.body" -w '%{http_code}\n' -X POST -H "Authorization: Bearer $BOB" \
		-H 'Content-Type: application/x-ndjson' --data-binary @"$2" "$1$API/commit/v1" >"$3"
}

# ---- read-your-writes through any node ---------------------------------------------------
for i in 1 2 3; do sha_via "$(node $i)" >/dev/null; done	# every node has the record cached
RYW=0
for r in 1 2 3 4 5 6; do
	w=$(( (r % 3) + 1 )); rd=$(( ((r + 1) % 3) + 1 ))
	printf 'round %s\n' "$r" >"$TEST_DIR/ryw.txt"
	/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "ryw $r" --file "ryw.txt=$TEST_DIR/ryw.txt" >"$TEST_DIR/ryw.ndjson"
	commit_to "$(node $w)" "$TEST_DIR/ryw.ndjson" "$TEST_DIR/st-ryw"
	NEW=$(/usr/bin/python3 -c "import json; print(json.load(open('$TEST_DIR/st-ryw.body'))['commitOid'])" 2>/dev/null)
	GOT=$(sha_via "$(node $rd)")
	if [ "$(cat "$TEST_DIR/st-ryw")" = 200 ] && [ -n "$NEW" ] && [ "$GOT" = "$NEW" ]; then
		RYW=$((RYW + 1))
	else
		diag "round $r: committed $NEW through node $w ($(cat "$TEST_DIR/st-ryw")), node $rd answers $GOT"
	fi
done
is "$RYW" 6 "a commit through one node is what the next read through another node answers (6 rounds)"

# ---- the JS client publishes through HAProxy while the loader loads through it ----------------
# The loader's steps (tests/integration/lib/load_kernel.py: the real `kernels`
# package when tests/lib/real_loader.sh finds its sources, else its steps by
# hand) load acme/relu version 1 three times while @huggingface/hub creates
# repos and uploads a kernel tree (LFS batch + PUT) through the balancer.
if command -v node >/dev/null 2>&1 && [ -d "$KHUB_SRC/tests/js/node_modules/@huggingface/hub" ] &&
	/usr/bin/python3 -c 'import torch' 2>/dev/null; then
	. "$KHUB_SRC/tests/lib/real_loader.sh"
	khub admin trust set acme >/dev/null 2>&1
	LOADER_PATH=$(real_loader_pythonpath "$TEST_DIR/loader" 2>/dev/null) || LOADER_PATH=
	(
		for l in 1 2 3; do
			cd "$TEST_DIR" && PYTHONPATH=$LOADER_PATH HF_HUB_CACHE=$TEST_DIR/hf-cache-$l HF_HOME=$TEST_DIR/hf-home \
				HF_HUB_DISABLE_XET=1 /usr/bin/python3 "$LIB/load_kernel.py" "$LB" acme/relu 1 --token "$BOB" \
				>>"$TEST_DIR/load.out" 2>>"$TEST_DIR/load.err" || echo "load $l failed" >>"$TEST_DIR/load.out"
		done
	) &
	LOADER=$!
	JSRC=$TEST_DIR/jsrc
	make_kernel_tree "$JSRC" relu
	head -c $((3 * 1024 * 1024)) /dev/urandom >"$JSRC/build/torch-cpu/weights.bin"
	JS_OUT=$(cd "$KHUB_SRC" && env KHUB_URL="$LB" TOKEN="$BOB" ADMIN_TOKEN="$OLGA" NS=acme SRC_DIR="$JSRC" \
		SRC2_DIR="$JSRC" STATE_FILE="$TEST_DIR/js-state.json" PHASE=publish node tests/js/publish_client.mjs 2>&1)
	JS_RC=$?
	wait $LOADER
	JS_FAILED=$(grep -c '^not ok' <<<"$JS_OUT")
	JS_PASSED=$(grep -c '^ok' <<<"$JS_OUT")
	ok $([ "$JS_RC" -eq 0 ] && [ "$JS_FAILED" -eq 0 ] && [ "$JS_PASSED" -gt 0 ]; echo $?) \
		"@huggingface/hub publishes through HAProxy ($JS_PASSED checks of its own passed)" ||
		grep -v '^ok' <<<"$JS_OUT" | head -10 | sed 's/^/#   /'
	LOADS=$(grep -c '"ok": *true' "$TEST_DIR/load.out")
	is "$LOADS" 3 "the loader loaded acme/relu version 1 through HAProxy three times meanwhile" ||
		tail -8 "$TEST_DIR/load.err" | sed 's/^/#   /'
else
	ok 0 "# SKIP node, tests/js/node_modules or torch missing: no JS publish and loader through HAProxy"
fi

# ---- 50 commits with one parentCommit, spread over the nodes --------------------------------
OLD=$(head_of)
for c in $(seq 1 50); do
	printf 'client %s\n' "$c" >"$TEST_DIR/race-$c.txt"
	/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "race $c" --parent "$OLD" \
		--file "race/$c.txt=$TEST_DIR/race-$c.txt" >"$TEST_DIR/race-$c.ndjson"
done
PIDS=()
for c in $(seq 1 50); do
	commit_to "$(node $(( (c % 3) + 1 )))" "$TEST_DIR/race-$c.ndjson" "$TEST_DIR/st-race-$c" &
	PIDS+=($!)
done
wait "${PIDS[@]}"
STATUSES=$(for c in $(seq 1 50); do cat "$TEST_DIR/st-race-$c"; done)
WINS=$(grep -c '^200$' <<<"$STATUSES")
LOSSES=$(grep -c '^412$' <<<"$STATUSES")
is "$WINS $LOSSES" "1 49" "50 commits with the same parentCommit over three nodes: one 200, 49 412"
[ "$WINS $LOSSES" = "1 49" ] || sort <<<"$STATUSES" | uniq -c | sed 's/^/# statuses: /'
NEW=$(head_of)
is "$(git --git-dir="$GITDIR" rev-list --count "$OLD..$NEW")" 1 "one new commit on v1"
is "$(git --git-dir="$GITDIR" rev-parse "$NEW^")" "$OLD" "its parent is the parentCommit: history linear"
is "$(git --git-dir="$GITDIR" rev-list --merges --count v1)" 0 "no merge commits on v1"

# ---- token revocation and privacy, every node -----------------------------------------------
until_all() {	# until_all DESCRIPTION WANT -- COMMAND_PREFIX: poll each node until COMMAND BASE prints WANT
	local what=$1 want=$2 start end i got
	shift 3
	start=$(date +%s%N)
	for i in 1 2 3; do
		for _ in $(seq 1 100); do
			got=$("$@" "$(node $i)")
			[ "$got" = "$want" ] && break
			sleep 0.05
		done
		[ "$got" = "$want" ] || { ok 1 "$what: node $i still answers $got"; return; }
	done
	end=$(date +%s%N)
	ok 0 "$what on all three nodes (after $(( (end - start) / 1000000 )) ms; the cache TTLs are 600 s)"
}
status_of() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
for i in 1 2 3; do
	is "$(status_of -H "Authorization: Bearer $CAROL" "$(node $i)/api/whoami-v2")" 200 "carol's token works on node $i (now cached)"
done
CAROL_ID=$(khub admin token list carol 2>/dev/null | head -1 | cut -f1)
khub admin token revoke "$CAROL_ID" >>"$TEST_DIR/setup.log" 2>&1
anon_repo() { status_of "$1$API"; }
whoami_carol() { status_of -H "Authorization: Bearer $CAROL" "$1/api/whoami-v2"; }
until_all "carol's revoked token is refused" 401 -- whoami_carol

for i in 1 2 3; do
	is "$(anon_repo "$(node $i)")" 200 "acme/relu is public on node $i (record cached)"
done
is "$(status_of -X PUT -H "Authorization: Bearer $OLGA" -H 'Content-Type: application/json' \
	--data-binary '{"private": true}' "$(node 1)$API/settings")" 200 "olga (admin) makes acme/relu private through node 1"
until_all "acme/relu is hidden from anonymous callers" 401 -- anon_repo

# ---- draining a node fails no request ------------------------------------------------------
reads_through_lb() {	# reads_through_lb OUT STOPFILE: one status per line until STOPFILE exists
	while [ ! -e "$2" ]; do
		status_of -H "Authorization: Bearer $BOB" "$LB$API/revision/v1" >>"$1"; echo >>"$1"
	done
}
rm -f "$TEST_DIR/drain.stop"
reads_through_lb "$TEST_DIR/drain.out" "$TEST_DIR/drain.stop" &
READER=$!
kill -USR1 "${NODE_PIDS[2]}"
wait_health "$(node 2)" 503
ok $? "node 2 drains on SIGUSR1: /api/health answers 503"
is "$(status_of -H "Authorization: Bearer $BOB" "$(node 2)$API/revision/v1")" 200 "a draining node still serves requests"
# HAProxy marks it DOWN after two failed checks (500 ms apart); then stop it.
grep -q "node2 is DOWN" "$H/haproxy.log" || for _ in $(seq 1 200); do
	grep -q "node2 is DOWN" "$H/haproxy.log" && break; sleep 0.05
done
ok $(grep -q "node2 is DOWN" "$H/haproxy.log"; echo $?) "HAProxy takes the draining node out"
kill -TERM "${NODE_PIDS[2]}"; wait "${NODE_PIDS[2]}" 2>/dev/null
for _ in $(seq 1 20); do status_of "$LB/api/health" >/dev/null; done
touch "$TEST_DIR/drain.stop"; wait $READER
TOTAL=$(grep -c . "$TEST_DIR/drain.out")
GOOD=$(grep -c '^200$' "$TEST_DIR/drain.out")
is "$GOOD" "$TOTAL" "every read through HAProxy while node 2 drained and stopped answered 200 ($TOTAL reads)"
start_node 2
kill -USR2 "${NODE_PIDS[2]}"
wait_health "$(node 2)" 200
ok $? "node 2 restarted and healthy"

# ---- a node SIGKILLed mid-commit -------------------------------------------------------------
BEFORE=$(head_of)
head -c 6000000 /dev/urandom >"$TEST_DIR/big.bin"
/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "killed" --parent "$BEFORE" \
	--file "big.bin=$TEST_DIR/big.bin" >"$TEST_DIR/big.ndjson"
curl -s -o /dev/null --limit-rate 2M -X POST -H "Authorization: Bearer $BOB" -H 'Content-Type: application/x-ndjson' \
	--data-binary @"$TEST_DIR/big.ndjson" "$(node 3)$API/commit/v1" &
CURL=$!
sleep 1
kill -KILL "${NODE_PIDS[3]}"; wait "${NODE_PIDS[3]}" 2>/dev/null
wait $CURL
NODE_PIDS[3]=
is "$(head_of)" "$BEFORE" "the commit of the killed node did not land"
SERVED=0
for _ in $(seq 1 30); do
	[ "$(status_of -H "Authorization: Bearer $BOB" "$LB$API/revision/v1")" = 200 ] && SERVED=$((SERVED + 1))
done
is "$SERVED" 30 "the other nodes keep serving through HAProxy (30 reads)"
printf 'after\n' >"$TEST_DIR/after.txt"
/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "after the kill" --parent "$BEFORE" \
	--file "after.txt=$TEST_DIR/after.txt" >"$TEST_DIR/after.ndjson"
commit_to "$LB" "$TEST_DIR/after.ndjson" "$TEST_DIR/st-after"
is "$(cat "$TEST_DIR/st-after")" 200 "a commit through HAProxy lands after the kill (the killed node's lock died with it)"
OUT=$(git --git-dir="$GITDIR" fsck --strict --no-dangling 2>&1)
ok $([ $? -eq 0 ] && [ -z "$OUT" ]; echo $?) "git fsck --strict clean"
if [ "${KHUB_LFS_BACKEND:-local}" = local ]; then
	khub fsck >"$TEST_DIR/fsck.out" 2>&1
	ok $? "khub fsck clean" || tail -5 "$TEST_DIR/fsck.out" | sed 's/^/# /'
else	# on s3 fsck refuses (it re-hashes local object files): every LFS pointer is still linked
	khub check lfs-pointers >"$TEST_DIR/fsck.out" 2>&1
	ok $? "khub check lfs-pointers clean (lfs_backend = $KHUB_LFS_BACKEND)" || tail -5 "$TEST_DIR/fsck.out" | sed 's/^/# /'
fi

stop_all
HAPROXY_PID= NODE_PIDS=()
done_testing
