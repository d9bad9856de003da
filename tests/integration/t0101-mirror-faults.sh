#!/bin/bash
# t0101-mirror-faults.sh -- `khub mirror` under faults, with
# tests/integration/lib/fault_proxy.py between the mirror and the upstream:
#  - the upstream SIGKILLed in the middle of a 200 MB LFS download (throttled
#    by the proxy), then restarted: the next sync completes and transfers
#    only the missing bytes (Range on .../lfs/tmp/mirror-<oid>.part);
#  - the mirror process itself SIGKILLed mid-download, then re-run: the same;
#  - one corrupted LFS byte: the object is refused, the ref does not move,
#    status shows the verification error; a single corrupted answer is
#    fetched again and accepted;
#  - 429 with Retry-After (and with a RateLimit header): the mirror waits and
#    finishes;
#  - an upstream force-push and a branch deletion under policy mirror and
#    policy keep (kept refs reported by `khub mirror status`);
#  - several first requests for the same lazily mirrored file at once.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 git curl; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
now() { date +%s.%N; }
since() { /usr/bin/python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }
T_START=$(now)
BIG_MB=${BIG_MB:-200}

hubs_setup
hub_init up
hub_init mirror
UP=$(hub_url up)
MI=$(hub_url mirror)
hub_spawn up
hub_spawn mirror
hub_wait up

# ---- upstream repos ------------------------------------------------------------------
ORG=acme
CU=build/torch211-cxx11-cu128-x86_64-linux
declare -A SHA
import() {	# import NAME BRANCH DIR -> SHA[NAME/BRANCH]
	SHA[$1/$2]=$(hub up import "$3" --repo "$ORG/$1" --branch "$2" 2>>"$TEST_DIR/import.log")
	[[ "${SHA[$1/$2]}" =~ ^[0-9a-f]{40}$ ]]
}
seed_fail=0
t=$(now)
make_kernel_tree "$TEST_DIR/src/big" big
rm "$TEST_DIR/src/big/$CU/_big_cuda.abi3.so"	# the big file is the repo's only LFS object
head -c $((BIG_MB * 1024 * 1024)) /dev/urandom >"$TEST_DIR/src/big/$CU/_big.abi3.so"
BIG_OID=$(sha256sum "$TEST_DIR/src/big/$CU/_big.abi3.so" | cut -d' ' -f1)
BIG_SIZE=$((BIG_MB * 1024 * 1024))
import big main "$TEST_DIR/src/big" || seed_fail=1
rm -f "$TEST_DIR/src/big/$CU/_big.abi3.so"
make_kernel_tree "$TEST_DIR/src/big2" big2
rm "$TEST_DIR/src/big2/$CU/_big2_cuda.abi3.so"
head -c $((64 * 1024 * 1024)) /dev/urandom >"$TEST_DIR/src/big2/$CU/_big2.abi3.so"
BIG2_OID=$(sha256sum "$TEST_DIR/src/big2/$CU/_big2.abi3.so" | cut -d' ' -f1)
BIG2_SIZE=$((64 * 1024 * 1024))
import big2 main "$TEST_DIR/src/big2" || seed_fail=1
rm -f "$TEST_DIR/src/big2/$CU/_big2.abi3.so"
for name in corr rl lz; do
	make_kernel_tree "$TEST_DIR/src/$name" $name
	import $name main "$TEST_DIR/src/$name" || seed_fail=1
done
for name in fpm fpk; do	# main, v1, v2, and scratch (outside the selection; forked from main)
	for b in main v1 v2 scratch; do
		make_kernel_tree "$TEST_DIR/src/$name-$b" $name
		import $name $b "$TEST_DIR/src/$name-$b" || seed_fail=1
	done
done
ok $seed_fail "upstream seeded (a ${BIG_MB} MiB and a 64 MiB LFS file among them)"
diag "seeding took $(since "$t") s"

hub_wait mirror
hub mirror admin user create root --site-admin >/dev/null 2>&1
ROOT=$(hub mirror admin token create root --scope admin 2>/dev/null | tail -n 1)
proxy_start "$UP"
EAGER='["torch-*", "torch21*-cxx11-cu12*-x86_64-linux"]'
sel() {	# sel NAME UPSTREAM POLICY
	printf '{"name": "%s", "upstream": "%s", "repos": ["%s/%s"], "refs": ["main", "v*"], "eager_variants": %s,
	  "lazy": true, "policy": "%s"}' "$1" "$2" "$ORG" "$1" "$EAGER" "$3"
}
CFG=$TEST_DIR/mirror.json
cat >"$CFG" <<EOF
{"upstreams": [{"name": "fast-fail", "url": "$PROXY_URL", "concurrency": 4, "max_retries": 1},
               {"name": "patient", "url": "$PROXY_URL", "concurrency": 4, "max_retries": 4}],
 "selections": [$(sel big fast-fail mirror), $(sel big2 patient mirror), $(sel corr patient mirror),
                $(sel rl patient mirror), $(sel fpm patient mirror), $(sel fpk patient keep),
                $(sel lz patient mirror)]}
