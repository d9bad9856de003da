#!/bin/bash
# t0201-slow-plan-storm.sh -- a storm of slow build.toml files (a key path
# of 120,000 parts: tomllib takes far past the planner's kill) committed to
# one author's kernel repo never delays another owner's commit, and the
# other owner's push is planned in its turn, not after the storm
# (docs/build-farm.md, "Planning"). Before the push planner, each slow plan
# held one of the work threads commits use until the planner was killed.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
log=$TEST_DIR/setup.log
khub admin user create alice >>"$log" 2>&1
khub admin user create bob >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
khub_start
KILL_S=10	# build_plan_wall_ms, the planner's kill (default)

B=$TEST_DIR/b
b64() { base64 -w0 "$@"; }
TOML='[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
for who in alice:slow bob:fast; do
	tok=$ALICE; [ "${who%%:*}" = bob ] && tok=$BOB
	files=$(printf '{"path":"build.toml","content":"%s","encoding":"base64"},{"path":"torch-ext/relu/__init__.py","content":"%s","encoding":"base64"}' \
		"$(printf "$TOML" | b64)" "$(printf 'x = 1\n' | b64)")
	st=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
		--data-binary "{\"name\":\"${who#*:}\",\"type\":\"kernel\",\"files\":[$files]}" "$KHUB_URL/api/repos/create")
	is "$st" 200 "${who%%:*}/${who#*:} created (a kernel repo with build.toml, buildOnPush on)"
done

# 16 commits of a pathological build.toml (each its own, so no kept plan
# answers the next), sent at once
KEYPATH=$(/usr/bin/python3 -c 'print("[" + ".".join(["a"] * 120000) + "]")')
for i in $(seq 1 16); do
	printf '%s\nx = %d\n' "$KEYPATH" "$i" >"$TEST_DIR/slow$i.toml"
	printf '{"key":"header","value":{"summary":"slow %d"}}\n{"key":"file","value":{"content":"%s","path":"build.toml","encoding":"base64"}}\n' \
		"$i" "$(b64 "$TEST_DIR/slow$i.toml")" >"$TEST_DIR/slow$i.ndjson"
done
ok "$([ "$(stat -c %s "$TEST_DIR/slow1.toml")" -lt 262144 ] && echo 0 || echo 1)" "the slow build.toml is under the 256 KiB cap (it is planned)"
pids=
for i in $(seq 1 16); do
	curl -s -o "$TEST_DIR/slow$i.out" -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $ALICE" \
		-H 'Content-Type: application/x-ndjson' --data-binary "@$TEST_DIR/slow$i.ndjson" \
		"$KHUB_URL/api/kernels/alice/slow/commit/main" >"$TEST_DIR/slow$i.code" &
	pids="$pids $!"
done
# another owner's commit, while the storm is being committed and planned:
# once 4 of its commits landed (as many as the work threads commits use)
GD=$KHUB_DATA_DIR/repos/kernels/alice/slow.git
for _ in $(seq 1 600); do
	[ "$(git --git-dir="$GD" rev-list --count main 2>/dev/null || echo 0)" -ge 5 ] && break
	sleep 0.1
done
printf '{"key":"header","value":{"summary":"fast"}}\n{"key":"file","value":{"content":"%s","path":"torch-ext/relu/__init__.py","encoding":"base64"}}\n' \
	"$(printf 'x = 2\n' | b64)" >"$TEST_DIR/fast.ndjson"
res=$(curl -s -o "$B" -w '%{http_code} %{time_total}' -H "Authorization: Bearer $BOB" -H 'Content-Type: application/x-ndjson' \
	--data-binary "@$TEST_DIR/fast.ndjson" "$KHUB_URL/api/kernels/bob/fast/commit/main")
stopped() { grep -c "nothing queued: build.toml: reading it was stopped" "$TEST_DIR/server.log"; }
ended_at_answer=$(stopped)
is "${res%% *}" 200 "bob's commit during the storm → 200"
diag "bob's commit took ${res#* } s (slow plans ended by then: $ended_at_answer)"
ok "$(awk -v t="${res#* }" -v k=$KILL_S 'BEGIN { exit !(t < k) }'; echo $?)" "… answered in less than the planner's kill ($KILL_S s): it waited for no plan"
ok "$([ "$ended_at_answer" -lt 16 ] && echo 0 || echo 1)" "… while the storm's plans were still being made"
BSHA=$(jq -r .commitOid "$B")
wait $pids
is "$(cat "$TEST_DIR"/slow*.code | cut -d' ' -f1 | sort | uniq -c | tr -s ' ')" " 16 200" "the 16 slow commits are answered 200"
slowest=$(cat "$TEST_DIR"/slow*.code | cut -d' ' -f2 | sort -n | tail -1)
diag "the slowest of them took $slowest s"

# bob's push is planned in its turn: before the storm is through
for _ in $(seq 1 1800); do
	grep -q "build trigger: repo [0-9]* $BSHA (refs/heads/main)" "$TEST_DIR/server.log" && break
	sleep 0.1
done
ended_at_plan=$(stopped)
grep -q "build trigger: repo [0-9]* $BSHA (refs/heads/main)" "$TEST_DIR/server.log"
ok $? "bob's push was planned"
diag "slow plans ended before bob's was made: $ended_at_plan of 16"
ok "$([ "$ended_at_plan" -lt 16 ] && echo 0 || echo 1)" "… before the 16th slow plan"
ok "$([ "$ended_at_plan" -le 4 ] && echo 0 || echo 1)" "… after at most one slow plan per planner thread beyond those running (2 threads: ≤ 4)"
like "$(grep -m1 'reading it was stopped' "$TEST_DIR/server.log")" "stopped at" "the slow plans were stopped at a limit (the attack is real)"

# The checks are done. A stop waits for the plans the server is running
# (its planners' python3 children, up to their 10 s kill, a CPU each) and
# then drops the queued ones: stop it, ending the plans it still runs.
kill -TERM "$KHUB_PID"
for _ in $(seq 1 600); do
	planners=$(pgrep -P "$KHUB_PID" -x python3)
	[ -n "$planners" ] && kill -KILL $planners 2>/dev/null
	state=$(ps -o stat= -p "$KHUB_PID")
	[ -z "$state" ] || [[ "$state" == Z* ]] && break
	sleep 0.1
done
khub_stop	# reaps it
done_testing
