#!/bin/bash
# t0354-worker-slot-uids.sh -- builds at once on one daemon run as uids of
# their own, so one author's fork bomb cannot stop another's build. A root
# daemon with --concurrency 2 --build-user 4354-4355 builds a hostile noarch
# kernel (acme/bomb) whose __init__.py, run by the smoke import, forks until
# its uid's process limit (--max-processes 512, RLIMIT_NPROC) refuses and
# holds every process until the build is canceled. While it holds them, a
# push of examples/relu is built on the other slot: its bubblewrap starts
# (under one shared uid it failed with EAGAIN), it compiles and is
# published. The two build logs name two different uids, one per slot. A
# range with fewer uids than --concurrency is refused at start. The cache is
# the repo's, not a uid's: relu's next commit, built as another uid, is all
# hits.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/worker_env.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
worker_needs torch bwrap root	# root: only a root daemon builds as uids of its own
UIDS=4354-4355	# this test's build uids (no account needed): no other test's builds share their limit

khub_setup
export KHUB_ABI_POLICY=warn	# Debian's toolchain links a GLIBC_2.32 symbol
W=$TEST_DIR/worker
mkdir -p "$W" "$TEST_DIR/readme"
worker_toolchain "$W/toolchains.json"

# ---- too few uids for --concurrency: refused at start, saying why -------------------------------------
out=$("$WORKER_BIN" --url http://127.0.0.1:1 --toolchains "$W/toolchains.json" --concurrency 3 \
	--build-user "$UIDS" 2>&1)
is "$?" 64 "--concurrency 3 with --build-user $UIDS (two uids): refused"
like "$out" "--build-user 4354-4355 has 2 uid\(s\) for --concurrency 3: each build at once needs a uid of its own" \
	"… saying each build at once needs a uid of its own"

worker_check "$W/toolchains.json"

khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
khub admin worker add w1 2>/dev/null | tail -n 1 >"$W/w1.token"
chmod 600 "$W/w1.token"
printf '# a kernel\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/bomb --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub import "$TEST_DIR/readme" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start

