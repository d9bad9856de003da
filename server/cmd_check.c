/* cmd_check.c -- khub check lfs-pointers: find LFS pointers in repos'
 * history that name an object not linked to their repo (planted before
 * commits, imports and mirrors checked pointers, to read another repo's
 * object). The read path refuses them already; this reports them. */
#include "server/server.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum blob_kind { BLOB_PLAIN, BLOB_LINKED, BLOB_UNLINKED };

/* What a blob is, remembered per repo (hashmap values, owned by the map). */
struct blob_info {
	enum blob_kind kind;
	struct lfs_pointer ptr;		/* BLOB_UNLINKED */
};

struct pointer_scan {
	git_repository *git;
	struct lfs_store *lfs;
	int64_t repo_id;
	char repo[2 * REPO_NAME_MAX + 16];	/* "kernels/ns/name" */
	const char *ref;
	char commit[41];
	struct hashmap blobs;		/* blob sha → struct blob_info */
	struct hashmap clean_trees;	/* tree sha → non-NULL: holds no unlinked pointer */
	int fix;
	size_t commits, found;
	int failed;			/* a database or git error: the report is incomplete */
	int nrepos;
};

/* What the blob id is (remembered); NULL on a database error. */
static const struct blob_info *classify_blob(struct pointer_scan *ps, const git_oid *id)
{
	char sha[41];
	git_oid_tostr(sha, sizeof(sha), id);
	struct blob_info *info = hashmap_get(&ps->blobs, sha);
	if (info)
		return info;
	info = xcalloc(1, sizeof(*info));
	info->kind = BLOB_PLAIN;
	git_odb *odb = NULL;
	git_blob *blob = NULL;
	size_t size = 0;
	git_object_t type;
	/* only small blobs can be pointers: read the header first */
	if (git_repository_odb(&odb, ps->git) < 0 || git_odb_read_header(&size, &type, odb, id) < 0 ||
	    size >= LFS_POINTER_MAX || git_blob_lookup(&blob, ps->git, id) < 0)
		goto cleanup;
	if (lfs_pointer_parse(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), &info->ptr) < 0)
		goto cleanup;
	int linked = db_lfs_linked(ps->repo_id, info->ptr.oid);
	if (linked < 0) {
		free(info);
		info = NULL;
		goto cleanup;
	}
	info->kind = linked ? BLOB_LINKED : BLOB_UNLINKED;
cleanup:
	git_blob_free(blob);
	git_odb_free(odb);
	if (info)
		hashmap_put(&ps->blobs, sha, info);
	return info;
}

static void report(struct pointer_scan *ps, const char *path, const struct lfs_pointer *ptr)
{
	int stored = lfs_store_stat(ps->lfs, ptr->oid, NULL) == 0;
	ps->found++;
	printf("%s\t%s\t%s\t%s\t%s\t%s\n", ps->repo, ps->ref, ps->commit, path, ptr->oid,
	       stored ? "in-store" : "not-in-store");
	if (!ps->fix)
		return;
	json_t *details = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}", "ref", ps->ref, "commit", ps->commit, "path",
				    path, "oid", ptr->oid, "in_store", stored, "state",
				    "unreadable: not linked to this repo");
	char *text = json_dumps(details, JSON_COMPACT);
	if (db_audit(0, "cli", "lfs.unlinked_pointer", ps->repo, text, "local") < 0)
		ps->failed = 1;
	free(text);
	json_decref(details);
}

/* Report the unlinked pointers under tree (at prefix); returns how many. */
static size_t scan_tree(struct pointer_scan *ps, git_tree *tree, const char *prefix)
{
	char sha[41];
	git_oid_tostr(sha, sizeof(sha), git_tree_id(tree));
	if (hashmap_get(&ps->clean_trees, sha))
		return 0;
	size_t found = 0;
	int complete = 1;
	for (size_t i = 0; i < git_tree_entrycount(tree); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tree, i);
		char *path = prefix[0] ? xasprintf("%s/%s", prefix, git_tree_entry_name(e))
				       : xstrdup(git_tree_entry_name(e));
		if (git_tree_entry_type(e) == GIT_OBJECT_TREE) {
			git_tree *sub = NULL;
			if (git_tree_lookup(&sub, ps->git, git_tree_entry_id(e)) == 0)
				found += scan_tree(ps, sub, path);
			else
				complete = 0, ps->failed = 1;
			git_tree_free(sub);
		} else if (git_tree_entry_type(e) == GIT_OBJECT_BLOB) {
			const struct blob_info *info = classify_blob(ps, git_tree_entry_id(e));
			if (!info) {
				complete = 0, ps->failed = 1;
			} else if (info->kind == BLOB_UNLINKED) {
				report(ps, path, &info->ptr);
				found++;
			}
		}
		free(path);
	}
	if (!found && complete)
		hashmap_put(&ps->clean_trees, sha, ps);	/* any non-NULL value */
	return found;
}

