#!/bin/bash
# t0147-build-reproducible.sh -- the same source and toolchain give the same
# bytes through the build farm: examples/relu pushed with git is built (CPU,
# Debian's python3-torch) and published on v1; a forced rebuild of the same
# commit by a worker with another work directory (a scratch dir of another
# name and length) and a relative --toolchains path gives the same digest,
# publishes nothing (v1 does not move; the build says "identical to
# published commit X") and keeps the attempt's log apart; the .so that
# `khub-worker build` makes by hand in yet another scratch dir, given the
# commit and its time, is byte-identical to the published one. Then a worker
# whose toolchains file went away after it started (`khub-worker build`
# exits 64): the job goes back to the queue, no attempt spent, and the
# worker stops with exit 1. Prints the build timings (diag lines).
. "$(dirname "$0")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs torch	# $WORKER_BIN, or a skip
KSRC=$KHUB_SRC/examples/relu

khub_setup
export KHUB_ABI_POLICY=warn	# Debian's toolchain links a GLIBC_2.32 symbol
W=$TEST_DIR/worker
mkdir -p "$W" "$TEST_DIR/readme"
worker_toolchain "$W/toolchains.json"
worker_check "$W/toolchains.json"	# $VARIANT, or a skip
diag "building $VARIANT"

khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
for w in w1 w2 w3; do
	khub admin worker add $w 2>/dev/null | tail -n 1 >"$W/$w.token"
done
chmod 600 "$W"/*.token
printf '# relu\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start

H=$TEST_DIR/headers
B=$TEST_DIR/body
api() {	# api METHOD PATH [curl args]: status in $STATUS, body in $B
	local method=$1 path=$2; shift 2
	STATUS=$(curl -s -X "$method" -D "$H" -o "$B" -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$@" \
		"$KHUB_URL$path")
}
json() { jq -r "$@" "$B" 2>/dev/null; }	# json JQ-FILTER [jq args]: on the last body
build_field() { api GET "/api/builds/$1"; json "$2"; }
wait_state() {	# wait_state ID SECONDS STATE...: 0 once the build is in one of STATEs (polled, bounded)
	local id=$1 secs=$2 i st; shift 2
	for i in $(seq 1 $((secs * 2))); do
		st=$(build_field "$id" '.state')
		for want in "$@"; do [ "$st" = "$want" ] && return 0; done
		sleep 0.5
	done
	return 1
}
v1_head() { git ls-remote "$REMOTE" refs/heads/v1 | cut -f1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", b - a }'; }
build_seconds() {	# build_seconds ID: what `khub-worker build` said it took, from the build's log
	api GET "/api/builds/$1/log"
	sed -n 's/.*khub-worker build: ok: .* in \([0-9.]*\) s (.*/\1/p' "$B" | tail -1
}

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
REMOTE=http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu
git clone -q "$REMOTE" "$TEST_DIR/clone" 2>"$TEST_DIR/git.err" || bail "git clone failed: $(cat "$TEST_DIR/git.err")"
cd "$TEST_DIR/clone" || bail "no clone"
cp -r "$KSRC"/. .
git add -A >/dev/null && git commit -qm "relu source" || bail "commit failed"
SHA=$(git rev-parse HEAD)
EPOCH=$(git log -1 --format=%ct)

# ---- the first build: push → published ----------------------------------------------------------
# the worker waits for work before the push, so the figure is push to published
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work-a" --poll-seconds 1 2>>"$W/w1.log" &
WPID=$!
for _ in $(seq 1 600); do grep -q 'registered with' "$W/w1.log" && break; sleep 0.5; done
like "$(cat "$W/w1.log")" "registered with $KHUB_URL as w1" "w1 is up and waiting for work"
t_push=$(now)
git push -q origin main 2>"$TEST_DIR/git.err"
ok $? "git push of examples/relu" || sed 's/^/#   /' "$TEST_DIR/git.err"
ID1=
for _ in $(seq 1 600); do
	api GET "/api/kernels/acme/relu/builds?limit=100"
	ID1=$(json --arg c "$SHA" --arg v "$VARIANT" '[.builds[] | select(.commit == $c and .variant == $v) | .id][0] // empty')
	[ -n "$ID1" ] && break
	sleep 0.5
done
like "$ID1" '^[0-9]+$' "the push queued build #$ID1"
wait_state "$ID1" 1800 succeeded failed
t_published=$(now)
is "$(build_field "$ID1" '.state')" succeeded "build #$ID1 succeeded"
kill -TERM "$WPID"; wait "$WPID"
diag "first build: push → published $(secs "$t_push" "$t_published") s; khub-worker build $(build_seconds "$ID1") s"
HEAD1=$(v1_head)
like "$HEAD1" '^[0-9a-f]{40}$' "v1 is at $HEAD1"
is "$(build_field "$ID1" '.published.commit')" "$HEAD1" "build #$ID1 published it"
api GET "/api/builds/$ID1/log"
like "$(head -1 "$B")" "^\[khub\] attempt 1 of [0-9]+ on worker w1$" "its log starts with khub's line for attempt 1"
SO=_relu_cpu_${SHA:0:7}.abi3.so
curl -s -o "$TEST_DIR/published.so" -H "Authorization: Bearer $ALICE" \
	"$KHUB_URL/kernels/acme/relu/resolve/v1/build/$VARIANT/$SO"
