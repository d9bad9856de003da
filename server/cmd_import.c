/* cmd_import.c -- khub import: commit a local directory as a new commit on
 * a branch (creating the repo and branch if needed), storing big or binary
 * files as LFS the way the Hub does (a pointer text only to an object the
 * repo already has). Seeds a hub without the write API. */
#include "server/server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct import_state {
	git_repository *git;
	struct commit_builder *cb;
	struct lfs_store *lfs;
	const char *gitattributes;
	int64_t repo_id;
	size_t files, lfs_files;
	uint64_t bytes;
};

static int import_file(struct import_state *st, const char *full, const char *rel, const struct stat *sb)
{
	char head[8000];
	size_t head_len = 0;
	int fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "khub import: cannot read %s: %s\n", full, strerror(errno));
		return KHUB_EIO;
	}
	ssize_t n = read(fd, head, sizeof(head));
	close(fd);
	if (n < 0)
		return KHUB_EIO;
	head_len = (size_t)n;
	unsigned mode = (sb->st_mode & 0111) ? 0100755 : 0100644;
	st->files++;
	st->bytes += (uint64_t)sb->st_size;
	struct lfs_pointer ptr;
	if (lfs_pointer_parse(head, head_len, &ptr) == 0 && (uint64_t)sb->st_size == head_len) {
		/* a pointer text is committed as a pointer (as git-lfs does) only
		 * to an object this repo already has: else importing a 3-line
		 * file would hand this repo another repo's private object */
		char text[LFS_POINTER_MAX];
		uint64_t stored;
		int linked = db_lfs_linked(st->repo_id, ptr.oid);
		if (linked < 0)
			return linked;
		if (!linked || lfs_store_stat(st->lfs, ptr.oid, &stored) < 0 || stored != ptr.size) {
			fprintf(stderr, "khub import: %s is an LFS pointer to %s, an object this repo does not have: "
				"import the file's content instead\n", rel, ptr.oid);
			return KHUB_EPERM;
		}
		st->lfs_files++;
		return commit_builder_put_bytes(st->cb, rel, text, lfs_pointer_format(&ptr, text), mode);
	}
	if (lfs_should_store(st->gitattributes, rel, head, head_len, (uint64_t)sb->st_size)) {
		char text[LFS_POINTER_MAX];
		int rc = lfs_store_put_file(st->lfs, full, ptr.oid, &ptr.size);
		if (rc < 0)
			return rc;
		if ((rc = db_lfs_link(st->repo_id, ptr.oid)) < 0)
			return rc;
		size_t len = lfs_pointer_format(&ptr, text);
		st->lfs_files++;
		return commit_builder_put_bytes(st->cb, rel, text, len, mode);
	}
	git_oid oid;
	char hex[41];
	if (git_blob_create_from_disk(&oid, st->git, full) < 0) {
		fprintf(stderr, "khub import: cannot store %s\n", full);
		return KHUB_EIO;
	}
	git_oid_tostr(hex, sizeof(hex), &oid);
	return commit_builder_put_blob(st->cb, rel, hex, mode);
}

static int import_dir(struct import_state *st, const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "khub import: cannot open %s: %s\n", dir, strerror(errno));
		return KHUB_EIO;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 || strcmp(de->d_name, ".git") == 0)
			continue;
		char *full = xasprintf("%s/%s", dir, de->d_name);
		char *rel = prefix[0] ? xasprintf("%s/%s", prefix, de->d_name) : xstrdup(de->d_name);
		struct stat sb;
		const char *why;
		if (lstat(full, &sb) < 0) {
			rc = KHUB_EIO;
		} else if (S_ISDIR(sb.st_mode)) {
			rc = import_dir(st, full, rel);
		} else if (!S_ISREG(sb.st_mode)) {
			fprintf(stderr, "khub import: skipping %s (not a regular file)\n", rel);
		} else if (repo_path_validate(rel, &why) < 0) {
			fprintf(stderr, "khub import: %s: %s\n", rel, why);
			rc = KHUB_EINVAL;
		} else {
			rc = import_file(st, full, rel, &sb);
		}
		free(full);
		free(rel);
	}
	closedir(d);
	return rc;
}

static int lock_repo(int64_t repo_id, int lock)
{
	char id[24];
	snprintf(id, sizeof(id), "%" PRId64, repo_id);
	const char *params[1] = { id };
	PGresult *res = db_exec(lock ? "SELECT pg_advisory_lock(1, $1::int)" : "SELECT pg_advisory_unlock(1, $1::int)",
				1, params, NULL);
	if (!res)
		return KHUB_EDB;
	PQclear(res);
	return 0;
}