/* Every commit reachable from refs->items[i] and from no earlier ref. */
static void scan_ref(struct pointer_scan *ps, const struct ref_list *refs, size_t i)
{
	git_revwalk *walk = NULL;
	git_oid oid;
	ps->ref = refs->items[i].ref;
	if (git_revwalk_new(&walk, ps->git) < 0 || git_oid_fromstr(&oid, refs->items[i].sha) < 0 ||
	    git_revwalk_push(walk, &oid) < 0) {
		fprintf(stderr, "khub check: %s %s: cannot walk the history\n", ps->repo, ps->ref);
		ps->failed = 1;
		goto cleanup;
	}
	for (size_t k = 0; k < i; k++)
		if (git_oid_fromstr(&oid, refs->items[k].sha) == 0)
			git_revwalk_hide(walk, &oid);
	while (git_revwalk_next(&oid, walk) == 0) {
		git_commit *commit = NULL;
		git_tree *tree = NULL;
		if (git_commit_lookup(&commit, ps->git, &oid) < 0 || git_commit_tree(&tree, commit) < 0) {
			ps->failed = 1;
		} else {
			git_oid_tostr(ps->commit, sizeof(ps->commit), &oid);
			ps->commits++;
			scan_tree(ps, tree, "");
		}
		git_tree_free(tree);
		git_commit_free(commit);
	}
cleanup:
	git_revwalk_free(walk);
}

static void scan_repo(struct pointer_scan *ps, enum repo_type type, const char *ns, const char *name)
{
	struct ref_list refs = { 0 };
	snprintf(ps->repo, sizeof(ps->repo), "%s/%s/%s", repo_type_plural(type), ns, name);
	if (repo_store_open(runtime_repo_root(), type, ns, name, &ps->git) < 0) {
		fprintf(stderr, "khub check: %s: cannot open the git repository\n", ps->repo);
		ps->failed = 1;
		return;
	}
	hashmap_init(&ps->blobs);
	hashmap_init(&ps->clean_trees);
	if (repo_list_refs(ps->git, &refs) < 0) {
		fprintf(stderr, "khub check: %s: cannot list the refs\n", ps->repo);
		ps->failed = 1;
		goto cleanup;
	}
	for (size_t i = 0; i < refs.count; i++)
		scan_ref(ps, &refs, i);
cleanup:
	ref_list_release(&refs);
	hashmap_release(&ps->blobs, free);
	hashmap_release(&ps->clean_trees, NULL);
	git_repository_free(ps->git);
	ps->git = NULL;
}

static int scan_one(const struct repo_record *rec, void *arg)
{
	struct pointer_scan *ps = arg;
	ps->repo_id = rec->id;
	ps->nrepos++;
	scan_repo(ps, rec->type, rec->ns, rec->name);
	return 0;
}

static int check_lfs_pointers(int fix)
{
	struct pointer_scan ps = { 0 };
	ps.fix = fix;
	ps.lfs = lfs_store_open(runtime_lfs_root());
	if (!ps.lfs) {
		fprintf(stderr, "khub check: cannot open the LFS store under %s\n", runtime_lfs_root());
		return 2;
	}
	printf("# repo\tref\tcommit\tpath\toid\tobject\n");
	if (db_repo_each(scan_one, &ps) < 0) {
		lfs_store_close(ps.lfs);
		fprintf(stderr, "khub check: database unavailable\n");
		return 2;
	}
	int nrepos = ps.nrepos;
	lfs_store_close(ps.lfs);
	fprintf(stderr, "khub check lfs-pointers: %d repos, %zu commits, %zu pointer%s to objects not linked to "
		"their repo%s%s\n", nrepos, ps.commits, ps.found, ps.found == 1 ? "" : "s",
		ps.found ? " (not served: reads require the link)" : "",
		ps.found && fix ? "; recorded in the audit log (lfs.unlinked_pointer), nothing unlinked" : "");
	if (ps.failed)
		fprintf(stderr, "khub check lfs-pointers: some repos could not be read completely (see above)\n");
	return ps.found ? 1 : ps.failed ? 2 : 0;
}

const char cmd_check_usage[] =
	"usage: khub check lfs-pointers [--fix]\n"
	"  report LFS pointers (every ref, every reachable commit) naming an object not linked\n"
	"  to their repo; exits 1 when any is found. --fix records each in the audit log\n"
	"  (they are unreadable already: reads require the link; nothing is unlinked)\n";

int cmd_check(int argc, char **argv)
{
	int fix = 0;
	const char *what = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--fix") == 0)
			fix = 1;
		else if (!what && argv[i][0] != '-')
			what = argv[i];
		else
			what = "";
	}
	if (!what || strcmp(what, "lfs-pointers") != 0) {
		fputs(cmd_check_usage, stderr);
		return 2;
	}
	runtime_open_database();
	int rc = check_lfs_pointers(fix);
	runtime_close_database();
	return rc;
}
