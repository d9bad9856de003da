#!/bin/bash
# t0139-sandbox-escape.sh -- hostile build code against the real worker's
# sandbox. A noarch kernel whose torch-ext/evil/__init__.py (run by the
# smoke import) is tests/integration/lib/sandbox_attacks.py tries to: read
# the worker token (its file, the environment, the parent's and the
# daemon's /proc/PID/environ and cmdline), /etc/shadow, another build's
# scratch, /root, /home, /var; write outside its scratch (/usr, /etc, /,
# the work dir, the host's /tmp); mount, remount / read-write, unmount
# /proc, unshare, setns, ptrace, keyctl, bpf, pivot_root, userfaultfd; see
# the host's processes; reach the network; start 10,000 processes; fill
# the disk. Every attempt must be refused, with `khub-worker build` run as
# root (build code then runs as --build-user 4139) and as an unprivileged
# user, and through the daemon, where the uploaded build log and the
# worker's own log never hold the token (build code printing it, whole or
# cut in two, is scrubbed to [worker token]). The 10,000 processes spend
# the process limit of the uid they run as: 4139 and 4242 are this test's
# own, so other tests' builds (uid 65534 and the daemon's defaults) run
# beside it unharmed.
. "$(dirname "$0")/../lib/khub-test.sh"

. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs torch bwrap root	# $WORKER_BIN, $PY, or a skip (it runs the worker as root and as another user)
ATTACKS=$KHUB_SRC/tests/integration/lib/sandbox_attacks.py
UNPRIV=4242	# the unprivileged worker's uid (no account needed)
BUILD_UID=4139	# the root worker's build uid: this test's own (no account needed)

khub_setup
W=$TEST_DIR/worker
mkdir -p "$W"
worker_toolchain "$W/toolchains.json"
# what build code must never read: a token file, another build's scratch
printf 'khw_sandbox_test_token_%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$W/token"
chmod 600 "$W/token"
TOKEN=$(cat "$W/token")
TOKEN_HASH=$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)
TMP_MARKER=/tmp/khub-t0139-marker-$$

# The attacks every run must report, blocked.
NAMES="token-file shadow other-scratch work-dir root-home home var scratch-neighbours stage-link source-link environment
proc-environ-init proc-cmdline-init proc-environ-parent proc-cmdline-parent proc-environ-host proc-cmdline-host
host-processes identity no-new-privs seccomp mount-tmpfs remount-rw umount-proc unshare-user unshare-mount
unshare-command network-127.0.0.1 network-1.1.1.1 processes"
[ "$(uname -m)" = x86_64 ] && NAMES="$NAMES ptrace-attach keyctl bpf setns pivot-root userfaultfd"

# evil_kernel DIR WORK LEAK PROCESSES FILL_MB: the hostile noarch kernel in DIR
evil_kernel() {
	local dir=$1 work=$2 leak=$3 procs=$4 fill=$5
	mkdir -p "$dir/torch-ext/evil"
	cat >"$dir/build.toml" <<'EOF'
[general]
name = "evil"
version = 1
edition = 5
license = "MIT"
backends = ["cpu"]

[torch-noarch]
EOF
	{
		printf 'CONFIG = {"token_file": "%s", "work_dir": "%s", "decoy": "%s", "host_pid": %d, ' \
			"$W/token" "$work" "$work/khub-build-other/secret" $$
		printf '"server_port": %d, "tmp_marker": "%s", "processes": %d, "fill_mb": %d, "leak": %s}\n' \
			"${KHUB_PORT:-1}" "$TMP_MARKER" "$procs" "$fill" "$leak"
		cat "$ATTACKS"
	} >"$dir/torch-ext/evil/__init__.py"
	chmod -R a+rX "$dir"
}

# check_attacks LOG WORK LABEL: every attack blocked, nothing written on the host
check_attacks() {
	local log=$1 work=$2 label=$3 name line
	for name in $NAMES; do
		line=$(grep -m1 "^ATTACK $name:" "$log")
		like "$line" "^ATTACK $name: blocked" "$label: $name refused${line:+ -- ${line#*: }}"
	done
	is "$(grep -c 'ESCAPED' "$log")" 0 "$label: no attack escaped"
	grep 'ESCAPED' "$log" | sed 's/^/#   /'
	like "$(grep '^ATTACK processes:' "$log")" 'blocked \([0-9]+ of 10000 processes: fork failed' \
		"$label: 10,000 processes: fork fails at the process limit"
	is "$(grep -c "SECRET $TOKEN_HASH" "$log")" 0 "$label: the token was read nowhere (no hash of it in the log)"
	local leaked=
	for f in /usr/khub-pwned /etc/khub-pwned /khub-pwned "$work/khub-pwned" "$TMP_MARKER"; do
		[ -e "$f" ] && leaked="$leaked $f"
	done
	is "$leaked" "" "$label: no write reached the host (/usr, /etc, /, the work dir, the host's /tmp)"
	is "$(cat "$work/khub-build-other/secret")" "other build" "$label: the other build's scratch is untouched"
}