curl -s -o "$TEST_DIR/published.json" -H "Authorization: Bearer $ALICE" \
	"$KHUB_URL/kernels/acme/relu/resolve/v1/build/$VARIANT/metadata.json"
meta=$(jq -r '.khub | "\(.worker) \(.commit) \(.["source-date"]) \(has("built-at"))"' "$TEST_DIR/published.json")
is "$meta" "w1 $SHA $(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%S.000Z) false" \
	"metadata.json: khub.worker names the worker, khub.source-date is the commit's time, no build time"
ok $(strings "$TEST_DIR/published.so" | grep -qE 'khub-build-|/work-a/'; [ $? -ne 0 ]; echo $?) \
	"the published .so holds no scratch path"

# ---- a forced rebuild of the same commit, another scratch dir, relative paths ------------------------------
api POST /api/kernels/acme/relu/builds -H 'Content-Type: application/json' \
	-d "{\"revision\": \"$SHA\", \"variants\": [\"$VARIANT\"], \"force\": true}"
ID2=$(json '.builds[0].id')
like "$ID2" '^[0-9]+$' "a forced rebuild of $SHA queued as build #$ID2"
mkdir -p "$W/elsewhere/a/much/longer/work/dir/name"
t0=$(now)
(cd "$W" && "$WORKER_BIN" --url "$KHUB_URL" --token-file w2.token --toolchains toolchains.json --name w2 \
	--work-dir elsewhere/a/much/longer/work/dir/name --once 2>>"$W/w2.log")
is "$?" 0 "w2 (relative --toolchains and --work-dir) ran the queue dry"
t1=$(now)
diag "rebuild: claimed → done $(secs "$t0" "$t1") s; khub-worker build $(build_seconds "$ID2") s"
is "$(build_field "$ID2" '.state')" succeeded "build #$ID2 succeeded (no exit 64 from a relative toolchains path)"
is "$(build_field "$ID2" '.note')" "identical to published commit $HEAD1" "it says it is identical to the published commit"
is "$(build_field "$ID2" '.published.commit')" "$HEAD1" "and names that commit as its publication"
is "$(v1_head)" "$HEAD1" "v1 did not move: no new commit"
api GET "/api/kernels/acme/relu/commits/v1?limit=1000"
is "$(json --arg t "(build #$ID2)" '[.[] | select(.title | contains($t))] | length')" 0 "no commit names build #$ID2"
like "$(cat "$W/w2.log")" "published build #$ID2 .*identical to published commit $HEAD1" "the worker logs it too"

# ---- the same .so by hand, in yet another scratch dir --------------------------------------------------
"$WORKER_BIN" build --toolchains "$W/toolchains.json" --toolchain cpu-debian --source "$TEST_DIR/clone" \
	--out "$TEST_DIR/by-hand" --variant "$VARIANT" --commit "$SHA" --source-date-epoch "$EPOCH" \
	--work-dir "$TEST_DIR/x" >"$TEST_DIR/by-hand.log" 2>&1
is "$?" 0 "khub-worker build of the clone by hand"
cmp "$TEST_DIR/by-hand/$VARIANT/$SO" "$TEST_DIR/published.so"
ok $? "its $SO is byte-identical to the one published on v1"
dig() { jq -cS '.digest' "$1"; }
is "$(dig "$TEST_DIR/by-hand/$VARIANT/metadata.json")" "$(dig "$TEST_DIR/published.json")" "and its digest is the published one"

# ---- a misconfigured worker gives the job back and stops -----------------------------------------------
cp "$W/toolchains.json" "$W/w3-toolchains.json"
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w3.token" --toolchains "$W/w3-toolchains.json" --name w3 \
	--work-dir "$W/work-c" --poll-seconds 1 2>>"$W/w3.log" &
WPID=$!
for _ in $(seq 1 600); do grep -q 'registered with' "$W/w3.log" && break; sleep 0.5; done
like "$(cat "$W/w3.log")" "registered with" "w3 is up"
rm "$W/w3-toolchains.json"	# what `khub-worker build` reads: it will exit 64
api POST /api/kernels/acme/relu/builds -H 'Content-Type: application/json' \
	-d "{\"revision\": \"$SHA\", \"variants\": [\"$VARIANT\"], \"force\": true}"
ID3=$(json '.builds[0].id')
stopped=1
for _ in $(seq 1 600); do kill -0 "$WPID" 2>/dev/null || { stopped=0; break; }; sleep 0.5; done
is "$stopped" 0 "w3 stopped by itself after claiming build #$ID3"
wait "$WPID"
is "$?" 1 "with exit status 1"
like "$(cat "$W/w3.log")" "misconfigured" "its log says it is misconfigured"
is "$(build_field "$ID3" '.state') $(build_field "$ID3" '.attempt')" "queued 0" \
	"build #$ID3 is queued again, no attempt spent (not the author's failure)"
api GET "/api/builds/$ID3/log"
like "$(cat "$B")" "worker misconfigured: .*exit 64.*the job goes back to the queue and worker w3 stops" \
	"its log says the worker gave it back"
api POST "/api/builds/$ID3/cancel"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "no sanitizer report"
done_testing
