# node_tap.sh -- sourced by the tests that run a node TAP script (the browser
# tests): the one way its output becomes this test's TAP lines.

# node_tap_relay OUT RC: each "ok"/"not ok" line of OUT (a node script's
# output) as this test's ok, its "#" lines as they are, anything else as a
# "# node:" comment; then that the script ran its whole plan, and RC (its
# exit status) as a diagnostic when not 0.
node_tap_relay() {
	local out=$1 rc=$2 line results=0 plan=
	while IFS= read -r line; do
		if [[ "$line" =~ ^ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1))
			ok 0 "${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^not\ ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1))
			ok 1 "${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^1\.\.([0-9]+) ]]; then
			plan=${BASH_REMATCH[1]}
		elif [[ "$line" =~ ^# ]]; then
			echo "$line"
		elif [ -n "$line" ]; then
			echo "# node: $line"
		fi
	done <<<"$out"
	is "$plan" "$results" "the node script ran its whole plan"
	[ "$rc" -ne 0 ] && diag "node exited with status $rc"
	return 0
}