# run_build LABEL AS_UID WORK [ARGS...]: `khub-worker build` of $EVIL as root or uid AS_UID
run_build() {
	local label=$1 as=$2 work=$3; shift 3
	local out=$TEST_DIR/out-$label
	local cmd=("$WORKER_BIN" build --toolchains "$W/toolchains.json" --toolchain cpu-debian --source "$EVIL"
		--out "$out" --variant torch-cpu --work-dir "$work" --wall-seconds 600 "$@")
	if [ "$as" = 0 ]; then
		"${cmd[@]}" --build-user "$BUILD_UID" >"$TEST_DIR/$label.log" 2>&1
	else
		mkdir -p "$out" && chown "$as:$as" "$out"
		setpriv --reuid "$as" --regid "$as" --clear-groups "${cmd[@]}" >"$TEST_DIR/$label.log" 2>&1
	fi
	RC=$?
}

# attack_round LABEL AS_UID: the attacks, then the full disk, by hand as AS_UID
attack_round() {
	local label=$1 as=$2
	local work=$TEST_DIR/work-$label
	mkdir -p "$work/khub-build-other"
	echo "other build" >"$work/khub-build-other/secret"
	chmod 700 "$work/khub-build-other"
	[ "$as" = 0 ] || chown -R "$as:$as" "$work"
	EVIL=$TEST_DIR/evil-$label
	evil_kernel "$EVIL" "$work" None 10000 0
	run_build "$label" "$as" "$work" --cpu-seconds 600
	is "$RC" 0 "$label: the hostile kernel's build ends normally (its attacks failed, its import ran)"
	like "$(grep -m1 'sandbox bubblewrap:' "$TEST_DIR/$label.log")" \
		"uid 1000 in its own user namespace \($( [ "$as" = 0 ] && echo "$BUILD_UID" || echo "$as") outside\), no capabilities, no_new_privs, seccomp filter on; namespaces: user own, pid own, net own \(no network\), ipc own, mount own; limits: processes 512" \
		"$label: the build log says what isolation it got"
	check_attacks "$TEST_DIR/$label.log" "$work" "$label"
	[ "$(grep -c 'ATTACKS DONE' "$TEST_DIR/$label.log")" = 1 ] || sed 's/^/#   /' "$TEST_DIR/$label.log" | grep -v SECRET | tail -20

	# a full disk: /tmp is a tmpfs the disk limit's size, the scratch is watched
	EVIL=$TEST_DIR/evil-$label-disk
	evil_kernel "$EVIL" "$work" None 10 200
	run_build "$label-disk" "$as" "$work" --disk-mb 50
	is "$RC" 3 "$label: 200 MiB written under --disk-mb 50: exit 3 (a limit was hit)"
	like "$(grep '^ATTACK tmp-fill:' "$TEST_DIR/$label-disk.log")" 'blocked \(/tmp: ENOSPC\)' \
		"$label: /tmp fills up at the disk limit (ENOSPC)"
	like "$(cat "$TEST_DIR/$label-disk.log")" 'over the disk limit of 50 MiB: killed' \
		"$label: the scratch growing over the limit gets the build killed"
	is "$(grep -c '^ATTACK disk-fill' "$TEST_DIR/$label-disk.log")" 0 "$label: before it wrote its 200 MiB"
	is "$(ls "$work" | grep -c '^khub-build-[^o]')" 0 "$label: both scratch directories are gone"
}

# ---- `khub-worker build` as root: build code runs as uid 4139 -------------------------------------
attack_round root 0

# ---- as an unprivileged worker user ----------------------------------------------------------------
if setpriv --reuid $UNPRIV --regid $UNPRIV --clear-groups test -x "$WORKER_BIN" 2>/dev/null; then
	attack_round unprivileged $UNPRIV
else
	ok 0 "# SKIP uid $UNPRIV cannot run $WORKER_BIN (a checkout below a private directory)"
fi

# ---- --sandbox unshare is refused, --check reports the isolation ------------------------------------
EVIL=$TEST_DIR/evil-root
run_build unshare 0 "$TEST_DIR/work-root" --sandbox unshare
is "$RC" 64 "--sandbox unshare (no user namespace, / visible) is refused"
like "$(cat "$TEST_DIR/unshare.log")" 'unshare is refused: it cannot hide the machine' "saying why"
"$WORKER_BIN" --check --toolchains "$W/toolchains.json" --build-user "$BUILD_UID" >"$TEST_DIR/check.out" 2>&1
like "$(grep sandbox "$TEST_DIR/check.out" | head -1)" \
	"sandbox bubblewrap: uid 1000 in its own user namespace \\($BUILD_UID outside\\), no capabilities, no_new_privs, seccomp filter on; namespaces: user own, pid own, net own" \
	"--check says what isolation the toolchain's builds get"
