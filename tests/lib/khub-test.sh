# khub-test.sh -- sourced by the integration tests: TAP output, a throw-away
# data dir, and a real khub server (with its embedded PostgreSQL) on a free
# port. Tests run as root in CI; the embedded cluster then runs as the
# 'postgres' user, so the data dir must be searchable by it.
# Nothing may depend on how long an interpreter takes to start or on a lease
# the test does not renew: JSON is read with jq, Python (when needed) is
# Debian's /usr/bin/python3, and a test acting as a build worker heartbeats
# the jobs it holds, as the worker protocol does (docs/build-farm.md).
#
# Commands run through khub() and servers started by khub_start keep the
# embedded PostgreSQL running after they exit (embedded_db_linger_s =
# $KHUB_TEST_LINGER_S, default 3600), so that each command does not start
# and stop it; khub_teardown stops it and waits (SIGTERM to pg/linger.pid).
# KHUB_TEST_LINGER_S=0 gives a test the production default (the last user
# stops the cluster). khub_setup also puts a copy of a ready cluster (initdb,
# the khub database, every migration: made once per khub binary by `khub db
# migrate` and kept under ${TMPDIR:-/tmp}) in the new data dir, instead of
# each test paying initdb and the migrations; a test of that path sets
# KHUB_TEST_FRESH_CLUSTER=1 before khub_setup. Helpers for the usual test: khub_fixture (a hub with a
# user, a token, an org and a kernel, started once per test file), api (one
# HTTP request: status, headers and body in files), http_request (the same
# through one client process for a test's thousands of requests: no curl
# start per request) and jget (jq on a file).

