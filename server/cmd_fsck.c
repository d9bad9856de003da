/* cmd_fsck.c -- khub fsck: check every repo at git fsck level, every LFS
 * object of the store (local or S3, as listed) against its name, and the
 * database against storage (repo rows and git dirs, LFS links both ways,
 * the variant index, published build outputs);
 * --repair does what loses nothing (quarantine damaged LFS objects, drop
 * links to missing objects no commit references, re-index, trash
 * unregistered git dirs). */
#include "server/server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fsck {
	int repair, json, quick;
	json_t *problems, *unlinked;
	size_t damaged, unrepaired, listed;
	struct hashmap uses;		/* oid → struct lfs_use */
	struct lfs_use **use_list;	/* the same, in the order first seen */
	size_t nuses;
	struct lfs_store *lfs;
	struct hashmap repo_dirs;	/* git dirs of registered repos → non-NULL */
	int failed;			/* could not check something: exit 2 */
};

/* Record a problem: repaired says whether --repair fixed it, why_not
 * (NULL when repaired or not attempted) why it could not. */
static void problem(struct fsck *f, const char *repo, const char *what, const char *where, int repaired,
		    const char *why_not)
{
	const char *state = repaired ? "repaired" : !f->repair ? "damaged" : why_not ? why_not : "not repairable";
	f->damaged++;
	if (!repaired)
		f->unrepaired++;
	json_array_append_new(f->problems, json_pack("{s:s, s:s, s:s, s:s}", "repo", repo, "what", what, "where",
						     where, "state", state));
	if (!f->json)
		printf("%s\t%s\t%s\t%s\n", repo, what, where, state);
}

/* ---- what the repos say of each LFS object ----------------------------------- */

/* One oid some repo references (an LFS pointer in its history) or links. */
struct lfs_use {
	char oid[65];
	struct strbuf repos;	/* "kernels/a/x, kernels/b/y": who references or links it */
	int referenced;		/* by a commit of a repo that is not a mirror */
	int protected_link;	/* linked by a repo that references it (a mirror too) */
	int64_t *unlinkable;	/* repos linking it that reference it nowhere */
	size_t nunlinkable;
	int has_pointer;
	uint64_t pointer_size;	/* what the first pointer seen says */
	int present;		/* in the store's listing, and not quarantined */
	uint64_t size;		/* as listed */
};

static struct lfs_use *use_of(struct fsck *f, const char *oid)
{
	struct lfs_use *u = hashmap_get(&f->uses, oid);
	if (u)
		return u;
	u = xcalloc(1, sizeof(*u));
	snprintf(u->oid, sizeof(u->oid), "%s", oid);
	strbuf_init(&u->repos);
	hashmap_put(&f->uses, oid, u);
	f->use_list = xrealloc(f->use_list, (f->nuses + 1) * sizeof(*f->use_list));
	f->use_list[f->nuses++] = u;
	return u;
}

static void use_add_repo(struct lfs_use *u, const char *repo)
{
	if (u->repos.len)
		strbuf_adds(&u->repos, ", ");
	strbuf_adds(&u->repos, repo);
}

static void use_free(void *arg)
{
	struct lfs_use *u = arg;
	strbuf_release(&u->repos);
	free(u->unlinkable);
	free(u);
}

/* Who a problem with oid is about: the repos using it, "-" when none. */
static const char *users(struct fsck *f, const char *oid)
{
	struct lfs_use *u = is_lower_hex(oid, 64) ? hashmap_get(&f->uses, oid) : NULL;
	return u && u->repos.len ? u->repos.buf : "-";
}

/* ---- LFS objects as the store lists them ------------------------------------- */

static void unlinked_object(struct fsck *f, const struct lfs_listed *o)
{
	json_array_append_new(f->unlinked, json_pack("{s:s, s:I}", "where", o->where, "size", (json_int_t)o->size));
	if (!f->json)
		printf("-\tLFS object no repo links or references (not damage: khub gc removes it after its grace "
		       "period)\t%s\tnotice\n", o->where);
}

