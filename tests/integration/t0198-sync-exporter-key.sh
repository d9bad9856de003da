#!/bin/bash
# t0198-sync-exporter-key.sh -- a trusted but scoped sync key cannot freeze
# another exporter (issue 31, item 3). OUT (hub a, key k) exports to IN (hub
# b); an attacker's hub x signs with key c, which b trusts for org evil only.
# The sequence b keeps is per exporter id, and the exporter id is what the
# signed manifest says: c signs a bundle naming OUT's exporter id with
# sequence 10^12. An exporter id is bound to one key (the key of its first
# bundle here, or the operator's choice), so b refuses it (exit 5, audited),
# and OUT's next genuine bundle still imports. A hub attacked before the fix
# (the forged bundle recorded) is not frozen either: the sequence counts only
# the bundles of the bound key.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in python3 curl tar git; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

hubs_setup
for h in a b x; do hub_init $h; done
for h in a b x; do hub_spawn $h; done
for h in a b x; do hub_wait $h; done
A=$(hub_url a)
B=$(hub_url b)
W=$TEST_DIR/work
mkdir -p "$W"
psql_of() { psql "host=$(hub_data "$1")/pg/run dbname=khub user=khub" -tAc "$2" 2>&1; }
sha_of() { curl -s "$1/api/kernels/$2/revision/$3" | jq -r '.sha // empty' 2>/dev/null; }
exporter_of() { grep -o 'of exporter [0-9a-f-]\{36\}' "$1" | head -1 | cut -d' ' -f3; }
sequence_of() { grep -o 'sequence [0-9]* of exporter' "$1" | head -1 | cut -d' ' -f2; }
new_version() {	# new_version HUB REPO TEXT: a new commit on main
	printf '%s\n' "$3" >"$W/src/${2#*/}/VERSION.txt"
	hub "$1" import "$W/src/${2#*/}" --repo "$2" --branch main >/dev/null 2>>"$W/import.log"
}

seed_fail=0
make_kernel_tree "$W/src/relu" relu
make_kernel_tree "$W/src/k" k
make_kernel_tree "$W/src/k2" k2
hub a import "$W/src/relu" --repo acme/relu --branch main >/dev/null 2>>"$W/import.log" || seed_fail=1
hub x import "$W/src/k" --repo evil/k --branch main >/dev/null 2>>"$W/import.log" || seed_fail=1
hub a sync keygen --out "$W/k" >"$W/k.out" 2>&1 || seed_fail=1
hub x sync keygen --out "$W/c" >"$W/c.out" 2>&1 || seed_fail=1
KID=$(grep -o '[0-9a-f]\{16\}' "$W/k.out" | head -1)
CID=$(grep -o '[0-9a-f]\{16\}' "$W/c.out" | head -1)
export KHUB_SYNC_TRUSTED_KEYS=$W/k.pub,$W/c.pub
hub b sync key-scope "$W/c.pub" --orgs evil >/dev/null 2>&1 || seed_fail=1
ok $seed_fail "A: acme/relu (key k $KID); X: evil/k (key c $CID); B trusts both, c for org evil only"

# ---- genuine flows: each key with its own exporter ------------------------------------------------
hub a sync export --key "$W/k.key" --out "$W/a1.khub" --repos 'acme/*' >"$W/a1.out" 2>&1
E=$(exporter_of "$W/a1.out")
hub b sync import "$W/a1.khub" >/dev/null 2>"$W/i1.err"
ok $? "B imports OUT's bundle 1 (exporter $E)"
hub x sync export --key "$W/c.key" --out "$W/x1.khub" --repos 'evil/*' >"$W/x1.out" 2>&1
EX=$(exporter_of "$W/x1.out")
hub b sync import "$W/x1.khub" >/dev/null 2>"$W/ix1.err"
ok $? "B imports X's own bundle (exporter $EX, key c, within its scope)"
like "$(hub b sync key-scope 2>&1)" "exporter $E  signed by key $KID only" "key-scope lists OUT's exporter bound to key k"
like "$(hub b sync key-scope 2>&1)" "exporter $EX  signed by key $CID only" "  and X's exporter bound to key c"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.exporter_key' AND target IN ('$E', '$EX')
	AND details->>'first_bundle' = 'true'")" 2 "  each binding audited as sync.exporter_key (its first bundle)"

