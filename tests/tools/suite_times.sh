#!/bin/bash
# suite_times.sh [-n N] [DIR...] -- what the last `make check` spent: reads
# the NAME.time files that tests/tools/timed-test.sh wrote (default DIR:
# tests/integration) and prints the N slowest tests (default 25) by wall
# seconds with their CPU seconds (of the test's cgroup; marked ~ where only
# bash's time of the waited-for processes was had, which misses daemons and
# sandboxed builds) and TAP checks (from NAME.trs), then the totals and the
# critical path: the suite's span (first start to last end), the longest
# test (no -jN runs the suite faster), the bound sum/jobs at the observed
# concurrency, the CPU seconds over the machine's cores (the bound at any
# -jN), and the tests still running once the last one had started.
n=25
[ "${1:-}" = -n ] && { n=$2; shift 2; }
[ $# -gt 0 ] || set -- tests/integration
rows=$(for d in "$@"; do
	for f in "$d"/*.time; do
		[ -e "$f" ] || continue
		checks=$(grep -c '^:test-result:' "${f%.time}.trs" 2>/dev/null)
		sed "s/\$/ checks=${checks:-?}/" "$f"
	done
done | awk '{
	delete v
	for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	# the cgroup'"'"'s CPU seconds, else (marked ~) what bash'"'"'s time saw
	cpu = ("cpu" in v) ? v["cpu"] : v["user"] + v["sys"]
	printf "%s %s %s %s %s %s %s %s\n", v["test"], v["wall"], cpu, v["start"], v["end"], v["exit"], v["checks"], ("cpu" in v) ? "" : "~"
}')
[ -n "$rows" ] || { echo "suite_times.sh: no .time files under $* (run make check first)" >&2; exit 1; }
printf '%-44s %8s %8s %6s %7s\n' test wall_s cpu_s cpu% checks
sort -k2,2nr <<<"$rows" | head -n "$n" | awk '{
	printf "%-44s %8.1f %7.1f%1s %5.0f%% %7s%s\n", $1, $2, $3, $8, ($2 > 0 ? 100 * $3 / $2 : 0), $7, ($6 != 0 ? "  exit " $6 : "")
}'
awk -v cores="$(nproc 2>/dev/null || echo 1)" '
	{ wall += $2; cpu += $3; k++
	  if (min == "" || $4 < min) min = $4
	  if (max == "" || $5 > max) { max = $5 }
	  if ($4 > laststart) laststart = $4
	  if ($2 > long) { long = $2; longname = $1 }
	  s[k] = $4; e[k] = $5; name[k] = $1 }
	END {
		span = max - min
		# the most tests running at once (the suite'"'"'s -jN, as observed)
		jobs = 1
		for (i = 1; i <= k; i++) { c = 0; for (j = 1; j <= k; j++) if (s[j] <= s[i] && e[j] > s[i]) c++; if (c > jobs) jobs = c }
		bound = wall / jobs; if (long > bound) bound = long
		printf "\n%d tests: %.0f s of wall time, %.0f s of CPU (%.0f%%)\n", k, wall, cpu, (wall > 0 ? 100 * cpu / wall : 0)
		printf "span %.0f s with up to %d at once; no schedule beats %.0f s (the longest test, %s: %.0f s; sum/%d: %.0f s)\n",
			span, jobs, bound, longname, long, jobs, wall / jobs
		printf "the CPU seconds alone take %.0f s on this machine'"'"'s %d cores, at any -j\n", cpu / cores, cores
		printf "after the last test started (%.0f s before the end), still running:\n", max - laststart
		for (i = 1; i <= k; i++) if (e[i] > laststart) printf "  %-42s started at +%.0f s, ran %.0f s\n", name[i], s[i] - min, e[i] - s[i]
	}' <<<"$rows"