/* Re-hash the object; 0 when sound, -1 when reported. */
static int rehash_object(struct fsck *f, const struct lfs_listed *o)
{
	char got[65];
	int rc = lfs_store_hash(f->lfs, o->name, got, NULL);
	if (rc == KHUB_ENOTFOUND)
		return -1;	/* removed since listed (khub gc) */
	if (rc < 0) {
		problem(f, users(f, o->name), "unreadable LFS object", o->where, 0,
			"not repairable: check the disk or the object store");
		return -1;
	}
	if (strcmp(got, o->name) == 0)
		return 0;
	/* local: to data_dir/quarantine/lfs/{oid}.{time}; s3: to the bucket's quarantine/lfs/ */
	int repaired = f->repair && lfs_store_quarantine(f->lfs, o->name) == 0;
	problem(f, users(f, o->name), "LFS object content does not match its sha256 (moved to quarantine/lfs when "
		"repaired)", o->where, repaired, "not repairable: cannot move it to quarantine/lfs");
	return repaired ? -1 : 0;	/* unrepaired it is still there */
}

static int check_object(const struct lfs_listed *o, void *arg)
{
	struct fsck *f = arg;
	if (!o->well_placed) {
		problem(f, "-", "a file in the LFS store that is not named by a sha256 (or not at objects/ab/cd/{sha256})",
			o->where, 0, "not repairable: look at it and remove it by hand");
		return 0;
	}
	f->listed++;
	if (!f->quick && rehash_object(f, o) < 0)
		return 0;
	struct lfs_use *u = hashmap_get(&f->uses, o->name);
	if (!u) {
		unlinked_object(f, o);
		return 0;
	}
	u->present = 1;
	u->size = o->size;
	if (u->has_pointer && u->size != u->pointer_size) {
		char *where = xasprintf("%s (stored %llu bytes, pointer says %llu)", o->name,
					(unsigned long long)u->size, (unsigned long long)u->pointer_size);
		problem(f, u->repos.buf, "LFS object size differs from its pointer", where, 0,
			"not repairable: restore lfs/ from a backup");
		free(where);
	}
	return 0;
}

/* An object the repos use that the store lacks: one problem, whoever uses
 * it. A link is dropped under --repair only when no commit of the repo
 * references the object (it records an upload for a commit not made). */
static void missing_object(struct fsck *f, struct lfs_use *u)
{
	if (u->referenced) {
		problem(f, u->repos.buf, "LFS object referenced by a commit is missing", u->oid, 0,
			"not repairable: restore lfs/ from a backup");
		return;
	}
	if (!u->protected_link && !u->nunlinkable)
		return;	/* only a mirror references it: fetched on first request */
	int repaired = f->repair && !u->protected_link;
	for (size_t i = 0; repaired && i < u->nunlinkable; i++)
		repaired = db_lfs_unlink(u->unlinkable[i], u->oid) == 0;
	problem(f, u->repos.buf, "LFS link to a missing object", u->oid, repaired,
		u->protected_link ? "not repairable: a commit references it; restore lfs/ from a backup"
				  : "not repairable: database error");
}

/* The store after the repos: what they use is then installed already. */
static void check_lfs_store(struct fsck *f)
{
	if (lfs_store_list(f->lfs, check_object, f) < 0) {
		fprintf(stderr, "khub fsck: cannot list the LFS store (%s): objects not checked\n",
			lfs_store_backend(f->lfs));
		f->failed = 1;
		return;
	}
	for (size_t i = 0; i < f->nuses; i++)
		if (!f->use_list[i]->present)
			missing_object(f, f->use_list[i]);
}

/* ---- git ---------------------------------------------------------------- */

/* git fsck of a bare repo; each line it prints about damage is a problem. */
static void git_fsck(struct fsck *f, const char *repo, const char *dir)
{
	char *git = spawn_find_program("git", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	char *gd = xasprintf("--git-dir=%s", dir);
	/* the data may belong to the user khub runs as, not to the caller */
	char *argv[] = { git, "-c", "safe.directory=*", gd, "fsck", "--no-progress", "--no-dangling", NULL };
	int fds[2] = { -1, -1 };
	pid_t pid;
	struct strbuf out = STRBUF_INIT;
	if (!git || pipe2(fds, O_CLOEXEC) < 0)
		goto fail;
	struct spawn_opts opts = { .argv = argv, .fd_in = -1, .fd_out = fds[1], .fd_err = fds[1] };
	if (spawn_process(&opts, &pid) < 0)
		goto fail;
	close(fds[1]);
	fds[1] = -1;
	char buf[4096];
	ssize_t n;
	while ((n = read(fds[0], buf, sizeof(buf))) > 0)
		if (out.len < 65536)
			strbuf_add(&out, buf, (size_t)n);
	int status = 0;
	waitpid(pid, &status, 0);
	/* damage is a failing exit; notices (an empty mirror's unborn HEAD)
	 * and warnings alone are not */
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		int lines = 0;
		char *save = NULL;
		for (char *line = out.len ? strtok_r(out.buf, "\n", &save) : NULL; line && lines < 20;
		     line = strtok_r(NULL, "\n", &save)) {
			if (strncmp(line, "notice:", 7) == 0)
				continue;
			problem(f, repo, "git fsck", line, 0, "not repairable: restore the repo from a backup");
			lines++;
		}
		if (!lines)
			problem(f, repo, "git fsck failed", dir, 0, "not repairable: restore the repo from a backup");
	}
	goto cleanup;
fail:
	fprintf(stderr, "khub fsck: %s: cannot run git fsck\n", repo);
	f->failed = 1;
cleanup:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	strbuf_release(&out);
	free(gd);
	free(git);
}

