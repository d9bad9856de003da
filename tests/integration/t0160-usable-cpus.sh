#!/bin/bash
# t0160-usable-cpus.sh -- threads = 0 starts one HTTP loop per CPU the
# process may use (at least 2), not per online CPU: under taskset -c 0,
# `khub serve -n` says 2 and why (sched_getaffinity: 1 CPU), and `khub
# serve` really runs 2 khub-http threads; without taskset one per CPU nproc
# reports (less only when a cgroup quota says so); under a cgroup CPU quota
# of one CPU (a v2 cpu.max or a v1 cfs quota, where this machine lets the
# test make a cgroup; else a TAP SKIP) 2 again, naming the quota.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

for tool in taskset nproc curl /usr/bin/python3; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
khub_setup
REAL_KHUB=$KHUB_BIN

# KHUB_BIN through a wrapper: "$@" of the wrapper run under PREFIX...
wrap_khub() {	# wrap_khub NAME SHELL_LINE_BEFORE_EXEC
	local w="$TEST_DIR/$1"
	printf '#!/bin/bash\n%s\nexec "%s" "$@"\n' "$2" "$REAL_KHUB" >"$w"
	chmod +x "$w"
	echo "$w"
}

# The HTTP loop threads of process $1 (khub names them khub-http-N), and
# libmicrohttpd's own (MHD-*: there must be none, the loops run the daemons).
mhd_threads() {
	cat /proc/"$1"/task/*/comm 2>/dev/null | grep -c '^khub-http-[0-9]*$'
}

# serve -n's line "http threads in use = N (why)" under the wrapper $1.
threads_line() {
	"$1" serve -n 2>/dev/null | grep '^http threads in use = '
}

# Start the server through wrapper $1; STARTED gets its HTTP thread count
# and LISTENING its "listening on" log line.
threads_started() {
	KHUB_BIN=$1 khub_start
	KHUB_BIN=$REAL_KHUB
	STARTED=$(mhd_threads "$KHUB_PID")
	MHD_OWN=$(cat /proc/"$KHUB_PID"/task/*/comm 2>/dev/null | grep -c '^MHD-')
	LISTENING=$(grep -o 'listening on .*' "$TEST_DIR/server.log" | tail -1)
	khub_stop
}

read -r first second < <(/usr/bin/python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[1] if len(c) > 1 else "")')

# ---- pinned to one CPU --------------------------------------------------------------------
pinned=$(wrap_khub khub-cpu1 "taskset -p -c $first \$\$ >/dev/null || exit 97")
line=$(threads_line "$pinned")
like "$line" '^http threads in use = 2 \(threads = 0: 1 per CPU, at least 2; 1 CPU: sched_getaffinity allows 1 of [0-9]+' \
	"serve -n under taskset -c $first: 2 threads, 1 CPU by sched_getaffinity ($line)"
threads_started "$pinned"
is "$STARTED" 2 "serve under taskset -c $first runs 2 khub-http loop threads"
is "$MHD_OWN" 0 "and no libmicrohttpd thread of its own (the loops run the daemons)"
like "$LISTENING" '2 threads; threads = 0: 1 per CPU, at least 2; 1 CPU: sched_getaffinity' \
	"the listening log line says how the count was chosen"

# ---- an explicit threads value wins -------------------------------------------------------
line=$(KHUB_THREADS=3 threads_line "$pinned")
is "$line" "http threads in use = 3 (threads = 3)" "threads = 3 is used as set, whatever the CPUs"

# ---- the machine as it is, and two CPUs ---------------------------------------------------
n=$(nproc)
line=$(threads_line "$REAL_KHUB")
if [[ "$line" =~ CPUs?:\ cgroup ]]; then
	like "$line" '^http threads in use = [0-9]+ \(threads = 0: 1 per CPU, at least 2; [0-9]+ CPUs?: cgroup ' \
		"serve -n as started, under a cgroup quota: $line"
	echo "ok $((++TAP_COUNT)) # SKIP a cgroup quota binds this test already"
else
	want=$((n < 2 ? 2 : n))
	like "$line" "^http threads in use = $want \\(threads = 0: 1 per CPU, at least 2; $n CPUs?: sched_getaffinity allows $n of " \
		"serve -n as started: 1 per CPU nproc reports ($n), at least 2: $line"
	if [ -n "$second" ]; then
		two=$(wrap_khub khub-cpu2 "taskset -p -c $first,$second \$\$ >/dev/null || exit 97")
		line=$(threads_line "$two")
		like "$line" '^http threads in use = 2 \(threads = 0: 1 per CPU, at least 2; 2 CPUs: sched_getaffinity allows 2 of ' \
			"serve -n on two allowed CPUs: 2 threads ($line)"
	else
		echo "ok $((++TAP_COUNT)) # SKIP only one CPU allowed here"
	fi
fi

# ---- a cgroup CPU quota of one CPU --------------------------------------------------------
CG=
cg_remove() {	# the server and its database are gone first; rmdir waits for the last exit
	[ -n "$CG" ] || return 0
	for _ in $(seq 1 100); do
		rmdir "$CG" 2>/dev/null && break
		[ -d "$CG" ] || break
		sleep 0.1
	done
	[ -d "$CG" ] && diag "could not remove $CG"
	CG=
}
trap 'khub_stop; cg_remove; khub_teardown' EXIT

# A child of a cgroup2 mount with the cpu controller, else of v1's cpu
# hierarchy, with one CPU of quota, in CG; else CG_WHY says why not.
cg_make() {
	local root name="khub-t0160-$$"
	root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	if [ -n "$root" ] && grep -qw cpu "$root/cgroup.controllers" 2>/dev/null &&
		{ grep -qw cpu "$root/cgroup.subtree_control" || echo +cpu >"$root/cgroup.subtree_control"; } 2>/dev/null &&
		mkdir "$root/$name" 2>/dev/null; then
		CG="$root/$name"
		echo "100000 100000" >"$CG/cpu.max" 2>/dev/null && return 0
		cg_remove
	fi
	CG_WHY="cgroup2 at ${root:-(none)} has no usable cpu controller"
	root=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)
	if [ -n "$root" ] && mkdir "$root/$name" 2>/dev/null; then
		CG="$root/$name"
		echo 100000 >"$CG/cpu.cfs_period_us" 2>/dev/null && echo 100000 >"$CG/cpu.cfs_quota_us" 2>/dev/null &&
			return 0
		cg_remove
	fi
	CG_WHY="$CG_WHY; no v1 cpu hierarchy where a child can be made (${root:-none mounted})"
	return 1
}
if cg_make; then
	quota=$(wrap_khub khub-quota "echo \$\$ >'$CG/cgroup.procs' || exit 97")
	line=$(threads_line "$quota")
	like "$line" '^http threads in use = 2 \(threads = 0: 1 per CPU, at least 2; 1 CPU: cgroup (cpu\.max|cpu\.cfs_quota_us/cfs_period_us) 100000/100000 ' \
		"serve -n under a one-CPU cgroup quota ($CG): 2 threads ($line)"
	threads_started "$quota"
	is "$STARTED" 2 "serve under a one-CPU cgroup quota runs 2 khub-http loop threads"
	cg_remove
else
	echo "ok $((++TAP_COUNT)) # SKIP cgroup CPU quota: $CG_WHY"
	echo "ok $((++TAP_COUNT)) # SKIP cgroup CPU quota: $CG_WHY"
fi

done_testing
