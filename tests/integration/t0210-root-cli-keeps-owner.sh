#!/bin/bash
# t0210-root-cli-keeps-owner.sh -- a khub command run as root never changes
# who owns an existing data dir. The packaged layout is simulated: a system
# user of its own (as the package's khub), its data dir (750) and a config
# file (root:USER 640) at temp paths, and khub serve started as that user
# as khub.service starts it. Root then runs khub admin commands against the
# config (the red-team report: one such call chowned the live pg/ to
# postgres and the service could not start again). Every file must keep
# its owner, the commands must work, and the service must start again.
# Then the quickstart path: root on a fresh data dir still works (the
# cluster runs as postgres), and a second root call chowns nothing.
. "$(dirname "$0")/../lib/khub-test.sh"

khub_setup
[ "$(id -u)" -eq 0 ] || { diag "SKIP: needs root (a system user, setpriv)"; done_testing; exit $?; }

U=khubt0210
getent passwd "$U" >/dev/null && userdel "$U" 2>/dev/null
useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$U" ||
	bail "cannot create the system user $U"
SERVE_PID=
cleanup() {
	[ -n "$SERVE_PID" ] && kill -TERM "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
	local pid
	for d in "$DATA" "$FRESH"; do
		pid=$(head -1 "$d/pg/data/postmaster.pid" 2>/dev/null)
		[ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null
	done
	for _ in $(seq 1 100); do pgrep -u "$U" >/dev/null || break; sleep 0.1; done	# its postgres exiting
	getent passwd "$U" >/dev/null && userdel "$U"
	getent group "$U" >/dev/null && groupdel "$U"
	khub_teardown
}
trap cleanup EXIT

# the user's processes write their sanitizer reports here too
chmod 1777 "$TEST_DIR"
DATA=$TEST_DIR/lib/khub FRESH=$TEST_DIR/fresh CONF=$TEST_DIR/khub.conf
mkdir -p "$DATA" && chown "$U:$U" "$DATA" && chmod 750 "$DATA"
printf 'data_dir = %s\nlisten = %s\n' "$DATA" "$KHUB_LISTEN" >"$CONF"
chown "root:$U" "$CONF" && chmod 640 "$CONF"
unset KHUB_DATA_DIR KHUB_LISTEN	# the file says, as in the package

start_service() {	# as the unit: its user and group, no new privileges
	(cd / && exec setpriv --reuid="$U" --regid="$U" --init-groups --no-new-privs -- \
		"$KHUB_BIN" serve --config "$CONF") >>"$TEST_DIR/serve.log" 2>&1 &
	SERVE_PID=$!
	for _ in $(seq 1 600); do
		curl -sf "$KHUB_URL/api/health" >/dev/null 2>&1 && return 0
		kill -0 "$SERVE_PID" 2>/dev/null || break
		sleep 0.1
	done
	tail -5 "$TEST_DIR/serve.log" | sed 's/^/#   /'
	return 1
}

not_users() {	# the entries of DATA that are not U's (user and group)
	find "$DATA" \( ! -user "$U" -o ! -group "$U" \) -printf '%u:%g %p\n' | sort
}

start_service
ok $? "khub serve starts as $U on its own data dir"
is "$(ps -o user= -p "$(head -1 "$DATA/pg/data/postmaster.pid")")" "$U" "its embedded PostgreSQL runs as $U"
FILES=$(find "$DATA" | wc -l)
is "$(not_users)" "" "all $FILES entries of the data dir are $U's"

# ---- the attack: root runs a command against the live data dir ------------------------------------
(cd / && "$KHUB_BIN" admin user create alice --config "$CONF") >"$TEST_DIR/root.out" 2>"$TEST_DIR/root.err"
ok $? "root: khub admin user create alice works"
[ -s "$TEST_DIR/root.err" ] && sed 's/^/#   /' "$TEST_DIR/root.err" | tail -5
like "$(cat "$TEST_DIR/root.err")" "running as $U, the owner of data dir" "and says it ran as $U"
TOKEN=$(cd / && "$KHUB_BIN" admin token create alice --config "$CONF" 2>>"$TEST_DIR/root.err" | tail -1)
like "$(cd / && "$KHUB_BIN" admin token list alice --config "$CONF" 2>>"$TEST_DIR/root.err")" . \
	"root: khub admin token list alice lists her token"
CHANGED=$(not_users)
is "$(echo "$CHANGED" | grep -c .)" 0 "no entry of the data dir changed owner or group"
[ -n "$CHANGED" ] && echo "$CHANGED" | head -5 | sed 's/^/#   /'
ok $([ -z "$(find "$DATA" -user root)" ]; echo $?) "and root made nothing there"

# ---- the service starts again on it -------------------------------------------------------------
kill -TERM "$SERVE_PID" && wait "$SERVE_PID"
ok $? "the service stops (status 0)"
SERVE_PID=
start_service
ok $? "and starts again as $U after the root commands"
is "$(curl -s -H "Authorization: Bearer $TOKEN" "$KHUB_URL/api/whoami-v2" | jq -r .name)" alice \
	"the token root made for alice works"
kill -TERM "$SERVE_PID" && wait "$SERVE_PID"
SERVE_PID=

# ---- the quickstart path: root on a fresh data dir ---------------------------------------------
(cd / && KHUB_DATA_DIR=$FRESH "$KHUB_BIN" admin user create bob) >/dev/null 2>"$TEST_DIR/fresh.err"
ok $? "root on a fresh data dir: khub admin user create bob works"
[ -s "$TEST_DIR/fresh.err" ] && grep -i "error\|fatal" "$TEST_DIR/fresh.err" | head -3 | sed 's/^/#   /'
is "$(stat -c %U "$FRESH") $(stat -c %U "$FRESH/pg") $(stat -c %U "$FRESH/pg/data")" "root postgres postgres" \
	"the data dir is root's, its cluster postgres's"
find "$FRESH" -printf '%u:%g %p\n' | sort >"$TEST_DIR/fresh.before"
(cd / && KHUB_DATA_DIR=$FRESH "$KHUB_BIN" admin token create bob) >/dev/null 2>>"$TEST_DIR/fresh.err"
ok $? "a second root command on it works"
find "$FRESH" -printf '%u:%g %p\n' | sort >"$TEST_DIR/fresh.after"
is "$(join -j2 -o 1.1,2.1,0 <(awk '{print $1, $2}' "$TEST_DIR/fresh.before" | sort -k2) \
	<(awk '{print $1, $2}' "$TEST_DIR/fresh.after" | sort -k2) | awk '$1 != $2' | head -3)" "" \
	"and changes no owner there"

done_testing
