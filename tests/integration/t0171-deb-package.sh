#!/bin/bash
# t0171-deb-package.sh -- khub serve --print-config-template and SIGHUP
# with this tree's khub, then the Debian package on this machine (CI: as
# root). make deb builds it; an older build (the same tree before its newest
# migration, version ~pre) is installed with dpkg -i and started as
# khub.service would start it: its ExecStart, User, Group and UMask read
# from the installed unit, a clean environment, no new privileges and no
# capabilities (there is no systemd as PID 1 here); the demo kernel is
# seeded; the package is upgraded to the new build, which applies the
# newest migration exactly once and keeps the data; sd_notify's READY=1
# reaches a socket the test listens on only once the port answers, from
# the main PID; the loader's steps load the demo kernel; SIGHUP reloads
# [reload] keys; dpkg -r keeps /var/lib/khub and a reinstall finds it.
# The package, /var/lib/khub and the khub user are removed at the end.
. "$(dirname "$0")/../lib/khub-test.sh"

khub_setup

# ---- the config template and SIGHUP with this tree's khub (sanitizers on) -------------------------
khub serve --print-config-template >"$TEST_DIR/template.conf"
is "$(grep -cE '^#?[a-z_]+ =' "$TEST_DIR/template.conf")" "$(khub serve --help | grep -cE '^  [a-z_]+ +KHUB_')" \
	"--print-config-template writes every key of the table"
sed -E 's/^#([a-z_]+ =)/\1/' "$TEST_DIR/template.conf" >"$TEST_DIR/all-keys.conf"
check "the template with every key set to its default is a valid configuration" -- \
	env -u KHUB_LISTEN -u KHUB_DATA_DIR "$KHUB_BIN" serve -n --config "$TEST_DIR/all-keys.conf" --data-dir "$TEST_DIR/x"
like "$(khub serve --print-config-template --tree-page-size 7 | grep 'tree_page_size =')" '^tree_page_size = 7$' \
	"a value given when it is made is set, not commented out"
unset KHUB_LOG_LEVEL	# the environment would beat the file
printf 'log_level = info\n' >"$TEST_DIR/live.conf"
khub_start --config "$TEST_DIR/live.conf"
printf 'log_level = debug\ntree_page_size = 3\nthreads = 5\n' >"$TEST_DIR/live.conf"
kill -HUP "$KHUB_PID"
for _ in $(seq 1 100); do grep -q "reload: tree_page_size" "$TEST_DIR/server.log" && break; sleep 0.1; done
like "$(cat "$TEST_DIR/server.log")" "reload: log_level = debug" "SIGHUP: log_level is reloaded"
like "$(cat "$TEST_DIR/server.log")" "reload: tree_page_size = 3" "SIGHUP: tree_page_size is reloaded"
like "$(cat "$TEST_DIR/server.log")" "reload: threads changed; it takes effect when khub restarts" \
	"SIGHUP: a key that needs a restart is logged"
printf 'tree_page_size = 0\n' >"$TEST_DIR/live.conf"
kill -HUP "$KHUB_PID"
for _ in $(seq 1 100); do grep -q "configuration was not changed" "$TEST_DIR/server.log" && break; sleep 0.1; done
like "$(cat "$TEST_DIR/server.log")" "tree_page_size must be a number from 1" "SIGHUP: a bad value is refused"
check "and the server goes on" -- curl -sf "$KHUB_URL/api/health"
khub_stop

skip() { diag "SKIP the package: $*"; done_testing; exit $?; }
[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i, the khub user)"
command -v dpkg-buildpackage >/dev/null || skip "no dpkg-buildpackage (apt-get install debhelper dpkg-dev)"
dpkg-query -W khub >/dev/null 2>&1 && skip "a khub package is on this machine: left alone"
[ -e /var/lib/khub ] && skip "/var/lib/khub exists (quickstart as root?): left alone"
getent passwd khub >/dev/null && skip "a khub user exists: left alone"

UNIT=/lib/systemd/system/khub.service
CONF=/etc/khub/khub.conf
DATA=/var/lib/khub
PORT=$(free_port)
URL=http://127.0.0.1:$PORT
SOCK=$TEST_DIR/notify.sock
NOTIFY_LOG=$TEST_DIR/notify.log
SERVE_LOG=$TEST_DIR/serve.log
SERVE_PID= LISTENER= MADE_POLICY=
PATH_FOR_UNITS=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

