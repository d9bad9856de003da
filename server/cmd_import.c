/* cmd_import.c -- khub import: commit a local directory as a new commit on
 * a branch (creating the repo and branch if needed), storing big or binary
 * files as LFS the way the Hub does (a pointer text only to an object the
 * repo already has). Seeds a hub without the write API. */
#include "server/server.h"
#include "farm/farm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct import_state {
	struct publish_op *ops;		/* paths and fs_paths owned */
	size_t nops, alloc;
	size_t files, lfs_files;
	uint64_t bytes;
};

static void import_add(struct import_state *st, enum publish_op_kind kind, char *path, char *fs_path, unsigned mode)
{
	if (st->nops == st->alloc) {
		st->alloc = st->alloc ? st->alloc * 2 : 64;
		st->ops = xrealloc(st->ops, st->alloc * sizeof(*st->ops));
	}
	st->ops[st->nops++] = (struct publish_op){ .kind = kind, .path = path, .fs_path = fs_path, .mode = mode };
}

static int import_file(struct import_state *st, const char *full, const char *rel, const struct stat *sb)
{
	st->files++;
	st->bytes += (uint64_t)sb->st_size;
	import_add(st, PUBLISH_PUT, xstrdup(rel), xstrdup(full), (sb->st_mode & 0111) ? 0100755 : 0100644);
	return 0;
}

