#!/bin/bash
# t0330-import-lfs-batches.sh -- `khub import` of many LFS files stores them
# in batches: one transaction names a batch in flight, its files are made
# durable (each directory synced once), one statement links them all. An
# import of 600 LFS files (more than one batch of PUBLISH_HELD_MAX = 256)
# links every object in a few transactions (their xmin), not one or three
# per object; nothing is left in flight; every object is in the store under
# its sha256; khub fsck finds nothing wrong; a file is served.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v psql >/dev/null || { echo "1..0 # SKIP psql is not installed"; exit 0; }
khub_setup

N=600
khub admin org create acme >"$TEST_DIR/setup.log" 2>&1
SRC=$TEST_DIR/src
mkdir -p "$SRC/data"
printf '[general]\nname = "many"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["b.cpp"]\n' \
	>"$SRC/build.toml"
/usr/bin/python3 - "$SRC/data" "$N" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, "blob%05d.bin" % i), "wb") as f:
        f.write(b"\0" + os.urandom(1500))
PY
khub import "$SRC" --repo acme/many --type kernel >"$TEST_DIR/import.log" 2>&1
ok $? "khub import of $N small LFS files"
like "$(grep "khub import: acme/many" "$TEST_DIR/import.log")" "\\($((N + 1)) files, $N as LFS," "all $N stored as LFS"

khub_start
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1"; }
REPO_ID=$(sql "SELECT id FROM repos WHERE namespace = 'acme' AND name = 'many'")
is "$(sql "SELECT count(*) FROM lfs_repo_objects WHERE repo_id = $REPO_ID")" "$N" "every object is linked to the repo"
tx=$(sql "SELECT count(DISTINCT xmin::text) FROM lfs_repo_objects WHERE repo_id = $REPO_ID")
ok "$([ -n "$tx" ] && [ "$tx" -le 3 ]; echo $?)" "the $N links took $tx transactions (batches of 257 at most), not one per object"
is "$(sql "SELECT count(*) FROM lfs_inflight")" 0 "nothing is left in flight"
bad=0
for f in "$SRC"/data/*.bin; do
	oid=$(sha256sum "$f" | cut -d' ' -f1)
	obj=$(lfs_object_file "$oid")
	[ -f "$obj" ] && [ "$(sha256sum "$obj" | cut -d' ' -f1)" = "$oid" ] || bad=$((bad + 1))
done
is "$bad" 0 "every object is in the store under its sha256"
khub fsck >"$TEST_DIR/fsck.log" 2>&1
ok $? "khub fsck finds nothing wrong"
got=$(curl -sf "$KHUB_URL/kernels/acme/many/resolve/main/data/blob00599.bin" | sha256sum | cut -d' ' -f1)
is "$got" "$(sha256sum "$SRC/data/blob00599.bin" | cut -d' ' -f1)" "the last file is served"

done_testing
