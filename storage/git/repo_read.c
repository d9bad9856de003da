/* repo_read.c -- read refs, trees and blobs of a bare repo, describing LFS
 * pointer files the way the Hub does (tree oid = pointer blob sha1, size and
 * lfs.oid = the content's). */
#include "storage/git/repo.h"
#include "storage/lfs/lfs.h"

#include <stdlib.h>
#include <string.h>

static void oid_hex(const git_oid *oid, char out[41])
{
	git_oid_tostr(out, 41, oid);
}

static int add_ref(git_reference *ref, struct ref_list *list, size_t *alloc)
{
	const char *full = git_reference_name(ref);
	enum ref_kind kind;
	const char *short_name;
	if (strncmp(full, "refs/heads/", 11) == 0)
		kind = REF_BRANCH, short_name = full + 11;
	else if (strncmp(full, "refs/tags/", 10) == 0)
		kind = REF_TAG, short_name = full + 10;
	else if (strncmp(full, "refs/pr/", 8) == 0)
		kind = REF_PR, short_name = full + 8;
	else if (strncmp(full, "refs/convert/", 13) == 0)
		kind = REF_CONVERT, short_name = full + 13;
	else
		return 0;
	git_object *target = NULL;
	if (git_reference_peel(&target, ref, GIT_OBJECT_COMMIT) < 0)
		return 0;	/* a ref to a non-commit is not shown */
	if (list->count == *alloc) {
		*alloc = *alloc ? *alloc * 2 : 16;
		list->items = xrealloc(list->items, *alloc * sizeof(*list->items));
	}
	struct ref_item *item = &list->items[list->count++];
	item->kind = kind;
	item->name = xstrdup(short_name);
	item->ref = xstrdup(full);
	oid_hex(git_object_id(target), item->sha);
	git_object_free(target);
	return 0;
}

int repo_list_refs(git_repository *repo, struct ref_list *out)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	size_t alloc = 0;
	out->items = NULL;
	out->count = 0;
	if (git_reference_iterator_new(&it, repo) < 0)
		return KHUB_EIO;
	while (git_reference_next(&ref, it) == 0) {
		add_ref(ref, out, &alloc);
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	return 0;
}

void ref_list_release(struct ref_list *list)
{
	for (size_t i = 0; i < list->count; i++) {
		free(list->items[i].name);
		free(list->items[i].ref);
	}
	free(list->items);
	list->items = NULL;
	list->count = 0;
}

static int peel_ref_to_commit(git_repository *repo, const char *full, char sha[41])
{
	git_reference *ref = NULL;
	git_object *obj = NULL;
	int rc = KHUB_ENOTFOUND;
	if (git_reference_lookup(&ref, repo, full) < 0)
		goto cleanup;
	if (git_reference_peel(&obj, ref, GIT_OBJECT_COMMIT) < 0)
		goto cleanup;
	oid_hex(git_object_id(obj), sha);
	rc = 0;
cleanup:
	git_object_free(obj);
	git_reference_free(ref);
	return rc;
}

int repo_resolve_revision(git_repository *repo, const char *rev, char sha[41])
{
	size_t len = strlen(rev);
	if (len == 0 || len > REF_NAME_MAX + 11)
		return KHUB_ENOTFOUND;
	if (is_lower_hex(rev, 40)) {
		git_oid oid;
		git_commit *commit = NULL;
		if (git_oid_fromstr(&oid, rev) < 0 || git_commit_lookup(&commit, repo, &oid) < 0)
			return KHUB_ENOTFOUND;
		git_commit_free(commit);
		memcpy(sha, rev, 41);
		return 0;
	}
	if (strncmp(rev, "refs/", 5) == 0)
		return peel_ref_to_commit(repo, rev, sha);
	if (ref_name_validate(rev, NULL) < 0)
		return KHUB_ENOTFOUND;
	char full[REF_NAME_MAX + 16];
	snprintf(full, sizeof(full), "refs/heads/%s", rev);
	if (peel_ref_to_commit(repo, full, sha) == 0)
		return 0;
	snprintf(full, sizeof(full), "refs/tags/%s", rev);
	return peel_ref_to_commit(repo, full, sha);
}

/* Fill size and LFS fields of a blob entry. */
static int describe_blob(git_repository *repo, const git_oid *oid, struct tree_entry *e)
{
	git_odb *odb = NULL;
	size_t size = 0;
	git_object_t type;
	int rc = KHUB_EIO;
	if (git_repository_odb(&odb, repo) < 0)
		return KHUB_EIO;
	if (git_odb_read_header(&size, &type, odb, oid) < 0)
		goto cleanup;
	e->size = size;
	if (size > 0 && size < LFS_POINTER_MAX) {
		git_blob *blob = NULL;
		if (git_blob_lookup(&blob, repo, oid) < 0)
			goto cleanup;
		struct lfs_pointer ptr;
		if (lfs_pointer_parse(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), &ptr) == 0) {
			e->is_lfs = 1;
			memcpy(e->lfs_oid, ptr.oid, 65);
			e->pointer_size = size;
			e->size = ptr.size;
		}
		git_blob_free(blob);
	}
	rc = 0;