/* Why the file of operation op was refused. */
static void import_refused(const struct publish_op *op, int rc)
{
	if (rc == KHUB_EPERM && op->fs_path) {
		/* a pointer text is committed as a pointer (as git-lfs does) only
		 * to an object this repo already has: else importing a 3-line
		 * file would hand this repo another repo's private object */
		size_t len;
		char *text = read_file_limited(op->fs_path, LFS_POINTER_MAX, &len);
		struct lfs_pointer ptr;
		fprintf(stderr, "khub import: %s is an LFS pointer to %s, an object this repo does not have: "
			"import the file's content instead\n", op->path,
			text && lfs_pointer_parse(text, len, &ptr) == 0 ? ptr.oid : "an object");
		free(text);
	} else {
		fprintf(stderr, "khub import: cannot store %s: %s\n", op->path, khub_strerror(rc));
	}
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

/* The rules the import follows and the .gitattributes it keeps: the
 * directory's own, else the parent's (committed again), else the default. */
static char *import_rules(struct import_state *st, git_repository *git, const char *parent, const char *dir)
{
	char *attributes = parent[0] ? repo_read_text_file(git, parent, ".gitattributes", 1 << 20) : NULL;
	char *local_attr = xasprintf("%s/.gitattributes", dir);
	size_t local_len;
	char *local_attributes = read_file_limited(local_attr, 1 << 20, &local_len);
	free(local_attr);
	if (local_attributes) {
		free(attributes);
		return local_attributes;
	}
	if (!attributes)
		return xstrdup(repo_default_gitattributes);
	struct publish_op *op = (import_add(st, PUBLISH_PUT, xstrdup(".gitattributes"), NULL, 0100644), &st->ops[0]);
	op->data = xstrdup(attributes);
	op->len = strlen(attributes);
	return attributes;
}

/* The directory as one commit on branch: the tree holds only what it
 * has (LFS decided by the rules of import_rules); nothing committed when
 * the branch already holds exactly that. */
static int import_commit(struct import_state *st, const struct repo_record *rec, const char *dir,
			 const char *repo_id, const char *branch, const char *message)
{
	struct publish_actor who = { 0, "khub import", "import@khub.local", "local" };
	struct publication *pub = NULL;
	git_repository *git = NULL;
	struct publish_result res;
	char ref[REF_NAME_MAX + 16], old_sha[41] = "", parent[41] = "";
	char *details = NULL, *rules = NULL;
	snprintf(ref, sizeof(ref), "refs/heads/%s", branch);
	struct lfs_store *lfs = lfs_store_open(runtime_lfs_root());
	if (!lfs || publish_begin(runtime_repo_root(), lfs, rec, &pub) < 0 || publish_lock(pub) < 0 ||
	    repo_store_open(runtime_repo_root(), rec->type, rec->ns, rec->name, &git) < 0)
		fatal("cannot prepare the import");
	if (repo_resolve_revision(git, ref, old_sha) == 0)
		memcpy(parent, old_sha, sizeof(parent));
	else
		repo_resolve_revision(git, "refs/heads/main", parent);
	rules = import_rules(st, git, parent, dir);
	int rc = import_dir(st, dir, "");
	char *summary = message ? xstrdup(message) : xasprintf("Import %s", dir);
	struct publish_changeset change = {
		.ops = st->ops, .nops = st->nops, .ref = ref, .parent = old_sha[0] ? old_sha : NULL,
		.base = parent, .summary = summary, .gitattributes = rules,
		.flags = PUBLISH_START_EMPTY | (old_sha[0] ? PUBLISH_SKIP_UNCHANGED : PUBLISH_NEW_REF),
	};
	if (rc == 0 && (rc = publish_apply(pub, &who, &change, &res)) < 0 && res.failed_op < st->nops)
		import_refused(&st->ops[res.failed_op], rc);
	if (rc < 0) {
		fprintf(stderr, "khub import: failed: %s\n", khub_strerror(rc));
	} else if (res.unchanged) {
		printf("%s\n", old_sha);
		fprintf(stderr, "khub import: %s@%s is already identical to %s\n", repo_id, branch, dir);
	} else {
		details = xasprintf("{\"branch\":\"%s\",\"commit\":\"%s\",\"files\":%zu}", branch, res.sha, st->files);
		printf("%s\n", res.sha);
		fprintf(stderr, "khub import: %s@%s -> %s (%zu files, %zu as LFS, %" PRIu64 " bytes)\n", repo_id, branch,
			res.sha, st->files, res.lfs_files, st->bytes);
	}
	/* unlock; when the branch moved: touch, index, audit (once, as every
	 * writer does) */
	publish_end(pub, &who, "repo.import", details);
	for (size_t i = 0; i < st->nops; i++) {
		free((char *)st->ops[i].path);
		free((char *)st->ops[i].fs_path);
		free((void *)st->ops[i].data);
	}
	free(st->ops);
	git_repository_free(git);
	free(details);
	free(summary);
	free(rules);
	lfs_store_close(lfs);
	return rc;
}

struct import_args {
	const char *dir, *repo_id, *type_name, *branch, *message;
	int private;
};

const char cmd_import_usage[] =
	"usage: khub import DIR --repo NS/NAME [--type kernel] [--branch B] [--message M] [--private]\n";

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
		fputs(cmd_import_usage, stderr);
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
		static const struct accounts_actor cli = ACCOUNTS_CLI;
		const char *why;
		int rc = accounts_create(&cli, ACCOUNT_ORG, ns, NULL, 0, NULL, &why);
		if (rc < 0)
			fatal("cannot create org %s: %s", ns, why ? why : khub_strerror(rc));
		fprintf(stderr, "khub import: created org %s\n", ns);
	}
	if (db_repo_get(type, ns, name, rec) != KHUB_ENOTFOUND)
		return;
	/* git first, then the row, under the registry lock as the API's
	 * create: a directory a crash left in between (or anything else there
	 * without a row) goes to the trash, never adopted. */
	if (db_lock_wait(DB_LOCK_REGISTRY, 0) < 0)
		fatal("cannot take the registry lock");
	char *quarantined = NULL;
	int rc = db_repo_get(type, ns, name, rec);
	if (rc == KHUB_ENOTFOUND) {
		if (repo_store_create_fresh(runtime_repo_root(), type, ns, name, &quarantined) < 0)
			fatal("cannot create repository %s", a->repo_id);
		if (db_repo_insert(type, ns, name, a->private, rec) < 0)
			fatal("cannot register repository %s", a->repo_id);
		db_audit(0, "cli", "repo.create", a->repo_id, NULL, "local");
	}
	db_unlock(DB_LOCK_REGISTRY, 0);
	if (quarantined)
		fprintf(stderr, "khub import: moved an unregistered directory to %s\n", quarantined);
	free(quarantined);
	if (rc < 0 && rc != KHUB_ENOTFOUND)
		fatal("cannot read repository %s", a->repo_id);
}

/* An import of sources with build.toml queues builds, as a push does. */
static void builds_from_config(void)
{
	config_apply_all();	/* farm_settings among them */
	publish_set_on_new_commit(builds_on_new_commit);
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
	builds_from_config();
	struct import_state st = { 0 };
	rc = import_commit(&st, &rec, a.dir, a.repo_id, a.branch, a.message);
	free(ns);
	runtime_close_database();
	return rc < 0 ? 1 : 0;
}
