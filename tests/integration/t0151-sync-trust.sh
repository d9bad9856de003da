#!/bin/bash
# t0151-sync-trust.sh -- what an air-gapped hub must not be talked into by
# the transfer media, and what must cross it. A (connected) exports, B, C
# and D (inside) import; the bundle files are all that cross.
#  1. rollback: a replayed or older bundle moves nothing (exit 4), a branch
#     moving back is refused unless --allow-rewind (audited), tags never move;
#  2. a killed import (KHUB_TEST_CRASH_AT at each step) leaves nothing half
#     visible and a re-run ends where an uninterrupted import ends;
#  3. privacy, trust, deleted branches and deleted repos cross without a new
#     commit, through --since and full bundles; an admin's override wins;
#  4. after a --lock import `kernels lock` works against the inside hub and
#     equals the lock made outside; the variants the lock left out arrive
#     with the next bundle --since the inside hub's state;
#  5. a bundle never adds to, or changes the trust of, a local org;
#  6. --dry-run [--json] says what the import then does; refused, tampered
#     and older bundles audited with the reason and the operator's name;
#     progress lines when stderr is not a terminal; one import at a time;
#     khub sync history.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 curl zstd tar git; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")/lib" && pwd)
SB() { /usr/bin/python3 "$LIB/sync_bundle.py" "$@"; }
. "$KHUB_SRC/tests/lib/real_loader.sh"
LOADER_PATH=$(real_loader_pythonpath "$TEST_DIR/loader" 2>/dev/null) || LOADER_PATH=
LL() { PYTHONPATH=$LOADER_PATH HF_HUB_CACHE=$TEST_DIR/hf-cache-$RANDOM HF_HOME=$TEST_DIR/hf-home SB loaderlock "$@"; }

hubs_setup
for h in a b c d; do hub_init $h; done
for h in a b c d; do hub_spawn $h; done
for h in a b c d; do hub_wait $h; done
A=$(hub_url a)
B=$(hub_url b)
C=$(hub_url c)
D=$(hub_url d)
W=$TEST_DIR/work
mkdir -p "$W"
psql_of() { psql "host=$(hub_data "$1")/pg/run dbname=khub user=khub" -tAc "$2" 2>&1; }
sha_of() { curl -s "$1/api/kernels/$2/revision/$3" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("sha"))' 2>/dev/null; }
refs_of() { curl -s "$1/api/kernels/$2/refs" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin)
print(" ".join(sorted([b["name"] for b in d["branches"]] + ["tag:" + t["name"] for t in d["tags"]])))' 2>/dev/null; }
state_of() {	# the refs of acme/* and team/* (what the bundles carry), one line
	hub "$1" sync state | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin)
print(json.dumps(sorted([r["id"], r["refs"], sorted(r.get("lfs", []))] for r in d["repos"]
	if r["id"].split("/")[0] in ("acme", "team")), sort_keys=True))'
}
private_of() { psql_of "$1" "SELECT private FROM repos WHERE namespace = '${2%/*}' AND name = '${2#*/}'"; }
trusted_of() { psql_of "$1" "SELECT trusted_kernel_publisher FROM accounts WHERE name = '$2'"; }

# ---- A: acme/relu (v1, main; two variants), acme/gelu (main, old), acme/tanh; team/x -------------
seed_fail=0
for name in relu gelu tanh; do
	for b in v1 main; do
		d=$W/src/$name-$b
		make_kernel_tree "$d" "$name"	# torch-cpu + torch211-cxx11-cu128 (.so = LFS)
		printf '%s of %s\n' "$b" "$name" >"$d/VERSION.txt"
		hub a import "$d" --repo "acme/$name" --branch "$b" >/dev/null 2>>"$W/import.log" || seed_fail=1
	done
done
hub a import "$W/src/gelu-v1" --repo acme/gelu --branch old >/dev/null 2>>"$W/import.log" || seed_fail=1
make_kernel_tree "$W/src/x" x
hub a import "$W/src/x" --repo team/x --branch main >/dev/null 2>>"$W/import.log" || seed_fail=1
for i in $(seq 1 20); do
	hub a import "$W/src/x" --repo "many/k$i" --branch main >/dev/null 2>>"$W/import.log" || seed_fail=1
