#!/bin/bash
# t0152-sync-scope.sh -- what an air-gapped hub's operator controls about
# imports (issue 22, item 6). A (connected) exports; B and C import.
#  1. per-key scope: `khub sync key-scope` limits the orgs a signing key may
#     bring in; a bundle carrying a repo outside it is refused whole, with
#     the reason audited, and nothing is registered;
#  2. a killed import resumes without reading again what it verified: the
#     entries it staged are skipped (a byte changed in the bundle afterwards,
#     inside one of them, is never read), a staged file damaged meanwhile is
#     read again, and the end state is the uninterrupted import's; killed
#     mid-stream while reading volumes, the re-run seeks over what was
#     journaled and ends in the same state;
#  3. /admin/airgap lists the applied bundles for a site admin only
#     (anonymous, non-member, read-scoped session and dead session refused).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 curl tar git sha256sum; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

hubs_setup
for h in a b c; do hub_init $h; done
for h in a b c; do hub_spawn $h; done
for h in a b c; do hub_wait $h; done
B=$(hub_url b)
W=$TEST_DIR/work
mkdir -p "$W"
psql_of() { psql "host=$(hub_data "$1")/pg/run dbname=khub user=khub" -tAc "$2" 2>&1; }
state_of() {	# the refs and LFS objects of every repo, one line
	hub "$1" sync state | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin)
print(json.dumps(sorted([r["id"], r["refs"], sorted(r.get("lfs", []))] for r in d["repos"]), sort_keys=True))'
}

seed_fail=0
make_kernel_tree "$W/src/relu" relu	# torch-cpu + torch211-cxx11-cu128 (.so = LFS)
head -c 3000000 /dev/urandom >"$W/src/relu/build/torch-cpu/_big.abi3.so"
hub a import "$W/src/relu" --repo acme/relu --branch main >/dev/null 2>>"$W/import.log" || seed_fail=1
make_kernel_tree "$W/src/x" x
hub a import "$W/src/x" --repo team/x --branch main >/dev/null 2>>"$W/import.log" || seed_fail=1
hub a sync keygen --out "$W/k" >"$W/keygen.out" 2>&1 || seed_fail=1
KEY_ID=$(grep -o '[0-9a-f]\{16\}' "$W/keygen.out" | head -1)
export KHUB_SYNC_TRUSTED_KEYS=$W/k.pub
hub a sync export --key "$W/k.key" --out "$W/b1.khub" --repos 'acme/*,team/*' --compression none \
	>/dev/null 2>"$W/export.err" || seed_fail=1
ok $seed_fail "A: acme/relu and team/x exported in one bundle (no compression), key $KEY_ID"

# ---- 1. per-key scope -----------------------------------------------------------------------------------
hub b sync key-scope >"$W/ks0.out" 2>&1
like "$(cat "$W/ks0.out")" "no key has a scope" "key-scope lists none at first"
hub b sync key-scope "$W/k.pub" --orgs 'team,a/b' >/dev/null 2>&1
is $? 2 "a scope that is not org names or globs: usage error"
hub b sync key-scope "$W/k.pub" --orgs team >"$W/ks1.out" 2>&1
ok $? "B: key-scope k.pub --orgs team"
like "$(cat "$W/ks1.out")" "key $KEY_ID may bring in team" "  it names the key id"
like "$(hub b sync key-scope 2>&1)" "^$KEY_ID  team  \(set by " "  and lists it with who set it"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.key_scope' AND target = '$KEY_ID'")" 1 "  audited"
hub b sync import "$W/b1.khub" >/dev/null 2>"$W/scope.err"
is $? 1 "a bundle of that key carrying acme/relu is refused"
like "$(cat "$W/scope.err")" "signed by key $KEY_ID, which may bring in only team .*carries repo acme/relu, outside that scope" \
	"  the message names the key, its scope and the repo outside it"
is "$(psql_of b "SELECT count(*) FROM repos")" 0 "  nothing registered (team/x neither: the whole bundle is refused)"
is "$(psql_of b "SELECT count(*) FROM sync_imports")" 0 "  the bundle is not recorded as applied"
like "$(psql_of b "SELECT details FROM audit_log WHERE action = 'sync.refused' ORDER BY id DESC LIMIT 1")" \
	'"reason": *"bundle [0-9a-f-]+ is signed by key [0-9a-f]+, which may bring in only team' "  the refusal is audited with the reason"
