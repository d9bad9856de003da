#!/bin/bash
# t0206-delete-other-filesystem.sh -- a deleted private repo never comes
# back: with data_dir/repos on another filesystem than data_dir (the
# several-node layout: repos on a shared mount), a delete moves the repo
# aside on the repos' own filesystem before it unregisters it, so creating
# the name again (public) gives an empty repo, not the old files. A delete
# whose move fails (the trash made a mount of another filesystem) answers
# 5xx and unregisters nothing: the owner still reads the repo.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

REPOS=$KHUB_DATA_DIR/repos
mkdir -p "$REPOS" "$TEST_DIR/elsewhere"
MOUNTS=()
unmount_all() {
	khub_stop
	local i
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount "${MOUNTS[$i]}" 2>/dev/null; done
	khub_teardown
}
trap unmount_all EXIT
mount -t tmpfs -o mode=755 khub-t0206 "$REPOS" || bail "cannot mount a tmpfs (the test needs root)"
MOUNTS+=("$REPOS")
[ "$(stat -c %d "$REPOS")" != "$(stat -c %d "$KHUB_DATA_DIR")" ] || bail "repos is not on its own filesystem"

khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
khub_start

H=$TEST_DIR/headers
B=$TEST_DIR/body
api() {	# api METHOD PATH TOKEN [JSON] -> $STATUS, headers in $H, body in $B
	local method=$1 path=$2 token=$3 data=${4-}
	local args=(-s -X "$method" -D "$H" -o "$B" -w '%{http_code}')
	[ -n "$token" ] && args+=(-H "Authorization: Bearer $token")
	[ -n "$data" ] && args+=(-H "Content-Type: application/json" --data-binary "$data")
	STATUS=$(curl "${args[@]}" "$KHUB_URL$path")
}
code() { echo "$STATUS/$(grep -i '^X-Error-Code:' "$H" | head -1 | cut -d' ' -f2- | tr -d '\r')"; }

# ---- delete, then the same name again, public ------------------------------------
api POST /api/repos/create "$ALICE" \
	'{"name":"vault","organization":"acme","type":"kernel","private":true,"files":[{"path":"secret.txt","content":"TOP SECRET"}]}'
is "$STATUS" 200 "private repo created with a file"
api GET /kernels/acme/vault/resolve/main/secret.txt "$ALICE"
is "$STATUS/$(cat "$B")" "200/TOP SECRET" "its owner reads the file"
api DELETE /api/repos/delete "$ALICE" '{"name":"vault","organization":"acme","type":"kernel"}'
is "$STATUS" 200 "delete answers 200 with repos on their own filesystem"
check "the directory went to the trash on the repos' filesystem" -- ls -d "$REPOS"/.trash/kernels/acme/vault.git.*
api POST /api/repos/create "$ALICE" '{"name":"vault","organization":"acme","type":"kernel","private":false}'
is "$STATUS" 200 "the name is created again, public"
api GET /kernels/acme/vault/resolve/main/secret.txt ""
is "$(code)" "404/EntryNotFound" "anonymous GET of the deleted repo's file: 404 EntryNotFound"
api GET /api/kernels/acme/vault/tree/main ""
is "$STATUS/$(jq -r '[.[].path] | join(",")' "$B")" "200/.gitattributes" "the new repo is empty (its initial commit only)"
is "$(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc \
	"SELECT count(*) FROM audit_log WHERE action = 'repo.create' AND details::text ~ '\"adopted\": ?true'" 2>/dev/null)" 0 \
	"no create adopted a directory"

# ---- a delete whose move fails unregisters nothing -------------------------------
api POST /api/repos/create "$ALICE" \
	'{"name":"keep","organization":"acme","type":"kernel","private":true,"files":[{"path":"keep.txt","content":"STILL HERE"}]}'
is "$STATUS" 200 "second private repo created"
# the trash becomes another filesystem: rename(2) into it fails (EXDEV)
mkdir -p "$REPOS/.trash"
mount --bind "$TEST_DIR/elsewhere" "$REPOS/.trash" || bail "cannot bind-mount the trash"
MOUNTS+=("$REPOS/.trash")
api DELETE /api/repos/delete "$ALICE" '{"name":"keep","organization":"acme","type":"kernel"}'
like "$STATUS" '^5[0-9][0-9]$' "delete answers 5xx when the directory cannot be moved"
api GET /kernels/acme/keep/resolve/main/keep.txt "$ALICE"
is "$STATUS/$(cat "$B")" "200/STILL HERE" "the repo is still registered and its owner reads it"
api GET /kernels/acme/keep/resolve/main/keep.txt ""
is "$(code)" "401/RepoNotFound" "and it is still private"
check "its directory is where it was" -- test -d "$REPOS/kernels/acme/keep.git"
umount "$REPOS/.trash" && unset 'MOUNTS[1]'
api DELETE /api/repos/delete "$ALICE" '{"name":"keep","organization":"acme","type":"kernel"}'
is "$STATUS" 200 "with the trash back on the repos' filesystem the delete succeeds"

done_testing