/* ---- LFS pointers and links of a repo --------------------------------------- */

struct repo_check {
	struct fsck *f;
	const struct repo_record *rec;
	const char *repo;
	struct hashmap referenced;	/* oid → non-NULL */
};

static void check_pointer(const struct lfs_pointer *ptr, void *arg)
{
	struct repo_check *rc = arg;
	if (hashmap_get(&rc->referenced, ptr->oid))
		return;
	hashmap_put(&rc->referenced, ptr->oid, rc);
	struct lfs_use *u = use_of(rc->f, ptr->oid);
	use_add_repo(u, rc->repo);
	if (!rc->rec->mirrored)	/* a mirror fetches on first request */
		u->referenced = 1;
	if (!u->has_pointer) {
		u->has_pointer = 1;
		u->pointer_size = ptr->size;
	}
}

/* The repo's links, checked against the store's listing later. */
static void record_links(struct repo_check *rc)
{
	char **oids = NULL;
	size_t n = 0;
	if (db_lfs_links(rc->rec->id, &oids, &n) < 0) {
		rc->f->failed = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct lfs_use *u = is_lower_hex(oids[i], 64) ? use_of(rc->f, oids[i]) : NULL;
		if (u && hashmap_get(&rc->referenced, oids[i])) {
			u->protected_link = 1;
		} else if (u) {
			use_add_repo(u, rc->repo);
			u->unlinkable = xrealloc(u->unlinkable, (u->nunlinkable + 1) * sizeof(*u->unlinkable));
			u->unlinkable[u->nunlinkable++] = rc->rec->id;
		}
		free(oids[i]);
	}
	free(oids);
}

/* ---- the variant index -------------------------------------------------------- */

/* 1 when the indexed variants of sha are exactly the build/ dirs of the commit. */
static int index_matches(int64_t repo_id, git_repository *git, const char *sha)
{
	struct variant_rows rows = { 0 };
	struct tree_listing build = { 0 };
	if (variant_index_load(repo_id, sha, &rows) < 0)
		return 0;
	int rc = repo_list_tree(git, sha, "build", 0, &build);
	size_t dirs = 0, found = 0;
	for (size_t i = 0; rc == 0 && i < build.count; i++) {
		if (!build.entries[i].is_dir)
			continue;
		dirs++;
		const char *name = strrchr(build.entries[i].path, '/');
		name = name ? name + 1 : build.entries[i].path;
		for (size_t k = 0; k < rows.count; k++)
			if (strcmp(rows.items[k].name, name) == 0)
				found++;
	}
	int match = (rc == 0 || rc == KHUB_ENOTFOUND) && dirs == found && found == rows.count;
	tree_listing_release(&build);
	variant_rows_release(&rows);
	return match;
}

static void reindex(struct repo_check *rc, git_repository *git, const char *sha, const char *what)
{
	int repaired = 0;
	if (rc->f->repair && db_kernel_commit_forget(rc->rec->id, sha) == 0) {
		git_commit *c = NULL;
		git_oid id;
		int exists = git_oid_fromstr(&id, sha) == 0 && git_commit_lookup(&c, git, &id) == 0;
		git_commit_free(c);
		repaired = !exists || variant_index_ensure(rc->rec->id, git, sha) == 0;
	}
	problem(rc->f, rc->repo, what, sha, repaired, "not repairable: re-indexing failed");
}

