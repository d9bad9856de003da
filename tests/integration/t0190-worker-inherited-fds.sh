#!/bin/bash
# t0190-worker-inherited-fds.sh -- build code must find no descriptor of
# the worker's: no connection to khub (which carries the worker's token),
# no pipe, no file. A daemon with --concurrency 2 builds, at once, a
# hostile compiled kernel (acme/relu) and another tenant's chatty noarch
# kernel (bravo/chatty, 60 lines of output). The hostile kernel's build
# script (a `-wrapper` in its torch.cxx-flags, run for every compiler step)
# and its __init__.py (run by the smoke import) are
# tests/integration/lib/fd_probe.py: they list /proc/self/fd and write, on
# every descriptor past 2, a commit to their repo with their author's token
# pipelined with a worker call under a bogus token, and the same bytes on
# their own stdout and stderr. Wanted: build code sees 0, 1 and 2 only
# (bwrap's --seccomp and --ro-bind-data descriptors are read and closed by
# bwrap before it runs anything), so it writes on nothing else; no commit
# is made; the daemon keeps running and logs no rejected token; the other
# tenant's build and a later one succeed with all 60 lines in their logs;
# every descriptor the daemon holds past 2 is close-on-exec.
. "$(dirname "$0")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs torch bwrap root	# $WORKER_BIN, $PY, or a skip (root: builds run as uid 65534)

khub_setup
export KHUB_ABI_POLICY=warn	# Debian's toolchain links a GLIBC_2.32 symbol
W=$TEST_DIR/worker
mkdir -p "$W" "$TEST_DIR/readme"
worker_toolchain "$W/toolchains.json"
worker_check "$W/toolchains.json"	# $VARIANT, or a skip

khub admin org create acme >/dev/null 2>&1
khub admin org create bravo >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin user create bob >/dev/null 2>&1
khub admin member set acme alice admin >/dev/null 2>&1
khub admin member set bravo bob admin >/dev/null 2>&1
ALICE=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
BOB=$(khub admin token create bob --scope write 2>/dev/null | tail -n 1)
khub admin worker add w1 2>/dev/null | tail -n 1 >"$W/w1.token"
chmod 600 "$W/w1.token"
printf '# a kernel\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub import "$TEST_DIR/readme" --repo bravo/chatty --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start