B=$TEST_DIR/body
api() {	# api METHOD PATH [curl args]: status in $STATUS, body in $B
	local method=$1 path=$2; shift 2
	STATUS=$(curl -s -X "$method" -o "$B" -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$@" "$KHUB_URL$path")
}
build_state() { api GET "/api/builds/$1"; jq -r '.state' "$B" 2>/dev/null; }
build_log() { curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$1/log"; }
build_id() {	# build_id REPO SHA VARIANT: the build the push queued (polled, bounded)
	local id= _
	for _ in $(seq 1 300); do
		api GET "/api/kernels/$1/builds?limit=100"
		id=$(jq -r --arg c "$2" --arg v "$3" \
			'(if type == "object" then .builds else . end) | map(select(.commit == $c and .variant == $v)) | .[0].id // empty' \
			"$B" 2>/dev/null)
		[ -n "$id" ] && break
		sleep 0.5
	done
	echo "$id"
}
wait_for() {	# wait_for ID STATE...: 0 once build ID is in one of the STATEs; 1 when the daemon is gone first
	local id=$1 st _; shift
	for _ in $(seq 1 3600); do
		st=$(build_state "$id")
		[[ " $* " == *" $st "* ]] && return 0
		kill -0 "$WPID" 2>/dev/null || return 1
		sleep 0.5
	done
	return 1
}

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
clone() {	# clone REPO DIR
	git clone -q "http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/$1" "$2" 2>"$TEST_DIR/git.err" ||
		bail "git clone $1 failed: $(cat "$TEST_DIR/git.err")"
}

# ---- the daemon, two slots, a uid each (up first: a push queues what registered workers build) ------------
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work" --concurrency 2 --build-user "$UIDS" --poll-seconds 2 2>>"$W/w1.log" &
WPID=$!
for _ in $(seq 1 600); do grep -q 'registered with' "$W/w1.log" || ! kill -0 "$WPID" 2>/dev/null && break; sleep 0.5; done
like "$(cat "$W/w1.log")" "registered with $KHUB_URL as w1" "w1 is up with --concurrency 2"
like "$(cat "$W/w1.log")" "builds run as uids 4354 to 4355" "… and says which uid each slot builds as"

# ---- the fork bomb: a noarch kernel whose import forks to the limit and holds -----------------------------
K=$TEST_DIR/bomb
clone acme/bomb "$K"
mkdir -p "$K/torch-ext/bomb"
printf '[general]\nname = "bomb"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch-noarch]\n' \
	>"$K/build.toml"
cat >"$K/torch-ext/bomb/__init__.py" <<'EOF'
import subprocess, sys

# a fresh interpreter (no torch) forks until the process limit refuses;
# every process then waits for a signal: the build holds them until killed
BOMB = r'''
import os, signal
n, why = 0, "no limit met at 4096"
while n < 4096:
    try:
        pid = os.fork()
    except OSError as e:
        why = "fork failed: %s" % e.strerror
        break
    if pid == 0:
        signal.pause()
        os._exit(0)
    n += 1
print("BOMB holding %d processes (%s)" % (n, why), flush=True)
signal.pause()
'''
subprocess.run([sys.executable, "-c", BOMB])
EOF
(cd "$K" && git add -A >/dev/null && git commit -qm "bomb" && git push -q origin main 2>"$TEST_DIR/git.err")
ok $? "alice pushes the fork-bombing kernel" || sed 's/^/#   /' "$TEST_DIR/git.err"
BID=$(build_id acme/bomb "$(git -C "$K" rev-parse HEAD)" torch-cpu)
like "$BID" '^[0-9]+$' "the push queued build #$BID of torch-cpu"
for _ in $(seq 1 1200); do
	build_log "$BID" | grep -q '^BOMB holding' && break
	kill -0 "$WPID" 2>/dev/null || break
	sleep 0.5
done
HOLDING=$(build_log "$BID" | grep -m1 '^BOMB holding')
like "$HOLDING" '^BOMB holding [0-9]+ processes \(fork failed: Resource temporarily unavailable\)$' \
	"the bomb forked until its uid's process limit refused ($HOLDING)"

# ---- while it holds them, another author's build on the other slot -------------------------------------------
R=$TEST_DIR/relu
clone acme/relu "$R"
cp -r "$KHUB_SRC/examples/relu/." "$R"/
(cd "$R" && git add -A >/dev/null && git commit -qm "relu" && git push -q origin main 2>"$TEST_DIR/git.err")
ok $? "a push of examples/relu" || sed 's/^/#   /' "$TEST_DIR/git.err"
RSHA=$(git -C "$R" rev-parse HEAD)
RID=$(build_id acme/relu "$RSHA" "$VARIANT")
like "$RID" '^[0-9]+$' "… queues build #$RID of $VARIANT"
wait_for "$RID" succeeded failed
is "$(build_state "$RID")" succeeded "build #$RID succeeded beside the bomb"
build_log "$RID" >"$TEST_DIR/relu.log"
[ "$(build_state "$RID")" = succeeded ] || grep -v '^ *$' "$TEST_DIR/relu.log" | tail -15 | sed 's/^/#   /'
is "$(grep -c 'EAGAIN\|Resource temporarily unavailable' "$TEST_DIR/relu.log")" 0 \
	"… its sandbox started (no EAGAIN in its log)"
is "$(build_state "$BID")" running "the bomb still held its processes all along (build #$BID running)"
api GET "/api/kernels/acme/relu/tree/v1/build/$VARIANT"
is "$STATUS" 200 "… and published: build/$VARIANT/ is on v1"

# ---- two uids, one per slot ------------------------------------------------------------------------------------
build_log "$BID" >"$TEST_DIR/bomb.log"
outside() { grep -m1 'sandbox bubblewrap:' "$1" | sed -nE 's/.*\(([0-9]+) outside\).*/\1/p'; }
BUID=$(outside "$TEST_DIR/bomb.log") RUID=$(outside "$TEST_DIR/relu.log")
like "$BUID $RUID" '^435[45] 435[45]$' "both builds ran as uids of --build-user $UIDS (bomb $BUID, relu $RUID)"
ok $([ -n "$BUID" ] && [ -n "$RUID" ] && [ "$BUID" != "$RUID" ]; echo $?) \
	"… different ones: the bomb spent its own uid's process limit only"

# ---- the bomb, canceled, is gone --------------------------------------------------------------------------------
api POST "/api/builds/$BID/cancel"
is "$STATUS" 200 "alice cancels the bomb"
wait_for "$BID" canceled
is "$(build_state "$BID")" canceled "… its build ends"
left=
for _ in $(seq 1 300); do
	left=$(ps -o pid= -u 4354,4355 | wc -l)
	[ "$left" = 0 ] && break
	sleep 0.2
done
is "$left" 0 "no process of either build uid is left"

kill -TERM "$WPID"
wait "$WPID"
is "$?" 0 "the daemon stops cleanly on SIGTERM"
is "$(ls "$W/work/w1" | grep -c '^build-')" 0 "both scratch directories are gone"

# ---- the build cache is the repo's, not a uid's: relu's next commit, built as another uid, is all hits ----------
printf '\n# one more line\n' >>"$R/build.toml"
(cd "$R" && git commit -qam "relu 2" && git pull -q --rebase origin main 2>/dev/null; git push -q origin main 2>"$TEST_DIR/git.err")
RID2=$(build_id acme/relu "$(git -C "$R" rev-parse HEAD)" "$VARIANT")
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work" --build-user 4356 --once 2>>"$W/w1-once.log"
is "$(build_state "$RID2")" succeeded "relu's next commit (build #$RID2) builds as uid 4356 (one pass of w1)"
build_log "$RID2" >"$TEST_DIR/relu2.log"
is "$(outside "$TEST_DIR/relu2.log")" 4356 "… as that uid (relu's first build: $RUID)"
like "$(grep -m1 'build cache: [0-9]* hits' "$TEST_DIR/relu2.log")" 'build cache: [1-9][0-9]* hits, 0 misses' \
	"… and every unit is a hit in the cache uid $RUID filled"

khub_stop
ok $(cat "$W/w1.log" "$W/w1-once.log" <(server_and_sanitizer_logs) | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) \
	"no sanitizer report"
done_testing