EOF
/usr/bin/python3 -m json.tool "$CFG" >/dev/null
ok $? "mirror configuration"

sync() {	# sync SELECTION LABEL -> rc in SYNC_RC, summary line in SYNC_LINE
	hub mirror mirror sync "$1" --mirror-config "$CFG" >"$TEST_DIR/sync-$2.out" 2>"$TEST_DIR/sync-$2.err"
	SYNC_RC=$?
	SYNC_LINE=$(grep "khub mirror: $1:" "$TEST_DIR/sync-$2.err")
	diag "$2: exit $SYNC_RC: $SYNC_LINE"
}
status_field() {	# status_field REPO FIELD (admin API)
	curl -s -H "Authorization: Bearer $ROOT" "$MI/api/admin/mirror" |
		/usr/bin/python3 -c 'import json,sys; r={x["id"]: x for x in json.load(sys.stdin)}.get(sys.argv[1], {}); print(r.get(sys.argv[2]))' "$ORG/$1" "$2"
}
status_line() { hub mirror mirror status 2>/dev/null | grep "^$ORG/$1 "; }
mirror_ref() {	# mirror_ref NAME BRANCH: the visible ref in the mirror's git repo ('' if none)
	git --git-dir="$(hub_data mirror)/repos/kernels/$ORG/$1.git" rev-parse -q --verify "refs/heads/$2" 2>/dev/null
}
api_ref() {	# api_ref NAME BRANCH: targetCommit from the mirror's refs API ('' if none)
	curl -s "$MI/api/kernels/$ORG/$1/refs" | /usr/bin/python3 -c 'import json,sys
d = json.load(sys.stdin)
print(next((b["targetCommit"] for b in d.get("branches", []) if b["name"] == sys.argv[1]), ""))' "$2"
}
PART_DIR=$(hub_data mirror)/lfs/tmp
part_size() { stat -c %s "$PART_DIR/mirror-$1.part" 2>/dev/null || echo 0; }
proxy_count() {	# proxy_count REGEX [FROM_LINE]: matching proxy log lines
	lines_since "$PROXY_LOG" "${2:-0}" | grep -cE "$1"
}

# ---- 1. the upstream SIGKILLed in the middle of a big download ----------------------------------
proxy_rules '[{"match": "_big.abi3.so", "action": "throttle", "bytes_per_sec": 40000000}]'
n0=$(lines "$PROXY_LOG")
hub_bg mirror "$TEST_DIR/sync-kill1.out" "$TEST_DIR/sync-kill1.err" mirror sync big --mirror-config "$CFG"
SYNC_PID=$BG_PID
for _ in $(seq 1 300); do [ "$(part_size "$BIG_OID")" -ge $((60 * 1024 * 1024)) ] && break; sleep 0.05; done
at_kill=$(part_size "$BIG_OID")
hub_stop up KILL
diag "upstream SIGKILLed with $at_kill bytes of $BIG_SIZE in $PART_DIR/mirror-$BIG_OID.part"
wait $SYNC_PID
rc=$?
line=$(grep 'khub mirror: big:' "$TEST_DIR/sync-kill1.err")
diag "sync during the kill: exit $rc: $line"
grep -E 'warn|resum' "$TEST_DIR/sync-kill1.err" | head -3 | cut -c1-220 | sed 's/^/#   /'
P=$(part_size "$BIG_OID")
ok $((rc == 0)) "the sync that lost its upstream exits non-zero"
ok $((!(P > 0 && P < BIG_SIZE))) "a partial download is kept: mirror-<oid>.part has $P of $BIG_SIZE bytes"
is "$(mirror_ref big main)" "" "no visible main on the mirror while the big object is incomplete"
B1=$(status_field big bytes)
is "$B1" "$P" "bytes recorded for the interrupted sync = the bytes in the part file"
like "$(status_field big lastError)" 'could not be fetched' "status shows the fetch error"
hub_start up	# the embedded database of the killed upstream is adopted
proxy_rules '[]'
n1=$(lines "$PROXY_LOG")
sync big resume
ok $SYNC_RC "the next sync (upstream restarted) exits 0"
is "$(mirror_ref big main)" "${SHA[big/main]}" "main is now visible at the upstream sha"
check "the big object is in the store; the part file is gone" -- test -f "$(lfs_object mirror "$BIG_OID")" -a ! -e "$PART_DIR/mirror-$BIG_OID.part"
is "$(sha256sum <"$(lfs_object mirror "$BIG_OID")" | cut -d' ' -f1)" "$BIG_OID" "the stored object has the right sha256"
B2=$(($(status_field big bytes) - B1))
is "$B2" "$((BIG_SIZE - P))" "the resumed sync transferred only the missing bytes ($B2 = $BIG_SIZE - $P)"
is "$((B1 + B2))" "$BIG_SIZE" "bytes over both syncs = the object size (nothing transferred twice)"
# (the interrupted request's own line may be logged after n1: skip cut ones)
resume_line=$(lines_since "$PROXY_LOG" "$n1" | grep "_big.abi3.so" | grep -v 'cut@' | head -1)
like "$resume_line" " 206 $((BIG_SIZE - P))( |\$)" "the upstream answered one Range request with 206 and the missing $((BIG_SIZE - P)) bytes"
like "$SYNC_LINE" "$(/usr/bin/python3 -c "print('%.1f' % ($((BIG_SIZE - P)) / 1048576))") MiB in" "the sync prints the MiB it transferred"
diag "bytes: interrupted sync $B1, resumed sync $B2, object $BIG_SIZE; upstream requests for it: $(proxy_count '_big.abi3.so' "$n0")"
lines_since "$PROXY_LOG" "$n0" | grep "_big.abi3.so" | awk '{print "#   " $2, $4, $5, $6}'

