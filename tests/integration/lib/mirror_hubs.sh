# mirror_hubs.sh -- sourced after tests/lib/khub-test.sh by the mirror tests
# and bench/mirror.sh: several khub servers on loopback, each with its own
# data dir and embedded database (khub_setup/khub_start manage only one),
# and the fault-injecting proxy (tests/integration/lib/fault_proxy.py).
#
#   hub_init NAME          data dir $TEST_DIR/NAME/data (made at NAME's first khub with a
#                          copy of khub_seed_cluster's cluster: hub_seed), a free port
#   hub NAME ARGS...       run khub with NAME's KHUB_DATA_DIR/KHUB_LISTEN
#   hub_bg NAME OUT ERR ARGS...  the same in the background (BG_PID = khub's pid)
#   hub_start NAME [ARGS]  khub serve in the background, wait for /api/health
#   hub_spawn/hub_wait     the same in two steps (start two hubs at once)
#   hub_stop NAME [SIG]    SIGTERM (default) and wait, or SIGKILL
#   hub_url NAME / hub_data NAME / hub_log NAME
#   proxy_start UPSTREAM_URL   -> PROXY_URL PROXY_LOG PROXY_CTL PROXY_PID
#   proxy_rules JSON           replace the proxy's fault rules
#   proxy_stop
#   hubs_teardown          (the EXIT trap) stops everything started here
#   until_is WANT CMD...   poll CMD until its output matches ^(WANT)$ (60 s), print it
#   leftover_git_dir DIR   a bare git directory no repo row owns at DIR: branch leak
#                          and tag leaked, holding secret.txt ("LEFTOVER SECRET")

declare -A HUB_PORT HUB_PID
HUB_NAMES=()
MIRROR_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

hub_init() {
	local name=$1
	mkdir -p "$TEST_DIR/$name"
	chmod 755 "$TEST_DIR/$name"
	HUB_PORT[$name]=$(free_port)
	HUB_NAMES+=("$name")
}
hub_data() { echo "$TEST_DIR/$1/data"; }
hub_url() { echo "http://127.0.0.1:${HUB_PORT[$1]}"; }
hub_log() { echo "$TEST_DIR/$1/server.log"; }
# hub_seed NAME: before NAME's first khub, a data dir that does not exist yet
# (a test may link it to another hub's) gets a copy of the ready cluster, as
# khub_setup's does (no initdb and migrations per hub), unless KHUB_TEST_FRESH_CLUSTER.
hub_seed() {
	[ -e "$TEST_DIR/$1/data" ] || [ -n "${KHUB_TEST_FRESH_CLUSTER:-}" ] || khub_seed_cluster "$TEST_DIR/$1/data"
}
hub() {
	local name=$1; shift
	hub_seed "$name"
	KHUB_EMBEDDED_DB_LINGER_S=$KHUB_TEST_LINGER_S KHUB_DATA_DIR="$TEST_DIR/$name/data" KHUB_LISTEN="127.0.0.1:${HUB_PORT[$name]}" "$KHUB_BIN" "$@"
}

hub_bg() {	# hub_bg NAME OUT ERR ARGS...: khub in the background; BG_PID is khub itself
	local name=$1 out=$2 err=$3; shift 3
	hub_seed "$name"
	KHUB_EMBEDDED_DB_LINGER_S=$KHUB_TEST_LINGER_S KHUB_DATA_DIR="$TEST_DIR/$name/data" KHUB_LISTEN="127.0.0.1:${HUB_PORT[$name]}" \
		"$KHUB_BIN" "$@" >"$out" 2>"$err" &
	BG_PID=$!
}

hub_spawn() {	# hub_spawn NAME [serve args]: start khub serve, do not wait
	local name=$1; shift
	hub_seed "$name"
	KHUB_EMBEDDED_DB_LINGER_S=$KHUB_TEST_LINGER_S KHUB_DATA_DIR="$TEST_DIR/$name/data" KHUB_LISTEN="127.0.0.1:${HUB_PORT[$name]}" \
		"$KHUB_BIN" serve "$@" >>"$TEST_DIR/$name/server.log" 2>&1 &
	HUB_PID[$name]=$!
}

hub_wait() {	# hub_wait NAME: until /api/health answers (an initdb, where one runs, takes seconds)
	local name=$1 url
	url=$(hub_url "$name")
	for _ in $(seq 1 900); do
		curl -sf "$url/api/health" >/dev/null 2>&1 && return 0
		if ! kill -0 "${HUB_PID[$name]}" 2>/dev/null; then
			tail -20 "$TEST_DIR/$name/server.log" | sed 's/^/# /'
			bail "khub serve ($name) exited"
		fi
		sleep 0.1
	done
	tail -20 "$TEST_DIR/$name/server.log" | sed 's/^/# /'
	bail "khub serve ($name) did not answer /api/health"
}

hub_start() { hub_spawn "$@"; hub_wait "$1"; }

hub_stop() {
	local name=$1 sig=${2:-TERM} pid=${HUB_PID[$1]:-}
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -"$sig" "$pid"
		# a graceful stop that hangs (a stuck request) is cut after 20 s
		for _ in $(seq 1 200); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "# $name (pid $pid) did not stop on SIG$sig within 20 s; SIGKILL"
			kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
	fi
	HUB_PID[$name]=
}