int cmd_import(int argc, char **argv)
{
	const char *dir = NULL, *repo_id = NULL, *type_name = "kernel", *branch = "main", *message = NULL;
	int private = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc)
			repo_id = argv[++i];
		else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc)
			type_name = argv[++i];
		else if (strcmp(argv[i], "--branch") == 0 && i + 1 < argc)
			branch = argv[++i];
		else if (strcmp(argv[i], "--message") == 0 && i + 1 < argc)
			message = argv[++i];
		else if (strcmp(argv[i], "--private") == 0)
			private = 1;
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else {
			fprintf(stderr, "khub import: unexpected argument %s\n", argv[i]);
			return 2;
		}
	}
	if (!dir || !repo_id) {
		fprintf(stderr, "usage: khub import DIR --repo NS/NAME [--type kernel] [--branch B] [--message M] [--private]\n");
		return 2;
	}
	enum repo_type type;
	const char *why;
	if (repo_type_parse(type_name, &type) < 0)
		fatal("unknown repo type '%s'", type_name);
	const char *slash = strchr(repo_id, '/');
	if (!slash)
		fatal("--repo must be NS/NAME");
	char *ns = xstrndup(repo_id, (size_t)(slash - repo_id));
	const char *name = slash + 1;
	if (repo_name_validate(ns, &why) < 0 || repo_name_validate(name, &why) < 0)
		fatal("invalid repo id '%s': %s", repo_id, why);
	if (ref_name_validate(branch, &why) < 0)
		fatal("invalid branch '%s': %s", branch, why);
	struct stat sb;
	if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
		fatal("%s is not a directory", dir);

	runtime_open_database();
	int rc = 0;
	struct account owner;
	if (db_account_get(ns, &owner) == KHUB_ENOTFOUND) {
		if (db_account_create(ACCOUNT_ORG, ns, ns, 0, NULL) < 0)
			fatal("cannot create org %s", ns);
		fprintf(stderr, "khub import: created org %s\n", ns);
		db_audit(0, "cli", "org.create", ns, NULL, "local");
	}
	struct repo_record rec;
	if (db_repo_get(type, ns, name, &rec) == KHUB_ENOTFOUND) {
		/* git first, then the row: a crash in between is repaired by the
		 * next import, which finds the directory and adds the row. */
		rc = repo_store_create(runtime_repo_root(), type, ns, name);
		if (rc < 0 && rc != KHUB_EEXIST)
			fatal("cannot create repository %s", repo_id);
		if (db_repo_insert(type, ns, name, private, &rec) < 0)
			fatal("cannot register repository %s", repo_id);
		db_audit(0, "cli", "repo.create", repo_id, NULL, "local");
	}
	struct import_state st = { 0 };
	st.repo_id = rec.id;
	if (repo_store_open(runtime_repo_root(), type, rec.ns, rec.name, &st.git) < 0)
		fatal("cannot open repository %s", repo_id);
	st.lfs = lfs_store_open(runtime_lfs_root());
	if (!st.lfs || lock_repo(rec.id, 1) < 0)
		fatal("cannot prepare the import");

	char ref[REF_NAME_MAX + 16], old_sha[41] = "", parent[41] = "";
	snprintf(ref, sizeof(ref), "refs/heads/%s", branch);
	if (repo_resolve_revision(st.git, ref, old_sha) == 0)
		memcpy(parent, old_sha, sizeof(parent));
	else
		repo_resolve_revision(st.git, "refs/heads/main", parent);

	/* Keep the parent's .gitattributes unless the directory brings one. */
	char *attributes = repo_read_text_file(st.git, parent, ".gitattributes", 1 << 20);
	char *local_attr = xasprintf("%s/.gitattributes", dir);
	size_t local_len;
	char *local_attributes = read_file_limited(local_attr, 1 << 20, &local_len);
	free(local_attr);
	st.gitattributes = local_attributes ? local_attributes : attributes ? attributes : repo_default_gitattributes;

	st.cb = commit_builder_new(st.git, parent[0] ? parent : NULL);
	if (!st.cb)
		fatal("cannot start a commit");
	/* The commit is the directory: start from an empty tree. */
	commit_builder_clear(st.cb);
	if (!local_attributes && attributes)
		rc = commit_builder_put_bytes(st.cb, ".gitattributes", attributes, strlen(attributes), 0100644);
	if (rc == 0)
		rc = import_dir(&st, dir, "");
	char sha[41];
	char *summary = message ? xstrdup(message) : xasprintf("Import %s", dir);
	if (rc == 0 && parent[0] && old_sha[0] && commit_builder_unchanged(st.cb)) {
		printf("%s\n", old_sha);
		fprintf(stderr, "khub import: %s@%s is already identical to %s\n", repo_id, branch, dir);
		goto done;
	}
	if (rc == 0)
		rc = commit_builder_write(st.cb, "khub import", "import@khub.local", summary, NULL, sha);
	if (rc == 0)
		rc = repo_update_ref(st.git, ref, old_sha[0] ? old_sha : NULL, sha, summary);
	if (rc < 0) {
		fprintf(stderr, "khub import: failed: %s\n", khub_strerror(rc));
		goto done;
	}
	db_repo_touch(rec.id);
	if (variant_index_update(rec.id, st.git, sha) < 0)
		fprintf(stderr, "khub import: warning: the variant index was not updated (it is rebuilt on read)\n");
	char *details = xasprintf("{\"branch\":\"%s\",\"commit\":\"%s\",\"files\":%zu}", branch, sha, st.files);
	db_audit(0, "cli", "repo.import", repo_id, details, "local");
	free(details);
	printf("%s\n", sha);
	fprintf(stderr, "khub import: %s@%s -> %s (%zu files, %zu as LFS, %" PRIu64 " bytes)\n", repo_id, branch,
		sha, st.files, st.lfs_files, st.bytes);
done:
	lock_repo(rec.id, 0);
	free(summary);
	free(attributes);
	free(local_attributes);
	commit_builder_free(st.cb);
	lfs_store_close(st.lfs);
	git_repository_free(st.git);
	free(ns);
	runtime_close_database();
	return rc < 0 ? 1 : 0;
}