cleanup:
	git_odb_free(odb);
	return rc;
}

static int fill_entry(git_repository *repo, const git_tree_entry *te, const char *path,
		      struct tree_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->path = xstrdup(path);
	e->mode = (unsigned)git_tree_entry_filemode(te);
	oid_hex(git_tree_entry_id(te), e->oid);
	git_object_t type = git_tree_entry_type(te);
	if (type == GIT_OBJECT_TREE) {
		e->is_dir = 1;
		return 0;
	}
	if (type != GIT_OBJECT_BLOB)	/* submodule commits: shown as 0-byte files */
		return 0;
	return describe_blob(repo, git_tree_entry_id(te), e);
}

static void listing_push(struct tree_listing *l, size_t *alloc, struct tree_entry *e)
{
	if (l->count == *alloc) {
		*alloc = *alloc ? *alloc * 2 : 32;
		l->entries = xrealloc(l->entries, *alloc * sizeof(*l->entries));
	}
	l->entries[l->count++] = *e;
}

/* One page of a listing: entries after the path `after` (in listing
 * order), at most limit of them; more is set when one was left out. */
struct list_page {
	size_t limit;
	int more;
};

static int list_entry(git_repository *repo, const git_tree_entry *te, const char *path, int recursive,
		      const char *after, struct tree_listing *out, size_t *alloc, struct list_page *pg, int emit);

/* List tree (at prefix) in git order, a directory's children right after
 * it. after: the part of the cursor path inside this tree (NULL: list all);
 * entries up to it were on earlier pages, so the walk goes straight to it
 * (a page costs its own size and the depth, not the repo's size). */
static int list_dir(git_repository *repo, git_tree *tree, const char *prefix, int recursive, const char *after,
		    struct tree_listing *out, size_t *alloc, struct list_page *pg)
{
	size_t n = git_tree_entrycount(tree), i = 0;
	if (after) {
		const char *slash = strchr(after, '/');
		size_t comp_len = slash ? (size_t)(slash - after) : strlen(after);
		char *comp = xstrndup(after, comp_len);
		const git_tree_entry *at = git_tree_entry_byname(tree, comp);
		free(comp);
		if (!at)
			return KHUB_EINVAL;	/* not a path of this listing */
		for (i = 0; i < n && git_tree_entry_byindex(tree, i) != at; i++)
			;
		char *path = prefix[0] ? xasprintf("%s/%s", prefix, git_tree_entry_name(at))
				       : xstrdup(git_tree_entry_name(at));
		/* the cursor's own entry was listed: only its children may remain */
		int rc = list_entry(repo, at, path, recursive, slash ? slash + 1 : NULL, out, alloc, pg, 0);
		free(path);
		if (rc < 0 || pg->more)
			return rc;
		i++;
	}
	for (; i < n; i++) {
		const git_tree_entry *te = git_tree_entry_byindex(tree, i);
		char *path = prefix[0] ? xasprintf("%s/%s", prefix, git_tree_entry_name(te))
				       : xstrdup(git_tree_entry_name(te));
		int rc = list_entry(repo, te, path, recursive, NULL, out, alloc, pg, 1);
		free(path);
		if (rc < 0 || pg->more)
			return rc;
	}
	return 0;
}

static int list_entry(git_repository *repo, const git_tree_entry *te, const char *path, int recursive,
		      const char *after, struct tree_listing *out, size_t *alloc, struct list_page *pg, int emit)
{
	int is_dir = git_tree_entry_type(te) == GIT_OBJECT_TREE;
	if (emit) {
		if (out->count == pg->limit) {
			pg->more = 1;
			return 0;
		}
		struct tree_entry e;
		int rc = fill_entry(repo, te, path, &e);
		if (rc < 0) {
			tree_entry_release(&e);
			return rc;
		}
		listing_push(out, alloc, &e);
	} else if (after && !is_dir) {
		return KHUB_EINVAL;	/* the cursor goes below a file */
	}
	if (!is_dir || (!recursive && !after))
		return 0;
	if (!recursive)
		return KHUB_EINVAL;	/* a flat listing's cursor has one component */
	git_tree *sub = NULL;
	if (git_tree_lookup(&sub, repo, git_tree_entry_id(te)) < 0)
		return KHUB_EIO;
	int rc = list_dir(repo, sub, path, recursive, after, out, alloc, pg);
	git_tree_free(sub);
	return rc;
}

static int commit_tree(git_repository *repo, const char *commit_sha, git_tree **tree)
{
	git_oid oid;
	git_commit *commit = NULL;
	if (git_oid_fromstr(&oid, commit_sha) < 0 || git_commit_lookup(&commit, repo, &oid) < 0)
		return KHUB_ENOTFOUND;
	int rc = git_commit_tree(tree, commit) < 0 ? KHUB_EIO : 0;
	git_commit_free(commit);
	return rc;
}

