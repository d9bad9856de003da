#!/bin/bash
# t0211-backup-private.sh -- a backup is its owner's alone, backs up only a
# named data dir, and a restore refuses links. khub backup into a directory
# the operator made 0755 (the docs' example) leaves DIR 0700, every file
# 0600 and every directory 0700 (an earlier backup's looser modes too):
# another local user (nobody) can read neither db.dump (token hashes,
# emails, sessions) nor repos/ (a private repo), even once DIR is opened
# again. khub backup with no data_dir configured refuses (no fresh empty
# hub in ./var backed up with status 0). khub restore of a backup whose
# secret is a symbolic link to /etc/shadow, or with a link inside repos/,
# is refused and the data dir gets nothing; the real backup restores.
. "$(dirname "$0")/../lib/khub-test.sh"

khub_setup
[ "$(id -u)" -eq 0 ] || { diag "SKIP: needs root (runuser -u nobody)"; done_testing; exit $?; }
khub_start
make_kernel_tree "$TEST_DIR/k"
check "a private repo is imported" -- khub import "$TEST_DIR/k" --repo acme/hidden --branch main --private
check "a user with a token" -- bash -c "'$KHUB_BIN' admin user create alice && '$KHUB_BIN' admin token create alice"

as_nobody() { (cd / && runuser -u nobody -- "$@") >/dev/null 2>&1; }
loose() {	# the entries of DIR another user could read or enter
	find "$1" \( -type f ! -perm 600 \) -o \( -type d ! -perm 700 \) -o \( ! -type f ! -type d \) | sort
}

# ---- private, whatever DIR was ------------------------------------------------------------------
BK=$TEST_DIR/backups
umask 022
mkdir -m 0755 "$BK"
khub backup "$BK" >"$TEST_DIR/backup.out" 2>&1
ok $? "khub backup into an operator-made 0755 directory"
[ -f "$BK/db.dump" ] && [ -d "$BK/repos" ] || bail "no db.dump or repos/ in the backup"
is "$(stat -c %a "$BK")" 700 "DIR is made 0700"
is "$(loose "$BK")" "" "every file in it is 0600 and every directory 0700"
chmod 755 "$BK"	# opened again by the operator: what is inside stays private
ok $(! as_nobody cat "$BK/db.dump"; echo $?) "nobody cannot read db.dump"
ok $(! as_nobody ls "$BK/repos"; echo $?) "nobody cannot list repos/"
ok $(! as_nobody cat "$BK/secret"; echo $?) "nobody cannot read the secret"
PACK=$(find "$BK/repos" -type f -name 'packed-refs' | head -1)
ok $(! as_nobody cat "$PACK"; echo $?) "nor a private repo's refs"

# an earlier backup's loose modes are made private by the next run into DIR
chmod -R go+rX "$BK" && chmod 644 "$BK/db.dump"
khub backup "$BK" >>"$TEST_DIR/backup.out" 2>&1
ok $? "a second backup into the same DIR"
is "$(stat -c %a "$BK") $(loose "$BK" | wc -l)" "700 0" "the files already there are made private too"

# ---- no data dir named: refused --------------------------------------------------------------------
mkdir -p "$TEST_DIR/cwd"
(cd "$TEST_DIR/cwd" && env -u KHUB_DATA_DIR "$KHUB_BIN" backup "$TEST_DIR/b2") >"$TEST_DIR/b2.out" 2>&1
rc=$?
ok $([ $rc -ne 0 ]; echo $?) "khub backup with no data_dir configured fails (exit $rc)"
like "$(cat "$TEST_DIR/b2.out")" "no data_dir is configured" "and says so"
ok $([ ! -e "$TEST_DIR/cwd/var" ] && [ ! -e "$TEST_DIR/b2/manifest.json" ]; echo $?) \
	"no hub was made in ./var and no backup written"

# ---- restore refuses links -----------------------------------------------------------------------
EVIL=$TEST_DIR/evil
cp -a "$BK" "$EVIL" && rm "$EVIL/secret" && ln -s /etc/shadow "$EVIL/secret"
KHUB_DATA_DIR=$TEST_DIR/restored khub restore "$EVIL" >"$TEST_DIR/evil.out" 2>&1
rc=$?
ok $([ $rc -ne 0 ]; echo $?) "restore of a backup whose secret links to /etc/shadow is refused (exit $rc)"
like "$(cat "$TEST_DIR/evil.out")" "secret is a symbolic link" "naming the link"
ok $([ ! -e "$TEST_DIR/restored/secret" ] && [ -z "$(ls -A "$TEST_DIR/restored" 2>/dev/null)" ]; echo $?) \
	"the data dir got nothing (no copy of /etc/shadow)"
EVIL2=$TEST_DIR/evil2
cp -a "$BK" "$EVIL2" && rm "$EVIL2/secret"
CONFIG=$(find "$EVIL2/repos" -name config -type f | head -1)
rm "$CONFIG" && ln -s /etc/shadow "$CONFIG"
KHUB_DATA_DIR=$TEST_DIR/restored2 khub restore "$EVIL2" >"$TEST_DIR/evil2.out" 2>&1
rc=$?
ok $([ $rc -ne 0 ]; echo $?) "a link inside repos/ is refused too (exit $rc)"
ok $([ -z "$(ls -A "$TEST_DIR/restored2" 2>/dev/null)" ]; echo $?) "and nothing is restored"

KHUB_DATA_DIR=$TEST_DIR/good khub restore "$BK" >"$TEST_DIR/good.out" 2>&1
rc=$?
ok $rc "the private backup itself restores"
[ $rc -eq 0 ] || tail -5 "$TEST_DIR/good.out" | sed 's/^/#   /'
check "with the secret as it was" -- cmp "$BK/secret" "$TEST_DIR/good/secret"
check "and the private repo" -- test -d "$TEST_DIR/good/repos/kernels/acme/hidden.git"

done_testing
