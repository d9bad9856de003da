#!/bin/bash
# t0153-sync-compression.sh -- `khub sync export --compression none|zstd[:LEVEL]`
# and the export's writer thread: a plain tar bundle (no zstd frame, listed
# by tar) and a zstd:19 one carry the same entries and import the same; a
# split plain bundle's index matches its volumes; a bad level is refused
# before anything is written; a bundle that cannot be written fails and
# writes nothing.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 curl zstd tar sha256sum; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

hubs_setup
hub_init a
hub_init b
hub_spawn a
hub_spawn b
hub_wait a
A=$(hub_url a)
B=$(hub_url b)
W=$TEST_DIR/work
mkdir -p "$W"
make_kernel_tree "$W/src" relu
head -c 3000000 /dev/urandom >"$W/src/build/torch-cpu/weights.bin"	# past a few writer chunks
hub a import "$W/src" --repo acme/relu --branch main >/dev/null 2>"$W/import.log"
ok $? "A: acme/relu with a 3 MB binary"
hub a sync keygen --out "$W/k" >/dev/null 2>&1
export KHUB_SYNC_TRUSTED_KEYS=$W/k.pub

hub a sync export --key "$W/k.key" --out "$W/none.khub" --repos 'acme/*' --compression none >/dev/null 2>"$W/none.err"
ok $? "export --compression none"
is "$(head -c 4 "$W/none.khub" | od -An -tx1 | tr -d ' ')" "$(printf 'manifest.json' | head -c 4 | od -An -tx1 | tr -d ' ')" \
	"a plain tar: it starts with its first entry's name, no zstd frame"
tar -tf "$W/none.khub" >"$W/none.list" 2>/dev/null
ok $? "tar lists the plain bundle"
hub a sync export --key "$W/k.key" --out "$W/z19.khub" --repos 'acme/*' --compression zstd:19 >/dev/null 2>&1
ok $? "export --compression zstd:19"
is "$(head -c 4 "$W/z19.khub" | od -An -tx1 | tr -d ' ')" 28b52ffd "a zstd frame"
tar --zstd -tf "$W/z19.khub" >"$W/z19.list" 2>/dev/null
is "$(cat "$W/z19.list")" "$(cat "$W/none.list")" "both carry the same entries"
ok $([ "$(stat -c %s "$W/none.khub")" -gt 3000000 ] && echo 0 || echo 1) "the plain bundle holds the binary's bytes"

hub b sync verify "$W/z19.khub" >/dev/null 2>&1
ok $? "B verifies the zstd:19 bundle"
hub b sync import "$W/none.khub" >"$W/import-b.out" 2>&1
ok $? "B imports the plain bundle"
want=$(curl -s "$A/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
got=$(curl -s "$B/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
is "$got" "$want" "B's main is A's"
curl -s -o "$W/weights.b" "$B/kernels/acme/relu/resolve/main/build/torch-cpu/weights.bin"
is "$(sha256sum <"$W/weights.b" | cut -d' ' -f1)" "$(sha256sum <"$W/src/build/torch-cpu/weights.bin" | cut -d' ' -f1)" \
	"the binary arrives byte-identical"

hub a sync export --key "$W/k.key" --out "$W/vol.khub" --repos 'acme/*' --compression none --volume-size 1M >/dev/null 2>&1
ok $? "a plain bundle in 1 MiB volumes"
why=$(/usr/bin/python3 - "$W" <<'PY'
import hashlib, json, os, sys
w = sys.argv[1]
idx = json.load(open(f"{w}/vol.khub.index"))["volumes"]
bad = [v["name"] for v in idx if os.path.getsize(f"{w}/{v['name']}") != v["size"]
       or hashlib.sha256(open(f"{w}/{v['name']}", "rb").read()).hexdigest() != v["sha256"]]
print(f"{len(idx)} volumes; wrong: {bad}" if bad or len(idx) < 3 else "")
PY
)
is "$why" "" "the index lists every volume with its size and sha256"
cat "$W"/vol.khub.[0-9][0-9][0-9] | tar -tf - >"$W/vol.list" 2>/dev/null
is "$(cat "$W/vol.list")" "$(cat "$W/none.list")" "the volumes put together are the same tar"

for bad in zstd:0 zstd:20 zstd: zstd:x gzip ''; do
	hub a sync export --key "$W/k.key" --out "$W/bad.khub" --repos 'acme/*' --compression "$bad" >/dev/null 2>"$W/bad.err"
	rc=$?
	is "$rc/$(ls "$W"/bad.khub* 2>/dev/null | wc -l)" "2/0" "--compression '$bad' refused (exit 2), nothing written"
done
like "$(cat "$W/bad.err")" "compression" "the refusal says what --compression takes"

# the writer thread cannot open the file: the export fails, nothing is left
hub a sync export --key "$W/k.key" --out "$W/nodir/x.khub" --repos 'acme/*' --compression none >/dev/null 2>"$W/nodir.err"
rc=$?
ok $([ $rc -ne 0 ] && echo 0 || echo 1) "an export whose bundle cannot be written fails (exit $rc)"
like "$(cat "$W/nodir.err")" "cannot" "and says so"
ok $([ ! -e "$W/nodir" ] && echo 0 || echo 1) "nothing written"
# a disk that fills up mid-bundle (a 1 MiB tmpfs; where mounting is
# allowed): the writer thread's ENOSPC ends the export, no partial file
FULL=$W/full
mkdir -p "$FULL"
if mount -t tmpfs -o size=1m tmpfs "$FULL" 2>/dev/null; then
	hub a sync export --key "$W/k.key" --out "$FULL/b.khub" --repos 'acme/*' --compression none >/dev/null 2>"$W/full.err"
	rc=$?
	ok $([ $rc -ne 0 ] && echo 0 || echo 1) "a bundle that fills the disk fails (exit $rc)"
	like "$(cat "$W/full.err")" "cannot write" "and says so"
	is "$(ls -A "$FULL" | wc -l)" 0 "no partial file left"
	umount "$FULL"
else
	ok 0 "# SKIP cannot mount a small tmpfs here"
	ok 0 "# SKIP cannot mount a small tmpfs here"
	ok 0 "# SKIP cannot mount a small tmpfs here"
fi
done_testing