B=$TEST_DIR/body
api() {	# api TOKEN METHOD PATH [curl args]: status in $STATUS, body in $B
	local token=$1 method=$2 path=$3; shift 3
	STATUS=$(curl -s -X "$method" -o "$B" -w '%{http_code}' -H "Authorization: Bearer $token" "$@" "$KHUB_URL$path")
}
json() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$B" 2>/dev/null; }
build_state() { api "$ALICE" GET "/api/builds/$1"; json 'd["state"]'; }
build_log() { curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$1/log"; }
build_id() {	# build_id REPO SHA VARIANT: the build the push queued (polled, bounded)
	local id= _
	for _ in $(seq 1 300); do
		api "$ALICE" GET "/api/kernels/$1/builds?limit=100"
		id=$(json "[b['id'] for b in d['builds'] if b['commit'] == '$2' and b['variant'] == '$3'][0]")
		[ -n "$id" ] && break
		sleep 0.5
	done
	echo "$id"
}
wait_done() {	# wait_done ID: 0 once the build succeeded or failed; 1 when the daemon is gone first
	local st _
	for _ in $(seq 1 3600); do
		st=$(build_state "$1")
		{ [ "$st" = succeeded ] || [ "$st" = failed ]; } && return 0
		kill -0 "$WPID" 2>/dev/null || return 1
		sleep 0.5
	done
	return 1
}

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
clone() {	# clone TOKEN REPO DIR
	git clone -q "http://x:$1@127.0.0.1:$KHUB_PORT/kernels/$2" "$3" 2>"$TEST_DIR/git.err" ||
		bail "git clone $2 failed: $(cat "$TEST_DIR/git.err")"
}

# ---- the hostile kernel: examples/relu with the probe as build script and in __init__.py -------------
E=$TEST_DIR/evil
clone "$ALICE" acme/relu "$E"
cp -r "$KHUB_SRC/examples/relu/." "$E"/
printf '%s\n' '[general]' 'name = "relu"' 'version = 1' 'edition = 5' 'license = "Apache-2.0"' 'backends = ["cpu"]' '' \
	'[torch]' 'src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]' \
	'cxx-flags = ["-wrapper", "/usr/bin/python3,fdprobe.py"]' '' \
	'[kernel.relu_cpu]' 'backend = "cpu"' 'depends = ["torch"]' 'src = ["relu_cpu/relu_cpu.cpp"]' >"$E/build.toml"
{
	printf 'CONFIG = {"port": %d, "token": "%s"}\n' "$KHUB_PORT" "$ALICE"
	cat "$KHUB_SRC/tests/integration/lib/fd_probe.py"
} >"$E/fdprobe.py"
cp "$E/fdprobe.py" "$E/torch-ext/relu/_fdprobe.py"
printf 'from . import _fdprobe  # noqa: F401 (the probe runs on import)\n' >>"$E/torch-ext/relu/__init__.py"
(cd "$E" && git add -A >/dev/null && git commit -qm "relu, hostile") || bail "commit failed"
ESHA=$(git -C "$E" rev-parse HEAD)

# ---- the other tenant's kernel: 60 lines of output over a few seconds ----------------------------------
C=$TEST_DIR/chatty
clone "$BOB" bravo/chatty "$C"
mkdir -p "$C/torch-ext/chatty"
printf '[general]\nname = "chatty"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch-noarch]\n' \
	>"$C/build.toml"
printf '%s\n' 'import time' '' 'for i in range(1, 61):' '    print("CHATTY line %d of 60" % i, flush=True)' \
	'    time.sleep(0.1)' >"$C/torch-ext/chatty/__init__.py"
(cd "$C" && git add -A >/dev/null && git commit -qm "chatty") || bail "commit failed"
CSHA=$(git -C "$C" rev-parse HEAD)

# ---- the daemon, two builds at once ------------------------------------------------------------------------
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work" --concurrency 2 --poll-seconds 2 2>>"$W/w1.log" &
WPID=$!
for _ in $(seq 1 600); do grep -q 'registered with' "$W/w1.log" && break; sleep 0.5; done
like "$(cat "$W/w1.log")" "registered with $KHUB_URL as w1" "w1 is up with --concurrency 2"
(cd "$E" && git push -q origin main 2>"$TEST_DIR/git.err")
ok $? "alice pushes the hostile kernel" || sed 's/^/#   /' "$TEST_DIR/git.err"
(cd "$C" && git push -q origin main 2>"$TEST_DIR/git.err")
ok $? "bob pushes his kernel" || sed 's/^/#   /' "$TEST_DIR/git.err"
EID=$(build_id acme/relu "$ESHA" "$VARIANT")
CID=$(build_id bravo/chatty "$CSHA" torch-cpu)
like "$EID $CID" '^[0-9]+ [0-9]+$' "the pushes queued the hostile build #$EID and the other tenant's #$CID"
wait_done "$EID"
ok $? "the hostile build #$EID ended ($(build_state "$EID")) while the daemon ran"
wait_done "$CID"
is "$(build_state "$CID")" succeeded "the other tenant's build #$CID, run beside it, succeeded"
is "$(build_log "$CID" | grep -c '^CHATTY line [0-9]* of 60$')" 60 "… and its log holds all 60 lines"

# ---- what build code saw and did -----------------------------------------------------------------------------
build_log "$EID" >"$TEST_DIR/evil.log"
grep -E '^(FDS|LINKS|WROTE|REFUSED)' "$TEST_DIR/evil.log" | sed 's/^/#   /'
ok $(grep -q '^FDS build-script: ' "$TEST_DIR/evil.log"; echo $?) "the build script listed its descriptors"
ok $(grep -q '^FDS smoke-import: ' "$TEST_DIR/evil.log"; echo $?) "the smoke import listed its descriptors"
# The build's own log is the pipe the smoke import has as its stdout. The
# build cache's ccache runs each compiler step with its stdout in a file of
# its own and keeps a copy of the step's stdout, that same log pipe, on a
# descriptor past 2: build code reaching its own log reaches nothing of the
# worker's, so that pipe is allowed past 2, and nothing else is.
LOGPIPE=$(grep '^LINKS smoke-import: ' "$TEST_DIR/evil.log" | head -1 | tr ' ' '\n' | sed -n 's/^1->//p')
beyond_log() {	# the descriptors past 2 of probe $1 that are not the build's log
	grep "^LINKS $1: " "$TEST_DIR/evil.log" | tr ' ' '\n' | grep -- '->' | grep -v '^[012]->' |
		awk -v want="${LOGPIPE:-none}" '{ split($0, f, "->"); if (f[2] != want) print }' | sort -u | tr '\n' ' '
}
is "$(grep '^FDS smoke-import: ' "$TEST_DIR/evil.log" | sed 's/^FDS [a-z-]*: //' | sort -u | tr '\n' ';')" "0 1 2;" \
	"the smoke import found descriptors 0, 1 and 2 only"
like "$LOGPIPE" '^pipe:' "… its stdout is the build's log pipe"
is "$(beyond_log build-script)" "" "the build script found no descriptor past 2 but the build's own log"
is "$(grep '^WROTE ' "$TEST_DIR/evil.log" | grep -vF "(${LOGPIPE:-none})" | wc -l)" 0 \
	"so they wrote on no descriptor of the worker's"
is "$(build_state "$EID")" succeeded "the hostile build itself succeeded (its stdio is only its log)"
[ "$(build_state "$EID")" = succeeded ] ||
	grep -vE '^(STDIO|POST|Host|Authorization|Content|\{|$)' "$TEST_DIR/evil.log" | tail -15 | sed 's/^/#   /'
ok $(grep -q '^STDIO smoke-import: POST /api/kernels/acme/relu/commit/main' "$TEST_DIR/evil.log"; echo $?) \
	"the requests it wrote on its stdout and stderr arrived as log text"
GD=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
is "$(git --git-dir="$GD" log --all --format=%s | grep -c 'pwned by build code')" 0 "no commit was made by build code"
is "$(git --git-dir="$GD" log --all --name-only --format= | grep -c 'pwned-by-build-code')" 0 "no file of its is in any ref"

# ---- the daemon: still there, still in step, every descriptor close-on-exec ----------------------------------
kill -0 "$WPID" 2>/dev/null
ok $? "the daemon is still running"
is "$(grep -c 'token rejected' "$W/w1.log")" 0 "its log says no token was rejected"
api "$BOB" POST /api/kernels/bravo/chatty/builds -H 'Content-Type: application/json' \
	-d "{\"revision\": \"$CSHA\", \"variants\": [\"torch-cpu\"], \"force\": true}"
CID2=$(json 'd["builds"][0]["id"]')
wait_done "$CID2"
is "$(build_state "$CID2")" succeeded "a later build #$CID2 of the other tenant's kernel succeeds"
is "$(build_log "$CID2" | grep -c '^CHATTY line [0-9]* of 60$')" 60 "… with all 60 lines in its log"
open_fds=0 inheritable=
for f in /proc/"$WPID"/fdinfo/*; do
	n=${f##*/}
	flags=$(awk '/^flags:/ {print $2}' "$f" 2>/dev/null)
	{ [ -n "$flags" ] && [ "$n" -gt 2 ]; } || continue
	open_fds=$((open_fds + 1))
	(( 8#$flags & 8#2000000 )) || inheritable="$inheritable $n->$(readlink "/proc/$WPID/fd/$n")"
done
is "$inheritable" "" "all $open_fds descriptors the daemon holds past 2 are close-on-exec"
kill -TERM "$WPID"
wait "$WPID"
is "$?" 0 "the daemon stops cleanly on SIGTERM"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "no sanitizer report"
done_testing