done
hub a admin trust set acme >/dev/null 2>&1 || seed_fail=1
hub a admin trust set team >/dev/null 2>&1 || seed_fail=1
hub a admin user create root --site-admin >/dev/null 2>&1
TOKEN=$(hub a admin token create root --scope admin 2>/dev/null | tail -n 1)
ok $seed_fail "A: acme/relu, acme/gelu (main, old), acme/tanh, team/x, many/k1..k20; acme and team trusted"
ARELU=$(hub_data a)/repos/kernels/acme/relu.git
api_a() { curl -s -o "$W/api.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' "$@"; }
is "$(api_a -d '{"tag": "1.0"}' "$A/api/kernels/acme/relu/tag/v1")" 200 "A: tag 1.0 on relu v1"
commit_api() {	# commit_api REPO BRANCH SUMMARY REPO_PATH=LOCAL...
	local repo=$1 branch=$2 summary=$3; shift 3
	local args=()
	for f in "$@"; do args+=(--file "$f"); done
	/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "$summary" "${args[@]}" >"$W/c.ndjson"
	curl -s -o "$W/c.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		-H 'Content-Type: application/x-ndjson' --data-binary @"$W/c.ndjson" "$A/api/kernels/$repo/commit/$branch"
}
hub a sync keygen --out "$W/k" >/dev/null 2>&1
export KHUB_SYNC_TRUSTED_KEYS=$W/k.pub
export_a() { hub a sync export --key "$W/k.key" "$@" 2>"$W/export.err"; }

# ---- 1. rollback ---------------------------------------------------------------------------------------
export_a --out "$W/b1.khub" --repos 'acme/*' --state-out "$W/s1.json" >"$W/e1.out"
ok $? "bundle 1: acme/*"
like "$(cat "$W/e1.out")" "sequence 1 of exporter [0-9a-f-]{36}" "  it says its sequence and exporter"
hub b sync import "$W/b1.khub" >/dev/null 2>"$W/i.err"
ok $? "B imports bundle 1"
like "$(cat "$W/i.err")" "import +100\.0% [0-9.]+ / [0-9.]+ MiB" "  with progress lines on stderr (not a terminal)"
MAIN1=$(sha_of "$A" acme/relu main)
TAG1=$(git --git-dir="$ARELU" rev-parse refs/tags/1.0)
printf 'fix\n' >"$W/fix.txt"
is "$(commit_api acme/relu main "a fix" FIX.txt="$W/fix.txt")" 200 "A: a fix on relu main"
MAIN2=$(sha_of "$A" acme/relu main)
is "$(api_a -X DELETE "$A/api/kernels/acme/gelu/branch/old")" 200 "A: gelu branch old deleted"
export_a --out "$W/b2.khub" --repos 'acme/*' >/dev/null
ok $? "bundle 2: a full bundle (no --since)"
hub b sync import "$W/b2.khub" >"$W/i2.out" 2>&1
ok $? "B imports bundle 2"
is "$(sha_of "$B" acme/relu main)" "$MAIN2" "  relu main has the fix"
is "$(refs_of "$B" acme/gelu)" "main v1" "  gelu branch old is deleted by a full bundle (the source's refs travel)"
B2=$(state_of b)
hub b sync import "$W/b1.khub" >"$W/r1.out" 2>"$W/r1.err"
is $? 4 "bundle 1 again after bundle 2: exit 4"
like "$(cat "$W/r1.err")" "number 1 of exporter .* applied number 2 .*older or replayed bundle moves nothing" "  it says why"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.stale' AND actor_name = 'sync:$(id -un)'
	AND details->>'reason' LIKE '%older or replayed%' AND details->>'operator' = '$(id -un)'")" 1 \
	"  audited as sync.stale with the reason and the operator's name"
SB tamper "$W/b2.khub" "$W/bad.khub" manifest
hub b sync import "$W/bad.khub" >/dev/null 2>&1
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.refused' AND details->>'file' = 'bad.khub'
	AND details->>'reason' LIKE '%signature%' AND details->>'operator' = '$(id -un)'")" 1 \
	"a tampered bundle is audited as sync.refused with the reason and the operator's name"
is "$(state_of b)" "$B2" "  nothing moved (main keeps the fix, old stays deleted)"
hub b sync import "$W/b2.khub" >"$W/r2.out" 2>&1
ok $? "bundle 2 again: exit 0"
like "$(cat "$W/r2.out")" "imported already: nothing changed" "  nothing changed"
exec 9>"$(hub_data b)/repos/.sync-staging/import.lock"
flock 9
hub b sync import "$W/b2.khub" >/dev/null 2>"$W/busy.err"
is $? 3 "while another import holds the hub's import lock: refused"
like "$(cat "$W/busy.err")" "another import is running on this hub" "  saying so"
exec 9>&-
hub b sync import "$W/b1.khub" "$W/b2.khub" >/dev/null 2>&1
is $? 4 "bundles 1 and 2 in one run: exit 4 (the older one moved nothing, the next one was read)"
# A's main moved back behind khub's back (a force push), and its tag moved
git --git-dir="$ARELU" update-ref refs/heads/main "$MAIN1"
export_a --out "$W/b3.khub" --repos 'acme/*' >/dev/null
ok $? "bundle 3: relu main moved back at the source"
hub b sync import --dry-run --json "$W/b3.khub" >"$W/d3.json" 2>/dev/null
is $? 1 "--dry-run of a branch moving back: exit 1, as the import"
is "$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(d["status"][:17], [(c["action"], c["ref"], c["fast_forward"]) for c in d["changes"] if c.get("ref")])' "$W/d3.json")" \
	"would be refused: [('move-ref', 'refs/heads/main', False)]" "--dry-run --json: main would move, not a fast-forward: refused"
hub b sync import "$W/b3.khub" >/dev/null 2>"$W/r3.err"
is $? 1 "B refuses a branch moving back (exit 1)"
like "$(cat "$W/r3.err")" "would move refs/heads/main of acme/relu from [0-9a-f]{12} back to [0-9a-f]{12} .*--allow-rewind" \
	"  naming the ref and the way out"
is "$(state_of b)" "$B2" "  B unchanged"
hub b sync import "$W/b3.khub" --allow-rewind >/dev/null 2>&1
ok $? "an admin's --allow-rewind applies it"
is "$(sha_of "$B" acme/relu main)" "$MAIN1" "  relu main moved back"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.rewind' AND actor_name LIKE 'sync:%'
	AND details::text LIKE '%refs/heads/main%' AND details::text LIKE '%operator%'")" 1 \
	"  audited as sync.rewind with the operator's name"
git --git-dir="$ARELU" update-ref refs/tags/1.0 "$MAIN2"
export_a --out "$W/b4.khub" --repos 'acme/*' >/dev/null
hub b sync import "$W/b4.khub" >"$W/i4.out" 2>&1
ok $? "bundle 4 (tag 1.0 moved at the source) imports"
like "$(cat "$W/i4.out")" "kept refs/tags/1.0 of acme/relu at [0-9a-f]{12} .*tags never move" "  saying the tag stays"
is "$(git --git-dir="$(hub_data b)/repos/kernels/acme/relu.git" rev-parse refs/tags/1.0)" "$TAG1" "  tag 1.0 did not move"
git --git-dir="$ARELU" update-ref refs/tags/1.0 "$TAG1"
git --git-dir="$ARELU" update-ref refs/heads/main "$MAIN2"

# ---- 2. killed imports ---------------------------------------------------------------------------------
export_a --out "$W/k1.khub" --repos 'acme/*' --state-out "$W/ks1.json" >/dev/null
ok $? "a bundle of 3 new repos for D"
hub c sync import "$W/k1.khub" >/dev/null 2>&1
ok $? "C imports it uninterrupted (the reference)"
REF1=$(state_of c)
visible() {	# repos of acme/* registered on D (what readers can see), and those not mirrored
	psql_of d "SELECT count(*) || '/' || count(*) FILTER (WHERE NOT mirrored) FROM repos WHERE namespace = 'acme'"
}
git_refs() { git --git-dir="$1" for-each-ref --format='%(refname) %(objectname)' refs/heads refs/tags; }
whole() {	# every registered repo has all of its refs
	local bad=0
	for r in $(psql_of d "SELECT name FROM repos WHERE namespace = 'acme'"); do
		[ "$(git_refs "$(hub_data d)/repos/kernels/acme/$r.git")" = "$(git_refs "$(hub_data a)/repos/kernels/acme/$r.git")" ] || bad=1
	done
	echo $bad
}
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
for step in staged prepared; do
	KHUB_TEST_CRASH_AT=$step hub d sync import "$W/k1.khub" >/dev/null 2>"$W/crash.err"
	is $? 137 "import killed at '$step'"
	is "$(visible)" "0/0" "  no repo visible, no repo registered half (not mirrored)"
done
KHUB_TEST_CRASH_AT=registered hub d sync import "$W/k1.khub" >/dev/null 2>"$W/crash.err"
is $? 137 "import killed at 'registered' (after its one transaction)"
is "$(visible)" "3/0" "  all 3 repos visible at once"
is "$(whole)" 0 "  each with all of its refs"
hub d sync import "$W/k1.khub" >"$W/rerun.out" 2>&1
ok $? "the re-run completes"
like "$(cat "$W/rerun.out")" "cut short; finishing it" "  saying it finishes a cut-short import"
is "$(state_of d)" "$REF1" "  D ends where C (uninterrupted) ended: refs and LFS objects"
# kill -9 at an observed point: as soon as D has registered a first repo of many/*
export_a --out "$W/many.khub" --repos 'many/*' >/dev/null
hub_bg d "$W/m.out" "$W/m.err" sync import "$W/many.khub"
killed=0
for _ in $(seq 1 3000); do
	if [ "$(psql_of d "SELECT count(*) FROM repos WHERE namespace = 'many'")" != 0 ]; then
		kill -KILL "$BG_PID" 2>/dev/null && killed=1
		break
	fi
	kill -0 "$BG_PID" 2>/dev/null || break
	sleep 0.01
done
wait "$BG_PID" 2>/dev/null
diag "killed: $killed"
is "$(psql_of d "SELECT count(*) || '/' || count(*) FILTER (WHERE NOT mirrored) FROM repos WHERE namespace = 'many'")" "20/0" \
	"kill -9 as the first of 20 new repos shows: all 20 are there at once, none half registered"
nomain=0
for i in $(seq 1 20); do
	git --git-dir="$(hub_data d)/repos/kernels/many/k$i.git" rev-parse -q --verify refs/heads/main >/dev/null || nomain=$((nomain + 1))
done
is "$nomain" 0 "  each with its main"
hub d sync import "$W/many.khub" >/dev/null 2>&1
ok $? "  the re-run completes"
printf 'one\n' >"$W/one.txt"
is "$(commit_api acme/relu main "one" ONE.txt="$W/one.txt")" 200 "A: new commits on relu main and tanh main"
is "$(commit_api acme/tanh main "one" ONE.txt="$W/one.txt")" 200 "  (two repos move)"
export_a --out "$W/k2.khub" --repos 'acme/*' --since "$W/ks1.json" >/dev/null
hub c sync import "$W/k2.khub" >/dev/null 2>&1
REF2=$(state_of c)
KHUB_TEST_CRASH_AT=moving hub d sync import "$W/k2.khub" >/dev/null 2>"$W/crash.err"
is $? 137 "import killed after its first ref move"
moved=0
for r in relu tanh; do [ "$(sha_of "$D" acme/$r main)" = "$(sha_of "$A" acme/$r main)" ] && moved=$((moved + 1)); done
is "$moved" 1 "  one ref moved, the other still at its old commit"
hub d sync import "$W/k2.khub" >/dev/null 2>&1
ok $? "the re-run completes"
is "$(state_of d)" "$REF2" "  D ends where C ended"
is "$(psql_of d "SELECT state FROM sync_imports ORDER BY id" | paste -sd,)" "done,done,done" "  the bundles recorded as applied"

# ---- 3. revocations without a new commit ---------------------------------------------------------------
export_a --out "$W/p0.khub" --repos 'acme/*' --state-out "$W/p0.json" >/dev/null
S_BEFORE=$(state_of b)
hub b sync import --dry-run --json "$W/p0.khub" >"$W/d0.json" 2>"$W/d0.err"
ok $? "--dry-run --json of a bundle that moves refs"
is "$(state_of b)" "$S_BEFORE" "  B unchanged by it"
P0=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bundle"])' "$W/d0.json")
planned=$(/usr/bin/python3 -c 'import json,sys
print("\n".join(sorted(c["repo"] + " " + c["ref"] + " " + (c["to"] or "") for c in json.load(open(sys.argv[1]))["changes"] if c.get("ref"))))' "$W/d0.json")
hub b sync import "$W/p0.khub" >/dev/null 2>&1
ok $? "B is up to date"
done_=$(psql_of b "SELECT substring(target from 'acme/.*') || ' ' || (details->>'ref') || ' ' || (details->>'new') FROM audit_log
	WHERE action IN ('sync.ref', 'sync.rewind') AND details->>'bundle' = '$P0' ORDER BY 1")
is "$done_" "$planned" "  the refs it moved are the ones --dry-run listed ($(echo "$planned" | wc -l))"
is "$(private_of b acme/relu)/$(trusted_of b acme)" "f/t" "  relu public, acme trusted on B"
is "$(api_a -X PUT -d '{"private": true}' "$A/api/kernels/acme/relu/settings")" 200 "A: relu made private (no commit)"
hub a admin trust unset acme >/dev/null 2>&1
ok $? "A: acme no longer trusted"
is "$(api_a -X DELETE -d '{"type": "kernel", "organization": "acme", "name": "tanh"}' "$A/api/repos/delete")" 200 \
	"A: acme/tanh deleted"
export_a --out "$W/p1.khub" --repos 'acme/*' --since "$W/p0.json" >"$W/ep1.out"
hub b sync import --dry-run "$W/p1.khub" >"$W/d1.txt" 2>&1
ok $? "--dry-run (text) of the revocations"
like "$(cat "$W/d1.txt")" "make-private acme/relu" "  relu would be made private"
like "$(cat "$W/d1.txt")" "set-org-trust acme not trusted" "  acme would lose its trust"
like "$(cat "$W/d1.txt")" "delete-repo acme/tanh" "  acme/tanh would be deleted"
is "$(private_of b acme/relu)/$(trusted_of b acme)" "f/t" "  and nothing changed yet"
like "$(cat "$W/ep1.out")" "0 repos, 0 refs, 0 LFS objects.*the state of 2 repos, 1 deleted" \
	"export --since: no new object, but the state of 2 repos and 1 deletion"
hub b sync import "$W/p1.khub" >/dev/null 2>"$W/p1.err"
ok $? "B imports it"
is "$(private_of b acme/relu)" t "  relu is private on B"
like "$(until_is '40[14]' code_of "$B/api/kernels/acme/relu")" '^40[14]$' "  anonymous readers of B no longer see it"
is "$(trusted_of b acme)" f "  acme is no longer trusted on B"
is "$(psql_of b "SELECT count(*) FROM repos WHERE namespace = 'acme' AND name = 'tanh'")" 0 "  acme/tanh is gone from B"
like "$(until_is '40[14]' code_of "$B/api/kernels/acme/tanh")" '^40[14]$' "  and answers not found"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.delete' AND target LIKE '%acme/tanh'")" 1 \
	"  its deletion audited"
hub b admin trust set acme >/dev/null 2>&1
hub a admin trust unset acme >/dev/null 2>&1
export_a --out "$W/p2.khub" --repos 'acme/*' >/dev/null
hub b sync import "$W/p2.khub" >/dev/null 2>&1
is "$(trusted_of b acme)" t "an admin's trust decision on B beats a later full bundle"

# ---- 4. a lock-only import, then the variants it left out ----------------------------------------------------------
hub a admin trust set acme >/dev/null 2>&1
SB lock "$A" acme/gelu v1 torch-cpu >"$W/kernels.lock"
export_a --out "$W/lock.khub" --lock "$W/kernels.lock" >/dev/null
ok $? "a --lock bundle of acme/gelu v1, variant torch-cpu"
hub_init e
hub_start e
E=$(hub_url e)
hub e sync import "$W/lock.khub" >/dev/null 2>"$W/il.err"
ok $? "E (a fresh inside hub) imports it"
want=$(LL "$A" acme/gelu 1 2>&1)
got=$(LL "$E" acme/gelu 1 2>&1)
diag "loader: $(echo "$want" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("loader"))' 2>/dev/null)"
like "$got" '"sha"' "kernels lock against E works (main is there for the loader: $(echo "$got" | head -c 120))"
is "$got" "$want" "  and equals the lock made against A"
so=build/torch211-cxx11-cu128-x86_64-linux/_gelu_cuda.abi3.so
V1=$(sha_of "$A" acme/gelu v1)
like "$(SB get "$E/kernels/acme/gelu/resolve/$V1/$so")" "^404 " "E has no content for the variant the lock left out"
hub e sync state --out "$W/se.json"
ok $? "khub sync state on E"
is "$(/usr/bin/python3 -c 'import json,sys; print(len([r for r in json.load(open(sys.argv[1]))["repos"] if "lfs" in r]))' "$W/se.json")" 1 \
	"  it lists the LFS objects E has"
export_a --out "$W/rest.khub" --repos acme/gelu --since "$W/se.json" >"$W/erest.out"
like "$(cat "$W/erest.out")" "1 repos, [0-9]+ refs, [1-9][0-9]* LFS objects" "export --since E's state carries the left-out LFS objects"
hub e sync import "$W/rest.khub" >/dev/null 2>&1
ok $? "E imports it"
is "$(curl -s "$E/kernels/acme/gelu/resolve/$V1/$so" | sha256sum)" "$(curl -s "$A/kernels/acme/gelu/resolve/$V1/$so" | sha256sum)" \
	"  E serves the left-out variant byte-identical"

# ---- 5. a local org ------------------------------------------------------------------------------------
hub b admin org create team >/dev/null 2>&1
ok $? "B: a local org team (not trusted)"
export_a --out "$W/team.khub" --repos 'team/*' >/dev/null
hub b sync import "$W/team.khub" >/dev/null 2>"$W/team.err"
is $? 1 "B refuses a bundle that adds team/x to its local org"
like "$(cat "$W/team.err")" "team/x to team, a user or org of this hub .*never changes the members or trust of a local account" \
	"  the message says so"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.refused' AND details->>'reason' LIKE '%local account%'")" 1 \
	"  audited as sync.refused"
is "$(trusted_of b team)/$(psql_of b "SELECT count(*) FROM repos WHERE namespace = 'team'")" "f/0" "  team stays untrusted and has no team/x"

make_kernel_tree "$W/src/local" x
hub b import "$W/src/local" --repo team/x --branch main >/dev/null 2>>"$W/import.log"
ok $? "B: a local repo team/x of its own"
is "$(api_a -X DELETE -d '{"type": "kernel", "organization": "team", "name": "x"}' "$A/api/repos/delete")" 200 \
	"A: team/x (exported once) deleted"
export_a --out "$W/del.khub" --repos 'acme/*' >"$W/edel.out"
like "$(cat "$W/edel.out")" ", 2 deleted;" "  the next bundle carries its deletion (and acme/tanh's)"
hub b sync import "$W/del.khub" >/dev/null 2>&1
ok $? "B imports it"
is "$(psql_of b "SELECT count(*) FROM repos WHERE namespace = 'team' AND name = 'x' AND NOT mirrored")" 1 \
	"  B's own team/x is untouched (only mirrored repos are deleted by a bundle)"

# ---- 6. history ------------------------------------------------------------------------------------
hub b sync history --json >"$W/h.json"
ok $? "khub sync history --json"
is "$(/usr/bin/python3 -c 'import json,sys; h=json.load(open(sys.argv[1])); print(len(h), h[0]["sequence"], h[0]["operator"] != "", h[0]["state"])' "$W/h.json")" \
	"8 1 True applied" "  the bundles B applied, oldest first, with sequence and operator"

done_testing
