/* store_scan.c -- walks shared by khub fsck and khub gc: every LFS pointer
 * reachable from any ref of a repo (as khub check lfs-pointers walks them),
 * and every object file of the LFS store. */
#include "server/server.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

struct pointer_walk {
	git_repository *git;
	git_odb *odb;
	struct hashmap seen;	/* tree and blob shas already looked at → non-NULL */
	void (*fn)(const struct lfs_pointer *ptr, void *arg);
	void *arg;
	int incomplete;
};

/* 1 the first time sha is seen. */
static int first_time(struct pointer_walk *pw, const git_oid *id)
{
	char sha[41];
	git_oid_tostr(sha, sizeof(sha), id);
	if (hashmap_get(&pw->seen, sha))
		return 0;
	hashmap_put(&pw->seen, sha, pw);
	return 1;
}

static void walk_blob(struct pointer_walk *pw, const git_oid *id)
{
	size_t size = 0;
	git_object_t type;
	git_blob *blob = NULL;
	struct lfs_pointer ptr;
	/* only small blobs can be pointers: read the header first */
	if (git_odb_read_header(&size, &type, pw->odb, id) < 0) {
		pw->incomplete = 1;
		return;
	}
	if (size >= LFS_POINTER_MAX)
		return;
	if (git_blob_lookup(&blob, pw->git, id) < 0) {
		pw->incomplete = 1;
		return;
	}
	if (lfs_pointer_parse(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob), &ptr) == 0)
		pw->fn(&ptr, pw->arg);
	git_blob_free(blob);
}

static void walk_tree(struct pointer_walk *pw, const git_oid *tree_id)
{
	git_tree *tree = NULL;
	if (!first_time(pw, tree_id))
		return;
	if (git_tree_lookup(&tree, pw->git, tree_id) < 0) {
		pw->incomplete = 1;
		return;
	}
	for (size_t i = 0; i < git_tree_entrycount(tree); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tree, i);
		if (git_tree_entry_type(e) == GIT_OBJECT_TREE)
			walk_tree(pw, git_tree_entry_id(e));
		else if (git_tree_entry_type(e) == GIT_OBJECT_BLOB && first_time(pw, git_tree_entry_id(e)))
			walk_blob(pw, git_tree_entry_id(e));
	}
	git_tree_free(tree);
}

int store_scan_pointers(git_repository *git, void (*fn)(const struct lfs_pointer *ptr, void *arg), void *arg)
{
	struct pointer_walk pw = { .git = git, .fn = fn, .arg = arg };
	git_revwalk *walk = NULL;
	git_oid oid;
	hashmap_init(&pw.seen);
	if (git_repository_odb(&pw.odb, git) < 0 || git_revwalk_new(&walk, git) < 0) {
		pw.incomplete = 1;
		goto cleanup;
	}
	/* every ref naming a commit (directly or through a tag); an empty
	 * repo has none */
	if (git_revwalk_push_glob(walk, "refs/*") < 0) {
		pw.incomplete = 1;
		goto cleanup;
	}
	int rc;
	while ((rc = git_revwalk_next(&oid, walk)) == 0) {
		git_commit *commit = NULL;
		if (git_commit_lookup(&commit, git, &oid) < 0) {
			pw.incomplete = 1;
			continue;
		}
		walk_tree(&pw, git_commit_tree_id(commit));
		git_commit_free(commit);
	}
	if (rc != GIT_ITEROVER)
		pw.incomplete = 1;
cleanup:
	git_revwalk_free(walk);
	git_odb_free(pw.odb);
	hashmap_release(&pw.seen, NULL);
	return pw.incomplete ? KHUB_EIO : 0;
}

/* The entries of dir (not "." or ".."); NULL-terminated, the caller frees. */
static char **list_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0, cap = 16;
	char **names = xcalloc(cap + 1, sizeof(char *));
	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			names = xrealloc(names, (2 * cap + 1) * sizeof(char *));
			cap *= 2;
		}
		names[n++] = xstrdup(de->d_name);
		names[n] = NULL;
	}
	if (d)
		closedir(d);
	return names;
}

static void free_list(char **names)
{
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

int store_each_lfs_object(const char *lfs_root, int (*fn)(const char *oid, const char *path, void *arg),
			  void *arg)
{
	char *objects = xasprintf("%s/objects", lfs_root);
	char **l1 = list_dir(objects);
	int rc = 0;
	for (size_t i = 0; rc == 0 && l1[i]; i++) {
		char *d1 = xasprintf("%s/%s", objects, l1[i]);
		char **l2 = list_dir(d1);
		for (size_t j = 0; rc == 0 && l2[j]; j++) {
			char *d2 = xasprintf("%s/%s", d1, l2[j]);
			char **l3 = list_dir(d2);
			for (size_t k = 0; rc == 0 && l3[k]; k++) {
				char *path = xasprintf("%s/%s", d2, l3[k]);
				rc = fn(l3[k], path, arg);
				free(path);
			}
			free_list(l3);
			free(d2);
		}
		free_list(l2);
		free(d1);
	}
	free_list(l1);
	free(objects);
	return rc;
}

void store_each_repo_dir(const char *root,
			 void (*fn)(enum repo_type type, const char *ns, const char *name, const char *path, void *arg),
			 void *arg)
{
	for (int t = 0; t < REPO_TYPE_COUNT; t++) {
		char *type_dir = xasprintf("%s/%s", root, repo_type_plural((enum repo_type)t));
		DIR *d = opendir(type_dir);
		struct dirent *ns;
		while (d && (ns = readdir(d))) {
			if (ns->d_name[0] == '.')
				continue;
			char *ns_dir = xasprintf("%s/%s", type_dir, ns->d_name);
			DIR *nd = opendir(ns_dir);
			struct dirent *e;
			while (nd && (e = readdir(nd))) {
				if (e->d_name[0] == '.')
					continue;
				char *path = xasprintf("%s/%s", ns_dir, e->d_name);
				fn((enum repo_type)t, ns->d_name, e->d_name, path, arg);
				free(path);
			}
			if (nd)
				closedir(nd);
			free(ns_dir);
		}
		if (d)
			closedir(d);
		free(type_dir);
	}
}
