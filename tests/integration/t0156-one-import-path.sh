#!/bin/bash
# t0156-one-import-path.sh -- the tree keeps one import path: content that
# arrives from another hub (the mirror's pull, an air-gap bundle) comes in
# through storage's repo_import_* (storage/publish/import.c, declared in
# storage/publish/publish.h) and nowhere else. Outside storage/, nothing moves a ref
# to objects that arrived as a pack, brings a pack into a repo's objects,
# adopts staged LFS content, creates an empty store, registers a mirrored
# repo or copies an org's trust from a source. A second importer that
# copies the sequence instead fails here.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

outside="api server mirror sync common web kernel builder-worker"
# the low-level steps of an import, each a call only storage/ may make
for fn in publish_import_ref publish_import_unregistered_ref git_odb_refresh git_odb_write_pack \
	git_odb_add_disk_alternate git_odb_add_backend repo_store_init_empty lfs_store_adopt_hashed \
	db_repo_ensure_mirrored db_sync_register_repo db_account_copy_upstream_trust; do
	hits=$(grep -rn --include='*.c' --include='*.h' "\b$fn(" $outside 2>/dev/null)
	is "$hits" "" "no $fn() outside storage/ (use repo_import_* in storage/publish/publish.h)"
done
# a pack is renamed into a repo's objects/pack only by repo_import_add_pack
hits=$(grep -rn --include='*.c' 'objects/pack' $outside 2>/dev/null)
is "$hits" "" "no path into a repo's objects/pack outside storage/"
# the importers link LFS objects to a repo through the import too
hits=$(grep -rn --include='*.c' '\bdb_lfs_link(' mirror sync 2>/dev/null)
is "$hits" "" "the mirror and sync link LFS objects only through repo_import_add_lfs"

# inside storage/, the low-level ref import is called by import.c alone
# (publish.c defines it)
hits=$(grep -rln --include='*.c' '\bpublish_import_ref(\|\bpublish_import_unregistered_ref(' storage |
	grep -v '^storage/publish/publish.c$' | sort | tr '\n' ' ')
is "$hits" "storage/publish/import.c " "inside storage/, only import.c imports refs"

check "storage/publish/import.c exists" -- test -f storage/publish/import.c
check "repo_import_* is declared in storage/publish/publish.h" -- grep -q 'int repo_import_move_ref(' storage/publish/publish.h

# both importers use it, for every step they take
for step in repo_import_register repo_import_open repo_import_copy_trust repo_import_add_lfs repo_import_move_ref; do
	like "$(grep -rln --include='*.c' "\b$step(" mirror | sort | tr '\n' ' ')" 'mirror/' "the mirror's pull uses $step"
	like "$(grep -rln --include='*.c' "\b$step(" sync | sort | tr '\n' ' ')" 'sync/import' "air-gap import uses $step"
done
like "$(grep -rln --include='*.c' '\brepo_import_add_pack(' sync)" 'sync/import_apply.c' \
	"air-gap import moves its staged packs in through repo_import_add_pack"
like "$(grep -rln --include='*.c' '\brepo_import_set_fresh_ref(' sync)" 'sync/import_apply.c' \
	"air-gap import sets the refs of a repo new here through repo_import_set_fresh_ref"
done_testing
