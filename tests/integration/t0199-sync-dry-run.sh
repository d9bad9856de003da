#!/bin/bash
# t0199-sync-dry-run.sh -- `khub sync import --dry-run` exits as the import
# would (issue 31, item 11): it runs every check of the import, the packs
# indexed (into a scratch directory) and every branch move checked, for
#  - a bundle re-signed by a trusted key whose pack is not a valid pack (the
#    sha256 in the manifest is the damaged bytes' own),
#  - a branch moving back (a rewind), and one moving sideways to a commit
#    only the bundle's pack holds; with --allow-rewind both exit 0.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in curl tar git jq; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
/usr/bin/python3 -c 'import cryptography' 2>/dev/null || { echo "1..0 # SKIP python3 cryptography not installed"; exit 0; }

hubs_setup
for h in a b; do hub_init $h; done
for h in a b; do hub_spawn $h; done
for h in a b; do hub_wait $h; done
A=$(hub_url a)
B=$(hub_url b)
W=$TEST_DIR/work
mkdir -p "$W"
sha_of() { curl -s "$1/api/kernels/$2/revision/$3" | jq -r '.sha // empty' 2>/dev/null; }
state_of() { hub "$1" sync state | jq -c '[.repos[] | [.id, .refs]]'; }
both() {	# both NAME BUNDLE [ARGS]: the dry run's and the import's exit status, "D I"
	hub b sync import --dry-run "$2" "${@:3}" >"$W/$1.dry" 2>"$W/$1.dry.err"
	local d=$?
	hub b sync import "$2" "${@:3}" >"$W/$1.out" 2>"$W/$1.err"
	echo "$d $?"
}
cat >"$W/resign.py" <<'PY'
# resign.py SRC DST KEY: SRC (an uncompressed bundle) with one byte of its
# first pack changed, the manifest's sha256 of it updated and signed again
import hashlib, io, json, sys, tarfile
from cryptography.hazmat.primitives import serialization
src, dst, keyfile = sys.argv[1:4]
entries = []
with tarfile.open(src) as t:
    for m in t.getmembers():
        entries.append([m.name, t.extractfile(m).read()])
data = dict(entries)
manifest = json.loads(data["manifest.json"])
pack = next(n for n, _ in entries if n.startswith("git/"))
b = bytearray(data[pack]); b[len(b) // 2] ^= 0xff; data[pack] = bytes(b)
for e in manifest["entries"]:
    if e["name"] == pack:
        e["sha256"] = hashlib.sha256(data[pack]).hexdigest()
text = json.dumps(manifest).encode()
digest = hashlib.sha256(text).digest()
key = serialization.load_pem_private_key(open(keyfile, "rb").read(), None)
sig = json.loads(data["manifest.sig"])
sig.update(manifest_sha256=digest.hex(), signature=key.sign(digest).hex())
data["manifest.json"], data["manifest.sig"] = text, json.dumps(sig).encode()
with tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as t:
    for name, _ in entries:
        info = tarfile.TarInfo(name); info.size = len(data[name])
        t.addfile(info, io.BytesIO(data[name]))
PY

seed_fail=0
make_kernel_tree "$W/src/relu" relu
hub a import "$W/src/relu" --repo acme/relu --branch main >/dev/null 2>>"$W/import.log" || seed_fail=1
hub a sync keygen --out "$W/k" >/dev/null 2>&1 || seed_fail=1
export KHUB_SYNC_TRUSTED_KEYS=$W/k.pub
hub a sync export --key "$W/k.key" --out "$W/b1.khub" --repos 'acme/*' >/dev/null 2>&1 || seed_fail=1
hub b sync import "$W/b1.khub" >/dev/null 2>&1 || seed_fail=1
ok $seed_fail "A: acme/relu; B imported bundle 1"
MAIN1=$(sha_of "$A" acme/relu main)
printf 'two\n' >"$W/src/relu/VERSION.txt"
hub a import "$W/src/relu" --repo acme/relu --branch main >/dev/null 2>>"$W/import.log"
MAIN2=$(sha_of "$A" acme/relu main)
hub a sync export --key "$W/k.key" --out "$W/b2.khub" --repos 'acme/*' --compression none >/dev/null 2>&1
ok $? "bundle 2: main moves from ${MAIN1:0:12} to ${MAIN2:0:12} (uncompressed)"

# ---- a re-signed bundle whose pack is not a valid pack ---------------------------------------------------
/usr/bin/python3 "$W/resign.py" "$W/b2.khub" "$W/bad.khub" "$W/k.key"
hub b sync verify "$W/bad.khub" >/dev/null 2>&1
ok $? "bad.khub: one byte of its pack changed, re-signed by the trusted key (verify passes)"
B1=$(state_of b)
is "$(both bad "$W/bad.khub")" "1 1" "--dry-run and the import: both exit 1"
like "$(cat "$W/bad.dry.err")" "git/[0-9]+\.pack is not a (valid|complete) git pack" "  the dry run says the pack is not valid"
like "$(cat "$W/bad.dry")" "would be refused: " "  and prints its plan as refused"
is "$(state_of b)" "$B1" "  B unchanged"
is "$(ls "$(hub_data b)/repos/.sync-staging" | grep -c dry-run)" 0 "  the dry run's scratch directory is gone"
is "$(both b2 "$W/b2.khub")" "0 0" "the genuine bundle 2: both exit 0"
is "$(sha_of "$B" acme/relu main)" "$MAIN2" "  B's main at ${MAIN2:0:12}"

# ---- a branch moving back -----------------------------------------------------------------------------
ARELU=$(hub_data a)/repos/kernels/acme/relu.git
git --git-dir="$ARELU" update-ref refs/heads/main "$MAIN1"
hub a sync export --key "$W/k.key" --out "$W/b3.khub" --repos 'acme/*' >/dev/null 2>&1
is "$(both rewind "$W/b3.khub")" "1 1" "a rewind: --dry-run and the import both exit 1"
like "$(cat "$W/rewind.dry.err")" "would move refs/heads/main of acme/relu from [0-9a-f]{12} back to [0-9a-f]{12}" \
	"  the dry run names the ref"

# ---- a branch moving sideways, to a commit only the bundle holds -----------------------------------------
TREE=$(git --git-dir="$ARELU" rev-parse "$MAIN1^{tree}")
SIDE=$(GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x \
	git --git-dir="$ARELU" commit-tree "$TREE" -p "$MAIN1" -m sideways)
git --git-dir="$ARELU" update-ref refs/heads/main "$SIDE"
hub a sync export --key "$W/k.key" --out "$W/b4.khub" --repos 'acme/*' >/dev/null 2>&1
is "$(both side "$W/b4.khub")" "1 1" "a sideways move (${SIDE:0:12}, not a descendant of ${MAIN2:0:12}): both exit 1"
like "$(cat "$W/side.dry.err")" "would move refs/heads/main of acme/relu from ${MAIN2:0:12} back to ${SIDE:0:12}" \
	"  the dry run read the pack to know it"
is "$(sha_of "$B" acme/relu main)" "$MAIN2" "  B's main stays at ${MAIN2:0:12}"
is "$(both sideok "$W/b4.khub" --allow-rewind)" "0 0" "with --allow-rewind: both exit 0"
is "$(sha_of "$B" acme/relu main)" "$SIDE" "  B's main moved to ${SIDE:0:12}"
done_testing