hub b sync import --dry-run "$W/b1.khub" >/dev/null 2>&1
is $? 1 "--dry-run refuses it as well"
hub b sync key-scope "$KEY_ID" --orgs 'AC*,team' >/dev/null 2>&1
ok $? "B: the scope widened by key id to a glob (AC*: names are case-insensitive) and team"
hub b sync import "$W/b1.khub" >/dev/null 2>"$W/scope2.err"
ok $? "  the bundle imports now"
is "$(psql_of b "SELECT count(*) FROM repos WHERE mirrored")" 2 "  both repos registered"
hub b sync key-scope "$W/k.pub" --any >/dev/null 2>&1
like "$(hub b sync key-scope 2>&1)" "no key has a scope" "key-scope --any removes the scope"

# ---- 2. a killed import resumes without reading again what it verified -----------------------------------
LFS_ENTRIES=$(/usr/bin/python3 -c 'import tarfile,sys; t=tarfile.open(sys.argv[1]); print(sum(1 for m in t if m.name.startswith(("lfs/","git/"))))' "$W/b1.khub")
KHUB_TEST_CRASH_AT=staged hub c sync import "$W/b1.khub" >/dev/null 2>"$W/crash.err"
is $? 137 "C: an import killed after staging (SIGKILL)"
is "$(psql_of c "SELECT count(*) FROM repos")" 0 "  nothing visible"
STAGE_LFS=$(ls -d "$(hub_data c)"/lfs/tmp/sync-* 2>/dev/null | head -1)
ok $([ -n "$STAGE_LFS" ] && [ -s "$(hub_data c)/repos/.sync-staging/$(basename "${STAGE_LFS#*/sync-}")/verified" ] && echo 0 || echo 1) \
	"  its staging and the journal of verified entries stay"
# a byte of the big object's bytes in the bundle changed after it was verified and staged:
# a re-run that read it again would refuse the bundle
cp "$W/b1.khub" "$W/b1-orig.khub"
/usr/bin/python3 - "$W/b1.khub" "$(sha256sum "$W/src/relu/build/torch-cpu/_big.abi3.so" | cut -d' ' -f1)" <<'EOF'
import sys, tarfile
path, oid = sys.argv[1], sys.argv[2]
m = tarfile.open(path).getmember("lfs/" + oid)
with open(path, "r+b") as f:
    f.seek(m.offset_data + 1000)
    b = f.read(1)
    f.seek(m.offset_data + 1000)
    f.write(bytes([b[0] ^ 0xff]))
EOF
hub c sync import "$W/b1.khub" >"$W/resume.out" 2>"$W/resume.err"
ok $? "  the re-run completes"
like "$(cat "$W/resume.out")" "$LFS_ENTRIES entries verified by an earlier, cut-short run are not read again" \
	"  it reads none of the $LFS_ENTRIES entries the killed run verified (the changed byte is never read)"
is "$(state_of c)" "$(state_of b)" "  C ends where B's uninterrupted import ended"
bad=0
for f in $(find "$(hub_data c)/lfs/objects" -type f); do
	[ "$(sha256sum "$f" | cut -d' ' -f1)" = "$(basename "$f")" ] || bad=1
done
ok $bad "  every object in C's store has the content its name says"
ok $([ -z "$(ls -A "$(hub_data c)/lfs/tmp" 2>/dev/null | grep sync-)" ] && echo 0 || echo 1) "  the staging is removed"

# a staged file damaged between the kill and the re-run is read again
hub_stop c
hub_init c2
hub_start c2
KHUB_TEST_CRASH_AT=staged hub c2 sync import "$W/b1-orig.khub" >/dev/null 2>"$W/crash2.err"
is $? 137 "C2: an import killed after staging"
STAGE2=$(ls -d "$(hub_data c2)"/lfs/tmp/sync-* | head -1)
victim=$(ls "$STAGE2" | grep -v '\.part$' | head -1)
truncate -s 10 "$STAGE2/$victim"
hub c2 sync import "$W/b1-orig.khub" >"$W/resume2.out" 2>"$W/resume2.err"
ok $? "  the re-run after a staged object was truncated completes"
like "$(cat "$W/resume2.out")" "$((LFS_ENTRIES - 1)) entries verified by an earlier" "  that object is read again, the others not"
is "$(state_of c2)" "$(state_of b)" "  same end state"
is "$(sha256sum "$(hub_data c2)/lfs/objects/${victim:0:2}/${victim:2:2}/$victim" 2>/dev/null | cut -d' ' -f1)" "$victim" \
	"  the object read again is whole"
# killed after the objects moved into place: the re-run finishes
hub_init e
hub_start e
KHUB_TEST_CRASH_AT=prepared hub e sync import "$W/b1-orig.khub" >/dev/null 2>&1
is $? 137 "E: an import killed after filling the repos"
hub e sync import "$W/b1-orig.khub" >"$W/resume3.out" 2>&1
ok $? "  the re-run completes"
is "$(state_of e)" "$(state_of b)" "  same end state"

# killed mid-stream, reading a bundle in volumes: the re-run seeks over what was journaled
hub a sync export --key "$W/k.key" --out "$W/vol.khub" --repos 'acme/*,team/*' --compression none \
	--volume-size 1M >/dev/null 2>&1
ok $([ -f "$W/vol.khub.index" ] && [ -f "$W/vol.khub.004" ] && echo 0 || echo 1) "A: the same repos as a bundle in 1 MiB volumes"
hub_init f
hub_start f
KHUB_TEST_CRASH_AT=streaming hub f sync import "$W/vol.khub" >/dev/null 2>&1
is $? 137 "F: an import killed once half the entries were staged"
hub f sync import "$W/vol.khub" >"$W/resume4.out" 2>"$W/resume4.err"
ok $? "  the re-run completes (volumes passed over in part are checked by size)"
half=$(sed -n 's/.*: \([0-9]*\) entries verified by an earlier.*/\1/p' "$W/resume4.out")
ok $([ -n "$half" ] && [ "$half" -ge 1 ] && [ "$half" -lt "$LFS_ENTRIES" ] && echo 0 || echo 1) \
	"  it skips the ${half:-no} entries the killed run journaled, reads the rest"
is "$(state_of f)" "$(state_of b)" "  same end state"
bad=0
for f in $(find "$(hub_data f)/lfs/objects" -type f); do
	[ "$(sha256sum "$f" | cut -d' ' -f1)" = "$(basename "$f")" ] || bad=1
done
ok $bad "  every object in F's store has the content its name says"

# ---- 3. /admin/airgap ------------------------------------------------------------------------------------
hub b admin user create root --site-admin >/dev/null 2>&1
hub b admin user create mallory >/dev/null 2>&1
ROOT_W=$(hub b admin token create root --scope write 2>/dev/null | tail -n 1)
ROOT_R=$(hub b admin token create root --scope read 2>/dev/null | tail -n 1)
MAL=$(hub b admin token create mallory --scope write 2>/dev/null | tail -n 1)
login() {	# login TOKEN: a web session id
	local jar=$W/jar.$RANDOM csrf
	curl -s -c "$jar" -o "$W/login.html" "$B/login"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$W/login.html" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -D "$W/login.h" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$1" "$B/login"
	grep -i "^set-cookie: khub_session=" "$W/login.h" | sed 's/.*khub_session=\([0-9a-f]*\).*/\1/' | tr -d '\r'
}
page() { curl -s -o "$W/page.html" -w '%{http_code}' ${1:+-b "khub_session=$1"} "$B/admin/airgap"; }
BUNDLE=$(psql_of b "SELECT bundle FROM sync_imports LIMIT 1")
S_ROOT=$(login "$ROOT_W")
is "$(page "$S_ROOT")" 200 "/admin/airgap: a site admin's session"
like "$(cat "$W/page.html")" "Air-gap imports" "  titled"
like "$(cat "$W/page.html")" "<td class=\"mono\">$BUNDLE</td>" "  lists the applied bundle"
like "$(cat "$W/page.html")" "<td>applied</td><td class=\"num\">[0-9]+</td>" "  applied, with its refs moved"
like "$(cat "$W/page.html")" "<td>$(id -un)</td>" "  and the operator"
like "$(curl -s -b "khub_session=$S_ROOT" "$B/admin")" 'href="/admin/airgap"' "/admin links to it"
code=$(page "")
ok $([ "$code" != 200 ] && ! grep -q "$BUNDLE" "$W/page.html" && echo 0 || echo 1) "anonymous: refused ($code), no bundle shown"
code=$(page "$(login "$MAL")")
ok $([ "$code" = 403 ] && ! grep -q "$BUNDLE" "$W/page.html" && echo 0 || echo 1) "a user who is not a site admin: 403 ($code)"
code=$(page "$(login "$ROOT_R")")
ok $([ "$code" = 403 ] && ! grep -q "$BUNDLE" "$W/page.html" && echo 0 || echo 1) "a site admin's read-scoped session: 403 ($code)"
code=$(curl -s -o "$W/page.html" -w '%{http_code}' -H "Authorization: Bearer $ROOT_W" "$B/admin/airgap")
ok $([ "$code" != 200 ] && echo 0 || echo 1) "a bearer token on the page route (pages take sessions only): refused ($code)"
psql_of b "UPDATE web_sessions SET expires_at = now() - interval '1 second'" >/dev/null
code=$(page "$S_ROOT")
ok $([ "$code" = 401 ] && ! grep -q "$BUNDLE" "$W/page.html" && echo 0 || echo 1) "a dead session: 401 ($code)"
done_testing
