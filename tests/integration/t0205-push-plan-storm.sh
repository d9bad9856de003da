#!/bin/bash
# t0205-push-plan-storm.sh -- a git push is answered without waiting for
# its plan (docs/build-farm.md, "Planning"): several real `git push`es of
# a build.toml tomllib cannot read before the planner's kill (a key path
# of 120,000 parts) are each answered well before that kill, telling the
# pusher where the builds will show; another owner's push during the storm
# is answered as fast and still planned (its builds appear), in its turn;
# each slow push is planned exactly once, by the server that ran it.
# Before, the push hook planned in the push's own process, so every such
# push waited for the planner's kill.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
V1=torch211-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json
log=$TEST_DIR/setup.log
khub admin user create alice >>"$log" 2>&1
khub admin user create bob >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
W1=$(khub admin worker add w1 2>>"$log" | tail -n 1)
khub_start
KILL_S=10	# build_plan_wall_ms, the planner's kill (default)
N=6		# slow pushes

B=$TEST_DIR/b
b64() { base64 -w0 "$@"; }
st=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $W1" -H 'Content-Type: application/json' \
	--data-binary "{\"name\":\"w1\",\"toolchains\":[{\"name\":\"fake\",\"variants\":[\"$V1\"]}]}" \
	"$KHUB_URL/api/workers/register")
is "$st" 200 "a worker that builds $V1 registered (pushes get builds)"
TOML='[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
for who in alice:slow bob:fast; do
	tok=$ALICE; [ "${who%%:*}" = bob ] && tok=$BOB
	files=$(printf '{"path":"build.toml","content":"%s","encoding":"base64"},{"path":"torch-ext/relu/__init__.py","content":"%s","encoding":"base64"}' \
		"$(printf "$TOML" | b64)" "$(printf 'x = 1\n' | b64)")
	st=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
		--data-binary "{\"name\":\"${who#*:}\",\"type\":\"kernel\",\"files\":[$files]}" "$KHUB_URL/api/repos/create")
	is "$st" 200 "${who%%:*}/${who#*:} created (a kernel repo with build.toml, buildOnPush on)"
done

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME" && git config --global user.name t && git config --global user.email t@example.com
for who in alice:slow:$ALICE bob:fast:$BOB; do
	IFS=: read -r u r t <<<"$who"
	git clone -q "http://x:$t@127.0.0.1:$KHUB_PORT/kernels/$u/$r" "$TEST_DIR/$r" >>"$log" 2>&1
done
ok "$([ -f "$TEST_DIR/slow/build.toml" ] && [ -f "$TEST_DIR/fast/build.toml" ] && echo 0 || echo 1)" "both repos cloned over git smart HTTP"

# N branches of alice's, each with its own pathological build.toml (so no
# kept plan answers the next), pushed at once
KEYPATH=$(/usr/bin/python3 -c 'print("[" + ".".join(["a"] * 120000) + "]")')
for i in $(seq 1 $N); do
	git -C "$TEST_DIR/slow" checkout -q -b "s$i" main
	printf '%s\nx = %d\n' "$KEYPATH" "$i" >"$TEST_DIR/slow/build.toml"
	git -C "$TEST_DIR/slow" commit -qam "slow $i"
done
ok "$([ "$(stat -c %s "$TEST_DIR/slow/build.toml")" -lt 262144 ] && echo 0 || echo 1)" "the slow build.toml is under the 256 KiB cap (it is planned)"
pids=
for i in $(seq 1 $N); do
	(s=$(date +%s%N); git -C "$TEST_DIR/slow" push origin "s$i" >"$TEST_DIR/push$i.out" 2>&1; rc=$?
	 echo "$rc $((($(date +%s%N) - s) / 1000000))" >"$TEST_DIR/push$i.code") &
	pids="$pids $!"
done
# another owner's push while the storm is being pushed and planned: once
# every slow branch is in alice's repo
GD=$KHUB_DATA_DIR/repos/kernels/alice/slow.git
for _ in $(seq 1 600); do
	[ "$(git --git-dir="$GD" for-each-ref refs/heads/ | grep -c 'refs/heads/s[0-9]')" -ge $N ] && break
	sleep 0.1
