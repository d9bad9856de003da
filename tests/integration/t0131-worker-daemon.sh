#!/bin/bash
# t0131-worker-daemon.sh -- the build farm end to end with the real daemon:
# a kernel source pushed with git to khub enqueues a build; `khub-worker
# --once` claims it, streams the log, publishes build/<variant>/ on v1
# (exactly once) and removes its scratch directory. The build process gets
# neither the worker token nor the daemon's environment. A worker SIGKILLed
# mid-build takes its build processes with it; the lease expires, the job
# goes back to the queue with the attempt counted, another worker completes
# it, and it is published exactly once. Two workers on one queue never
# build the same job. An unknown worker token is "worker token rejected".
#
# The source is examples/relu (KHUB_TEST_KERNEL_SRC overrides it) and the
# toolchain Debian's python3-torch (KHUB_TEST_TOOLCHAINS: another
# toolchains.json).
. "$(dirname "$0")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs	# $WORKER_BIN
KSRC=${KHUB_TEST_KERNEL_SRC:-$KHUB_SRC/examples/relu}
# examples/relu comes with the build (worker-build); without it there is nothing to build
[ -f "$KSRC/build.toml" ] || { echo "1..0 # SKIP no kernel source with build.toml at $KSRC"; exit 0; }

khub_setup
# short leases so that a killed worker's job comes back within seconds; a
# Debian toolchain links symbols newer than manylinux_2_28 allows, so the ABI
# policy only warns here (its enforcement is tested with the build itself)
export KHUB_BUILD_LEASE_SECONDS=4 KHUB_BUILD_HEARTBEAT_SECONDS=1 KHUB_ABI_POLICY=warn
W=$TEST_DIR/worker
mkdir -p "$W/work" "$TEST_DIR/readme"
if [ -n "${KHUB_TEST_TOOLCHAINS:-}" ]; then
	cp "$KHUB_TEST_TOOLCHAINS" "$W/toolchains.json"
else
	worker_toolchain "$W/toolchains.json" ', "cmake": "cmake", "ninja": "ninja", "env": {}'
fi
# the variant to build: the toolchain's CPU arch variant, else its first
worker_check "$W/toolchains.json"
[ -n "$VARIANT" ] || VARIANT=$(grep -oE '\btorch[0-9a-z_-]*' "$W/check.out" | grep -v '^torch$' | head -1)
diag "building $VARIANT"

khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
T1=$(khub admin worker add w1 2>/dev/null | tail -n 1)
T2=$(khub admin worker add w2 2>/dev/null | tail -n 1)
[ -n "$T1" ] && [ -n "$T2" ] || bail "khub admin worker add failed (is the build farm in this khub?)"
printf '%s\n' "$T1" >"$W/w1.token"
printf '%s\n' "$T2" >"$W/w2.token"
chmod 600 "$W"/*.token
printf '# relu\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start

like "$T1/$T2" '^[^ /]{16,}/[^ /]{16,}$' "khub admin worker add prints a token per worker"

worker() {	# worker NAME [options]: a daemon run in the foreground, its stderr in $W/NAME.log
	local name=$1; shift
	"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/$name.token" --toolchains "$W/toolchains.json" \
		--name "$name" --work-dir "$W/work" "$@" 2>>"$W/$name.log"
}
H=$TEST_DIR/headers
B=$TEST_DIR/body
api() {	# api METHOD PATH [curl args]: status in $STATUS, body in $B
	local method=$1 path=$2; shift 2
	STATUS=$(curl -s -X "$method" -D "$H" -o "$B" -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$@" \
		"$KHUB_URL$path")
}
json() { jq -r "$@" "$B" 2>/dev/null; }	# json JQ-FILTER [jq args]: on the last body
build_field() {	# build_field ID JQ-FILTER: a field of GET /api/builds/ID
	api GET "/api/builds/$1"
	json "$2"
}
wait_state() {	# wait_state ID STATE SECONDS: 0 once the build is in STATE
	local i
	for i in $(seq 1 $(($3 * 5))); do
		[ "$(build_field "$1" '.state')" = "$2" ] && return 0
		sleep 0.2
	done
	return 1
}
publications() {	# publications ID: commits on v1 naming build #ID
	api GET "/api/kernels/acme/relu/commits/v1?limit=1000"
	[ "$STATUS" = 200 ] || { echo 0; return; }
	json --arg t "(build #$1)" '[.[] | select(.title | contains($t))] | length'
}
# the queued build of commit SHA for $VARIANT (waits for the push trigger)
queued_build() {
	local i
	for i in $(seq 1 1500); do
		api GET "/api/kernels/acme/relu/builds?limit=100"
		local id
		id=$(json --arg c "$1" --arg v "$VARIANT" \
			'(if type == "object" then .builds else . end) | map(select(.commit == $c and .variant == $v)) | .[0].id // empty')
		[ -n "$id" ] && { echo "$id"; return 0; }
		sleep 0.2
	done
	return 1
}

# ---- an unknown token --------------------------------------------------------------------------
printf 'hf_notarealworkertoken\n' >"$W/bad.token"
worker bad --once
is "$?" 1 "an unknown worker token: exit 1"
like "$(cat "$W/bad.log")" 'worker token rejected' "with 'worker token rejected'"

# ---- register, then push the source ---------------------------------------------------------------
worker w1 --once
is "$?" 0 "w1 registers and, the queue being empty, exits 0 (--once)"
like "$(cat "$W/w1.log")" "registered with $KHUB_URL as w1" "it logged its registration"

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
git config --global advice.detachedHead false
REMOTE=http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu
git clone -q "$REMOTE" "$TEST_DIR/clone" 2>"$TEST_DIR/git.err" || bail "git clone failed: $(cat "$TEST_DIR/git.err")"
cd "$TEST_DIR/clone" || bail "no clone"
cp -r "$KSRC"/. .
rm -rf build .git/info/lfs
git add -A >/dev/null && git commit -qm "relu source" && git push -q origin main 2>"$TEST_DIR/git.err"
ok $? "git push of the kernel source" || sed 's/^/#   /' "$TEST_DIR/git.err"
SHA1=$(git rev-parse HEAD)
ID1=$(queued_build "$SHA1")
like "$ID1" '^[0-9]+$' "the push enqueued build #$ID1 of $VARIANT"

# after this first push, builds are enqueued by hand, one variant each
api PUT /api/kernels/acme/relu/settings -H 'Content-Type: application/json' -d '{"buildOnPush": false}'
is "$STATUS" 200 "buildOnPush turned off for the rest of the test"
enqueue() {	# enqueue SHA [force]: one build of $VARIANT, its id
	api POST /api/kernels/acme/relu/builds -H 'Content-Type: application/json' \
		-d "{\"revision\": \"$1\", \"variants\": [\"$VARIANT\"], \"force\": ${2:-false}}"
	json '.builds[0].id // empty'
}
push() {	# push BRANCH: the clone's BRANCH to khub (main may have moved: the farm publishes README.md)
	git pull -q --rebase origin main >/dev/null 2>&1
	git push -q origin "$1" 2>"$TEST_DIR/git.err"
}

# ---- one build end to end ---------------------------------------------------------------------------
start=$(date +%s.%N)
worker w1 --once
is "$?" 0 "khub-worker --once ran the queue dry"
diag "build took $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s end to end"
like "$(cat "$W/w1.log")" "claimed build #$ID1 $VARIANT acme/relu@${SHA1:0:12}" "its log: claimed build #$ID1"
like "$(cat "$W/w1.log")" "published build #$ID1 $VARIANT acme/relu@${SHA1:0:12} on v1" "its log: published on v1"
is "$(build_field "$ID1" '.state')" succeeded "build #$ID1 succeeded"
api GET "/api/builds/$ID1/log"
is "$STATUS" 200 "its log can be read"
like "$(cat "$B")" "\[khub-worker\] build $ID1 of acme/relu@$SHA1 on worker w1" "the log starts with the worker's line"
like "$(cat "$B")" "\[khub-worker\] build finished; uploading the output" "and holds the build's output to the end"
LOG_LEN=$(grep -i '^x-log-length:' "$H" | tr -d '\r' | cut -d' ' -f2)
is "$LOG_LEN" "$(stat -c %s "$B")" "X-Log-Length is the whole log (no chunk lost or doubled)"
api GET "/api/kernels/acme/relu/tree/v1/build/$VARIANT"
is "$STATUS" 200 "build/$VARIANT/ is on v1"
like "$(json '.[].path')" "build/$VARIANT/metadata.json" "with its metadata.json"
is "$(publications "$ID1")" 1 "published exactly once"
is "$(ls "$W/work/w1" | grep -c '^build-')" 0 "the scratch directory is gone"

# ---- the published variant loads -------------------------------------------------------------------
# get_kernel(acme/relu, version=1) with the real kernels loader when its
# sources are at hand (KERNELS_GIT_DIR and HF_HUB_GIT_DIR, see
# tests/lib/real_loader.sh), else the loader's own steps by hand; relu must
# equal torch.relu on random tensors.
. "$KHUB_SRC/tests/lib/real_loader.sh"
khub admin trust set acme >/dev/null 2>&1
LOADER_PATH=$(real_loader_pythonpath "$TEST_DIR/loader" 2>/dev/null) || LOADER_PATH=
loaded=$(cd "$TEST_DIR" && PYTHONPATH=$LOADER_PATH HF_HUB_CACHE=$TEST_DIR/hf-cache HF_HOME=$TEST_DIR/hf-home \
	HF_HUB_DISABLE_XET=1 /usr/bin/python3 "$KHUB_SRC/tests/integration/lib/load_kernel.py" "$KHUB_URL" acme/relu 1 \
	--expect-variant "$VARIANT" --token "$ALICE" 2>"$TEST_DIR/load.err")
load_rc=$?
ok $load_rc "get_kernel(acme/relu, version=1) loads $VARIANT and its relu equals torch.relu: $loaded"
[ $load_rc -eq 0 ] || sed 's/^/#   /' "$TEST_DIR/load.err" | tail -8

# ---- SIGKILL mid-build: the lease expires, another worker completes it -------------------------------------
cd "$TEST_DIR/clone" || bail "no clone"
printf '\n# second revision\n' >>build.toml
git commit -qam "touch build.toml" && push main
ok $? "second push" || sed 's/^/#   /' "$TEST_DIR/git.err"
SHA2=$(git rev-parse HEAD)
ID2=$(enqueue "$SHA2")
like "$ID2" '^[0-9]+$' "build #$ID2 enqueued"
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work" --poll-seconds 1 2>>"$W/w1.log" &
WPID=$!
CHILD=
for _ in $(seq 1 6000); do	# the daemon probes its toolchain (imports torch) first: slow on a busy machine
	CHILD=$(pgrep -P "$WPID" -f -- ' build .*--source ' | head -1)	# the build, not the probe
	[ -n "$CHILD" ] && break
	sleep 0.05
done
# Stopped as soon as it is seen: this build is all cache hits (seconds), and
# stopped it cannot finish before the kill below, however slow this test is.
[ -n "$CHILD" ] && kill -STOP "$CHILD"
ok $([ -n "$CHILD" ] && [ "$(build_field "$ID2" '.state')" = running ]; echo $?) \
	"w1 claimed build #$ID2 and started its build process"
if [ -n "$CHILD" ]; then
	ENV=$(tr '\0' '\n' <"/proc/$CHILD/environ" 2>/dev/null)
	ok $(! grep -qF "$T1" <<<"$ENV" && ! grep -q '^KHUB_' <<<"$ENV"; echo $?) \
		"the build process's environment has no token and no KHUB_ variable"
	is "$(ps -o pgid= -p "$CHILD" | tr -d ' ')" "$CHILD" "the build process leads its own process group"
fi
for _ in $(seq 1 1500); do	# the daemon's first line of this attempt uploaded (it flushes its log as it goes)
	api GET "/api/builds/$ID2/log"
	grep -q "^\[khub-worker\] build $ID2 of " "$B" && break
	sleep 0.2
done
kill -KILL "$WPID"
wait "$WPID" 2>/dev/null
gone=1
for _ in $(seq 1 600); do
	[ -z "$CHILD" ] || ! pgrep -g "$CHILD" >/dev/null && { gone=0; break; }
	sleep 0.1
done
is "$gone" 0 "SIGKILL of the worker takes its build's processes down"
wait_state "$ID2" queued 300
ok $? "the lease expired: build #$ID2 is queued again"
is "$(build_field "$ID2" '.attempt')" 1 "with its attempt counted"
for _ in $(seq 1 60); do
	worker w2 --once
	st=$(build_field "$ID2" '.state')
	[ "$st" = succeeded ] || [ "$st" = failed ] && break
	sleep 1
done
is "$(build_field "$ID2" '.state')" succeeded "w2 completed build #$ID2"
like "$(cat "$W/w2.log")" "claimed build #$ID2 .*\(attempt 2 of [0-9]+\)" "on its second attempt"
# the log keeps both attempts whole and apart: khub's line starts each, and
# the second attempt's first bytes are there (not dropped as "already sent")
api GET "/api/builds/$ID2/log"
parts=$(/usr/bin/python3 - "$B" <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
heads = [m.start() for m in re.finditer(r"^\[khub\] attempt \d+ of \d+ on worker \S+$", text, re.M)]
parts = [text[a:b] for a, b in zip(heads, heads[1:] + [len(text)])]
for p in parts:
    lines = p.splitlines()
    print(lines[0], "|", lines[1][:60] if len(lines) > 1 else "", "|", "end" if "build finished" in p else "cut")
EOF
)
like "$parts" "^\[khub\] attempt 1 of [0-9]+ on worker w1 \| \[khub-worker\] build $ID2 of acme/relu@[0-9a-f]+ \| cut" \
	"build #$ID2's log: attempt 1 (w1, killed) from its first line"
like "$parts" $'\n'"\[khub\] attempt 2 of [0-9]+ on worker w2 \| \[khub-worker\] build $ID2 of acme/relu@[0-9a-f]+ \| end\$" \
	"then attempt 2 (w2) whole, from its first line to the end"
is "$(publications "$ID2")" 1 "build #$ID2 published exactly once"
worker w1 --once
like "$(cat "$W/w1.log")" "removing .*/w1/build-$ID2-.*, left by an earlier run" "w1's next run removes the killed run's scratch dir"
is "$(ls "$W/work/w1" | grep -c '^build-')" 0 "and none is left"