# ---- 2. the mirror SIGKILLed in the middle of a download -------------------------------------------
proxy_rules '[{"match": "_big2.abi3.so", "action": "throttle", "bytes_per_sec": 30000000}]'
n0=$(lines "$PROXY_LOG")
hub_bg mirror "$TEST_DIR/sync-kill2.out" "$TEST_DIR/sync-kill2.err" mirror sync big2 --mirror-config "$CFG"
SYNC_PID=$BG_PID
for _ in $(seq 1 300); do [ "$(part_size "$BIG2_OID")" -ge $((20 * 1024 * 1024)) ] && break; sleep 0.05; done
kill -KILL $SYNC_PID
wait $SYNC_PID 2>/dev/null
P2=$(part_size "$BIG2_OID")
diag "khub mirror sync SIGKILLed with $P2 of $BIG2_SIZE bytes in the part file"
ok $((!(P2 > 0 && P2 < BIG2_SIZE))) "the part file survives the SIGKILL"
is "$(mirror_ref big2 main)" "" "no visible main after the SIGKILL"
proxy_rules '[]'
n1=$(lines "$PROXY_LOG")
sync big2 after-kill
ok $SYNC_RC "re-running the sync after the SIGKILL exits 0"
is "$(mirror_ref big2 main)" "${SHA[big2/main]}" "main visible at the upstream sha"
is "$(status_field big2 bytes)" "$((BIG2_SIZE - P2))" "the re-run transferred only the missing $((BIG2_SIZE - P2)) bytes"
like "$(lines_since "$PROXY_LOG" "$n1" | grep '_big2.abi3.so' | grep -v 'cut@' | head -1)" " 206 $((BIG2_SIZE - P2))( |\$)" "one Range request (206) for the rest"

