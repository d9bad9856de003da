#!/bin/bash
# t0133-worker-alone.sh -- khub-worker's daemon where no build farm answers:
# an unreachable khub fails clearly with --once and is retried (with a clear
# line) without it, until SIGTERM stops it at once; the token is never
# taken on the command line; a missing token or toolchain file says what is missing; --check
# names an unusable toolchain; the work dir of a running worker is not
# shared with a second one of the same name.
. "$(dirname "$0")/../lib/khub-test.sh"

WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
[ -x "$WORKER_BIN" ] || bail "khub-worker not built ($WORKER_BIN)"
khub_setup
worker() { "$WORKER_BIN" "$@"; }

W=$TEST_DIR/worker
mkdir -p "$W"
printf 'not-a-real-token\n' >"$W/token"
chmod 600 "$W/token"
# A toolchain on the system Python (usable when it has torch), and one
# whose Python does not exist.
cat >"$W/toolchains.json" <<EOF
{"toolchains": [{"name": "cpu", "python": "/usr/bin/python3", "cxx": "g++"}]}
EOF
cat >"$W/broken.json" <<EOF
{"toolchains": [{"name": "broken", "python": "$TEST_DIR/no/such/python", "cxx": "g++"}]}
EOF
USABLE=0
worker --check --toolchains "$W/toolchains.json" >"$W/check.out" 2>&1 && USABLE=1
diag "system toolchain usable: $USABLE"

# ---- --check ------------------------------------------------------------------------------
worker --check --toolchains "$W/broken.json" >"$W/out" 2>&1
rc=$?
is "$rc" 1 "--check with no usable toolchain exits 1"
like "$(cat "$W/out")" 'broken: (not usable|unusable): .+' "--check names the toolchain and why it is not usable"
worker --check --toolchains "$W/missing.json" >"$W/out" 2>&1
rc=$?
ok $([ "$rc" -ne 0 ]; echo $?) "--check with a missing toolchains file fails"
like "$(cat "$W/out")" 'missing\.json' "and names the file"

# ---- usage errors ---------------------------------------------------------------------------
worker --url http://127.0.0.1:1 --token secret --toolchains "$W/toolchains.json" --once >"$W/out" 2>&1
is "$?" 64 "a token on the command line (--token) is refused: usage error"
like "$(cat "$W/out")" 'not taken on the command line' "saying why"
(unset KHUB_WORKER_TOKEN; worker --url http://127.0.0.1:1 --toolchains "$W/toolchains.json" --once) >"$W/out" 2>&1
rc=$?
ok $([ "$rc" -ne 0 ]; echo $?) "no token at all fails"
like "$(cat "$W/out")" 'no worker token: --token-file FILE or KHUB_WORKER_TOKEN' "and says how to give one"
worker --url http://127.0.0.1:1 --token-file "$W/nope" --toolchains "$W/toolchains.json" --once >"$W/out" 2>&1
like "$(cat "$W/out")" "cannot read the token file .*nope" "an unreadable token file is named"
worker --url http://127.0.0.1:1 --token-file "$W/token" --toolchains "$W/broken.json" --once \
	--work-dir "$W/work" >"$W/out" 2>&1
rc=$?
is "$rc" 1 "no usable toolchain: exit 1"
like "$(cat "$W/out")" 'no usable toolchain' "and says so"

if [ "$USABLE" = 1 ]; then
	# ---- unreachable khub ---------------------------------------------------------------------
	worker --url http://127.0.0.1:1 --token-file "$W/token" --toolchains "$W/toolchains.json" --once \
		--work-dir "$W/work" >"$W/out" 2>&1
	rc=$?
	is "$rc" 1 "--once against an unreachable khub exits 1"
	like "$(cat "$W/out")" 'cannot reach khub at http://127\.0\.0\.1:1: .*(refused|connect)' \
		"with a clear message naming the URL and the cause"
	# counted, not timed: the toolchain probe before it takes what the machine's load makes it
	is "$(grep -c 'retrying in' "$W/out")" 2 "after two retries (three tries in all)"

	# without --once it keeps trying (a daemon waits for its hub) and says so; SIGTERM ends it
	"$WORKER_BIN" --url http://127.0.0.1:1 --token-file "$W/token" --toolchains "$W/toolchains.json" \
		--work-dir "$W/work" >"$W/daemon.out" 2>&1 &
	DPID=$!
	# bounded, not a margin: it probes its toolchain (imports torch) before the first try
	for _ in $(seq 1 1200); do grep -q 'retrying in' "$W/daemon.out" && break; sleep 0.25; done
	like "$(cat "$W/daemon.out")" 'khub at http://127\.0\.0\.1:1 unreachable or failing .*retrying in [0-9]+ s' \
		"the daemon logs each failed attempt and retries"
	# a second worker of the same name cannot take the same work dir
	worker --url http://127.0.0.1:1 --token-file "$W/token" --toolchains "$W/toolchains.json" --once \
		--work-dir "$W/work" >"$W/out" 2>&1
	like "$(cat "$W/out")" 'in use by another khub-worker' "a second worker of the same name is refused the work dir"
	# it would retry forever: ending at all shows SIGTERM ends the wait
	# (its naps grow to 60 s; the bound is generous, not a margin)
	kill -TERM "$DPID"
	stopped=1
	for _ in $(seq 1 1200); do kill -0 "$DPID" 2>/dev/null || { stopped=0; break; }; sleep 0.25; done
	is "$stopped" 0 "SIGTERM stops it while it waits"
	wait "$DPID"
	is "$?" 0 "and it exits 0"

else
	diag "$(cat "$W/check.out")"
	for _ in 1 2 3 4 5 6 7 8 9; do
		TAP_COUNT=$((TAP_COUNT + 1)); echo "ok $TAP_COUNT # SKIP no usable toolchain on this machine"
	done
fi
done_testing
