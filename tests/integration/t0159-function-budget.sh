#!/bin/bash
# t0159-function-budget.sh -- the function budget that replaced the file cap
# (docs/ARCHITECTURE.md, "Function budget"): no production C function is
# longer than 80 lines, counted by tests/tools/function_lengths.py from the
# "{" to the "}" of each definition. A file may be as long as its one
# concern needs; a function must fit on a screen.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"
command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }

over=$(/usr/bin/python3 tests/tools/function_lengths.py --over 80)
is "$(tail -1 <<<"$over")" "total: 0 functions over 80 lines, longest 0" "no production function over 80 lines"
[ "$(wc -l <<<"$over")" -gt 1 ] && diag "$over"

# The counter itself: a 90-line function in a scratch tree is found, a
# 79-line one is not (so a change to the tool cannot pass everything).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/common"
{
	printf 'static int long_one(int a)\n{\n'
	for i in $(seq 1 88); do printf '\ta += %d;\n' "$i"; done
	printf '\treturn a;\n}\n\nint short_one(void)\n{\n'
	for i in $(seq 1 76); do printf '\t(void)%d;\n' "$i"; done
	printf '\treturn 0;\n}\n'
} >"$scratch/common/sample.c"
got=$(/usr/bin/python3 tests/tools/function_lengths.py --over 80 "$scratch")
like "$got" '^91 common/sample\.c:1 long_one' "the counter finds a 91-line function, with its file, line and name"
like "$(tail -1 <<<"$got")" '^total: 1 functions over 80 lines, longest 91$' "and only that one (a 79-line function is within budget)"
done_testing
