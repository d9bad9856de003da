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
	struct publication *pub;
	size_t files, lfs_files;
	uint64_t bytes;
};

static int import_file(struct import_state *st, const char *full, const char *rel, const struct stat *sb)
{
	unsigned mode = (sb->st_mode & 0111) ? 0100755 : 0100644;
	int as_lfs = 0;
	st->files++;
	st->bytes += (uint64_t)sb->st_size;
	int rc = publish_put_file(st->pub, rel, full, mode, &as_lfs);
	if (rc == KHUB_EPERM) {
		/* a pointer text is committed as a pointer (as git-lfs does) only
		 * to an object this repo already has: else importing a 3-line
		 * file would hand this repo another repo's private object */
		size_t len;
		char *text = read_file_limited(full, LFS_POINTER_MAX, &len);
		struct lfs_pointer ptr;
		fprintf(stderr, "khub import: %s is an LFS pointer to %s, an object this repo does not have: "
			"import the file's content instead\n", rel,
			text && lfs_pointer_parse(text, len, &ptr) == 0 ? ptr.oid : "an object");
		free(text);
	} else if (rc < 0)
		fprintf(stderr, "khub import: cannot store %s: %s\n", rel, khub_strerror(rc));
	st->lfs_files += as_lfs;
	return rc;
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

struct import_args {
	const char *dir, *repo_id, *type_name, *branch, *message;
	int private;
};

/* 0, or 2 after a usage message. */
static int parse_args(int argc, char **argv, struct import_args *a)
{
	*a = (struct import_args){ NULL, NULL, "kernel", "main", NULL, 0 };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc)
			a->repo_id = argv[++i];
		else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc)
			a->type_name = argv[++i];
		else if (strcmp(argv[i], "--branch") == 0 && i + 1 < argc)
			a->branch = argv[++i];
		else if (strcmp(argv[i], "--message") == 0 && i + 1 < argc)
			a->message = argv[++i];
		else if (strcmp(argv[i], "--private") == 0)
			a->private = 1;
		else if (argv[i][0] != '-' && !a->dir)
			a->dir = argv[i];
		else {
			fprintf(stderr, "khub import: unexpected argument %s\n", argv[i]);
			return 2;
		}
	}
	if (!a->dir || !a->repo_id) {
		fprintf(stderr, "usage: khub import DIR --repo NS/NAME [--type kernel] [--branch B] [--message M] [--private]\n");
		return 2;
	}
	return 0;
}

