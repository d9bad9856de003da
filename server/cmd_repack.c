/* cmd_repack.c -- khub repack: git repack of every repo, so that reads do
 * not slow down as pushes and commits pile up packs and loose objects. A
 * repo is repacked under its write lock (no push or commit adds objects
 * meanwhile) with -a -d --keep-unreachable: the new pack is complete before
 * old ones go, and nothing is dropped (gc's business), so a reader that
 * has an old pack open keeps it and one that looks again finds the new. */
#include "server/server.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a repo's write lock is tried before the repo is left for the next run. */
#define LOCK_TRY_MS 30000

struct repack {
	struct repo_record *repos;
	size_t nrepos, packed, busy, failed;
	char *git;
};

static int add_repo(const struct repo_record *rec, void *arg)
{
	struct repack *r = arg;
	r->repos = xrealloc(r->repos, (r->nrepos + 1) * sizeof(*r->repos));
	r->repos[r->nrepos++] = *rec;
	return 0;
}

/* The repo's write lock within LOCK_TRY_MS: 0, 1 busy, or KHUB_EDB. */
static int lock_repo(int64_t id)
{
	uint64_t until = monotonic_usec() + LOCK_TRY_MS * 1000ull;
	int rc;
	while ((rc = db_lock_try(DB_LOCK_REPO_WRITE, id)) == 1 && monotonic_usec() < until)
		usleep(20000);
	return rc;
}

static void repack_repo(struct repack *r, const struct repo_record *rec)
{
	char *dir = repo_store_git_dir(runtime_repo_root(), rec->type, rec->ns, rec->name);
	char *gd = xasprintf("--git-dir=%s", dir);
	char *argv[] = { r->git, "-c", "safe.directory=*", gd, "repack", "-a", "-d", "--keep-unreachable", "-q", NULL };
	int rc = access(dir, F_OK) == 0 ? lock_repo(rec->id) : 2;
	if (rc == 0) {
		rc = backup_run(argv, 0) == 0 ? 0 : -1;
		db_unlock(DB_LOCK_REPO_WRITE, rec->id);
	}
	if (rc == 0) {
		r->packed++;
	} else if (rc == 1) {
		fprintf(stderr, "khub repack: %s/%s stayed busy writing for %d s; left for the next run\n", rec->ns,
			rec->name, LOCK_TRY_MS / 1000);
		r->busy++;
	} else if (rc != 2) {	/* 2: no git dir (khub fsck says so) */
		fprintf(stderr, "khub repack: %s: git repack failed\n", dir);
		r->failed++;
	}
	free(gd);
	free(dir);
}

const char cmd_repack_usage[] = "usage: khub repack\n  every repo's objects into one pack, under its write lock\n";

int cmd_repack(int argc, char **argv)
{
	struct repack r = { 0 };
	(void)argv;
	if (argc != 1) {
		fputs(cmd_repack_usage, stderr);
		return 2;
	}
	r.git = spawn_find_program("git", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	if (!r.git) {
		fprintf(stderr, "khub repack: git is not installed\n");
		return 2;
	}
	runtime_open_database();
	int rc = db_repo_each(add_repo, &r);
	for (size_t i = 0; rc == 0 && i < r.nrepos; i++)
		repack_repo(&r, &r.repos[i]);
	runtime_close_database();
	if (rc < 0)
		fprintf(stderr, "khub repack: cannot list the repos (%s)\n", khub_strerror(rc));
	else
		printf("khub repack: %zu repos repacked, %zu busy (left for the next run), %zu failed\n", r.packed,
		       r.busy, r.failed);
	free(r.repos);
	free(r.git);
	return rc < 0 || r.failed ? 1 : 0;
}
