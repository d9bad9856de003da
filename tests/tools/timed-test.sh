#!/bin/bash
# timed-test.sh -- the SH_LOG_COMPILER of `make check`: runs one test script
# with bash, its output and exit status untouched, and writes NAME.time next
# to the test's .log: one line of key=value, the wall seconds, the CPU
# seconds (user, sys) of the script and of every process it waited for
# (bash's `time`: a daemon that is never waited for, such as a lingering
# embedded PostgreSQL, is not counted), its start and end (epoch seconds)
# and its exit status. tests/tools/suite_times.sh reads these files.
test=$1
out=${test#"${srcdir:-.}"/}
out=${out%.sh}.time
# a tree where the .time cannot be written runs the test untimed
: 2>/dev/null >"$out.tmp" || exec bash "$@"
start=${EPOCHREALTIME:-$(date +%s.%N)}
TIMEFORMAT='%3R %3U %3S'
exec 3>&2
{ time bash "$@" 2>&3 3>&-; } 2>"$out.tmp"
rc=$?
end=${EPOCHREALTIME:-$(date +%s.%N)}
exec 3>&-
read -r wall user sys <"$out.tmp" 2>/dev/null
printf 'test=%s wall=%s user=%s sys=%s start=%s end=%s exit=%s\n' "$(basename "$out" .time)" \
	"${wall:-?}" "${user:-?}" "${sys:-?}" "$start" "$end" "$rc" >"$out" 2>/dev/null
rm -f "$out.tmp"
exit $rc