/* The type, namespace (caller frees) and name, or fatal. */
static char *check_args(const struct import_args *a, enum repo_type *type, const char **name)
{
	const char *why;
	if (repo_type_parse(a->type_name, type) < 0)
		fatal("unknown repo type '%s'", a->type_name);
	const char *slash = strchr(a->repo_id, '/');
	if (!slash)
		fatal("--repo must be NS/NAME");
	char *ns = xstrndup(a->repo_id, (size_t)(slash - a->repo_id));
	*name = slash + 1;
	if (repo_name_validate(ns, &why) < 0 || repo_name_validate(*name, &why) < 0)
		fatal("invalid repo id '%s': %s", a->repo_id, why);
	if (ref_name_validate(a->branch, &why) < 0)
		fatal("invalid branch '%s': %s", a->branch, why);
	struct stat sb;
	if (stat(a->dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
		fatal("%s is not a directory", a->dir);
	return ns;
}

/* The org and the repo, made when missing; or fatal. */
static void ensure_repo(const struct import_args *a, enum repo_type type, const char *ns, const char *name,
			struct repo_record *rec)
{
	struct account owner;
	if (db_account_get(ns, &owner) == KHUB_ENOTFOUND) {
		if (db_account_create(ACCOUNT_ORG, ns, ns, 0, NULL) < 0)
			fatal("cannot create org %s", ns);
		fprintf(stderr, "khub import: created org %s\n", ns);
		db_audit(0, "cli", "org.create", ns, NULL, "local");
	}
	if (db_repo_get(type, ns, name, rec) != KHUB_ENOTFOUND)
		return;
	/* git first, then the row: a crash in between is repaired by the
	 * next import, which finds the directory and adds the row. */
	int rc = repo_store_create(runtime_repo_root(), type, ns, name);
	if (rc < 0 && rc != KHUB_EEXIST)
		fatal("cannot create repository %s", a->repo_id);
	if (db_repo_insert(type, ns, name, a->private, rec) < 0)
		fatal("cannot register repository %s", a->repo_id);
	db_audit(0, "cli", "repo.create", a->repo_id, NULL, "local");
}

/* An import of sources with build.toml queues builds, as a push does. */
static void builds_from_config(void)
{
	api_ctx.builds.variants_file = config.build_variants;
	api_ctx.builds.max_attempts = config.build_max_attempts;
	api_ctx.builds.queue_per_repo = config.build_queue_per_repo;
	api_ctx.builds.queue_per_user = config.build_queue_per_user;
	api_ctx.builds.variants_per_request = config.build_variants_per_request;
	api_ctx.builds.worker_live_seconds = config.build_worker_live_seconds;
	api_ctx.builds.plan_python = config.build_plan_python;
	api_ctx.builds.plan_wall_ms = config.build_plan_wall_ms;
	publish_set_on_new_commit(builds_on_new_commit);
}

/* The commit is the directory: start from an empty tree, keeping the
 * parent's .gitattributes unless the directory brings one (which then
 * decides what is LFS); then every file of dir. */
static int stage_directory(struct import_state *st, const char *dir, const char *parent)
{
	int rc = 0;
	if (publish_tree(st->pub, parent[0] ? parent : NULL, 1) < 0)
		fatal("cannot start a commit");
	char *attributes = repo_read_text_file(publish_git(st->pub), parent, ".gitattributes", 1 << 20);
	char *local_attr = xasprintf("%s/.gitattributes", dir);
	size_t local_len;
	char *local_attributes = read_file_limited(local_attr, 1 << 20, &local_len);
	free(local_attr);
	publish_set_gitattributes(st->pub, local_attributes ? local_attributes
						    : attributes ? attributes : repo_default_gitattributes);
	if (!local_attributes && attributes)
		rc = publish_put_bytes(st->pub, ".gitattributes", attributes, strlen(attributes), 0100644, NULL);
	if (rc == 0)
		rc = import_dir(st, dir, "");
	free(attributes);
	free(local_attributes);
	return rc;
}

int cmd_import(int argc, char **argv)
{
	struct import_args a;
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc;
	enum repo_type type;
	const char *name;
	char *ns = check_args(&a, &type, &name);

	runtime_open_database();
	struct repo_record rec;
	ensure_repo(&a, type, ns, name, &rec);
	struct import_state st = { 0 };
	builds_from_config();
	struct lfs_store *lfs = lfs_store_open(runtime_lfs_root());
	struct publish_actor who = { 0, "khub import", "import@khub.local", "local" };
	char *details = NULL, *summary = NULL;
	if (!lfs || publish_begin(runtime_repo_root(), lfs, &rec, &st.pub) < 0 || publish_lock(st.pub) < 0)
		fatal("cannot prepare the import");
	git_repository *git = publish_git(st.pub);

	char ref[REF_NAME_MAX + 16], old_sha[41] = "", parent[41] = "";
	snprintf(ref, sizeof(ref), "refs/heads/%s", a.branch);
	if (repo_resolve_revision(git, ref, old_sha) == 0)
		memcpy(parent, old_sha, sizeof(parent));
	else
		repo_resolve_revision(git, "refs/heads/main", parent);
	rc = stage_directory(&st, a.dir, parent);
	char sha[41];
	summary = a.message ? xstrdup(a.message) : xasprintf("Import %s", a.dir);
	if (rc == 0 && parent[0] && old_sha[0] && publish_unchanged(st.pub)) {
		printf("%s\n", old_sha);
		fprintf(stderr, "khub import: %s@%s is already identical to %s\n", a.repo_id, a.branch, a.dir);
		goto done;
	}
	if (rc == 0)
		rc = publish_commit(st.pub, &who, summary, NULL, ref, old_sha[0] ? old_sha : NULL, sha);
	if (rc < 0) {
		fprintf(stderr, "khub import: failed: %s\n", khub_strerror(rc));
		goto done;
	}
	details = xasprintf("{\"branch\":\"%s\",\"commit\":\"%s\",\"files\":%zu}", a.branch, sha, st.files);
	printf("%s\n", sha);
	fprintf(stderr, "khub import: %s@%s -> %s (%zu files, %zu as LFS, %" PRIu64 " bytes)\n", a.repo_id, a.branch,
		sha, st.files, st.lfs_files, st.bytes);
done:
	/* unlock; when the branch moved: touch, index, audit (once, as every
	 * writer does) */
	publish_end(st.pub, &who, "repo.import", details);
	free(details);
	free(summary);
	lfs_store_close(lfs);
	free(ns);
	runtime_close_database();
	return rc < 0 ? 1 : 0;
}
