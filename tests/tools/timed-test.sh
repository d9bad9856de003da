#!/bin/bash
# timed-test.sh -- the SH_LOG_COMPILER of `make check`: runs one test script
# with bash, its output and exit status untouched, and writes NAME.time next
# to the test's .log: one line of key=value, read by tests/tools/suite_times.sh:
#   wall   seconds from start to exit
#   cpu    CPU seconds of every process the test started, daemons and
#          sandboxed builds included: the usage of a cgroup made for the
#          test (cgroup v2 cpu.stat, else v1 cpuacct); absent where no
#          cgroup can be made (not root, no writable cgroup file system)
#   user, sys  CPU seconds of the script and of the processes it waited for
#          (bash's `time`: a daemon never waited for, such as a lingering
#          embedded PostgreSQL, and processes in a PID namespace that bwrap
#          reaps, such as a build's compilers, are not counted)
#   start, end (epoch seconds), exit (its status)
test=$1
out=${test#"${srcdir:-.}"/}
out=${out%.sh}.time
# a tree where the .time cannot be written runs the test untimed
: 2>/dev/null >"$out.tmp" || exec bash "$@"

# cg_make: a new cgroup for the test in $CG (its usage file in $CG_USAGE,
# in ns or as cpu.stat's usage_usec), or nothing
CG= CG_USAGE=
cg_make() {
	local root rel
	for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ -f "$root/cgroup.controllers" ] || continue
		rel=$(sed -n 's/^0:://p' /proc/self/cgroup)
		CG=$root${rel%/}/khub-test.$$
		mkdir "$CG" 2>/dev/null && [ -f "$CG/cpu.stat" ] && { CG_USAGE=$CG/cpu.stat; return; }
		rmdir "$CG" 2>/dev/null
	done
	rel=$(sed -n 's/^[0-9]*:[^:]*cpuacct[^:]*://p' /proc/self/cgroup)
	for root in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/cpu,cpuacct; do
		[ -f "$root/cpuacct.usage" ] || continue
		CG=$root${rel%/}/khub-test.$$
		mkdir "$CG" 2>/dev/null && [ -f "$CG/cpuacct.usage" ] && { CG_USAGE=$CG/cpuacct.usage; return; }
		rmdir "$CG" 2>/dev/null
	done
	CG=
}
cg_seconds() {	# the cgroup's CPU seconds so far
	case $CG_USAGE in
	*/cpu.stat) awk '$1 == "usage_usec" { printf "%.3f", $2 / 1e6 }' "$CG_USAGE" ;;
	*) awk '{ printf "%.3f", $1 / 1e9 }' "$CG_USAGE" ;;
	esac 2>/dev/null
}
cg_make
# the cgroups of wrappers that were killed (their process gone, nothing left in them)
for d in "${CG%/*}"/khub-test.*; do
	[ -n "$CG" ] && [ "$d" != "$CG" ] && ! kill -0 "${d##*.}" 2>/dev/null && rmdir "$d" 2>/dev/null
done

# A test whose attack spends a resource every sandboxed build shares (a fork
# bomb exhausting the process limit of a build uid other tests' builds use,
# under which their bubblewrap then fails to start; t0139 and t0354 build
# as uids of their own instead, so they need not) says so with a line
# "# suite: runs alone" and holds the suite's lock exclusively; every other
# test holds it shared. The test itself never holds the lock (fd 9 is closed
# for it), so a daemon it leaves behind cannot keep it. A turnstile taken
# before the lock keeps tests from starting while one waits to run alone.
exec 8>"${TMPDIR:-/tmp}/khub-suite.turnstile" 9>"${TMPDIR:-/tmp}/khub-suite.lock"
flock -x 8
if grep -q '^# suite: runs alone' "$1"; then flock -x 9; else flock -s 9; fi
flock -u 8

start=${EPOCHREALTIME:-$(date +%s.%N)}
TIMEFORMAT='%3R %3U %3S'
exec 3>&2
# the test's shell enters the cgroup before it starts the script
{ time ( [ -z "$CG" ] || echo "$BASHPID" >"$CG/cgroup.procs" 2>/dev/null; bash "$@" 2>&3 3>&- 8>&- 9>&- ); } 2>"$out.tmp"
rc=$?
end=${EPOCHREALTIME:-$(date +%s.%N)}
exec 3>&-
read -r wall user sys <"$out.tmp" 2>/dev/null
cpu=
if [ -n "$CG" ]; then
	cpu=$(cg_seconds)
	# a daemon left behind keeps the cgroup; it goes once the daemon does
	for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$CG" 2>/dev/null && break; sleep 0.2; done
fi
printf 'test=%s wall=%s%s user=%s sys=%s start=%s end=%s exit=%s\n' "$(basename "$out" .time)" \
	"${wall:-?}" "${cpu:+ cpu=$cpu}" "${user:-?}" "${sys:-?}" "$start" "$end" "$rc" >"$out" 2>/dev/null
rm -f "$out.tmp"
exit $rc
