#!/bin/bash
# t0227-help-and-config-docs.sh -- every `--help` of khub and khub-worker,
# at every level (`khub lfs migrate --help`, `khub admin user create
# --help`: the commands and verbs each usage text names), prints its usage
# to stdout and exits 0, before anything runs (no data dir is made); and
# docs/configuration.md documents every key of the configuration table
# (the keys `khub serve --print-config-template` writes) and no key the
# table lacks, so the two cannot drift apart.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

khub_setup
KHUB_DATA_DIR=$TEST_DIR/never-made	# --help must not touch it

# ---- every --help -------------------------------------------------------------------------------
helps=0 bad=0
help_ok() {	# help_ok BINARY ARGS...: stdout non-empty, exit 0
	local out rc
	out=$("$@" 2>"$TEST_DIR/help.err")
	rc=$?
	helps=$((helps + 1))
	if [ "$rc" -ne 0 ] || [ -z "$out" ]; then
		bad=$((bad + 1))
		diag "${*#"$KHUB_SRC"/}: exit $rc, $(printf %s "$out" | wc -c) bytes on stdout, stderr: $(head -c 120 "$TEST_DIR/help.err")"
	fi
}
commands=$(khub --help | sed -n '/^commands:/,/^$/p' | sed -nE 's/^  ([a-z][a-z-]*) +.*/\1/p' | grep -vx version)
like "$(echo $commands)" '^serve db import mirror .*lfs .*admin' "khub --help lists the commands"
for cmd in $commands; do
	help_ok "$KHUB_BIN" "$cmd" --help
	help_ok "$KHUB_BIN" "$cmd" -h
	# the verbs its usage names: "khub admin trust set|unset ORG" -> admin trust set, admin trust unset
	"$KHUB_BIN" "$cmd" --help 2>/dev/null | grep -oE "khub $cmd( [a-z][a-z|-]*)+" | sed "s/^khub //" | sort -u |
		while read -r -a words; do
			last=${words[${#words[@]} - 1]}
			for verb in ${last//|/ }; do
				echo "${words[*]:0:${#words[@]}-1} $verb"
			done
		done >"$TEST_DIR/verbs.$cmd"
	while read -r -a path; do
		[ "${#path[@]}" -gt 1 ] && help_ok "$KHUB_BIN" "${path[@]}" --help
	done <"$TEST_DIR/verbs.$cmd"
done
help_ok "$KHUB_BIN" --help
help_ok "$KHUB_BIN" help
help_ok "$KHUB_SRC/khub-worker" --help
help_ok "$KHUB_SRC/khub-worker" build --help
check "khub lfs migrate --help: the usage on stdout, exit 0" -- bash -c \
	"'$KHUB_BIN' lfs migrate --help 2>/dev/null | grep -q 'usage: khub lfs migrate'"
is "$bad" 0 "every --help of $helps (commands, their verbs, khub-worker) prints to stdout and exits 0"
check "no --help made the data dir" -- test ! -e "$KHUB_DATA_DIR"
KHUB_DATA_DIR=$TEST_DIR/data

# ---- docs/configuration.md documents every key ------------------------------------------------------
DOC=$KHUB_SRC/docs/configuration.md
khub serve --print-config-template | sed -nE 's/^#?([a-z_0-9]+) =.*/\1/p' | sort -u >"$TEST_DIR/keys"
like "$(wc -l <"$TEST_DIR/keys")" '^[0-9]{2,}$' "the template names the table's keys ($(wc -l <"$TEST_DIR/keys"))"
sed -nE 's/^\| `([a-z_0-9]+)` \|.*/\1/p' "$DOC" | sort -u >"$TEST_DIR/documented"
missing=$(comm -23 "$TEST_DIR/keys" "$TEST_DIR/documented" | paste -sd' ')
is "$missing" "" "every key of the configuration table has its row in docs/configuration.md"
unknown=$(comm -13 "$TEST_DIR/keys" "$TEST_DIR/documented" | paste -sd' ')
is "$unknown" "" "docs/configuration.md documents no key the table lacks"
while read -r key; do
	env=KHUB_$(echo "$key" | tr a-z A-Z)
	grep -qE "^\| \`$key\` \| \`$env\` \|" "$DOC" || echo "$key"
done <"$TEST_DIR/keys" >"$TEST_DIR/bad-env"
is "$(paste -sd' ' "$TEST_DIR/bad-env")" "" "each row names the key's environment variable"
done_testing