# The embedded PostgreSQL of a hub that was SIGKILLed keeps running; a
# later `khub serve` on the same data dir adopts it and stops it on SIGTERM.
# For a hub left killed at the end, stop its cluster here.
hub_stop_cluster() {
	local pgdata="$TEST_DIR/$1/data/pg/data" bindir=${KHUB_PG_BINDIR:-/usr/lib/postgresql/15/bin}
	[ -f "$pgdata/postmaster.pid" ] || return 0
	local owner
	owner=$(stat -c %U "$pgdata")
	if [ "$(id -u)" = 0 ] && [ "$owner" != root ]; then
		su -s /bin/sh "$owner" -c "'$bindir/pg_ctl' stop -m fast -D '$pgdata'" >/dev/null 2>&1
	else
		"$bindir/pg_ctl" stop -m fast -D "$pgdata" >/dev/null 2>&1
	fi
}

proxy_start() {	# proxy_start UPSTREAM_URL
	PROXY_LOG=$TEST_DIR/proxy.log
	PROXY_CTL=$TEST_DIR/proxy-control.json
	[ -f "$PROXY_CTL" ] || echo '{"rules":[]}' >"$PROXY_CTL"
	rm -f "$TEST_DIR/proxy.port"
	/usr/bin/python3 "$MIRROR_LIB_DIR/fault_proxy.py" --upstream "$1" --listen "127.0.0.1:${PROXY_PORT:-0}" \
		--control "$PROXY_CTL" --log "$PROXY_LOG" --port-file "$TEST_DIR/proxy.port" \
		2>>"$TEST_DIR/proxy.err" &
	PROXY_PID=$!
	for _ in $(seq 1 100); do
		[ -s "$TEST_DIR/proxy.port" ] && break
		sleep 0.05
	done
	[ -s "$TEST_DIR/proxy.port" ] || bail "fault proxy did not start"
	PROXY_PORT=$(cat "$TEST_DIR/proxy.port")
	PROXY_URL="http://127.0.0.1:$PROXY_PORT"
}

proxy_rules() {	# proxy_rules JSON_RULES_ARRAY
	local tmp="$PROXY_CTL.tmp"
	printf '{"rules": %s}\n' "$1" >"$tmp"
	mv "$tmp" "$PROXY_CTL"
}

proxy_stop() {
	if [ -n "${PROXY_PID:-}" ] && kill -0 "$PROXY_PID" 2>/dev/null; then
		kill "$PROXY_PID"
		wait "$PROXY_PID" 2>/dev/null
	fi
	PROXY_PID=
}

# Lines appended to FILE after line N (N from `lines FILE`).
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
lines_since() { tail -n +"$(($2 + 1))" "$1"; }

# The LFS store path of an oid in a hub's data dir.
lfs_object() { echo "$(hub_data "$1")/lfs/objects/${2:0:2}/${2:2:2}/$2"; }

hubs_teardown() {
	proxy_stop
	for name in "${HUB_NAMES[@]}"; do
		hub_stop "$name"
	done
	khub_stop_lingering	# CLI calls and hubs left each cluster running (tests/lib/khub-test.sh)
	for name in "${HUB_NAMES[@]}"; do
		hub_stop_cluster "$name"
	done
	local clean=0
	sanitizer_reports || clean=1
	if [ -n "${KEEP_TEST_DIR:-}" ]; then
		echo "# kept $TEST_DIR"
	else
		rm -rf "$TEST_DIR"
	fi
	[ $clean -eq 0 ] || exit 1
}

# A fresh TEST_DIR (short: the embedded database's socket path is limited).
until_is() {	# a server reuses a repo record for a second
	local want=$1 got; shift
	for _ in $(seq 1 300); do
		got=$("$@")
		[[ "$got" =~ ^($want)$ ]] && break
		sleep 0.2
	done
	echo "$got"
}

leftover_git_dir() {
	local dir=$1 work
	work=$(mktemp -d "$TEST_DIR/leftover.XXXXXX")
	mkdir -p "$(dirname "$dir")"
	git init -q --bare "$dir" && git init -q "$work" || return 1
	printf 'LEFTOVER SECRET' >"$work/secret.txt"
	git -C "$work" add secret.txt &&
		git -C "$work" -c user.name=x -c user.email=x@x commit -qm leftover &&
		git -C "$work" push -q "$dir" HEAD:refs/heads/leak HEAD:refs/tags/leaked 2>/dev/null &&
		git --git-dir="$dir" rev-parse -q --verify refs/heads/leak >/dev/null
}

hubs_setup() {
	TEST_DIR=$(mktemp -d /tmp/khm.XXXXXX)
	chmod 755 "$TEST_DIR"
	export KHUB_LOG_LEVEL=${KHUB_LOG_LEVEL:-info}
	unset KHUB_DATABASE_URL KHUB_CONFIG KHUB_DATA_DIR KHUB_LISTEN
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$TEST_DIR/sanitizer"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$TEST_DIR/sanitizer"
	trap hubs_teardown EXIT
}