# ---- 3. one corrupted LFS byte -------------------------------------------------------------------------
sync corr corr-initial
A=${SHA[corr/main]}
is "$SYNC_RC/$(mirror_ref corr main)" "0/$A" "corr: first sync, main at $A"
make_kernel_tree "$TEST_DIR/src/corr-b" corr
head -c 700000 /dev/urandom >"$TEST_DIR/src/corr-b/$CU/_corr_new.abi3.so"
CORR_OID=$(sha256sum "$TEST_DIR/src/corr-b/$CU/_corr_new.abi3.so" | cut -d' ' -f1)
import corr main "$TEST_DIR/src/corr-b"
B=${SHA[corr/main]}
proxy_rules '[{"match": "_corr_new.abi3.so", "action": "corrupt", "offset": 1000}]'
n0=$(lines "$PROXY_LOG")
sync corr corrupt
ok $((SYNC_RC == 0)) "sync with a corrupted LFS byte exits non-zero"
is "$(mirror_ref corr main)/$(api_ref corr main)" "$A/$A" "the mirror's main did not move (git and refs API still at $A)"
check "the corrupted object is not in the store" -- test ! -e "$(lfs_object mirror "$CORR_OID")"
err=$(status_field corr lastError)
like "$err" "_corr_new.abi3.so: LFS object $CORR_OID failed verification" "admin API lastError names the file and the verification failure"
like "$(status_line corr)" 'failed verification' "khub mirror status shows the verification error"
diag "status: $(status_line corr | tr -s ' ' | cut -c1-300)"
ncorrupt=$(proxy_count '_corr_new.abi3.so .*corrupt@1000' "$n0")
diag "corrupted answers the mirror received and refused: $ncorrupt"
ok $((ncorrupt < 1)) "the proxy corrupted the object's download ($ncorrupt times)"
code=$(curl -s -o /dev/null -w '%{http_code}' "$MI/api/kernels/$ORG/corr/revision/$B")
code2=$(curl -s -o /dev/null -w '%{http_code}' "$MI/kernels/$ORG/corr/resolve/$B/$CU/_corr_new.abi3.so")
diag "on the mirror, by the refused commit's sha: revision HTTP $code, resolve of the refused file HTTP $code2"
# a single corrupted answer: fetched again and accepted in the same sync
proxy_rules '[{"match": "_corr_new.abi3.so", "action": "corrupt", "offset": 1000, "count": 1}]'
n0=$(lines "$PROXY_LOG")
sync corr corrupt-once
is "$SYNC_RC/$(mirror_ref corr main)" "0/$B" "one corrupted answer, then a good one: the sync succeeds and main moves to $B"
is "$(proxy_count '_corr_new.abi3.so' "$n0")/$(proxy_count '_corr_new.abi3.so .*corrupt@' "$n0")" "2/1" "two upstream GETs: the corrupted one refused, the second verified"
is "$(status_field corr lastError)" "None" "lastError cleared after the good sync"
proxy_rules '[]'

# ---- 4. 429 with Retry-After (and RateLimit) ------------------------------------------------------------------
make_kernel_tree "$TEST_DIR/src/rl-b" rl
import rl main "$TEST_DIR/src/rl-b"
proxy_rules '[{"match": "/resolve/", "action": "429", "count": 2, "retry_after": 1},
              {"match": "/overview", "action": "429", "count": 1, "ratelimit": "\"api\";r=0;t=1"}]'
n0=$(lines "$PROXY_LOG")
t=$(now)
sync rl ratelimited
took=$(since "$t")
is "$SYNC_RC/$(mirror_ref rl main)" "0/${SHA[rl/main]}" "sync through 429s succeeds and main moves"
n429=$(proxy_count ' 429 ' "$n0")
is "$n429" 3 "the proxy answered 429 three times (2 x Retry-After: 1 on resolve, 1 x RateLimit t=1 on overview)"
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 3.0 else 1)" "$took"
ok $? "the sync waited at least the 3 s asked for ($took s)"
lines_since "$PROXY_LOG" "$n0" | awk '{print "#   " $1, $2, substr($3, 1, 60), $4, $6}'
gaps=$(lines_since "$PROXY_LOG" "$n0" | grep '/resolve/' | awk 'NR > 1 { printf "%.2f ", $1 - prev } { prev = $1 }')
diag "gaps between the resolve attempts (s): $gaps"
proxy_rules '[]'

# ---- 5. force-push and branch deletion, policy mirror vs keep -------------------------------------
sync fpm fp-initial
sync fpk fp-initial-keep
for name in fpm fpk; do
	is "$(mirror_ref $name v1)/$(mirror_ref $name v2)/$(mirror_ref $name scratch)" "${SHA[$name/v1]}/${SHA[$name/v2]}/" \
		"$name: v1 and v2 mirrored, scratch (outside the selection) not"
	UPGIT=$(hub_data up)/repos/kernels/$ORG/$name.git
	git --git-dir="$UPGIT" update-ref refs/heads/v1 "${SHA[$name/scratch]}" "${SHA[$name/v1]}"
	git --git-dir="$UPGIT" update-ref -d refs/heads/v2 "${SHA[$name/v2]}"
	git --git-dir="$UPGIT" merge-base --is-ancestor "${SHA[$name/v1]}" "${SHA[$name/scratch]}"
	ok $((! $?)) "$name: upstream v1 force-pushed to an unrelated commit, v2 deleted"