done
printf 'x = 2\n' >"$TEST_DIR/fast/torch-ext/relu/__init__.py"
git -C "$TEST_DIR/fast" commit -qam "a source change"
BSHA=$(git -C "$TEST_DIR/fast" rev-parse HEAD)
s=$(date +%s%N)
git -C "$TEST_DIR/fast" push origin main >"$TEST_DIR/bob.out" 2>&1
rc=$?
bob_ms=$((($(date +%s%N) - s) / 1000000))
stopped() { grep -c "nothing queued: build.toml: reading it was stopped" "$TEST_DIR/server.log"; }
ended_at_answer=$(stopped)
is "$rc" 0 "bob's git push during the storm succeeds"
diag "bob's push took $bob_ms ms (slow plans ended by then: $ended_at_answer of $N)"
ok "$([ $bob_ms -lt $((KILL_S * 1000)) ] && echo 0 || echo 1)" "… answered in less than the planner's kill ($KILL_S s)"
like "$(cat "$TEST_DIR/bob.out")" "remote: khub: refs/heads/main: builds of ${BSHA:0:12} will be planned after this push: see $KHUB_URL/kernels/bob/fast/builds\\?commit=$BSHA" \
	"… and told where its builds will show"
wait $pids
is "$(cat "$TEST_DIR"/push*.code | cut -d' ' -f1 | sort | uniq -c | tr -s ' ')" " $N 0" "the $N slow pushes succeed"
slowest=$(cat "$TEST_DIR"/push*.code | cut -d' ' -f2 | sort -n | tail -1)
diag "the slowest of them took $slowest ms"
ok "$([ "$slowest" -lt $((KILL_S * 1000)) ] && echo 0 || echo 1)" "… each answered in less than the planner's kill ($KILL_S s): none waited for its plan"
like "$(cat "$TEST_DIR/push1.out")" "remote: khub: refs/heads/s1: builds of [0-9a-f]{12} will be planned after this push: see $KHUB_URL/kernels/alice/slow/builds\\?commit=[0-9a-f]{40}" \
	"… each told where its builds will show"

# bob's push is planned: its builds appear, in its turn (not after the storm)
got=
for _ in $(seq 1 1800); do
	got=$(curl -s -H "Authorization: Bearer $BOB" "$KHUB_URL/api/kernels/bob/fast/builds?limit=100" |
		jq -r --arg c "$BSHA" '[.builds[] | select(.commit == $c) | .variant] | join(",")')
	[ -n "$got" ] && break
	sleep 0.1
done
ended_at_plan=$(stopped)
is "$got" "$V1" "bob's push was planned: its build of $V1 is queued"
diag "slow plans ended before bob's builds showed: $ended_at_plan of $N"
ok "$([ "$ended_at_plan" -lt $N ] && echo 0 || echo 1)" "… before the storm's last slow plan ended"

# each slow push planned exactly once, and stopped at the planner's limit
for _ in $(seq 1 1800); do
	[ "$(stopped)" -ge $N ] && break
	sleep 0.1
done
is "$(stopped)" "$N" "each of the $N slow pushes was planned exactly once"
like "$(grep -m1 'reading it was stopped' "$TEST_DIR/server.log")" "stopped at" "the slow plans were stopped at a limit (the attack is real)"
is "$(ls "$KHUB_DATA_DIR"/lfs/tmp | grep -c '^push-plans-')" 0 "no push's plan file is left behind"
khub_stop	# one a crashed server left is removed when it starts again
printf 'khub-plan 1 1 %s -1 0 refs/heads/x\n' "$BSHA" >"$KHUB_DATA_DIR/lfs/tmp/push-plans-crash1"
khub_start
is "$(ls "$KHUB_DATA_DIR"/lfs/tmp | grep -c '^push-plans-')" 0 "… nor one a crashed server left, once it starts again"
done_testing