static void check_variant_index(struct repo_check *rc, git_repository *git)
{
	struct strvec commits = STRVEC_INIT;
	struct kernel_head *heads = NULL;
	size_t nheads = 0;
	if (rc->rec->type != REPO_KERNEL)
		return;
	if (db_kernel_commits_of(rc->rec->id, &commits) < 0 || db_kernel_heads_of(rc->rec->id, &heads, &nheads) < 0) {
		rc->f->failed = 1;
		goto cleanup;
	}
	for (size_t i = 0; i < commits.count; i++) {
		const char *sha = commits.items[i];
		git_commit *c = NULL;
		git_oid id;
		if (git_oid_fromstr(&id, sha) < 0 || git_commit_lookup(&c, git, &id) < 0)
			reindex(rc, git, sha, "variant index rows for a commit the repo does not have");
		else if (!index_matches(rc->rec->id, git, sha))
			reindex(rc, git, sha, "variant index rows differ from the commit's build/ variants");
		git_commit_free(c);
	}
	for (size_t i = 0; i < nheads; i++) {
		char sha[41];
		const char *ref = heads[i].ref;
		if (repo_resolve_revision(git, ref, sha) == 0 && strcmp(sha, heads[i].commit) == 0)
			continue;
		int repaired = rc->f->repair && variant_index_catch_up_repo(rc->rec->id, git) == 0;
		problem(rc->f, rc->repo, "variant index branch head differs from git", ref, repaired,
			"not repairable: re-indexing failed");
	}
cleanup:
	strvec_release(&commits);
	kernel_heads_free(heads, nheads);
}

/* ---- build outputs ---------------------------------------------------------------- */

/* Every published build's commit exists and holds build/{variant}/. */
static void check_build_outputs(struct repo_check *rc, git_repository *git)
{
	struct published_build *builds = NULL;
	size_t n = 0;
	if (db_build_outputs_of(rc->rec->id, &builds, &n) < 0) {
		rc->f->failed = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *sha = builds[i].commit;
		char *dir = xasprintf("build/%s", builds[i].variant);
		char *where = xasprintf("build %" PRId64 ": %s at %s", builds[i].id, dir, sha);
		struct tree_entry e = { 0 };
		if (repo_stat_path(git, sha, dir, &e) < 0 || !e.is_dir)
			problem(rc->f, rc->repo, "published build output missing from its commit", where, 0,
				"not repairable: build it again (force)");
		tree_entry_release(&e);
		free(where);
		free(dir);
	}
	published_builds_free(builds, n);
}

/* ---- repos ----------------------------------------------------------------------- */

static int check_repo(const struct repo_record *rec, void *arg)
{
	struct fsck *f = arg;
	char repo[2 * REPO_NAME_MAX + 16];
	struct repo_check rc = { .f = f, .rec = rec, .repo = repo };
	git_repository *git = NULL;
	struct stat st;
	snprintf(repo, sizeof(repo), "%s/%s/%s", repo_type_plural(rec->type), rec->ns, rec->name);
	char *dir = repo_store_git_dir(runtime_repo_root(), rec->type, rec->ns, rec->name);
	hashmap_put(&f->repo_dirs, dir, f);
	if (stat(dir, &st) < 0 || repo_store_open(runtime_repo_root(), rec->type, rec->ns, rec->name, &git) < 0) {
		struct repo_record now;
		if (db_repo_get(rec->type, rec->ns, rec->name, &now) != 0 || now.id != rec->id)
			goto cleanup;	/* deleted or moved since it was listed */
		problem(f, repo, "repo row without a git directory", dir, 0,
			"not repairable: restore the directory from a backup, or delete the repo");
		goto cleanup;
	}
	git_fsck(f, repo, dir);
	hashmap_init(&rc.referenced);
	if (store_scan_pointers(git, check_pointer, &rc) < 0)
		problem(f, repo, "history not readable completely (LFS pointers not all checked)", dir, 0,
			"not repairable: see git fsck");
	record_links(&rc);
	check_variant_index(&rc, git);
	check_build_outputs(&rc, git);
	hashmap_release(&rc.referenced, NULL);
cleanup:
	git_repository_free(git);
	free(dir);
	return 0;
}

/* A git dir no repo row names (re-checked under the registry lock, which
 * repo creation holds between making the dir and inserting the row). */