done
# keep still follows fast-forwards
make_kernel_tree "$TEST_DIR/src/fpk-ff" fpk
OLD_MAIN=${SHA[fpk/main]}
import fpk main "$TEST_DIR/src/fpk-ff"
sync fpm fp-mirror
ok $SYNC_RC "policy mirror: sync exits 0"
is "$(mirror_ref fpm v1)" "${SHA[fpm/scratch]}" "policy mirror: v1 follows the force-push"
is "$(mirror_ref fpm v2)" "" "policy mirror: v2 deleted like upstream"
is "$(api_ref fpm v1)/$(api_ref fpm v2)" "${SHA[fpm/scratch]}/" "policy mirror: the refs API agrees"
is "$(status_field fpm warnings)" "None" "policy mirror: no warnings"
sync fpk fp-keep
ok $SYNC_RC "policy keep: sync exits 0"
is "$(mirror_ref fpk v1)" "${SHA[fpk/v1]}" "policy keep: v1 keeps the old sha"
is "$(mirror_ref fpk v2)" "${SHA[fpk/v2]}" "policy keep: deleted v2 is kept"
is "$(mirror_ref fpk main)" "${SHA[fpk/main]}" "policy keep: a fast-forward of main is still followed ($OLD_MAIN -> ${SHA[fpk/main]})"
like "$SYNC_LINE" '[1-9][0-9]* kept by policy' "policy keep: the sync reports refs kept by policy"
st=$(status_line fpk)
diag "khub mirror status: $(echo "$st" | tr -s ' ')"
like "$st" 'warnings: .*refs/heads/v1 was force-pushed upstream.*kept' "khub mirror status warns about the kept force-push"
like "$st" 'refs/heads/v2 was deleted upstream: kept' "khub mirror status warns about the kept deletion"
like "$(status_field fpk warnings)" 'force-pushed' "admin API shows the warnings too"
sync fpk fp-keep-again
is "$SYNC_RC/$(mirror_ref fpk v1)/$(mirror_ref fpk v2)" "0/${SHA[fpk/v1]}/${SHA[fpk/v2]}" "policy keep: a second sync keeps them still"

# ---- 6. several first requests for the same lazy file at once ---------------------------------------
sync lz lz-initial
LZ_VARIANT=torch211-cxx11-rocm71-x86_64-linux
make_kernel_tree "$TEST_DIR/src/lz-b" lz
mkdir -p "$TEST_DIR/src/lz-b/build/$LZ_VARIANT"
printf 'x = 1\n' >"$TEST_DIR/src/lz-b/build/$LZ_VARIANT/__init__.py"
head -c 3000000 /dev/urandom >"$TEST_DIR/src/lz-b/build/$LZ_VARIANT/_lz_rocm.abi3.so"
LZ_OID=$(sha256sum "$TEST_DIR/src/lz-b/build/$LZ_VARIANT/_lz_rocm.abi3.so" | cut -d' ' -f1)
import lz main "$TEST_DIR/src/lz-b"
sync lz lz-b
is "$SYNC_RC/$(mirror_ref lz main)" "0/${SHA[lz/main]}" "lz: synced, the rocm variant is lazy"
check "the lazy object is not in the store yet" -- test ! -e "$(lfs_object mirror "$LZ_OID")"
proxy_rules '[{"match": "_lz_rocm.abi3.so", "action": "throttle", "bytes_per_sec": 4000000}]'
n0=$(lines "$PROXY_LOG")
t=$(now)
pids=()
for i in 1 2 3 4; do
	curl -s -m 15 -o "$TEST_DIR/lz$i" -w '%{http_code}\n' "$MI/kernels/$ORG/lz/resolve/main/build/$LZ_VARIANT/_lz_rocm.abi3.so" >"$TEST_DIR/lz$i.code" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
results=$(for i in 1 2 3 4; do
	touch "$TEST_DIR/lz$i"
	echo "$(cat "$TEST_DIR/lz$i.code")/$(sha256sum <"$TEST_DIR/lz$i" | cut -d' ' -f1 | cut -c1-12)"
done | sort | uniq -c | tr -s ' ' | tr '\n' ';')
nreq=$(proxy_count '_lz_rocm.abi3.so' "$n0")
diag "4 concurrent first GETs after $(since "$t") s: $results upstream GETs so far: $nreq"
is "$results" " 4 200/${LZ_OID:0:12};" "4 concurrent first GETs of one lazy file all get 200 and the right bytes within 15 s"
ok $((nreq > 4)) "the upstream is asked at most once per waiting client ($nreq requests)"
proxy_stop	# ends any fetch still looping (the upstream becomes unreachable)
sleep 2
diag "requests for the lazy file by the end: $(proxy_count '_lz_rocm.abi3.so' "$n0")"

diag "t0101 total $(since "$T_START") s"
done_testing
