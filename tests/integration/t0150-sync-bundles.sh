#!/bin/bash
# t0150-sync-bundles.sh -- air-gap bundles between khub instances that
# share nothing (own data dirs and embedded databases; the bundle file is
# the only thing that crosses). A publishes (khub import and the commit
# API: LFS binaries, several versions, an annotated tag, a private repo,
# metadata.json.sigstore files) and exports a signed bundle; B verifies and
# imports it: same refs and commit shas, byte-identical files, equal
# kernels lock hashes, read-only repos, audited with bundle and key id.
# Then: incremental bundles (--since an export's state or B's own state;
# only new objects travel; a deleted branch follows; out of order refused,
# naming the bundle to import first), refusals that leave B unchanged
# (flipped LFS byte, flipped manifest byte, untrusted key, truncated
# bundle, missing volume), SIGKILL while staging and while applying, then
# a re-run, the same bundle twice, --variants, and a --lock bundle that
# holds only the locked variants' files (a third hub C serves exactly
# those, and refuses to overwrite a repo of its own).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 curl zstd tar; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")/lib" && pwd)
SB() { /usr/bin/python3 "$LIB/sync_bundle.py" "$@"; }
compare() {	# compare HUB_A_URL HUB_B_URL REPO REV...: the python checks as TAP lines of this test
	local out rc line
	out=$(SB compare "$@" 2>&1)
	rc=$?
	while IFS= read -r line; do
		if [[ "$line" =~ ^ok\ -\ (.*)$ ]]; then
			ok 0 "${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^not\ ok\ -\ (.*)$ ]]; then
			ok 1 "${BASH_REMATCH[1]}"
		elif [ -n "$line" ]; then
			echo "# $line"
		fi
	done <<<"$out"
	[ $rc -eq 0 ] || ok 1 "the comparison of $3 ran to the end (exit $rc)"
}

hubs_setup
hub_init a
hub_init b
hub_init c
hub_spawn a
hub_spawn b
hub_spawn c
hub_wait a
A=$(hub_url a)
B=$(hub_url b)
C=$(hub_url c)
W=$TEST_DIR/work
mkdir -p "$W"

# ---- A: repos with LFS binaries and several versions --------------------------------
seed_fail=0
for name in relu gelu; do
	for b in v1 v2 main; do
		d=$W/src/$name-$b
		make_kernel_tree "$d" "$name"	# torch-cpu + torch211-cxx11-cu128 (.so = LFS)
		head -c 50000 /dev/urandom >"$d/build/torch-cpu/weights.bin"
		printf '%s of %s\n' "$b" "$name" >"$d/VERSION.txt"
		printf '{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "of": "%s"}\n' "$name-$b" \
			>"$d/build/torch-cpu/metadata.json.sigstore"
		hub a import "$d" --repo "acme/$name" --branch "$b" >/dev/null 2>>"$W/import.log" || seed_fail=1
	done
done
make_kernel_tree "$W/src/secret" secret
hub a import "$W/src/secret" --repo acme/secret --branch main --private >/dev/null 2>>"$W/import.log" || seed_fail=1
hub a admin trust set acme >/dev/null 2>&1 || seed_fail=1
hub a admin user create root --site-admin >/dev/null 2>&1
TOKEN=$(hub a admin token create root --scope admin 2>/dev/null | tail -n 1)
ok $seed_fail "A: acme/relu and acme/gelu (branches v1 v2 main, LFS binaries), private acme/secret; acme trusted"

# a commit through the commit API: a new binary (LFS) on main
commit_api() {	# commit_api REPO BRANCH SUMMARY REPO_PATH=LOCAL...
	local repo=$1 branch=$2 summary=$3; shift 3
	local args=()
	for f in "$@"; do args+=(--file "$f"); done
	/usr/bin/python3 "$LIB/commit_body.py" ndjson --summary "$summary" "${args[@]}" >"$W/c.ndjson"
	curl -s -o "$W/c.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		-H 'Content-Type: application/x-ndjson' --data-binary @"$W/c.ndjson" "$A/api/kernels/$repo/commit/$branch"
}
head -c 70000 /dev/urandom >"$W/extra1.bin"
is "$(commit_api acme/relu main "extra weights" build/torch-cpu/extra.bin="$W/extra1.bin")" 200 \
	"A: a commit with a binary file through the commit API"

