/* import.c -- the one importer of content that arrived from another hub
 * (see repo.h): the mirror's pull and air-gap sync register a mirrored
 * repo, open its store, copy its org's trust flag, bring in packs and LFS
 * objects, and move its refs through here, so the after-move steps and
 * the audit entry run the same way for both. */
#include "storage/git/repo.h"
#include "storage/db/db.h"
#include "storage/lfs/lfs.h"
#include "storage/publish/publish.h"

#include <git2/sys/odb_backend.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int repo_import_register(enum repo_type type, const char *ns, const char *name, int private_, struct repo_record *out)
{
	/* the org and the repo made when new (marked as made by an import, so
	 * a later import may change them; a race with another maker is no
	 * error), then an existing repo marked mirrored */
	int rc = db_sync_register_repo(type, ns, name, private_);
	if (rc == 0)
		rc = db_repo_ensure_mirrored(type, ns, name, out);
	return rc;
}

int repo_import_open(const char *root, enum repo_type type, const char *ns, const char *name, int fresh,
		     git_repository **out, char **quarantined)
{
	*out = NULL;
	if (quarantined)
		*quarantined = NULL;
	/* empty, never the Hub's initial commit: the source's history exactly;
	 * for a repo new here, never a directory found at its place */
	int rc = fresh ? repo_store_init_empty_fresh(root, type, ns, name, quarantined)
		       : repo_store_init_empty(root, type, ns, name);
	if (rc < 0 && rc != KHUB_EEXIST)
		return rc;
	return repo_store_open(root, type, ns, name, out);
}

int repo_import_copy_trust(const char *ns, int trusted)
{
	return db_account_copy_upstream_trust(ns, trusted);
}

int repo_import_open_with_pack(const char *root, enum repo_type type, const char *ns, const char *name, int exists,
			       const char *staged, git_repository **out)
{
	git_odb *odb = NULL;
	git_odb_backend *pack = NULL;
	int rc = exists ? repo_store_open(root, type, ns, name, out)
			: git_odb_new(&odb) < 0 || git_repository_wrap_odb(out, odb) < 0 ? KHUB_EIO : 0;
	git_odb_free(odb);
	odb = NULL;
	char *idx = staged ? xasprintf("%s.idx", staged) : NULL;
	if (rc == 0 && idx &&
	    (git_odb_backend_one_pack(&pack, idx) < 0 || git_repository_odb(&odb, *out) < 0 ||
	     git_odb_add_backend(odb, pack, 1) < 0)) {
		if (pack)
			pack->free(pack);
		rc = KHUB_EIO;
	}
	git_odb_free(odb);
	free(idx);
	if (rc < 0 && *out) {
		git_repository_free(*out);
		*out = NULL;
	}
	return rc;
}

int repo_import_add_pack(git_repository *git, const char *staged)
{
	const char *base = strrchr(staged, '/');
	base = base ? base + 1 : staged;
	char *objdir = xasprintf("%sobjects/pack", git_repository_path(git));
	const char *ext[2] = { ".pack", ".idx" };	/* the .idx last: git reads a pack through it */
	int rc = 0, err = 0;
	for (int k = 0; k < 2 && rc == 0; k++) {
		char *from = xasprintf("%s%s", staged, ext[k]), *to = xasprintf("%s/%s%s", objdir, base, ext[k]);
		if (mkdir_p(objdir, 0755) < 0 || rename(from, to) < 0) {
			err = errno;
			rc = KHUB_EIO;
		}
		free(from);
		free(to);
	}
	fsync_dir(objdir);
	free(objdir);
	git_odb *odb = NULL;
	if (rc == 0 && git_repository_odb(&odb, git) == 0)
		git_odb_refresh(odb);	/* this handle sees the new pack */
	git_odb_free(odb);
	errno = err;
	return rc;
}

int repo_import_add_lfs(struct lfs_store *lfs, int64_t repo_id, const char *staged, const char *oid)
{
	int rc = staged ? lfs_store_adopt_hashed(lfs, staged, oid) : 0;
	if (rc == 0 && repo_id > 0 && db_lfs_link(repo_id, oid) < 0)
		rc = KHUB_EDB;
	return rc;
}

/* The commit new_sha names (itself, or the commit an annotated tag names),
 * for indexing; "" when it names none. */
static void peel_to_commit(git_repository *git, const char *new_sha, char commit[41])
{
	git_oid oid;
	git_object *obj = NULL, *c = NULL;
	commit[0] = '\0';
	if (new_sha && new_sha[0] && git_oid_fromstr(&oid, new_sha) == 0 &&
	    git_object_lookup(&obj, git, &oid, GIT_OBJECT_ANY) == 0 && git_object_peel(&c, obj, GIT_OBJECT_COMMIT) == 0)
		git_oid_tostr(commit, 41, git_object_id(c));
	git_object_free(c);
	git_object_free(obj);
}

void repo_import_refs_moved(int64_t repo_id, git_repository *git, const char *new_sha,
			    const struct publish_actor *who, const char *action, const char *target, const char *details)
{
	char commit[41];
	peel_to_commit(git, new_sha, commit);
	publish_refs_moved(repo_id, git, commit[0] ? commit : NULL,
			   new_sha && new_sha[0] ? PUBLISH_NEW_COMMIT : PUBLISH_REFS_CHANGED, who, action, target,
			   details);
}

int repo_import_move_ref(int64_t repo_id, git_repository *git, const struct repo_import_ref *ref,
			 const struct publish_actor *who, const char *action, const char *target, const char *details)
{
	const char *new_sha = ref->new_sha && ref->new_sha[0] ? ref->new_sha : NULL;
	const char *old = ref->expected_old && ref->expected_old[0] ? ref->expected_old : NULL;
	int rc = publish_import_ref(repo_id, git, ref->name, old, new_sha, ref->log_message);
	if (rc == 0)
		repo_import_refs_moved(repo_id, git, new_sha, who, action, target, details);
	return rc;
}

int repo_import_set_fresh_ref(git_repository *git, const struct repo_import_ref *ref)
{
	const char *old = ref->expected_old && ref->expected_old[0] ? ref->expected_old : NULL;
	return publish_import_unregistered_ref(git, ref->name, old, ref->new_sha, ref->log_message);
}
