#!/bin/bash
# t0283-worker-daemon-cache.sh -- the build farm with the worker's build
# cache: the daemon keeps a ccache per (repo, toolchain) under its work
# directory; a pushed source builds cold (misses), the build of a changed
# commit pushed after it is served from the cache (hits, the binding too:
# it registers under the runtime op namespace, linked in; in the report the server
# stores and the build log, which gives each unit's compile time), and a rebuild of that commit with --no-build-cache gives
# the same bytes (the farm finds it identical to what it published, and
# publishes nothing new).
. "$(dirname "$0")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs ccache torch	# $WORKER_BIN, or a skip

khub_setup
export KHUB_ABI_POLICY=warn	# a Debian toolchain links symbols newer than manylinux_2_28 allows
W=$TEST_DIR/worker
mkdir -p "$W/work" "$TEST_DIR/readme"
worker_toolchain "$W/toolchains.json"
worker_check "$W/toolchains.json"	# $VARIANT, or a skip
khub_accounts	# alice, acme, $ALICE
khub admin worker add w1 2>/dev/null | tail -n 1 >"$W/w1.token"
chmod 600 "$W/w1.token"
printf '# relu\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start

worker() {	# worker [options]: w1 run until the queue is empty
	"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" \
		--name w1 --work-dir "$W/work" --once --poll-seconds 0 "$@" 2>>"$W/w1.log"
}
build() {	# build ID JQ: a field of GET /api/builds/ID
	curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$1" | jq -r "$2"
}
queued_build() {	# queued_build SHA: the build the push queued for $VARIANT
	local i id
	for i in $(seq 1 1500); do
		id=$(curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/kernels/acme/relu/builds?limit=100" |
			jq -r "(if type == \"object\" then .builds else . end)[] | select(.commit == \"$1\" and .variant == \"$VARIANT\") | .id" |
			head -1)
		[ -n "$id" ] && { echo "$id"; return 0; }
		sleep 0.2
	done
	return 1
}

worker	# registers its variants, so that a push queues them
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name "Test User" && git config --global user.email test@example.com
git clone -q "http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu" "$TEST_DIR/clone" 2>"$TEST_DIR/git.err" ||
	bail "git clone failed: $(cat "$TEST_DIR/git.err")"
cd "$TEST_DIR/clone" || bail "no clone"
cp -r "$KHUB_SRC/examples/relu"/. .
rm -rf build
git add -A && git commit -qm "relu source" && git push -q origin main 2>"$TEST_DIR/git.err"
ok $? "git push of the kernel source"
ID1=$(queued_build "$(git rev-parse HEAD)")
like "$ID1" '^[0-9]+$' "the push queued build #$ID1"
worker
is "$(build "$ID1" .state)" succeeded "build #$ID1 (cold) succeeded"
is "$(build "$ID1" '.abi_report.build.cache | "\(.used) \(.hits) \(.misses)"')" "true 0 2" \
	"its report: the cache used, 0 hits, 2 misses"
CACHE=$W/work/w1/ccache/$(printf 'acme/relu\ncpu-debian' | sha256sum | cut -d' ' -f1)
ok $([ -d "$CACHE" ]; echo $?) "the worker keeps acme/relu's cache in WORKDIR/w1/ccache/<sha256 of repo and toolchain>"
is "$(stat -c %a "$CACHE")" 2770 "mode 02770: the build group's (its builds at once share it), no one else's"

git pull -q --rebase origin main >/dev/null 2>&1	# the farm published README.md on main
printf '\n# a changed line\n' >>build.toml
git commit -qam "one more line" && git push -q origin main 2>"$TEST_DIR/git.err"
ok $? "git push of a changed commit"
SHA2=$(git rev-parse HEAD)
ID2=$(queued_build "$SHA2")
like "$ID2" '^[0-9]+$' "the push queued build #$ID2"
worker
is "$(build "$ID2" .state)" succeeded "build #$ID2 (the changed commit) succeeded"
is "$(build "$ID2" '.abi_report.build.cache | "\(.used) \(.hits) \(.misses)"')" "true 2 0" \
	"its report: 2 hits (relu_cpu.cpp, and the binding: a new op namespace, the same command line: the runtime namespace)"
curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$ID2/log" >"$TEST_DIR/log2"
like "$(cat "$TEST_DIR/log2")" "build cache .*/w1/ccache/[0-9a-f]{64} \(ccache, at most 2048 MiB" "its log names the cache"
like "$(cat "$TEST_DIR/log2")" 'build cache: 2 hits, 0 misses' "and counts what it served"
like "$(cat "$TEST_DIR/log2")" 'compiled torch-ext/torch_binding.cpp in [0-9]+\.[0-9] s' "and gives each unit's compile time"
like "$(cat "$TEST_DIR/log2")" "torch-ext/torch_binding.cpp: registers under the runtime op namespace _relu_cpu_${SHA2:0:7}" \
	"and says the binding got the commit's op namespace"

# the same commit without the cache: the same bytes, nothing published again
V1=$(git ls-remote origin refs/heads/v1 | cut -f1)
ID3=$(curl -s -X POST -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	-d "{\"revision\": \"$SHA2\", \"variants\": [\"$VARIANT\"], \"force\": true}" \
	"$KHUB_URL/api/kernels/acme/relu/builds" | jq -r '.builds[0].id')
worker --no-build-cache
is "$(build "$ID3" .state)" succeeded "build #$ID3 (--no-build-cache) succeeded"
is "$(build "$ID3" .abi_report.build.cache.used)" false "its report: no cache"
like "$(build "$ID3" .note)" "^identical to published commit $V1\$" \
	"its files are the cached build's, byte for byte: identical to what v1 holds"
is "$(git ls-remote origin refs/heads/v1 | cut -f1)" "$V1" "nothing new published on v1"
done_testing
