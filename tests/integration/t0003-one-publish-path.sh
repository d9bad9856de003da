#!/bin/bash
# t0003-one-publish-path.sh -- the tree keeps one publish path: outside
# storage/, nothing writes a commit, moves a ref to new content, touches a
# repo or updates the variant index except through storage/publish/publish.h (the
# after-move steps then run once, in one place, for every writer). A new
# writer that copies the sequence instead fails here.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

for fn in commit_builder_write repo_update_ref variant_index_update db_repo_touch quarantine_publish \
	lfs_writer_install; do
	# (the read side's repair of a commit written behind khub's back, a
	# background job in api/kernel_variants.c, indexes without publishing)
	hits=$(grep -rn --include='*.c' "\b$fn(" api http server farm mirror sync common 2>/dev/null |
		grep -v '^api/kernel_variants.c:.*variant_index_update(j->repo_id')
	is "$hits" "" "no $fn() outside storage/ (use storage/publish/publish.h)"
done
# The tree of a change is publish's: the LFS decision, pointers and the
# .gitattributes the Hub keeps are not taken above storage/ (preupload only
# tells a client what publish will do), nor is a commit staged there.
for fn in commit_builder_[a-z_]* lfs_pointer_format gitattributes_match_lfs publish_builder publish_git; do
	hits=$(grep -rn --include='*.c' "\b$fn(" api farm server mirror sync common web 2>/dev/null)
	is "$hits" "" "no ${fn%%\[*}() outside storage/ (hand publish_apply the operations)"
done
hits=$(grep -rln --include='*.c' '\blfs_should_store(' api farm server mirror sync common web 2>/dev/null | tr '\n' ' ')
is "$hits" "api/preupload.c " "the LFS decision is taken only by publish (and foretold by preupload)"
for f in storage/publish/publish.c storage/publish/publish.h; do
	check "$f exists" -- test -f "$f"
done
# (the mirror and air-gap sync through storage/publish/import.c: t0156)
users=$(grep -rln --include='*.c' 'publish_begin\|publish_refs_moved\|repo_import_move_ref' api http server farm mirror sync |
	sort | tr '\n' ' ')
like "$users" 'api/commit.c' "the commit API publishes through it"
like "$users" 'api/repos.c' "repo creation's files too"
like "$users" 'server/cmd_import.c' "khub import too"
like "$users" 'server/cmd_hook.c' "pushes run its after-move steps"
like "$users" 'mirror/pull' "the mirror too"
like "$users" 'sync/import_commit.c' "air-gap imports too"
like "$users" 'farm/build_publish.c' "the build farm's outputs too"
done_testing
