#!/bin/bash
# t0020-js-client.sh -- the real @huggingface/hub JS client (pinned in
# tests/js/package.json) reads kernel repos from khub: listFiles (recursive,
# paginated, non-recursive), downloadFile (regular and LFS), fileDownloadInfo,
# and accessToken use on a private repo. The node script's TAP lines are
# renumbered into this script's plan.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v node >/dev/null 2>&1 || { echo "1..0 # SKIP node not installed"; exit 0; }
JS_DIR="$KHUB_SRC/tests/js"
if [ ! -d "$JS_DIR/node_modules/@huggingface/hub" ]; then
	command -v npm >/dev/null 2>&1 || { echo "1..0 # SKIP npm not installed"; exit 0; }
	if ! (cd "$JS_DIR" && npm ci --silent --no-audit --no-fund >/dev/null 2>&1); then
		echo "1..0 # SKIP npm ci failed in $JS_DIR (offline?)"
		exit 0
	fi
fi

khub_setup

SRC="$TEST_DIR/src"
make_kernel_tree "$SRC" relu
# An explicit .bin next to the .so: LFS by the default .gitattributes.
head -c 4096 /dev/urandom >"$SRC/build/torch-cpu/weights.bin"

SRC2="$TEST_DIR/src2"
make_kernel_tree "$SRC2" secret

sha_v1=$(khub import "$SRC" --repo acme/relu --branch v1 2>>"$TEST_DIR/import.log")
ok $? "import acme/relu --branch v1"
like "$sha_v1" '^[0-9a-f]{40}$' "import prints the v1 commit sha"
sha_main=$(khub import "$SRC" --repo acme/relu --branch main 2>>"$TEST_DIR/import.log")
ok $? "import acme/relu --branch main"
diag "v1=$sha_v1 main=$sha_main"
sha_secret=$(khub import "$SRC2" --repo acme/secret --branch main --private 2>>"$TEST_DIR/import.log")
ok $? "import acme/secret --private"

check "admin user create alice" -- khub admin user create alice
check "admin member set acme alice read" -- khub admin member set acme alice read
TOKEN=$(khub admin token create alice --scope read 2>>"$TEST_DIR/import.log" | tail -n 1)
like "$TOKEN" '^hf_[A-Za-z0-9]+$' "admin token create prints an hf_ token"
check "admin trust set acme" -- khub admin trust set acme

# A small page size makes listFiles follow Link headers.
PAGE=4
khub_start --tree-page-size $PAGE

# run_js DESC-PREFIX ENV...: run read_client.mjs, re-emit its results here.
run_js() {
	local prefix=$1; shift
	local out rc line results=0 plan=
	out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" TREE_PAGE_SIZE=$PAGE "$@" node tests/js/read_client.mjs 2>&1)
	rc=$?
	while IFS= read -r line; do
		if [[ "$line" =~ ^ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1))
			ok 0 "$prefix${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^not\ ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1))
			ok 1 "$prefix${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^1\.\.([0-9]+) ]]; then
			plan=${BASH_REMATCH[1]}
		elif [[ "$line" =~ ^# ]]; then
			echo "$line"
		elif [ -n "$line" ]; then
			echo "# node: $line"
		fi
	done <<<"$out"
	is "$plan" "$results" "${prefix}node script ran its whole plan"
	[ "$rc" -ne 0 ] && diag "${prefix}node exited with status $rc"
	return 0
}

run_js "v1: " REPO=acme/relu REV=v1 SRC_DIR="$SRC" \
	PRIVATE_REPO=acme/secret TOKEN="$TOKEN" PRIVATE_SRC_DIR="$SRC2"
run_js "main: " REPO=acme/relu REV=main SRC_DIR="$SRC"
run_js "sha: " REPO=acme/relu REV="$sha_v1" SRC_DIR="$SRC"

done_testing