tag=$(curl -s -o "$W/tag.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
	-d '{"tag": "1.0", "message": "first release"}' "$A/api/kernels/acme/relu/tag/v1")
is "$tag" 200 "A: an annotated tag 1.0 on relu v1"

# ---- keys ------------------------------------------------------------------------------
hub a sync keygen --out "$W/k1" >"$W/keygen.out" 2>&1
ok $? "sync keygen makes a key pair"
like "$(cat "$W/keygen.out")" "key id [0-9a-f]{16}" "keygen prints the key id"
is "$(stat -c %a "$W/k1.key")" 600 "the private key is mode 0600"
hub a sync keygen --out "$W/k2" >/dev/null 2>&1
export KHUB_SYNC_TRUSTED_KEYS=$W/k1.pub

# ---- full export ------------------------------------------------------------------------------
hub a sync export --key "$W/k1.key" --out "$W/b1.khub" --repos 'acme/*' --state-out "$W/s1.json" >"$W/e1.out" 2>"$W/e1.err"
ok $? "export acme/* with --state-out"
like "$(cat "$W/e1.out")" "3 repos, 8 refs, [0-9]+ LFS objects" "export reports 3 repos and 8 refs (7 branches, 1 tag)"
entries=$(SB list "$W/b1.khub")
is "$(echo "$entries" | head -2 | paste -sd,)" "manifest.json,manifest.sig" "the manifest comes first, then its signature"
is "$(echo "$entries" | grep -c '^git/')" 3 "one git pack per repo"
nlfs1=$(echo "$entries" | grep -c '^lfs/')
like "$nlfs1" '^(1[0-9]|[2-9][0-9])$' "LFS objects travel by sha256 ($nlfs1)"
tar --zstd -tf "$W/b1.khub" >/dev/null 2>&1
ok $? "the bundle is a plain tar + zstd (tar --zstd lists it)"

# ---- verify offline -----------------------------------------------------------------------------
hub_wait b
hub b sync verify "$W/b1.khub" >"$W/v1.out" 2>"$W/v1.err"
ok $? "verify: signature, hashes and sizes"
like "$(cat "$W/v1.out")" "would move refs/heads/v1 \(none\) -> [0-9a-f]{40}" "verify prints refs old -> new"
if command -v script >/dev/null 2>&1; then	# stderr a terminal: a progress bar
	KHUB_DATA_DIR="$TEST_DIR/b/data" KHUB_BIN="$KHUB_BIN" BUNDLE="$W/b1.khub" \
		script -qec '"$KHUB_BIN" sync verify "$BUNDLE" >/dev/null' /dev/null >"$W/tty.out" 2>&1
	like "$(tr '\r' '\n' <"$W/tty.out" | grep -a 'verify' | tail -1)" 'verify +100\.0% [0-9.]+ / [0-9.]+ MiB' \
		"on a terminal, verify draws a progress bar"
	"$KHUB_BIN" sync verify "$W/b1.khub" 2>"$W/notty.err" >/dev/null
	is "$(cat "$W/notty.err")" "" "  and none when stderr is not a terminal"
fi
hub b sync verify "$W/b1.khub" --key "$W/k2.pub" >/dev/null 2>"$W/v2.err"
is $? 1 "verify with another public key: refused"
like "$(cat "$W/v2.err")" "not trust" "  says the signing key is not trusted"

