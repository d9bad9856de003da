/* refs_write.c -- create and delete branches and tags with compare-and-swap,
 * and resolve the revisions a client may start them from (abbreviated shas
 * included). Callers serialise writers with the repo's write lock; the
 * compare-and-swap catches writers that bypass it (git push). */
#include "storage/git/repo.h"

#include <errno.h>
#include <string.h>

static int is_hex(const char *s)
{
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')))
			return 0;
	return 1;
}

int repo_resolve_commitish(git_repository *repo, const char *rev, char sha[41])
{
	if (repo_resolve_revision(repo, rev, sha) == 0)
		return 0;
	size_t len = strlen(rev);
	if (len < 7 || len >= 40 || !is_hex(rev))
		return KHUB_ENOTFOUND;
	git_oid prefix;
	git_commit *commit = NULL;
	if (git_oid_fromstrn(&prefix, rev, len) < 0 || git_commit_lookup_prefix(&commit, repo, &prefix, len) < 0)
		return KHUB_ENOTFOUND;	/* absent, ambiguous or not a commit */
	git_oid_tostr(sha, 41, git_commit_id(commit));
	git_commit_free(commit);
	return 0;
}

/* A failed libgit2 ref lookup as ours: a missing or malformed name is
 * KHUB_ENOTFOUND, anything else (logged) KHUB_EIO. */
static int ref_lookup_failed(int rc, const char *what)
{
	if (rc == GIT_ENOTFOUND || rc == GIT_EINVALIDSPEC)
		return KHUB_ENOTFOUND;
	log_git_error("%s", what);
	return KHUB_EIO;
}

int repo_ref_read(git_repository *repo, const char *ref_name, char sha[41])
{
	git_oid oid;
	int rc = git_reference_name_to_id(&oid, repo, ref_name);
	if (rc < 0)
		return ref_lookup_failed(rc, "read ref");
	git_oid_tostr(sha, 41, &oid);
	return 0;
}

int repo_branch_set(git_repository *repo, const char *branch, const char *target_sha, int overwrite,
		    const char *log_message)
{
	char ref_name[REF_NAME_MAX + 16], old[41];
	snprintf(ref_name, sizeof(ref_name), "refs/heads/%s", branch);
	int rc = repo_ref_read(repo, ref_name, old);
	if (rc == 0 && !overwrite)
		return KHUB_EEXIST;
	if (rc < 0 && rc != KHUB_ENOTFOUND)
		return rc;
	if (rc == 0 && strcmp(old, target_sha) == 0)
		return 0;
	return repo_update_ref(repo, ref_name, rc == 0 ? old : NULL, target_sha, log_message);
}

int repo_delete_ref(git_repository *repo, const char *ref_name)
{
	git_reference *ref = NULL;
	int rc = git_reference_lookup(&ref, repo, ref_name);
	if (rc < 0)
		return ref_lookup_failed(rc, "look up ref");
	/* Fails with GIT_EMODIFIED when the ref moved since the lookup. */
	rc = git_reference_delete(ref);
	git_reference_free(ref);
	if (rc == GIT_EMODIFIED || rc == GIT_ELOCKED)
		return KHUB_ECONFLICT;
	if (rc == GIT_ENOTFOUND)
		return KHUB_ENOTFOUND;
	if (rc < 0) {
		log_git_error("delete ref");
		return KHUB_EIO;
	}
	return 0;
}

int repo_tag_create(git_repository *repo, const char *tag, const char *target_sha, const char *message,
		    const char *tagger_name, const char *tagger_email)
{
	git_oid target_oid, tag_oid;
	git_object *target = NULL;
	git_signature *tagger = NULL;
	int rc = KHUB_EIO;

	if (git_oid_fromstr(&target_oid, target_sha) < 0) {
		rc = KHUB_EINVAL;
		goto cleanup;
	}
	if (git_object_lookup(&target, repo, &target_oid, GIT_OBJECT_COMMIT) < 0) {
		rc = KHUB_ENOTFOUND;
		goto cleanup;
	}
	int grc;
	if (message) {
		if (git_signature_now(&tagger, tagger_name, tagger_email) < 0) {
			log_git_error("tagger signature");
			goto cleanup;
		}
		grc = git_tag_create(&tag_oid, repo, tag, target, tagger, message, 0);
	} else {
		grc = git_tag_create_lightweight(&tag_oid, repo, tag, target, 0);
	}
	if (grc == GIT_EEXISTS) {
		rc = KHUB_EEXIST;
		goto cleanup;
	}
	if (grc == GIT_EINVALIDSPEC) {
		rc = KHUB_EINVAL;
		goto cleanup;
	}
	if (grc < 0) {
		rc = khub_err_from_errno(errno);	/* libgit2 leaves the failed write's errno */
		log_git_error("create tag");
		goto cleanup;
	}
	rc = 0;
cleanup:
	git_signature_free(tagger);
	git_object_free(target);
	return rc;
}

int repo_commit_empty_root(git_repository *repo, const char *author_name, const char *author_email,
			   const char *summary, char commit_sha[41])
{
	struct commit_builder *cb = commit_builder_new(repo, NULL);
	if (!cb)
		return KHUB_EIO;
	int rc = commit_builder_write(cb, author_name, author_email, summary, NULL, commit_sha);
	commit_builder_free(cb);
	return rc;
}
