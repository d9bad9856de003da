#!/bin/bash
# t0208-sync-delete-create-atomic.sh -- an air-gap import deletes a repo
# atomically and never adopts a directory it did not make (issue 31 item 6,
# the sync path). Hub A exports, hub B imports, with B's data_dir/repos on a
# filesystem of its own (the several-node layout).
#  1. a bundle deleting a repo, imported while B's trash cannot take the
#     directory (repos/.trash made a mount of another filesystem), fails and
#     deletes nothing: the repo stays registered and readable where it was;
#     once the trash works again, the same bundle deletes it into
#     repos/.trash on the repos' filesystem;
#  2. a leftover directory at the place of a repo a bundle brings new (a
#     branch with a secret in it) is not adopted: the secret is not served
#     (anonymous GET 404), the directory is in the trash, and the create is
#     audited with where it went.
# Nothing outside storage/ makes a repo's directory except through the
# creators that never adopt.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in curl tar git jq; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

# ---- structure: one creator of repo directories --------------------------------------------------
outside="api server mirror sync common web kernel farm http"
hits=$(cd "$KHUB_SRC" && grep -rn --include='*.c' '\brepo_store_create(\|\brepo_store_init_empty(' $outside 2>/dev/null)
is "$hits" "" "outside storage/, repo directories are made only by the creators that never adopt (*_fresh)"

hubs_setup
hub_init a
hub_init b
REPOS=$(hub_data b)/repos
mkdir -p "$REPOS" "$TEST_DIR/elsewhere"
MOUNTS=()
unmount_all() {
	local i
	for name in "${HUB_NAMES[@]}"; do hub_stop "$name"; done
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount "${MOUNTS[$i]}" 2>/dev/null; done
	hubs_teardown
}
trap unmount_all EXIT
mount -t tmpfs -o mode=755 khub-t0208 "$REPOS" || bail "cannot mount a tmpfs (the test needs root)"
MOUNTS+=("$REPOS")
hub_spawn a
hub_spawn b
hub_wait a
hub_wait b
A=$(hub_url a)
B=$(hub_url b)
W=$TEST_DIR/work
mkdir -p "$W"
psql_of() { psql "host=$(hub_data "$1")/pg/run dbname=khub user=khub" -tAc "$2" 2>&1; }
body_of() { curl -s -w '/%{http_code}' "$1"; }
export_a() { hub a sync export --key "$W/k.key" --repos 'acme/*' --out "$@" >/dev/null 2>>"$W/export.err"; }
registered_b() { psql_of b "SELECT count(*) FROM repos WHERE namespace = 'acme' AND name = '$1'"; }

seed_fail=0
for name in relu gone; do
	make_kernel_tree "$W/src/$name" "$name"
	printf 'the %s kernel' "$name" >"$W/src/$name/NOTE.txt"
	hub a import "$W/src/$name" --repo "acme/$name" --branch main >/dev/null 2>>"$W/import.log" || seed_fail=1
done
hub a sync keygen --out "$W/k" >/dev/null 2>&1 || seed_fail=1
export KHUB_SYNC_TRUSTED_KEYS=$W/k.pub
hub a admin user create root --site-admin >/dev/null 2>&1
TOKEN=$(hub a admin token create root --scope admin 2>/dev/null | tail -n 1)
ok $seed_fail "A: acme/relu and acme/gone; a sync key B trusts"
[ "$(stat -c %d "$REPOS")" != "$(stat -c %d "$(hub_data b)")" ]
ok $? "B's repos are on a filesystem of their own"

export_a "$W/e1.khub"
hub b sync import "$W/e1.khub" >/dev/null 2>"$W/i1.err"
ok $? "B imports A's first bundle"
is "$(until_is '.*/200' body_of "$B/kernels/acme/gone/resolve/main/NOTE.txt")" "the gone kernel/200" \
	"  acme/gone is readable on B"