KHUB_BIN=${KHUB_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/khub}
KHUB_SRC=${KHUB_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
KHUB_TEST_LINGER_S=${KHUB_TEST_LINGER_S:-3600}
TAP_COUNT=0
TAP_FAILED=0

ok() {	# ok CONDITION_EXIT_STATUS DESCRIPTION
	local status=$1; shift
	TAP_COUNT=$((TAP_COUNT + 1))
	if [ "$status" -eq 0 ]; then
		echo "ok $TAP_COUNT - $*"
	else
		# a "# TODO" test is an expected failure (TAP): it does not fail the script
		[[ "$*" == *"# TODO"* ]] || TAP_FAILED=$((TAP_FAILED + 1))
		echo "not ok $TAP_COUNT - $*"
	fi
}

check() {	# check DESCRIPTION -- COMMAND...: ok when COMMAND succeeds
	local desc=$1; shift
	[ "$1" = "--" ] && shift
	"$@" >/dev/null 2>&1
	ok $? "$desc"
}

is() {	# is GOT WANT DESCRIPTION
	local got=$1 want=$2; shift 2
	if [ "$got" = "$want" ]; then
		ok 0 "$*"
	else
		ok 1 "$*"
		echo "#   got:  '$got'"
		echo "#   want: '$want'"
	fi
}

like() {	# like GOT REGEX DESCRIPTION
	local got=$1 re=$2; shift 2
	if [[ "$got" =~ $re ]]; then
		ok 0 "$*"
	else
		ok 1 "$*"
		echo "#   got: '$got'"
		echo "#   does not match: '$re'"
	fi
}

diag() { echo "# $*"; }

bail() { echo "Bail out! $*"; exit 1; }

done_testing() {
	echo "1..$TAP_COUNT"
	[ "$TAP_FAILED" -eq 0 ]
}

# tap_relay OUTPUT [RC]: a TAP script's output (a node test's) re-emitted
# as this test's lines, its comments kept and other lines marked "# node:",
# then one more test: it ran its whole plan; RC (the script's exit status)
# as a diagnostic when not 0.
tap_relay() {
	local line plan= results=0
	while IFS= read -r line; do
		if [[ "$line" =~ ^ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1)); ok 0 "${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^not\ ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1)); ok 1 "${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^1\.\.([0-9]+) ]]; then
			plan=${BASH_REMATCH[1]}
		elif [[ "$line" =~ ^# ]]; then
			echo "$line"
		elif [ -n "$line" ]; then
			echo "# node: $line"
		fi
	done <<<"$1"
	is "$plan" "$results" "the node script ran its whole plan"
	[ "${2:-0}" -ne 0 ] && diag "node exited with status $2"
	return 0
}

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# A fresh data dir, removed (with the server stopped) when the test exits.
khub_setup() {
	TEST_DIR=$(mktemp -d /tmp/khub-test.XXXXXX)
	chmod 755 "$TEST_DIR"
	export KHUB_DATA_DIR="$TEST_DIR/data"
	export KHUB_LOG_LEVEL=${KHUB_LOG_LEVEL:-info}
	unset KHUB_DATABASE_URL KHUB_CONFIG
	KHUB_PORT=$(free_port)
	export KHUB_LISTEN="127.0.0.1:$KHUB_PORT"
	KHUB_URL="http://127.0.0.1:$KHUB_PORT"
	# Sanitizer reports of every khub process of the test (server, CLI,
	# hooks, mirror children) go to files here; any one fails the test.
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$TEST_DIR/sanitizer"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$TEST_DIR/sanitizer"
	trap khub_teardown EXIT
	[ -n "${KHUB_TEST_FRESH_CLUSTER:-}" ] || khub_seed_cluster "$KHUB_DATA_DIR"
}

# khub_seed_cluster DATA_DIR: DATA_DIR/pg/data becomes a copy of a stopped
# embedded cluster that `khub db migrate` made on an empty data dir with
# this binary (its path, size and mtime name the copy kept under
# ${TMPDIR:-/tmp}/khub-test-clusters; made once, under a lock, by the first
# test that needs it), its socket directory set to DATA_DIR's.
khub_seed_cluster() {
	local data=$1 root=${TMPDIR:-/tmp}/khub-test-clusters key tpl
	key=$(stat -c '%s-%Y-%i' "$KHUB_BIN")-$(echo "$KHUB_BIN" | md5sum | cut -c1-12)
	tpl=$root/$key
	mkdir -p "$root" && chmod 755 "$root"
	if [ ! -d "$tpl" ]; then
		(
			flock 9
			[ -d "$tpl" ] && exit 0
			local tmp
			tmp=$(mktemp -d "$root/make.XXXXXX") && chmod 755 "$tmp" || exit 1
			KHUB_DATA_DIR=$tmp/data KHUB_EMBEDDED_DB_LINGER_S=0 "$KHUB_BIN" db migrate >"$tmp/log" 2>&1 &&
				mv "$tmp/data/pg/data" "$tpl"
			local rc=$?
			[ $rc -eq 0 ] || sed 's/^/# khub_seed_cluster: /' "$tmp/log"
			rm -rf "$tmp"
			# older copies of this binary's clusters (rebuilt since)
			find "$root" -mindepth 1 -maxdepth 1 -name "*-${key##*-}" ! -name "$key" -mmin +60 \
				-exec rm -rf {} + 2>/dev/null
			exit $rc
		) 9>"$root/lock" || bail "khub_seed_cluster: cannot make the cluster to copy"
	fi
	mkdir -p "$data" && mkdir -m 700 "$data/pg" && cp -a "$tpl" "$data/pg/data" || bail "khub_seed_cluster: cannot copy $tpl"
	sed -i "s|^unix_socket_directories = .*|unix_socket_directories = '$data/pg/run'|" "$data/pg/data/postgresql.conf"
}

# The server's log and every sanitizer report so far, for tests that check
# for reports while the server runs.
server_and_sanitizer_logs() {
	cat "$TEST_DIR/server.log" "$TEST_DIR"/sanitizer.* 2>/dev/null
}

# After the servers stopped: print every sanitizer report (leaks included)
# and fail the script when there is one.
sanitizer_reports() {
	local f found=0
	for f in "$TEST_DIR"/sanitizer.*; do
		[ -e "$f" ] || continue
		found=1
		echo "# sanitizer report $(basename "$f"):"
		head -60 "$f" | sed 's/^/#   /'
	done
	return $found
}

# Stop every embedded cluster left lingering under $TEST_DIR (each data
# dir's pg/linger.pid) and wait until its lingerer has stopped it.
khub_stop_lingering() {
	local f pid
	[ -n "${TEST_DIR:-}" ] && [ -d "$TEST_DIR" ] || return 0
	while IFS= read -r f; do
		pid=$(cat "$f" 2>/dev/null)
		[ -n "$pid" ] || continue
		kill -TERM "$pid" 2>/dev/null || continue
		for _ in $(seq 1 600); do
			[ -e "$f" ] && kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
	done < <(find "$TEST_DIR" -maxdepth 6 -path '*/pg/linger.pid' 2>/dev/null)
}

khub_teardown() {
	local clean=0
	[ -n "$HTTPC_PID" ] && kill "$HTTPC_PID" 2>/dev/null
	khub_stop
	khub_stop_lingering
	sanitizer_reports || clean=1
	if [ -n "${KEEP_TEST_DIR:-}" ]; then
		echo "# kept $TEST_DIR"
	else
		rm -rf "$TEST_DIR"
	fi
	[ $clean -eq 0 ] || exit 1
}

khub() { KHUB_EMBEDDED_DB_LINGER_S=$KHUB_TEST_LINGER_S "$KHUB_BIN" "$@"; }

# lfs_object_file OID: a file with the stored object's bytes (the local
# store's file; with KHUB_LFS_BACKEND=s3 (tests/lib/ceph-s3.sh) a copy
# fetched from the bucket), or a path that does not exist when it is not stored.
lfs_object_file() {
	local oid=$1 key="objects/${1:0:2}/${1:2:2}/$1"
	if [ "${KHUB_LFS_BACKEND:-local}" != s3 ]; then
		echo "$KHUB_DATA_DIR/lfs/$key"
		return
	fi
	local f="$TEST_DIR/s3-object-$oid"
	rm -f "$f"
	[ "$(curl -s -o "$f.part" -w '%{http_code}' -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
		--aws-sigv4 "aws:amz:$KHUB_LFS_S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		"$KHUB_LFS_S3_ENDPOINT/$KHUB_LFS_S3_BUCKET/$key")" = 200 ] && mv "$f.part" "$f"
	rm -f "$f.part"
	echo "$f"
}

# Start the server in the background and wait until /api/health answers.
khub_start() {
	KHUB_EMBEDDED_DB_LINGER_S=$KHUB_TEST_LINGER_S "$KHUB_BIN" serve "$@" >>"$TEST_DIR/server.log" 2>&1 &
	KHUB_PID=$!
	for _ in $(seq 1 300); do
		if curl -sf "$KHUB_URL/api/health" >/dev/null 2>&1; then
			return 0
		fi
		if ! kill -0 "$KHUB_PID" 2>/dev/null; then
			tail -20 "$TEST_DIR/server.log" | sed 's/^/# /'
			bail "khub serve exited"
		fi
		sleep 0.1
	done
	tail -20 "$TEST_DIR/server.log" | sed 's/^/# /'
	bail "khub serve did not answer /api/health"
}

khub_stop() {
	if [ -n "${KHUB_PID:-}" ] && kill -0 "$KHUB_PID" 2>/dev/null; then
		kill -TERM "$KHUB_PID"
		wait "$KHUB_PID" 2>/dev/null
	fi
	KHUB_PID=
}

# Build a small kernel tree in DIR: a pure-Python torch-cpu variant, a CUDA
# variant with a binary .so (LFS) and nested files, and a README.
make_kernel_tree() {
	local dir=$1 name=${2:-relu}
	mkdir -p "$dir/build/torch-cpu" "$dir/build/torch211-cxx11-cu128-x86_64-linux/$name/sub"
	cat >"$dir/build/torch-cpu/__init__.py" <<PY
import torch


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)
PY
	printf '{"id":"%s","name":"%s","version":1,"license":"apache-2.0","python-depends":[],"backend":{"type":"cpu"}}\n' \
		"$name" "$name" >"$dir/build/torch-cpu/metadata.json"
	local cu="$dir/build/torch211-cxx11-cu128-x86_64-linux"
	printf 'from ._ops import ops\n' >"$cu/__init__.py"
	printf '{"id":"%s","name":"%s","version":1,"license":"apache-2.0","python-depends":[],"backend":{"type":"cuda","archs":["8.0","9.0"]}}\n' \
		"$name" "$name" >"$cu/metadata.json"
	head -c 1500000 /dev/urandom >"$cu/_${name}_cuda.abi3.so"
	printf 'x = 1\n' >"$cu/$name/sub/nested.py"
	printf '# %s\n\nA test kernel.\n' "$name" >"$dir/README.md"
}

# khub_accounts (after khub_setup): user alice, org acme with alice its
# admin, and $ALICE, her write token. Bails out when a step fails (the
# commands' output is in $TEST_DIR/fixture.log).
khub_accounts() {
	local log=$TEST_DIR/fixture.log
	if khub admin org create acme >>"$log" 2>&1 && khub admin user create alice >>"$log" 2>&1 &&
		khub admin member set acme alice admin >>"$log" 2>&1; then
		ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
	fi
	if [[ "${ALICE:-}" != hf_* ]]; then
		sed 's/^/# /' "$log"
		bail "khub_accounts: the hub's accounts could not be made"
	fi
}

# khub_fixture [khub serve args]: the usual test's hub, once per test file:
# khub_setup, khub_accounts, kernel acme/relu (make_kernel_tree's tree in
# $SRC, imported on branch main, its commit in $RELU_SHA), then khub_start.
khub_fixture() {
	khub_setup
	khub_accounts
	SRC=$TEST_DIR/src
	make_kernel_tree "$SRC" relu
	RELU_SHA=$(khub import "$SRC" --repo acme/relu --branch main 2>>"$TEST_DIR/fixture.log")
	[[ "$RELU_SHA" =~ ^[0-9a-f]{40}$ ]] || { sed 's/^/# /' "$TEST_DIR/fixture.log"; bail "khub_fixture: import failed"; }
	khub_start "$@"
}

# api METHOD PATH-or-URL [curl args]: one request; the status in $STATUS,
# the headers in $H, the body in $B (files under $TEST_DIR). A PATH
# (/api/...) is on $KHUB_URL. HEAD is sent as curl -I (an empty body).
api() {
	local method=$1 url=$2; shift 2
	[[ "$url" == /* ]] && url=$KHUB_URL$url
	H=${H:-$TEST_DIR/headers} B=${B:-$TEST_DIR/body}
	if [ "$method" = HEAD ]; then
		STATUS=$(curl -s -I -o "$H" -w '%{http_code}' "$@" "$url")
		: >"$B"
	else
		STATUS=$(curl -s -X "$method" -D "$H" -o "$B" -w '%{http_code}' "$@" "$url")
	fi
}

# http_request METHOD URL HFILE BFILE REQBODY [HEADER...]: one request as
# `curl -s -X METHOD -D HFILE -o BFILE [-H HEADER]... [--data-binary @REQBODY]`
# sends it (REQBODY "-": no body; HEAD as curl -I), its status (000: no
# answer) in $HTTP_STATUS, through one client process per test
# (tests/lib/http_client.py, a coprocess started by the first call; one that
# a subshell started ends with it): a test of thousands of requests starts no
# curl per request, whose start costs more CPU than the request. Arguments
# hold no tab or newline; KHUB_HTTP_TIMEOUT (s) when the client starts is
# curl's --max-time. A bare `wait` waits for the client too: name the pids.
HTTPC_PID=
http_request() {
	local a
	for a in "$@"; do [[ "$a" != *[$'\t\n']* ]] || bail "http_request: a tab or newline in '$a'"; done
	if [ -z "$HTTPC_PID" ] || ! kill -0 "$HTTPC_PID" 2>/dev/null; then
		coproc HTTPC { exec /usr/bin/python3 "$KHUB_SRC/tests/lib/http_client.py"; }
	fi
	local IFS=$'\t'
	printf '%s\n' "$*" >&"${HTTPC[1]}" && IFS= read -r HTTP_STATUS <&"${HTTPC[0]}" ||
		bail "http_request: tests/lib/http_client.py is gone"
}

# header NAME: the value of that header in $H, the last api response's
# headers (the first such line, without its CR). Bash alone, no process:
# table-driven tests read thousands of headers.
header() {
	local line name=${1,,}
	while IFS= read -r line; do
		[[ "${line,,}" == "$name:"* ]] || continue
		[[ "$line" == *" "* ]] && line=${line#* }
		printf '%s\n' "${line//$'\r'/}"
		return 0
	done <"$H"
}

# jget [FILE] JQ-EXPR: jq -r JQ-EXPR on FILE (default: the last api body,
# $B; "-" for stdin). Prints nothing and fails when FILE is not JSON.
jget() {
	local file=${B:-}
	[ $# -ge 2 ] && { file=$1; shift; }
	if [ "$file" = - ]; then
		jq -r "$1" 2>/dev/null
	else
		jq -r "$1" <"$file" 2>/dev/null
	fi
}