deb_cleanup() {
	[ -n "$SERVE_PID" ] && kill -TERM "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
	local pid
	pid=$(head -1 "$DATA/pg/data/postmaster.pid" 2>/dev/null)
	[ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null	# PostgreSQL's immediate shutdown
	[ -n "$LISTENER" ] && kill "$LISTENER" 2>/dev/null
	dpkg --purge khub >/dev/null 2>&1
	rm -rf "$DATA"
	getent passwd khub >/dev/null && userdel khub
	getent group khub >/dev/null && groupdel khub
	[ -n "$MADE_POLICY" ] && rm -f /usr/sbin/policy-rc.d
}
trap 'deb_cleanup; khub_teardown' EXIT

# With systemd running, the package's postinst would start khub.service
# itself: policy-rc.d (which deb-systemd-invoke obeys) says no for the test.
if [ -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && MADE_POLICY=1
fi

ok_or_show() {	# ok_or_show STATUS DESCRIPTION FILE: ok, and FILE's tail when it failed
	ok "$1" "$2"
	[ "$1" -eq 0 ] || tail -20 "$3" | sed 's/^/#   /'
}

unit_value() {	# unit_value KEY: the value of KEY= in the installed khub.service
	sed -n "s/^$1=//p" "$UNIT" | tail -1
}

# What systemd does for the unit, without systemd: the unit's user and
# group with no supplementary privileges, NoNewPrivileges, an empty
# capability bounding set, its UMask, a clean environment (and
# NOTIFY_SOCKET), / as the directory; the command is ExecStart as written.
start_as_unit() {
	local exec user group mask
	exec=$(unit_value ExecStart) user=$(unit_value User) group=$(unit_value Group) mask=$(unit_value UMask)
	: >"$NOTIFY_LOG"
	# shellcheck disable=SC2086 -- ExecStart is split into words as systemd does
	(cd / && umask "${mask:-0022}" && exec env -i PATH=$PATH_FOR_UNITS LANG=C.UTF-8 HOME="$DATA" USER="$user" \
		LOGNAME="$user" NOTIFY_SOCKET="$SOCK" setpriv --reuid="$user" --regid="$group" --init-groups \
		--no-new-privs --bounding-set=-all -- $exec) >>"$SERVE_LOG" 2>&1 &
	SERVE_PID=$!
}

# Wait for READY=1 on the notify socket (the server gives up on its own on
# failure: then it is gone); 0 when it came.
wait_ready() {	# wait_ready COUNT: until COUNT READY=1 lines arrived
	for _ in $(seq 1 1200); do
		[ "$(grep -c ' READY=1' "$NOTIFY_LOG")" -ge "$1" ] && return 0
		kill -0 "$SERVE_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

stop_server() {
	kill -TERM "$SERVE_PID" && wait "$SERVE_PID"
	local rc=$?
	SERVE_PID=
	return $rc
}

as_khub() {	# as_khub COMMAND...: as the unit's user, in a clean environment
	(cd / && env -i PATH=$PATH_FOR_UNITS LANG=C.UTF-8 HOME="$DATA" \
		setpriv --reuid=khub --regid=khub --init-groups -- "$@")
}

psql_khub() {	# psql_khub SQL: one query on the embedded cluster, unaligned
	as_khub psql -X -A -t -h "$DATA/pg/run" -U khub -d khub -c "$1"
}

/usr/bin/python3 "$KHUB_SRC/tests/integration/lib/notify_listen.py" "$SOCK" "$NOTIFY_LOG" &
LISTENER=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
chmod 777 "$SOCK"	# the khub user sends to it, as to systemd's

# ---- make deb, and an older build (each takes minutes on 2 cores) ------------------------------------------------------------
T0=$(date +%s)
(cd "$KHUB_SRC" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s deb) >"$TEST_DIR/deb.out" 2>&1
ok_or_show $? "make deb builds the package in $(($(date +%s) - T0)) s" "$TEST_DIR/deb.out"
DEB=$(tail -1 "$TEST_DIR/deb.out")
[ -f "$DEB" ] || bail "no .deb from make deb"
dpkg-deb -c "$DEB" >"$TEST_DIR/contents"
for f in ./usr/bin/khub ./usr/bin/khub-worker ./etc/khub/khub.conf ./lib/systemd/system/khub.service \
	./lib/systemd/system/khub-mirror.service ./lib/systemd/system/khub-worker@.service; do
	check "the package holds $f" -- grep -q " $f\$" "$TEST_DIR/contents"
done
check "khub.conf is a conffile" -- bash -c "dpkg-deb -I '$DEB' conffiles | grep -qx /etc/khub/khub.conf"
check "the units' Documentation= (operations.md) is in the package" -- \
	grep -q " ./usr/share/doc/khub/operations.md.gz\$" "$TEST_DIR/contents"
check "the package holds its copyright file (/usr/share/doc/khub/copyright)" -- \
	grep -q " ./usr/share/doc/khub/copyright\$" "$TEST_DIR/contents"
dpkg-deb --fsys-tarfile "$DEB" | tar -xOf - ./usr/share/doc/khub/copyright >"$TEST_DIR/copyright" 2>/dev/null
like "$(head -1 "$TEST_DIR/copyright")" '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/$' \
	"the copyright file is machine-readable (DEP-5)"
check "it has a Files: * paragraph with a License" -- \
	bash -c "grep -A3 '^Files: \*\$' '$TEST_DIR/copyright' | grep -q '^License: '"

# The older build: the source tree as it was before its latest schema
# change (git history: the parent of the last commit that added a
# migration), its khub built with the default flags and packaged with this
# build's debian/ files as version ~pre.
# Without that history (a shallow clone) the older build is this one,
# relabelled: the upgrade then has no migration to apply.
ADDED=$(git -C "$KHUB_SRC" log --diff-filter=A --format=%H -1 -- sql/ 2>/dev/null)
if [ -n "$ADDED" ] && git -C "$KHUB_SRC" rev-parse -q --verify "$ADDED^" >/dev/null; then
	NEWEST=$(git -C "$KHUB_SRC" diff-tree --no-commit-id --name-only --diff-filter=A -r "$ADDED" -- sql/ | head -1)
	NEWEST_VERSION=$((10#$(basename "$NEWEST" | cut -d_ -f1)))
	OLD_TREE=$TEST_DIR/old-tree
	mkdir -p "$OLD_TREE/web/node_modules"
	git -C "$KHUB_SRC" archive "$ADDED^" | tar -x -C "$OLD_TREE"
	cp -rL "$KHUB_SRC/web/node_modules/uplot" "$OLD_TREE/web/node_modules/"
	T0=$(date +%s)
	(cd "$OLD_TREE" && ./autogen.sh && ./configure -q && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j"$(nproc)" khub) \
		>"$TEST_DIR/old.log" 2>&1
	ok_or_show $? "khub as of ${ADDED:0:10}^ (before $(basename "$NEWEST") was added) is built in $(($(date +%s) - T0)) s" \
		"$TEST_DIR/old.log"
	OLD_KHUB=$OLD_TREE/khub
else
	diag "no git history of sql/ (a shallow clone?): the older build is this one, relabelled"
	NEWEST= OLD_KHUB=
fi
VERSION=$(dpkg-deb -f "$DEB" Version)
OLD_DEB=$TEST_DIR/khub_${VERSION}~pre_old.deb
dpkg-deb -R "$DEB" "$TEST_DIR/old-root"
[ -n "$OLD_KHUB" ] && cp "$OLD_KHUB" "$TEST_DIR/old-root/usr/bin/khub"
sed -i "s/^Version: .*/Version: ${VERSION}~pre/" "$TEST_DIR/old-root/DEBIAN/control"
(cd "$TEST_DIR/old-root" && find usr lib -type f -exec md5sum {} + >DEBIAN/md5sums)
check "and packaged as version ${VERSION}~pre" -- dpkg-deb -b "$TEST_DIR/old-root" "$OLD_DEB"

# ---- install the older build and create data --------------------------------------------------
dpkg -i "$OLD_DEB" >"$TEST_DIR/dpkg.log" 2>&1
ok_or_show $? "dpkg -i installs ${VERSION}~pre" "$TEST_DIR/dpkg.log"
check "the khub system user exists" -- bash -c "getent passwd khub | grep -q ':/var/lib/khub:/usr/sbin/nologin$'"
is "$(stat -c '%U %a' "$DATA")" "khub 750" "/var/lib/khub belongs to khub, mode 750"
is "$(stat -c '%U:%G %a' "$CONF")" "root:khub 640" "khub.conf: root:khub 640 (it may hold a database password)"
like "$(grep '^data_dir' "$CONF")" '^data_dir = /var/lib/khub$' "with data_dir set to /var/lib/khub"
like "$(grep -B1 '^#log_level' "$CONF" | head -1)" '^# \[reload\]' "and [reload] on a key SIGHUP reloads"
check "the unit is enabled (its multi-user.target.wants link)" -- \
	test -L /etc/systemd/system/multi-user.target.wants/khub.service
if command -v systemd-analyze >/dev/null; then
	for u in khub.service khub-mirror.service khub-worker@.service; do
		f=/lib/systemd/system/$u
		[ "$u" = khub-worker@.service ] && { cp "$f" "$TEST_DIR/khub-worker@t.service"; f=$TEST_DIR/khub-worker@t.service; }
		systemd-analyze verify --man=no "$f" >"$TEST_DIR/verify.log" 2>&1
		grep -v "ConditionPathExists\|is not executable\|worker.env\|\.token" "$TEST_DIR/verify.log" | grep -q . 
		ok_or_show $([ $? -ne 0 ]; echo $?) "systemd-analyze verify finds nothing wrong in $u" "$TEST_DIR/verify.log"
	done
fi
# the administrator's change: a free port
sed -i "s/^#\?listen = .*/listen = 127.0.0.1:$PORT/" "$CONF"

start_as_unit	# it knows no sd_notify (its PostgreSQL may say READY=1): wait for the port
for _ in $(seq 1 1200); do
	curl -sf "$URL/api/health" >/dev/null 2>&1 && break
	kill -0 "$SERVE_PID" 2>/dev/null || break
	sleep 0.1
done
curl -sf "$URL/api/health" >/dev/null 2>&1
ok_or_show $? "the older build starts as the unit would, as user khub" "$SERVE_LOG"
DEMO=$TEST_DIR/demo
cp -r "$KHUB_SRC/deploy/demo-kernel/." "$DEMO/"
/usr/bin/python3 - "$DEMO/build/torch-cpu/relu_table.bin" <<'PY'
import hashlib, sys
out, block = bytearray(), b"khub-demo"
while len(out) < 2 * 1024 * 1024:
    block = hashlib.sha256(block).digest()
    out += block
open(sys.argv[1], "wb").write(bytes(out))
PY
chmod -R a+rX "$DEMO"
MAIN=$(as_khub /usr/bin/khub import "$DEMO" --repo khub-demo/relu --branch main --message "demo" --config "$CONF" 2>>"$TEST_DIR/cli.err")
V1=$(as_khub /usr/bin/khub import "$DEMO" --repo khub-demo/relu --branch v1 --message "demo v1" --config "$CONF" 2>>"$TEST_DIR/cli.err")
like "$V1" '^[0-9a-f]{40}$' "the demo kernel is imported (as khub, beside the running server)"
[ -n "$V1" ] || sed 's/^/#   /' "$TEST_DIR/cli.err"
check "trust set khub-demo" -- as_khub /usr/bin/khub admin trust set khub-demo --config "$CONF"
[ -n "$NEWEST" ] && is "$(psql_khub "SELECT count(*) FROM schema_migrations WHERE version = $NEWEST_VERSION")" 0 \
	"the older build's schema lacks migration $NEWEST_VERSION"
psql_khub "SELECT version FROM schema_migrations ORDER BY version" >"$TEST_DIR/versions.old"
POSTMASTER=$(head -1 "$DATA/pg/data/postmaster.pid")
is "$(ps -o user= -p "$POSTMASTER")" khub "the embedded PostgreSQL runs as khub"
stop_server
ok $? "it stops on SIGTERM with status 0"

# ---- upgrade to the new build -----------------------------------------------------------------------
dpkg -i --force-confold "$DEB" >"$TEST_DIR/dpkg.log" 2>&1
ok_or_show $? "dpkg -i upgrades ${VERSION}~pre to $VERSION" "$TEST_DIR/dpkg.log"
is "$(dpkg-query -W -f='${Version} ${Status}' khub)" "$VERSION install ok installed" "the new version is installed"
like "$(grep '^listen' "$CONF")" ":$PORT\$" "the administrator's khub.conf is kept"
KEYS=$(/usr/bin/khub serve --help | grep -cE '^  [a-z_]+ +KHUB_')
is "$(grep -cE '^#?[a-z_]+ =' "$CONF")" "$KEYS" "khub.conf has every key of the configuration table ($KEYS)"
: >"$SERVE_LOG"
start_as_unit
wait_ready 1
ok_or_show $? "the new build starts as the unit would" "$SERVE_LOG"
# READY=1 came: the port answers at once, no retry
is "$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/health")" 200 "READY=1 arrived once the port answers"
is "$(awk '{print $1}' "$NOTIFY_LOG" | sort -u)" "$SERVE_PID" "every notification came from the main PID (none from PostgreSQL)"
like "$(head -1 "$NOTIFY_LOG")" "^$SERVE_PID READY=1 STATUS=listening on 127.0.0.1:$PORT" "READY=1 with a STATUS line"
psql_khub "SELECT version FROM schema_migrations ORDER BY version" >"$TEST_DIR/versions.new"
MISSING=$(comm -13 <(sort "$TEST_DIR/versions.old") <(sort "$TEST_DIR/versions.new") | wc -l)
if [ -n "$NEWEST" ]; then
	ok $([ "$MISSING" -gt 0 ]; echo $?) "the older build lacked $MISSING migration(s) the new one has"
	like "$(grep "applying migration" "$SERVE_LOG")" "$(basename "$NEWEST" .sql)" "$(basename "$NEWEST") among those applied"
	is "$(psql_khub "SELECT count(*) FROM schema_migrations WHERE version = $NEWEST_VERSION")" 1 "migration $NEWEST_VERSION is in"
fi
is "$(grep -c "applying migration" "$SERVE_LOG")" "$MISSING" "the upgrade applied the migrations the older build lacked, and only those"
is "$(psql_khub "SELECT count(*) FROM schema_migrations GROUP BY version HAVING count(*) <> 1")" "" \
	"every migration is recorded exactly once"
is "$(curl -s "$URL/api/kernels/khub-demo/relu/revision/v1" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')" \
	"$V1" "the data survived the upgrade (v1 is where it was)"

# ---- the loader's steps load the demo kernel ---------------------------------------------------------
. "$KHUB_SRC/tests/lib/real_loader.sh"
LOADER_PATH=$(real_loader_pythonpath "$TEST_DIR/loader" 2>/dev/null) || LOADER_PATH=
loaded=$(cd "$TEST_DIR" && PYTHONPATH=$LOADER_PATH HF_HUB_CACHE=$TEST_DIR/hf-cache HF_HOME=$TEST_DIR/hf-home \
	HF_HUB_DISABLE_XET=1 /usr/bin/python3 "$KHUB_SRC/tests/integration/lib/load_kernel.py" "$URL" khub-demo/relu 1 \
	--backend cpu --expect-variant torch-cpu 2>"$TEST_DIR/load.err")
load_rc=$?
ok $load_rc "get_kernel(khub-demo/relu, version=1) loads torch-cpu from the packaged khub: $loaded"
[ $load_rc -eq 0 ] || tail -8 "$TEST_DIR/load.err" | sed 's/^/#   /'

# ---- the worker's sandbox under its unit's settings ----------------------------------------------------
# khub-worker@.service: a user of its own (DynamicUser; here nobody),
# NoNewPrivileges and no capabilities, but namespaces allowed: bubblewrap
# still makes its sandbox (khub-worker --check tries it).
WUNIT=/lib/systemd/system/khub-worker@.service
check "the worker unit leaves namespaces to bubblewrap (no RestrictNamespaces)" -- \
	bash -c "! grep -q '^RestrictNamespaces' '$WUNIT' && grep -q '^NoNewPrivileges=yes' '$WUNIT' && grep -q '^DynamicUser=yes' '$WUNIT'"
printf '{"toolchains": [{"name": "cpu", "python": "/usr/bin/python3", "cxx": "g++"}]}\n' >"$TEST_DIR/toolchains.json"
chmod 644 "$TEST_DIR/toolchains.json"
(cd / && env -i PATH=$PATH_FOR_UNITS LANG=C.UTF-8 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs \
	--bounding-set=-all -- /usr/bin/khub-worker --check --toolchains "$TEST_DIR/toolchains.json") >"$TEST_DIR/wcheck.out" 2>&1
wrc=$?
if grep -q "sandbox" "$TEST_DIR/wcheck.out"; then
	like "$(grep sandbox "$TEST_DIR/wcheck.out")" "sandbox bubblewrap: .*no_new_privs.*namespaces: user own" \
		"the packaged khub-worker's sandbox works as an unprivileged user with no_new_privs and no capabilities"
else
	diag "no usable toolchain here for khub-worker --check (rc $wrc): $(head -3 "$TEST_DIR/wcheck.out")"
fi

# ---- SIGHUP: reload -------------------------------------------------------------------------------------
sed -i -e 's/^#\?log_level = .*/log_level = debug/' -e 's/^#\?tree_page_size = .*/tree_page_size = 1/' \
	-e 's/^#\?threads = .*/threads = 3/' "$CONF"
kill -HUP "$SERVE_PID"
wait_ready 2
ok $? "after SIGHUP the server says READY=1 again"
like "$(sed -n 2p "$NOTIFY_LOG")" "^$SERVE_PID RELOADING=1 MONOTONIC_USEC=[0-9]+" "RELOADING=1 came first"
like "$(cat "$SERVE_LOG")" "reload: log_level = debug" "log_level is reloaded"
like "$(cat "$SERVE_LOG")" "reload: tree_page_size = 1" "tree_page_size is reloaded"
like "$(cat "$SERVE_LOG")" "threads changed; it takes effect when khub restarts" "a key that needs a restart is named"
curl -s -D "$TEST_DIR/headers" "$URL/api/kernels/khub-demo/relu/tree/main" >"$TEST_DIR/tree.json"
is "$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$TEST_DIR/tree.json")" 1 \
	"the new tree_page_size is in force: one entry per page"
check "with a Link header to the next page" -- grep -qi '^link: ' "$TEST_DIR/headers"
sed -i 's/^log_level = .*/log_level = loud/' "$CONF"
kill -HUP "$SERVE_PID"
wait_ready 3
like "$(cat "$SERVE_LOG")" "log_level must be error, warn, info or debug" "a bad value on reload is refused"
is "$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/health")" 200 "and the server goes on"
sed -i -e 's/^log_level = .*/#log_level = info/' -e 's/^threads = .*/#threads = 0/' \
	-e 's/^tree_page_size = .*/#tree_page_size = 1000/' "$CONF"
stop_server
ok $? "SIGTERM: status 0"
like "$(tail -1 "$NOTIFY_LOG")" "^[0-9]+ STOPPING=1$" "STOPPING=1 was the last notification"
ok $([ ! -e "$DATA/pg/data/postmaster.pid" ]; echo $?) "the embedded PostgreSQL stopped with khub"

# ---- dpkg -r keeps the data; a reinstall finds it ----------------------------------------------------
dpkg -r khub >"$TEST_DIR/dpkg.log" 2>&1
ok_or_show $? "dpkg -r khub" "$TEST_DIR/dpkg.log"
ok $([ ! -e /usr/bin/khub ]; echo $?) "/usr/bin/khub is gone"
check "/var/lib/khub keeps the repos" -- test -d "$DATA/repos/kernels/khub-demo/relu.git"
check "and the database" -- test -f "$DATA/pg/data/PG_VERSION"
check "khub.conf is kept (a conffile)" -- test -f "$CONF"
dpkg -i "$DEB" >"$TEST_DIR/dpkg.log" 2>&1
ok_or_show $? "dpkg -i again" "$TEST_DIR/dpkg.log"
: >"$SERVE_LOG"
start_as_unit
wait_ready 1
ok_or_show $? "khub starts on the kept data" "$SERVE_LOG"
is "$(curl -s "$URL/api/kernels/khub-demo/relu/revision/v1" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')" \
	"$V1" "the reinstalled khub finds the demo kernel"
is "$(curl -s -o /dev/null -w '%{http_code}' "$URL/kernels/khub-demo/relu/resolve/v1/build/torch-cpu/relu_table.bin")" 200 \
	"and its LFS object"
is "$(grep -c "applying migration" "$SERVE_LOG")" 0 "no migration runs again"
stop_server

done_testing