# ---- 1. a delete whose move to the trash fails deletes nothing -----------------------------------
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $TOKEN" \
	-H 'Content-Type: application/json' -d '{"type": "kernel", "organization": "acme", "name": "gone"}' \
	"$A/api/repos/delete")
is "$code" 200 "A: acme/gone deleted"
export_a "$W/e2.khub"
mkdir -p "$REPOS/.trash"
mount --bind "$TEST_DIR/elsewhere" "$REPOS/.trash" || bail "cannot bind-mount the trash"
MOUNTS+=("$REPOS/.trash")
hub b sync import "$W/e2.khub" >/dev/null 2>"$W/i2.err"
rc=$?
[ $rc -ne 0 ]
ok $? "B: the bundle deleting acme/gone fails while its directory cannot be moved (exit $rc)"
like "$(cat "$W/i2.err")" "cannot move its directory to the trash; nothing was deleted" "  saying so"
is "$(registered_b gone)" 1 "  acme/gone is still registered"
check "  its directory is where it was" -- test -d "$REPOS/kernels/acme/gone.git"
is "$(body_of "$B/kernels/acme/gone/resolve/main/NOTE.txt")" "the gone kernel/200" "  and it is still readable"
is "$(psql_of b "SELECT count(*) FROM audit_log WHERE action = 'sync.delete'")" 0 "  no deletion audited"
umount "$REPOS/.trash" && unset 'MOUNTS[1]'
hub b sync import "$W/e2.khub" >/dev/null 2>"$W/i3.err"
ok $? "with the trash back, B imports the same bundle"
is "$(registered_b gone)" 0 "  acme/gone is unregistered"
like "$(until_is '40[14]' curl -s -o /dev/null -w '%{http_code}' "$B/kernels/acme/gone/resolve/main/NOTE.txt")" \
	'^40[14]$' "  and answers not found"
check "  its directory went to repos/.trash, on the repos' filesystem" -- \
	ls -d "$REPOS"/.trash/kernels/acme/gone.git.*
check "  nothing is left at its place" -- test ! -e "$REPOS/kernels/acme/gone.git"

# ---- 2. a leftover directory at a new repo's place is not adopted --------------------------------
leftover_git_dir "$REPOS/kernels/acme/fresh.git"
ok $? "B: a leftover directory at acme/fresh's place (branch leak, tag leaked)"
make_kernel_tree "$W/src/fresh" fresh
printf 'the fresh kernel' >"$W/src/fresh/NOTE.txt"
hub a import "$W/src/fresh" --repo acme/fresh --branch main >/dev/null 2>>"$W/import.log"
ok $? "A: acme/fresh created (main only)"
export_a "$W/e3.khub"
hub b sync import "$W/e3.khub" >/dev/null 2>"$W/i4.err"
ok $? "B imports the bundle that brings acme/fresh"
is "$(until_is '.*/200' body_of "$B/kernels/acme/fresh/resolve/main/NOTE.txt")" "the fresh kernel/200" \
	"  acme/fresh is readable on B"
is "$(curl -s -o /dev/null -w '%{http_code}' "$B/kernels/acme/fresh/resolve/leak/secret.txt")" 404 \
	"  anonymous GET of the leftover branch's file: 404"
is "$(curl -s -o /dev/null -w '%{http_code}' "$B/kernels/acme/fresh/resolve/leaked/secret.txt")" 404 \
	"  nor through its tag"
is "$(curl -s "$B/api/kernels/acme/fresh/refs" | jq -r '[.branches[].name, .tags[].name] | join(",")')" "main" \
	"  the repo has A's refs only"
check "  the leftover directory is in the trash" -- \
	git --git-dir="$(ls -d "$REPOS"/.trash/kernels/acme/fresh.git.* | head -1)" rev-parse -q --verify refs/heads/leak
is "$(psql_of b "SELECT details->>'quarantined' LIKE '$REPOS/.trash/kernels/acme/fresh.git.%' FROM audit_log
	WHERE action = 'repo.create' AND target LIKE '%acme/fresh'")" t "  the create audited with where it went"

done_testing