# ---- cancel and stop --------------------------------------------------------------------------------------
start_daemon() {	# start_daemon NAME ID: a daemon in the background ($WPID) once it runs build ID ($CHILD)
	"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/$1.token" --toolchains "$W/toolchains.json" --name "$1" \
		--work-dir "$W/work" --poll-seconds 1 --kill-grace-seconds 2 2>>"$W/$1.log" &
	WPID=$!
	CHILD=
	for _ in $(seq 1 1200); do	# bounded; the toolchain probe comes first
		CHILD=$(pgrep -P "$WPID" | head -1)
		[ -n "$CHILD" ] && [ "$(build_field "$2" '.state')" = running ] && return 0
		sleep 0.25
	done
	return 1
}
exited_within() {	# exited_within PID SECONDS: 0 once PID is gone; its status in $EXIT
	local i
	for i in $(seq 1 $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || { wait "$1"; EXIT=$?; return 0; }
		sleep 0.1
	done
	return 1
}
ID3=$(enqueue "$SHA2" true)
start_daemon w1 "$ID3"
ok $? "build #$ID3 running on w1"
api POST "/api/builds/$ID3/cancel"
is "$STATUS" 200 "cancel build #$ID3"
gone=1
for _ in $(seq 1 1200); do pgrep -g "$CHILD" >/dev/null || { gone=0; break; }; sleep 0.1; done
is "$gone" 0 "the worker killed the canceled build's process group at its next heartbeat"
for _ in $(seq 1 1200); do grep -q "canceled build #$ID3" "$W/w1.log" && break; sleep 0.1; done
like "$(cat "$W/w1.log")" "canceled build #$ID3 " "and logged it"
is "$(build_field "$ID3" '.state')/$(publications "$ID3")" canceled/0 "build #$ID3 canceled, nothing published"
api GET "/api/builds/$ID3/log"
like "$(cat "$B")" '\[khub-worker\] canceled; build killed' "its log ends with the worker's note"
for _ in $(seq 1 1200); do [ "$(ls "$W/work/w1" | grep -c '^build-')" = 0 ] && break; sleep 0.1; done
is "$(ls "$W/work/w1" | grep -c '^build-')" 0 "its scratch directory is gone"

# SIGTERM twice: the build is killed and given back, its attempt not counted
ID4=$(enqueue "$SHA2" true)
for _ in $(seq 1 1200); do [ "$(build_field "$ID4" '.state')" = running ] && break; sleep 0.1; done
ok $([ "$(build_field "$ID4" '.state')" = running ]; echo $?) "the idle daemon claimed build #$ID4"
for _ in $(seq 1 1200); do CHILD=$(pgrep -P "$WPID" | head -1); [ -n "$CHILD" ] && break; sleep 0.1; done
kill -TERM "$WPID"
sleep 0.5
kill -0 "$WPID" 2>/dev/null
ok $? "after one SIGTERM the daemon waits for its build"
kill -TERM "$WPID"
exited_within "$WPID" 300
ok $? "a second SIGTERM ends it (the build killed, not waited for)"
is "$EXIT" 0 "exit status 0"
ok $( ! pgrep -g "$CHILD" >/dev/null; echo $?) "no process of the build is left"
like "$(cat "$W/w1.log")" "released build #$ID4 " "the worker released build #$ID4"
is "$(build_field "$ID4" '.state')/$(build_field "$ID4" '.attempt')" queued/0 \
	"build #$ID4 is queued again, no attempt counted"

# SIGTERM once: the running build finishes and is published, then the daemon exits
start_daemon w1 "$ID4"
ok $? "build #$ID4 running on w1 again"
kill -TERM "$WPID"
exited_within "$WPID" 300
ok $? "after one SIGTERM the daemon exits once the build is done"
is "$EXIT" 0 "exit status 0"
# a rebuild of SHA2, which build #$ID2 published: the same bytes, nothing new on v1
is "$(build_field "$ID4" '.state')/$(publications "$ID4")" succeeded/0 "build #$ID4 finished; nothing published again"
like "$(build_field "$ID4" '.note')" "^identical to published commit [0-9a-f]{40}\$" "it is identical to the published commit"
like "$(cat "$W/w1.log")" "signal 15: no more claims" "the worker logged that it stopped claiming"

# ---- two workers, one queue ---------------------------------------------------------------------------
IDS=
for b in b1 b2 b3; do
	git checkout -q -b "$b" main
	printf '\n# branch %s\n' "$b" >>build.toml
	git commit -qam "$b" && push "$b"
	id=$(enqueue "$(git rev-parse HEAD)")
	IDS="$IDS $id"
	git checkout -q main
done
like "$IDS" '^ [0-9]+ [0-9]+ [0-9]+$' "three more builds queued:$IDS"
: >"$W/w1.log"
: >"$W/w2.log"
worker w1 --once --poll-seconds 0 &
P1=$!
worker w2 --once --poll-seconds 0 &
P2=$!
wait "$P1"
wait "$P2"
C1=$(sed -n 's/.*claimed build #\([0-9]*\) .*/\1/p' "$W/w1.log" | sort -n)
C2=$(sed -n 's/.*claimed build #\([0-9]*\) .*/\1/p' "$W/w2.log" | sort -n)
diag "w1 built: $(echo $C1), w2 built: $(echo $C2)"
is "$(comm -12 <(echo "$C1") <(echo "$C2") | grep -c .)" 0 "no build was claimed by both workers"
is "$(printf '%s\n%s\n' "$C1" "$C2" | grep . | sort -n | tr '\n' ' ')" "$(echo $IDS | tr ' ' '\n' | sort -n | tr '\n' ' ')" \
	"between them they built each job once"
for id in $IDS; do
	is "$(build_field "$id" '.state')/$(publications "$id")" succeeded/1 "build #$id succeeded, published once"
done
# ---- abi_policy = enforce: the Debian toolchain's GLIBC_2.32 symbol refuses it -------------------------
V1_HEAD=$(git ls-remote "$REMOTE" refs/heads/v1 | cut -f1)
khub_stop
KHUB_ABI_POLICY=enforce khub_start
ID5=$(enqueue "$SHA2" true)
worker w1 --once
is "$(build_field "$ID5" '.state')" failed "abi_policy=enforce: the build with ABI violations failed"
like "$(build_field "$ID5" '.error')" "ABI" "its error names the ABI check"
like "$(build_field "$ID5" '.abi_report.text')" "GLIBC: 2.32" "its ABI report is kept and names the symbol version"
is "$(git ls-remote "$REMOTE" refs/heads/v1 | cut -f1)" "$V1_HEAD" "nothing was published: v1 did not move"
is "$(publications "$ID5")" 0 "no commit names build #$ID5"
done_testing