static void check_stray(struct fsck *f, enum repo_type type, const char *ns, const char *entry, const char *dir)
{
	struct repo_record rec;
	char repo[600];
	size_t n = strlen(entry);
	if (n <= 4 || strcmp(entry + n - 4, ".git") != 0) {
		problem(f, "-", "unexpected entry in the repo store", dir, 0, "not repairable: look at it by hand");
		return;
	}
	char *name = xstrndup(entry, n - 4);
	snprintf(repo, sizeof(repo), "%s/%s/%s", repo_type_plural(type), ns, name);
	if (db_lock_wait(DB_LOCK_REGISTRY, 0) < 0) {
		f->failed = 1;
		free(name);
		return;
	}
	int rc = db_repo_get(type, ns, name, &rec);
	if (rc == KHUB_ENOTFOUND) {
		int repaired = f->repair && repo_store_trash(runtime_repo_root(), type, ns, name) == 0;
		problem(f, repo, "git directory without a repo row (moved to repos/.trash/ when repaired)", dir, repaired,
			"not repairable: cannot move it to repos/.trash/");
	} else if (rc < 0) {
		f->failed = 1;
	}
	db_unlock(DB_LOCK_REGISTRY, 0);
	free(name);
}

/* A git dir younger than this may be a repo being created by a command
 * that makes the dir before the row (khub import, a sync import). */
#define STRAY_MIN_AGE 3600

static int recently_made(const char *dir)
{
	struct stat st;
	return lstat(dir, &st) == 0 && time(NULL) - st.st_mtime < STRAY_MIN_AGE;
}

static void check_unregistered_dir(enum repo_type type, const char *ns, const char *name, const char *dir, void *arg)
{
	struct fsck *f = arg;
	if (!hashmap_get(&f->repo_dirs, dir) && !recently_made(dir))
		check_stray(f, type, ns, name, dir);
}

static void check_unregistered(struct fsck *f)
{
	store_each_repo_dir(runtime_repo_root(), check_unregistered_dir, f);
}

/* ---- the command ------------------------------------------------------------------- */

static int run_fsck(struct fsck *f)
{
	if (db_repo_each(check_repo, f) < 0)
		return KHUB_EDB;
	check_lfs_store(f);
	check_unregistered(f);
	return 0;
}

static void report(struct fsck *f, int rc)
{
	int complete = rc == 0 && !f->failed;
	if (f->json) {
		json_t *doc = json_pack("{s:O, s:I, s:I, s:I, s:b, s:s, s:I, s:O}", "problems", f->problems, "damaged",
					(json_int_t)f->damaged, "repaired", (json_int_t)(f->damaged - f->unrepaired),
					"unrepaired", (json_int_t)f->unrepaired, "complete", complete, "lfs_backend",
					f->lfs ? lfs_store_backend(f->lfs) : "", "lfs_objects", (json_int_t)f->listed,
					"unlinked", f->unlinked);
		char *text = json_dumps(doc, JSON_COMPACT);
		printf("%s\n", text);
		free(text);
		json_decref(doc);
	}
	fprintf(stderr, "khub fsck: %zu problem%s found, %zu repaired, %zu left; %zu LFS objects %s, %zu linked by "
		"no repo%s\n", f->damaged, f->damaged == 1 ? "" : "s", f->damaged - f->unrepaired, f->unrepaired,
		f->listed, f->quick ? "listed (--quick: not re-hashed)" : "re-hashed", json_array_size(f->unlinked),
		complete ? "" : "; the check was incomplete (see above)");
}

const char cmd_fsck_usage[] =
	"usage: khub fsck [--repair] [--json] [--quick]\n"
	"  check every repo (git fsck), every LFS object's sha256 (--quick: only its name\n"
	"  and size) and the database against storage, on the local store or S3; exits 1\n"
	"  when something is damaged (with --repair: when something is left unrepaired),\n"
	"  2 when the check could not run\n";

int cmd_fsck(int argc, char **argv)
{
	struct fsck f = { 0 };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--repair") == 0) {
			f.repair = 1;
		} else if (strcmp(argv[i], "--json") == 0) {
			f.json = 1;
		} else if (strcmp(argv[i], "--quick") == 0) {
			f.quick = 1;
		} else {
			fputs(cmd_fsck_usage, stderr);
			return 2;
		}
	}
	runtime_open_database();
	f.problems = json_array();
	f.unlinked = json_array();
	f.lfs = lfs_store_open(runtime_lfs_root());
	hashmap_init(&f.repo_dirs);
	hashmap_init(&f.uses);
	int rc = f.lfs ? run_fsck(&f) : KHUB_EIO;
	report(&f, rc);
	hashmap_release(&f.repo_dirs, NULL);
	hashmap_release(&f.uses, use_free);
	free(f.use_list);
	lfs_store_close(f.lfs);
	json_decref(f.problems);
	json_decref(f.unlinked);
	runtime_close_database();
	if (rc < 0 || f.failed)
		return 2;
	return (f.repair ? f.unrepaired : f.damaged) ? 1 : 0;
}