# ---- refusals, each leaving B unchanged -------------------------------------------------------------
state_of() { hub "$1" sync state | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d["repos"], sort_keys=True))'; }
state_b() { state_of b; }
lfs_count_b() { find "$(hub_data b)/lfs/objects" -type f 2>/dev/null | wc -l; }
S0=$(state_b)
L0=$(lfs_count_b)
refuse() {	# refuse DESC PATTERN BUNDLE...
	local desc=$1 pat=$2; shift 2
	hub b sync import "$@" >"$W/r.out" 2>"$W/r.err"
	local rc=$?
	ok $([ $rc -ne 0 ]; echo $?) "refused: $desc (exit $rc)"
	like "$(cat "$W/r.err")" "$pat" "  the message says why"
	is "$(state_b)/$(lfs_count_b)" "$S0/$L0" "  B unchanged (refs, LFS store)"
}
SB tamper "$W/b1.khub" "$W/bad-lfs.khub" lfs/
refuse "one flipped byte in an LFS object" "lfs/[0-9a-f]{64} fails verification" "$W/bad-lfs.khub"
SB tamper "$W/b1.khub" "$W/bad-manifest.khub" manifest
refuse "one flipped byte in the manifest" "signature .* does not verify" "$W/bad-manifest.khub"
hub a sync export --key "$W/k2.key" --out "$W/untrusted.khub" --repos 'acme/*' >/dev/null 2>&1
refuse "a bundle signed by an untrusted key" "not trust" "$W/untrusted.khub"
size=$(stat -c %s "$W/b1.khub")
head -c $((size * 2 / 3)) "$W/b1.khub" >"$W/trunc.khub"
refuse "a truncated bundle" "truncated|corrupt" "$W/trunc.khub"
hub a sync export --key "$W/k1.key" --out "$W/vol.khub" --repos 'acme/gelu' --volume-size 300K >/dev/null 2>"$W/vol.err"
nvol=$(ls "$W"/vol.khub.0* 2>/dev/null | wc -l)
ok $([ "$nvol" -ge 3 ]; echo $?) "export --volume-size 300K writes $nvol volumes and an index"
big=$(stat -c %s "$W"/vol.khub.0* | sort -n | tail -1)
ok $([ "$big" -le 307200 ]; echo $?) "  no volume is larger than 300 KiB ($big bytes)"
hub b sync verify "$W/vol.khub" >"$W/vol.verify" 2>&1
ok $? "  verify reads the volumes as one stream"
mv "$W/vol.khub.002" "$W/vol.002.away"
refuse "a missing volume" "missing volume .*vol.khub.002" "$W/vol.khub"
mv "$W/vol.002.away" "$W/vol.khub.002"

# ---- import ------------------------------------------------------------------------------------
hub b sync import "$W/b1.khub" >"$W/i1.out" 2>"$W/i1.err"
ok $? "import the bundle into B"
like "$(cat "$W/i1.out")" "imported: 8 refs moved" "  8 refs moved"
hub_wait b
compare "$A" "$B" acme/relu v1 v2 main
compare "$A" "$B" acme/gelu v1 main
is "$(git --git-dir="$(hub_data b)/repos/kernels/acme/relu.git" cat-file -t refs/tags/1.0 2>&1)/$(git --git-dir="$(hub_data b)/repos/kernels/acme/relu.git" rev-parse refs/tags/1.0 2>&1)" \
	"tag/$(git --git-dir="$(hub_data a)/repos/kernels/acme/relu.git" rev-parse refs/tags/1.0 2>&1)" "the annotated tag object came along (same sha)"