cat >"$W/home-toolchain.json" <<EOF
{"toolchains": [{"name": "in-root", "python": "$PY", "env": {"EXTRA": "/root"}}]}
EOF
"$WORKER_BIN" --check --toolchains "$W/home-toolchain.json" >"$TEST_DIR/check2.out" 2>&1
like "$(cat "$TEST_DIR/check2.out")" 'sandbox none: builds are refused: EXTRA=/root is in /root, which a build never sees' \
	"--check: a toolchain reaching into /root is refused, and says so"

# ---- the daemon: the token in no log -----------------------------------------------------------------
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
WTOKEN=$(khub admin worker add w1 2>/dev/null | tail -n 1)
[ -n "$WTOKEN" ] || bail "khub admin worker add failed"
printf '%s\n' "$WTOKEN" >"$W/w1.token"
chmod 600 "$W/w1.token"
WTOKEN_HASH=$(printf '%s' "$WTOKEN" | sha256sum | cut -d' ' -f1)
mkdir -p "$TEST_DIR/readme" "$W/work"
printf '# evil\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/evil --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start
worker() {
	"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" \
		--name w1 --work-dir "$W/work" --build-user "$BUILD_UID" "$@" 2>>"$W/w1.log"
}
worker --once
is "$?" 0 "the worker registers"
mkdir -m 700 "$TEST_DIR/private"
worker --once --work-dir "$TEST_DIR/private/work"
ok $([ $? -ne 0 ]; echo $?) "a root worker whose work dir the build uid cannot reach does not start"
like "$(tail -1 "$W/w1.log")" "build uid $BUILD_UID cannot reach $TEST_DIR/private/work/w1: every directory above it must be searchable" \
	"saying why"

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
git clone -q "http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/evil" "$TEST_DIR/clone" 2>"$TEST_DIR/git.err" ||
	bail "git clone failed: $(cat "$TEST_DIR/git.err")"
# the kernel prints the daemon's token (as if it had got it): whole, and cut across two writes
evil_kernel "$TEST_DIR/clone" "$W/work/w1" "\"$WTOKEN\"" 10000 0
mkdir -p "$W/work/w1/khub-build-other"
echo "other build" >"$W/work/w1/khub-build-other/secret"
(cd "$TEST_DIR/clone" && git add -A >/dev/null && git commit -qm "evil" && git push -q origin main 2>"$TEST_DIR/git.err")
ok $? "git push of the hostile kernel" || sed 's/^/#   /' "$TEST_DIR/git.err"
SHA=$(git -C "$TEST_DIR/clone" rev-parse HEAD)
B=$TEST_DIR/body
ID=
for _ in $(seq 1 100); do
	curl -s -o "$B" -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/kernels/acme/evil/builds?limit=100"
	ID=$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); d=d.get('builds', d) if isinstance(d, dict) else d
print([b['id'] for b in d if b['commit'] == sys.argv[2] and b['variant'] == 'torch-cpu'][0])" "$B" "$SHA" 2>/dev/null)
	[ -n "$ID" ] && break
	sleep 0.2
done
like "$ID" '^[0-9]+$' "the push queued build #$ID of torch-cpu"
worker --once
is "$?" 0 "khub-worker --once ran the queue"
curl -s -o "$TEST_DIR/build.log" -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$ID/log"
like "$(grep -m1 '^ATTACK' "$TEST_DIR/build.log")" 'ATTACK token-file: blocked' "the uploaded build log holds the attacks"
check_attacks "$TEST_DIR/build.log" "$W/work/w1" daemon
is "$(grep -c "SECRET $WTOKEN_HASH" "$TEST_DIR/build.log")" 0 "daemon: the daemon's token was read nowhere"
is "$(grep -cF "$WTOKEN" "$TEST_DIR/build.log")" 0 "the token printed by build code is not in the uploaded log"
like "$(grep '^LEAK whole:' "$TEST_DIR/build.log")" '^LEAK whole: \[worker token\]$' "a whole token is scrubbed to [worker token]"
like "$(grep '^LEAK split:' "$TEST_DIR/build.log")" '^LEAK split: \[worker token\]$' \
	"a token cut across two writes seconds apart is scrubbed too"
is "$(grep -cF "$WTOKEN" "$W/w1.log" "$TEST_DIR/server.log" | awk -F: '{s += $2} END {print s}')" 0 \
	"the token is in neither the worker's log nor the server's"
is "$(ls "$W/work/w1" | grep -c '^build-')" 0 "the job's scratch directory is gone"

rm -f "$TMP_MARKER" /usr/khub-pwned /etc/khub-pwned /khub-pwned	# only there had an attack escaped
done_testing
