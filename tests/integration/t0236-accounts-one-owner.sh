#!/bin/bash
# t0236-accounts-one-owner.sh -- account changes have one owner: outside
# accounts/ (and storage/ itself), nothing calls a storage function that
# writes users, orgs, memberships, tokens, trust or build workers, nor
# writes an account audit action of its own; every action accounts/ writes
# is in the one table of docs/operations.md ("Audit log"), and the old
# second vocabulary is gone. (The live half, the API, the web UI and the CLI
# writing the same entry for the same change: t0237.)
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

ABOVE="api http server farm mirror sync web common kernel builder-worker"
for fn in db_account_create db_membership_set db_token_create db_token_revoke db_trusted_publisher_set \
	db_account_copy_upstream_trust db_worker_create db_worker_set_scope db_worker_rotate db_worker_remove; do
	hits=$(grep -rn --include='*.[ch]' "\b$fn(" $ABOVE 2>/dev/null)
	is "$hits" "" "no $fn() outside storage/ and accounts/ (call accounts/accounts.h)"
done
check "the accounts layer calls storage's writers" -- grep -q 'db_membership_set(' accounts/accounts.c
check "accounts/ has one header" -- test "$(ls accounts/*.h)" = "accounts/accounts.h"
hits=$(grep -rn '#include.*\(microhttpd\.h\|"api/\|"http/\|"web/\|"server/\)' accounts 2>/dev/null)
is "$hits" "" "accounts/ sees no HTTP: no microhttpd.h, api/, http/, web/ or server/ header"
# the account actions are written by accounts/ only
ACTIONS='"\(user\|org\)\.create"\|"org\.member\|"token\.\(create\|revoke\)"\|"trust\.\|"trusted_publisher\.\|"worker\.\|worker\.%s'
hits=$(grep -rn --include='*.c' "$ACTIONS" $ABOVE storage 2>/dev/null)
is "$hits" "" "no account audit action written outside accounts/"
hits=$(grep -rn 'trusted_publisher\.grant\|trusted_publisher\.revoke\|org\.member_role' --include='*.[ch]' --exclude-dir=build-deb . 2>/dev/null)
is "$hits" "" "the second vocabulary (trusted_publisher.grant/revoke, org.member_role) is gone"
# every action accounts/ writes is documented, once, in the table
acts=$(grep -o '"\(user\|org\|token\|trust\)\.[a-z._]*"' accounts/accounts.c | tr -d '"' | sort -u)
for verb in add scope rotate remove; do acts+=$'\n'"worker.$verb"; done
grep -q 'worker_changed(who, "add"' accounts/accounts.c && grep -q 'worker\.%s' accounts/accounts.c
ok $? "workers' actions are worker.VERB"
for a in $acts; do
	n=$(grep -c "^| \`$a\` " docs/operations.md)
	is "$n" 1 "audit action $a has one row in docs/operations.md's table"
done
done_testing