int repo_list_tree(git_repository *repo, const char *commit_sha, const char *path, int recursive,
		   struct tree_listing *out)
{
	return repo_list_tree_page(repo, commit_sha, path, recursive, NULL, SIZE_MAX, out, NULL);
}

int repo_list_tree_page(git_repository *repo, const char *commit_sha, const char *path, int recursive,
			const char *after, size_t limit, struct tree_listing *out, int *more)
{
	struct list_page pg = { limit, 0 };
	if (after && !after[0])
		after = NULL;
	git_tree *root = NULL, *dir = NULL;
	git_tree_entry *te = NULL;
	size_t alloc = 0;
	int rc;

	out->entries = NULL;
	out->count = 0;
	if ((rc = commit_tree(repo, commit_sha, &root)) < 0)
		return rc;
	if (path[0] == '\0') {
		rc = list_dir(repo, root, "", recursive, after, out, &alloc, &pg);
		goto cleanup;
	}
	if (git_tree_entry_bypath(&te, root, path) < 0) {
		rc = KHUB_ENOTFOUND;
		goto cleanup;
	}
	if (git_tree_entry_type(te) != GIT_OBJECT_TREE) {
		rc = KHUB_ENOTDIR;
		goto cleanup;
	}
	if (git_tree_lookup(&dir, repo, git_tree_entry_id(te)) < 0) {
		rc = KHUB_EIO;
		goto cleanup;
	}
	rc = list_dir(repo, dir, path, recursive, after, out, &alloc, &pg);
cleanup:
	if (more)
		*more = pg.more;
	if (rc < 0)
		tree_listing_release(out);
	git_tree_entry_free(te);
	git_tree_free(dir);
	git_tree_free(root);
	return rc;
}

void tree_entry_release(struct tree_entry *entry)
{
	free(entry->path);
	entry->path = NULL;
}

void tree_listing_release(struct tree_listing *listing)
{
	for (size_t i = 0; i < listing->count; i++)
		tree_entry_release(&listing->entries[i]);
	free(listing->entries);
	listing->entries = NULL;
	listing->count = 0;
}

int repo_stat_path(git_repository *repo, const char *commit_sha, const char *path,
		   struct tree_entry *out)
{
	git_tree *root = NULL;
	git_tree_entry *te = NULL;
	int rc;
	memset(out, 0, sizeof(*out));
	if ((rc = commit_tree(repo, commit_sha, &root)) < 0)
		return rc;
	if (path[0] == '\0' || git_tree_entry_bypath(&te, root, path) < 0) {
		rc = KHUB_ENOTFOUND;
		goto cleanup;
	}
	rc = fill_entry(repo, te, path, out);
	if (rc < 0)
		tree_entry_release(out);
cleanup:
	git_tree_entry_free(te);
	git_tree_free(root);
	return rc;
}

int repo_read_blob(git_repository *repo, const char *blob_sha, size_t limit, char **data,
		   size_t *len)
{
	git_oid oid;
	git_blob *blob = NULL;
	if (git_oid_fromstr(&oid, blob_sha) < 0 || git_blob_lookup(&blob, repo, &oid) < 0)
		return KHUB_ENOTFOUND;
	size_t size = (size_t)git_blob_rawsize(blob);
	if (size > limit) {
		git_blob_free(blob);
		return KHUB_ETOOBIG;
	}
	*data = xmalloc(size + 1);
	memcpy(*data, git_blob_rawcontent(blob), size);
	(*data)[size] = '\0';
	*len = size;
	git_blob_free(blob);
	return 0;
}

char *repo_read_text_file(git_repository *repo, const char *commit_sha, const char *path, size_t limit)
{
	struct tree_entry e;
	char *text = NULL;
	size_t len;
	if (commit_sha[0] && repo_stat_path(repo, commit_sha, path, &e) == 0) {
		if (!e.is_dir && !e.is_lfs)
			repo_read_blob(repo, e.oid, limit, &text, &len);
		tree_entry_release(&e);
	}
	return text;
}

/* rev and then, longest first, rev joined with the leading components of
 * path: a name that is too long or not a ref name is never looked up. */
int repo_resolve_rev_path(git_repository *repo, const char *rev, const char *path, char **ref, const char **rest,
			  char sha[41])
{
	size_t rlen = strlen(rev), end = path ? strlen(path) : 0;
	while (end > 0) {
		if (rlen + 1 + end <= REF_NAME_MAX) {
			char *candidate = xasprintf("%s/%.*s", rev, (int)end, path);
			if (repo_resolve_revision(repo, candidate, sha) == 0) {
				*ref = candidate;
				*rest = path + end + (path[end] == '/');
				return 0;
			}
			free(candidate);
		}
		do
			end--;
		while (end > 0 && path[end] != '/');
	}
	if (repo_resolve_revision(repo, rev, sha) < 0)
		return KHUB_ENOTFOUND;
	*ref = xstrdup(rev);
	*rest = path ? path : "";
	return 0;
}