hub a sync export --key "$W/k1.key" --out "$W/var.khub" --repos acme/gelu --variants torch-cpu >/dev/null 2>&1
ok $? "export --variants torch-cpu"
want=$(for r in v1 v2 main; do curl -s "$A/api/kernels/acme/gelu/tree/$r?recursive=true"; echo; done | /usr/bin/python3 -c '
import json,sys
oids = set()
for line in sys.stdin:
    if line.strip():
        oids |= {e["lfs"]["oid"] for e in json.loads(line) if e.get("lfs") and e["path"].startswith("build/torch-cpu/")}
print("\n".join(sorted(oids)))')
is "$(SB list "$W/var.khub" | grep '^lfs/' | sed 's|lfs/||' | sort)" "$want" "  it holds exactly torch-cpu's LFS objects (the trees whole)"
is "$(curl -s "$B/api/organizations/acme/overview" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("trustedKernelPublisher"))')" True \
	"the org trust flag came along"
B1ID=$(hub b sync verify "$W/b1.khub" | sed -n 's/^bundle \([0-9a-f-]*\) from.*/\1/p')
KEYID=$(sed -n 's/^key id \([0-9a-f]*\):.*/\1/p' "$W/keygen.out")
audit=$(psql "host=$(hub_data b)/pg/run dbname=khub user=khub" -tAc \
	"SELECT count(*) FROM audit_log WHERE action = 'sync.import' AND target = 'kernels/acme/relu'
	 AND details::text LIKE '%$B1ID%' AND details::text LIKE '%$KEYID%'" 2>&1)
is "$audit" 1 "the import is audit-logged with the bundle id and the key id"
refs_audit=$(psql "host=$(hub_data b)/pg/run dbname=khub user=khub" -tAc \
	"SELECT count(*) FROM audit_log WHERE action = 'sync.ref' AND details::text LIKE '%$B1ID%'" 2>&1)
is "$refs_audit" 8 "  and every ref it moved"
hub b admin user create root --site-admin >/dev/null 2>&1
BTOKEN=$(hub b admin token create root --scope admin 2>/dev/null | tail -n 1)
printf '%s\n' '{"key":"header","value":{"summary":"try to write to an imported repo"}}' \
	'{"key":"file","value":{"path":"NEW.txt","content":"aGk=","encoding":"base64"}}' >"$W/ro.ndjson"
code=$(curl -s -o "$W/ro.out" -w '%{http_code}' -H "Authorization: Bearer $BTOKEN" \
	-H 'Content-Type: application/x-ndjson' --data-binary @"$W/ro.ndjson" "$B/api/kernels/acme/relu/commit/main")
is "$code" 403 "imported repos are read-only (commit API as a site admin: 403)"
like "$(curl -s -o /dev/null -w '%{http_code}' "$B/api/kernels/acme/secret")" '^40[14]$' "a private repo stays private on B (anonymous: not found)"
is "$(curl -s -H "Authorization: Bearer $BTOKEN" "$B/api/kernels/acme/secret" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("private"))')" True \
	"  and a site admin sees it, private"
S1=$(state_b)
L1=$(lfs_count_b)
hub b sync import "$W/b1.khub" >"$W/i2.out" 2>&1
ok $? "the same bundle again: exit 0"
like "$(cat "$W/i2.out")" "imported already: nothing changed" "  says nothing changed"
is "$(state_b)/$(lfs_count_b)" "$S1/$L1" "  B unchanged"

# ---- incremental ------------------------------------------------------------------------------
head -c 90000 /dev/urandom >"$W/extra2.bin"
is "$(commit_api acme/relu main "more weights" build/torch-cpu/extra2.bin="$W/extra2.bin")" 200 "A: a new commit on relu main"
hub a sync export --key "$W/k1.key" --out "$W/b2.khub" --repos 'acme/*' --since "$W/s1.json" --state-out "$W/s2.json" >"$W/e2.out" 2>&1
ok $? "export --since the first bundle's state"
like "$(cat "$W/e2.out")" "1 repos, 1 refs, 1 LFS objects" "  only relu main and its one new LFS object"
e2=$(SB list "$W/b2.khub")
is "$(echo "$e2" | grep '^lfs/' | sed 's|lfs/||')" "$(sha256sum "$W/extra2.bin" | cut -c1-64)" "  the one LFS object is the new file"
s1=$(stat -c %s "$W/b1.khub"); s2=$(stat -c %s "$W/b2.khub")
ok $([ "$s2" -lt 120000 ] && [ "$s2" -lt $((s1 / 10)) ]; echo $?) "  the bundle is small: $s2 bytes (full: $s1)"
head -c 80000 /dev/urandom >"$W/extra3.bin"
is "$(commit_api acme/relu main "even more" build/torch-cpu/extra3.bin="$W/extra3.bin")" 200 "A: another commit"
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -X DELETE "$A/api/kernels/acme/gelu/branch/v2")" 200 \
	"A: gelu branch v2 deleted"
hub a sync export --key "$W/k1.key" --out "$W/b3.khub" --repos 'acme/*' --since "$W/s2.json" --state-out "$W/s3.json" >/dev/null 2>&1
ok $? "export --since the second state"
B2ID=$(hub b sync verify "$W/b2.khub" | sed -n 's/^bundle \([0-9a-f-]*\) from.*/\1/p')
S0=$(state_b)
L0=$(lfs_count_b)
refuse "out of order (the third bundle before the second)" "needs repo acme/relu at commit [0-9a-f]{40} \(refs/heads/main\); this hub has [0-9a-f]{40}: import bundle $B2ID first" "$W/b3.khub"
hub b admin trust unset acme >/dev/null 2>&1
hub b sync import "$W/b2.khub" "$W/b3.khub" >"$W/i3.out" 2>&1
ok $? "then the second and third in order"
compare "$A" "$B" acme/relu main
compare "$A" "$B" acme/gelu v1
is "$(curl -s "$B/api/organizations/acme/overview" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("trustedKernelPublisher"))')" False \
	"an admin's trust decision on B outlives later imports"

# ---- SIGKILL during an import, then a re-run ------------------------------------------------------------
head -c $((48 << 20)) /dev/urandom >"$W/huge.bin"
is "$(commit_api acme/gelu main "big" build/torch-cpu/huge.bin="$W/huge.bin")" 200 "A: a 48 MiB binary on gelu main"
hub a sync export --key "$W/k1.key" --out "$W/b4.khub" --repos 'acme/*' --since "$W/s3.json" --state-out "$W/s4.json" >/dev/null 2>&1
ok $? "export it"
S0=$(state_b)
hub_bg b "$W/k.out" "$W/k.err" sync import "$W/b4.khub"
killed=0
for _ in $(seq 1 400); do
	if ls "$(hub_data b)"/lfs/tmp/sync-*/* >/dev/null 2>&1; then
		kill -KILL "$BG_PID" && killed=1
		break
	fi
	kill -0 "$BG_PID" 2>/dev/null || break
	sleep 0.02
done
wait "$BG_PID" 2>/dev/null
ok $([ $killed = 1 ]; echo $?) "import SIGKILLed while staging"
is "$(state_b)" "$S0" "  no ref moved"
hub b sync import "$W/b4.khub" >"$W/i4.out" 2>&1
ok $? "the re-run completes"
compare "$A" "$B" acme/gelu main
ls "$(hub_data b)"/lfs/tmp/sync-* >/dev/null 2>&1
ok $([ $? -ne 0 ]; echo $?) "  no staging left behind"

# ---- --since the importing hub's own state (`khub sync state` carried out) -------------------------
head -c 60000 /dev/urandom >"$W/fix.bin"
is "$(commit_api acme/relu v2 "v2 fix" build/torch-cpu/fix.bin="$W/fix.bin")" 200 "A: a commit on relu v2"
hub b sync state --out "$W/sb.json"
ok $? "khub sync state on B"
hub a sync export --key "$W/k1.key" --out "$W/b5.khub" --repos 'acme/*' --since "$W/sb.json" >"$W/e5.out" 2>&1
like "$(cat "$W/e5.out")" "1 repos, 1 refs, 1 LFS objects" "export --since B's state: only relu v2's new commit"
hub b sync import "$W/b5.khub" >/dev/null 2>&1
ok $? "B imports it"
compare "$A" "$B" acme/relu v2
hub b sync state --out "$W/sb2.json"
hub a sync export --key "$W/k1.key" --out "$W/b6.khub" --repos 'acme/*' --since "$W/sb2.json" >"$W/e6.out" 2>&1
like "$(cat "$W/e6.out")" "0 repos, 0 refs, 0 LFS objects" "nothing new since B's state: an empty bundle"
hub b sync import "$W/b6.khub" >"$W/i6.out" 2>&1
like "$(cat "$W/i6.out")" "nothing changed" "  importing it changes nothing"

# ---- SIGKILL while applying (packs moved, LFS objects being stored, refs not yet) -------------------
files=()
for i in $(seq 1 120); do
	head -c 3000 /dev/urandom >"$W/many-$i.bin"
	files+=("build/torch-cpu/many/m$i.bin=$W/many-$i.bin")
done
is "$(commit_api acme/relu main "many small binaries" "${files[@]}")" 200 "A: 120 small binaries on relu main"
hub b sync state --out "$W/sb3.json"
hub a sync export --key "$W/k1.key" --out "$W/b7.khub" --repos 'acme/*' --since "$W/sb3.json" >/dev/null 2>&1
ok $? "export them"
PACKDIR=$(hub_data b)/repos/kernels/acme/relu.git/objects/pack
npacks=$(ls "$PACKDIR"/*.pack 2>/dev/null | wc -l)
MAIN0=$(curl -s "$B/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
hub_bg b "$W/k2.out" "$W/k2.err" sync import "$W/b7.khub"
killed=0
for _ in $(seq 1 1000); do
	if [ "$(ls "$PACKDIR"/*.pack 2>/dev/null | wc -l)" -gt "$npacks" ]; then
		kill -KILL "$BG_PID" && killed=1
		break
	fi
	kill -0 "$BG_PID" 2>/dev/null || break
	sleep 0.005
done
wait "$BG_PID" 2>/dev/null
ok $([ $killed = 1 ]; echo $?) "import SIGKILLed while applying (its pack already in the repo)"
MAIN1=$(curl -s "$B/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
is "$MAIN1" "$MAIN0" "  relu main did not move"
hub b sync import "$W/b7.khub" >"$W/i7.out" 2>&1
ok $? "the re-run completes"
compare "$A" "$B" acme/relu main

# ---- --lock: exactly the locked commits and variants -------------------------------------------------------------------
SB lock "$A" acme/relu v1 torch-cpu >"$W/kernels.lock"
ok $? "a kernels.lock for acme/relu v1, variant torch-cpu"
hub a sync export --key "$W/k1.key" --out "$W/lock.khub" --lock "$W/kernels.lock" >"$W/el.out" 2>&1
ok $? "export --lock kernels.lock"
lfs_in=$(SB list "$W/lock.khub" | grep '^lfs/' | sed 's|lfs/||' | sort)
want=$(for r in v1 main; do curl -s "$A/api/kernels/acme/relu/tree/$r?recursive=true"; echo; done | /usr/bin/python3 -c '
import json,sys
oids = set()
for line in sys.stdin:
    if line.strip():
        oids |= {e["lfs"]["oid"] for e in json.loads(line) if e.get("lfs") and not e["path"].startswith("build/") or (e.get("lfs") and e["path"].startswith("build/torch-cpu/"))}
print("\n".join(sorted(oids)))')
is "$lfs_in" "$want" "the lock bundle holds exactly torch-cpu's LFS objects (of v1, and of main: the loader reads main)"
hub_wait c
# the volumes of acme/gelu (exported before gelu moved on at A), read back to back
hub c sync import "$W/vol.khub.001" >"$W/icv.out" 2>&1
ok $? "C imports the bundle in $nvol volumes (named by its first)"
want=$(sed -n 's|^ *would move \(refs/heads/[^ ]*\) (none) -> \([0-9a-f]*\)$|\1 \2|p' "$W/vol.verify" | sort)
got=$(curl -s "$C/api/kernels/acme/gelu/refs" | /usr/bin/python3 -c 'import json,sys; print("\n".join(sorted(b["ref"] + " " + b["targetCommit"] for b in json.load(sys.stdin)["branches"])))')
is "$got" "$want" "  C's acme/gelu branches are the bundle's"
so=build/torch211-cxx11-cu128-x86_64-linux/_gelu_cuda.abi3.so
vsha=$(echo "$want" | awk '$1 == "refs/heads/v1" {print $2}')
is "$(curl -s "$C/kernels/acme/gelu/resolve/$vsha/$so" | sha256sum)" "$(curl -s "$A/kernels/acme/gelu/resolve/$vsha/$so" | sha256sum)" \
	"  and serves its LFS files byte-identical"
make_kernel_tree "$W/src/local" secret
hub c import "$W/src/local" --repo acme/secret --branch main >/dev/null 2>>"$W/import.log"
ok $? "C: a local (not mirrored) repo acme/secret"
C0=$(state_of c)
hub a sync export --key "$W/k1.key" --out "$W/secret.khub" --repos 'acme/secret' >/dev/null 2>&1
hub c sync import "$W/secret.khub" >/dev/null 2>"$W/ic0.err"
ok $([ $? -ne 0 ]; echo $?) "C refuses a bundle that would overwrite its own acme/secret"
like "$(cat "$W/ic0.err")" "acme/secret exists here and is not a mirrored repo" "  the message says so"
is "$(state_of c)" "$C0" "  C unchanged"
hub c sync import "$W/lock.khub" >"$W/ic.out" 2>"$W/ic.err"
ok $? "C imports the lock bundle"
V1=$(curl -s "$A/api/kernels/acme/relu/revision/v1" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
is "$(curl -s "$C/api/kernels/acme/relu/revision/$V1" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')" "$V1" "C has the locked commit"
is "$(SB lockhash "$C" acme/relu "$V1")" "$(SB lockhash "$A" acme/relu "$V1")" "lock hashes on C = on A"
a=$(curl -s "$A/kernels/acme/relu/resolve/$V1/build/torch-cpu/weights.bin" | sha256sum)
c=$(curl -s "$C/kernels/acme/relu/resolve/$V1/build/torch-cpu/weights.bin" | sha256sum)
is "$c" "$a" "C serves the locked variant's LFS file byte-identical"
got=$(SB get "$C/kernels/acme/relu/resolve/$V1/build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so")
like "$got" "^404 " "C answers 404 for a variant outside the lock"
diag "$got"
is "$(curl -s "$C/api/kernels/acme/relu/refs" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(sorted(b["name"] for b in d["branches"]), [t["name"] for t in d["tags"]])')" \
	"['main', 'v1'] ['1.0']" "C's acme/relu has exactly the refs at the locked commit (v1, tag 1.0) and main"

# A pointer made behind khub's back in acme/gelu, naming acme/relu's LFS
# object (in A's shared store, linked to relu only): export refuses to carry
# it, as every read path refuses to serve it.
GELU=$(hub_data a)/repos/kernels/acme/gelu.git
RELU_PTR=$(git --git-dir="$(hub_data a)/repos/kernels/acme/relu.git" cat-file -p "$V1:build/torch-cpu/weights.bin" |
	git --git-dir="$GELU" hash-object -w --stdin)
export GIT_INDEX_FILE=$W/sneaky.index
git --git-dir="$GELU" read-tree main &&
	git --git-dir="$GELU" update-index --add --cacheinfo "100644,$RELU_PTR,stolen.bin" &&
	SNEAKY=$(git --git-dir="$GELU" -c user.name=x -c user.email=x@x commit-tree "$(git --git-dir="$GELU" write-tree)" \
		-p main -m sneaky) && git --git-dir="$GELU" update-ref refs/heads/sneaky "$SNEAKY"
unset GIT_INDEX_FILE
hub a sync export --key "$W/k1.key" --out "$W/sneaky.khub" --repos acme/gelu --refs sneaky >/dev/null 2>"$W/sneaky.err"
is "$?" 1 "export of a branch whose pointer names another repo's LFS object fails"
like "$(cat "$W/sneaky.err")" "stolen.bin .*is not linked to this repo" "naming the file and why"
ok $([ ! -e "$W/sneaky.khub" ]; echo $?) "and writes no bundle"

done_testing