# ---- the attack: key c signs a bundle naming OUT's exporter id, sequence 10^12 ----------------------
hub x import "$W/src/k2" --repo evil/k2 --branch main >/dev/null 2>>"$W/import.log"
psql_of x "UPDATE sync_exporter SET exporter = '$E', sequence = 999999999999" >/dev/null
hub x sync export --key "$W/c.key" --out "$W/forged.khub" --repos 'evil/*' >"$W/f.out" 2>&1
ok $? "X: a bundle signed by key c that names OUT's exporter id"
is "$(exporter_of "$W/f.out") $(sequence_of "$W/f.out")" "$E 1000000000000" "  exporter $E, sequence 10^12"
hub b sync import --dry-run "$W/forged.khub" >/dev/null 2>"$W/fd.err"
is $? 5 "B: --dry-run refuses it (exit 5)"
hub b sync import "$W/forged.khub" >/dev/null 2>"$W/f.err"
is $? 5 "B refuses it (exit 5: the exporter id is bound to another key)"
like "$(cat "$W/f.err")" "names exporter $E, which is bound to key $KID; it is signed by key $CID, which may not sign for it" \
	"  saying which exporter, which key it is bound to and which key signed"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.refused' AND details->>'key_id' = '$CID'
	AND details->>'exporter' = '$E' AND details->>'reason' LIKE '%bound to key $KID%'")" 1 \
	"  audited as sync.refused with the key, the exporter and the reason (the dry run writes nothing)"
is "$(psql_of b "SELECT count(*) FROM repos WHERE namespace = 'evil' AND name = 'k2'")" 0 "  nothing imported"
is "$(psql_of b "SELECT count(*) FROM sync_imports WHERE sequence >= 1000000000000")" 0 "  nor recorded"

# ---- OUT is not frozen ---------------------------------------------------------------------------------
new_version a acme/relu "two"
hub a sync export --key "$W/k.key" --out "$W/a2.khub" --repos 'acme/*' >"$W/a2.out" 2>&1
hub b sync import "$W/a2.khub" >/dev/null 2>"$W/i2.err"
ok $? "B imports OUT's next genuine bundle (sequence $(sequence_of "$W/a2.out"))"
is "$(sha_of "$B" acme/relu main)" "$(sha_of "$A" acme/relu main)" "  relu main is OUT's new commit"

# ---- a hub attacked before the fix: the forged bundle was recorded ------------------------------------
psql_of b "INSERT INTO sync_imports (exporter, sequence, bundle, key_id, hub, operator, state)
	VALUES ('$E', 1000000000000, gen_random_uuid(), '$CID', 'x', 'old', 'done')" >/dev/null
new_version a acme/relu "three"
hub a sync export --key "$W/k.key" --out "$W/a3.khub" --repos 'acme/*' >/dev/null 2>&1
hub b sync import "$W/a3.khub" >/dev/null 2>"$W/i3.err"
ok $? "a recorded bundle of another key (sequence 10^12 for OUT's id) does not freeze OUT: its bundle imports"
is "$(sha_of "$B" acme/relu main)" "$(sha_of "$A" acme/relu main)" "  relu main moved"
hub b sync import "$W/a2.khub" >/dev/null 2>&1
is $? 4 "  OUT's older bundle is still refused as older (exit 4)"

# ---- the operator binds an exporter id to another key (a rotation) ------------------------------------
hub b sync key-scope "$W/c.pub" --exporter NOT-A-UUID >/dev/null 2>&1
is $? 2 "key-scope --exporter takes a uuid"
hub b sync key-scope "$W/c.pub" --exporter "$E" >/dev/null 2>&1
ok $? "B: key-scope c.pub --exporter $E"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.exporter_key' AND target = '$E'
	AND details->>'key_id' = '$CID' AND details->>'previous_key_id' = '$KID'")" 1 "  audited with the key before"
new_version a acme/relu "four"
hub a sync export --key "$W/k.key" --out "$W/a4.khub" --repos 'acme/*' >/dev/null 2>&1
hub b sync import "$W/a4.khub" >/dev/null 2>&1
is $? 5 "  now key k may not sign for $E (exit 5)"
hub b sync key-scope "$W/k.pub" --exporter "$E" >/dev/null 2>&1
hub b sync import "$W/a4.khub" >/dev/null 2>&1
ok $? "bound back to key k: OUT's bundle imports"
is "$(sha_of "$B" acme/relu main)" "$(sha_of "$A" acme/relu main)" "  relu main moved"
done_testing
