/* cmd_hook.c -- khub hook pre-receive|post-receive: run by git receive-pack
 * (through the hooks khub installs) so that a push obeys the commit API's
 * rules: branches and tags only, valid paths, no submodules or symlinks,
 * every LFS pointer naming an object present in the store, no plain blob
 * over 10 MiB, main never deleted, tags never moved or deleted; and is audited afterwards. A rejected pre-receive leaves every
 * ref of the push untouched. The builds a push triggers are handed to
 * the server that runs it and planned after the push was answered. */
#include "server/server.h"
#include "farm/farm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_COMMITS_CHECKED 200000

static const char zero_sha[] = "0000000000000000000000000000000000000000";

struct push_check {
	git_repository *git;
	struct lfs_store *lfs;
	int64_t repo_id;
	int problems;
	const char *ref;
};

static void complain(struct push_check *pc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void complain(struct push_check *pc, const char *fmt, ...)
{
	va_list ap;
	if (pc->problems++ >= 20)
		return;
	fprintf(stderr, "khub: %s: ", pc->ref);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int check_delta(const git_diff_delta *delta, float progress, void *payload)
{
	struct push_check *pc = payload;
	const char *why;
	if (delta->status != GIT_DELTA_ADDED && delta->status != GIT_DELTA_MODIFIED &&
	    delta->status != GIT_DELTA_RENAMED && delta->status != GIT_DELTA_COPIED &&
	    delta->status != GIT_DELTA_TYPECHANGE)
		return 0;
	const char *path = delta->new_file.path;
	if (repo_path_validate(path, &why) < 0) {
		complain(pc, "invalid path '%s': %s", path, why);
		return 0;
	}
	if (delta->new_file.mode == GIT_FILEMODE_COMMIT) {
		complain(pc, "%s: submodules are not supported", path);
		return 0;
	}
	if (delta->new_file.mode == GIT_FILEMODE_LINK) {
		complain(pc, "%s: symbolic links are not supported", path);
		return 0;
	}
	/* Only small blobs can be pointers: read the size from the object
	 * header before loading anything. */
	git_odb *odb = NULL;
	size_t blob_size = 0;
	git_object_t blob_type;
	int sized = git_repository_odb(&odb, pc->git) == 0 &&
		    git_odb_read_header(&blob_size, &blob_type, odb, &delta->new_file.id) == 0;
	git_odb_free(odb);
	if (sized && blob_size > LFS_SIZE_THRESHOLD) {
		complain(pc, "%s has %zu bytes: files over %u MiB must be stored with git lfs "
			 "(git lfs track '%s', then commit and push again)", path, blob_size,
			 LFS_SIZE_THRESHOLD >> 20, path);
		return 0;
	}
	if (sized && blob_size >= 1024)
		return 0;
	git_blob *blob = NULL;
	if (git_blob_lookup(&blob, pc->git, &delta->new_file.id) < 0)
		return 0;
	struct lfs_pointer ptr;
	const char *raw = git_blob_rawcontent(blob);
	size_t raw_len = (size_t)git_blob_rawsize(blob);
	if (lfs_pointer_parse(raw, raw_len, &ptr) < 0) {
		/* git-lfs takes any blob under 1024 bytes that starts with a
		 * version line naming git-lfs/hawser/git-media for a pointer
		 * (CRLF, no final newline, extensions): refuse those khub would
		 * serve as plain text while git clients chase a missing object */
		if (raw_len < 1024 && raw_len > 8 && memcmp(raw, "version ", 8) == 0 &&
		    (memmem(raw, raw_len, "git-lfs", 7) || memmem(raw, raw_len, "hawser", 6) ||
		     memmem(raw, raw_len, "git-media", 9)))
			complain(pc, "%s looks like an LFS pointer but is not in the canonical form (version, "
				 "oid sha256:, size, each line ending in a newline)", path);
	} else {
		uint64_t size;
		int linked = db_lfs_linked(pc->repo_id, ptr.oid);
		if (linked < 0)	/* not the pusher's fault: say so, or they re-upload for nothing */
			complain(pc, "the database is unavailable, cannot check the LFS object of %s; retry later", path);
		else if (lfs_store_stat(pc->lfs, ptr.oid, &size) < 0 || !linked)
			complain(pc, "%s is an LFS pointer to %s, which this server does not have for this repo: "
				 "push the LFS objects first (git lfs push --all origin)", path, ptr.oid);
		else if (size != ptr.size)
			complain(pc, "%s: LFS object %s has %llu bytes, the pointer says %llu", path, ptr.oid,
				 (unsigned long long)size, (unsigned long long)ptr.size);
	}
	git_blob_free(blob);
	return 0;
}

/* Check every commit the push brings that no existing ref reaches. */
static void check_new_commits(struct push_check *pc, const git_oid *new_tip)
{
	git_revwalk *walk = NULL;
	git_oid oid;
	size_t seen = 0;
	if (git_revwalk_new(&walk, pc->git) < 0 || git_revwalk_push(walk, new_tip) < 0) {
		complain(pc, "cannot read the pushed commits");
		goto cleanup;
	}
	git_revwalk_hide_glob(walk, "refs/*");
	while (git_revwalk_next(&oid, walk) == 0) {
		if (++seen > MAX_COMMITS_CHECKED) {
			complain(pc, "more than %d new commits in one push", MAX_COMMITS_CHECKED);
			break;
		}
		git_commit *commit = NULL;
		git_tree *tree = NULL, *parent_tree = NULL;
		git_diff *diff = NULL;
		if (git_commit_lookup(&commit, pc->git, &oid) < 0 || git_commit_tree(&tree, commit) < 0) {
			complain(pc, "cannot read a pushed commit");
			git_commit_free(commit);
			break;
		}
		if (git_commit_parentcount(commit) > 0) {
			git_commit *parent = NULL;
			if (git_commit_parent(&parent, commit, 0) == 0)
				git_commit_tree(&parent_tree, parent);
			git_commit_free(parent);
		}
		if (git_diff_tree_to_tree(&diff, pc->git, parent_tree, tree, NULL) == 0)
			git_diff_foreach(diff, check_delta, NULL, NULL, NULL, pc);
		git_diff_free(diff);
		git_tree_free(parent_tree);
		git_tree_free(tree);
		git_commit_free(commit);
	}
cleanup:
	git_revwalk_free(walk);
}

static int pre_receive(void)
{
	struct push_check pc = { 0 };
	const char *lfs_root = getenv("KHUB_HOOK_LFS_ROOT");
	if (!lfs_root) {
		fprintf(stderr, "khub: the push hook runs only under khub serve\n");
		return 1;
	}
	/* FROM_ENV: see the quarantined objects of this push */
	if (git_repository_open_ext(&pc.git, NULL, GIT_REPOSITORY_OPEN_FROM_ENV, NULL) < 0) {
		fprintf(stderr, "khub: cannot open the repository\n");
		return 1;
	}
	pc.lfs = lfs_store_open(lfs_root);
	const char *conninfo = getenv("KHUB_HOOK_DATABASE"), *repo_id = getenv("KHUB_HOOK_REPO_ID");
	if (!conninfo || !repo_id) {
		fprintf(stderr, "khub: the push hook runs only under khub serve\n");
		return 1;
	}
	db_configure(conninfo);
	pc.repo_id = strtoll(repo_id, NULL, 10);
	char line[1024];
	while (fgets(line, sizeof(line), stdin)) {
		char old_sha[64], new_sha[64], ref[900];
		if (sscanf(line, "%63s %63s %899s", old_sha, new_sha, ref) != 3)
			continue;
		pc.ref = ref;
		const char *why;
		const char *short_name = strncmp(ref, "refs/heads/", 11) == 0 ? ref + 11
				       : strncmp(ref, "refs/tags/", 10) == 0 ? ref + 10 : NULL;
		if (!short_name) {
			complain(&pc, "only branches (refs/heads/) and tags (refs/tags/) can be pushed");
			continue;
		}
		if (ref_name_validate(short_name, &why) < 0) {
			complain(&pc, "invalid name: %s", why);
			continue;
		}
		/* Tags are immutable: only an admin deletes one, through the API. */
		if (short_name == ref + 10 && strcmp(old_sha, zero_sha) != 0) {
			complain(&pc, strcmp(new_sha, zero_sha) == 0
					      ? "tags cannot be deleted by a push (an admin deletes them through the API)"
					      : "tags cannot be moved: a tag is immutable once created");
			continue;
		}
		if (strcmp(new_sha, zero_sha) == 0) {
			if (strcmp(ref, "refs/heads/main") == 0)
				complain(&pc, "the default branch main cannot be deleted");
			continue;
		}
		git_oid tip;
		git_object *obj = NULL;
		if (git_oid_fromstr(&tip, new_sha) < 0 || git_object_lookup(&obj, pc.git, &tip, GIT_OBJECT_ANY) < 0) {
			complain(&pc, "pushed object %s is missing", new_sha);
			continue;
		}
		git_object *peeled = NULL;
		if (git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT) < 0)
			complain(&pc, "must point at a commit");
		else
			check_new_commits(&pc, git_object_id(peeled));
		git_object_free(peeled);
		git_object_free(obj);
	}
	if (pc.problems)
		fprintf(stderr, "khub: push refused (%d problem%s); no ref was changed\n", pc.problems,
			pc.problems == 1 ? "" : "s");
	lfs_store_close(pc.lfs);
	git_repository_free(pc.git);
	return pc.problems ? 1 : 0;
}

/* Where the push's plans go: the file the server that runs the push made
 * for it (KHUB_HOOK_PLAN_FILE), which it submits to its push planner once
 * the push was answered, so that no push waits for a plan. */
static struct {
	FILE *fp;		/* NULL: the file cannot be written */
	const char *builds_url;	/* where the pusher asks for builds (the API) */
	const char *matrix_url;	/* where the pusher sees them: + "?commit=<sha>" */
} handed;

static void hand_to_server(struct push_plan *p)
{
	if (!handed.fp || push_plan_write(handed.fp, p) < 0 || fflush(handed.fp) != 0)
		fprintf(stderr, "khub: %s: the builds of %s cannot be planned: the server's file for them cannot be "
			"written; request them with POST %s\n", p->ref, p->sha, handed.builds_url);
	else
		fprintf(stderr, "khub: %s: builds of %.12s will be planned after this push: see %s?commit=%s\n", p->ref,
			p->sha, handed.matrix_url, p->sha);
	push_plan_free(p);
}

/* Hand the push's plans to the server when it gave a file for them (a
 * server of an older khub did not: plan here then). */
static void hand_off_open(void)
{
	const char *path = getenv("KHUB_HOOK_PLAN_FILE");
	if (!path)
		return;
	handed.builds_url = getenv("KHUB_HOOK_BUILDS_URL") ? getenv("KHUB_HOOK_BUILDS_URL") : "…/builds";
	handed.matrix_url = getenv("KHUB_HOOK_MATRIX_URL") ? getenv("KHUB_HOOK_MATRIX_URL") : "…/builds";
	int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !(handed.fp = fdopen(fd, "a")))
		close(fd);
	build_trigger_hand_off(hand_to_server);
}

static int post_receive(void)
{
	const char *conninfo = getenv("KHUB_HOOK_DATABASE");
	const char *repo = getenv("KHUB_HOOK_REPO"), *user = getenv("KHUB_HOOK_USER");
	const char *repo_id = getenv("KHUB_HOOK_REPO_ID"), *user_id = getenv("KHUB_HOOK_USER_ID");
	if (!conninfo || !repo || !repo_id)
		return 0;
	db_configure(conninfo);
	/* the build farm's trigger, with the server's settings */
	farm_settings.variants_file = getenv("KHUB_HOOK_BUILD_VARIANTS") ? getenv("KHUB_HOOK_BUILD_VARIANTS") : "";
	farm_settings.max_attempts = getenv("KHUB_HOOK_BUILD_ATTEMPTS") ? atol(getenv("KHUB_HOOK_BUILD_ATTEMPTS")) : 3;
	const char *queue = getenv("KHUB_HOOK_BUILD_QUEUE");	/* per repo, per user, per request */
	if (!queue || sscanf(queue, "%ld,%ld,%ld", &farm_settings.queue_per_repo, &farm_settings.queue_per_user,
			     &farm_settings.variants_per_request) != 3) {
		farm_settings.queue_per_repo = 128;	/* config.c's defaults */
		farm_settings.queue_per_user = 512;
		farm_settings.variants_per_request = 64;
	}
	farm_settings.worker_live_seconds = getenv("KHUB_HOOK_BUILD_LIVE") ? atol(getenv("KHUB_HOOK_BUILD_LIVE")) : 300;
	farm_settings.plan_python = getenv("KHUB_HOOK_BUILD_PYTHON") ? getenv("KHUB_HOOK_BUILD_PYTHON") : "python3";
	farm_settings.plan_wall_ms = getenv("KHUB_HOOK_BUILD_PLAN_MS") ? atol(getenv("KHUB_HOOK_BUILD_PLAN_MS")) : 10000;
	publish_set_on_new_commit(builds_on_new_commit);
	hand_off_open();
	/* For the variant index of kernel repos (GIT_DIR is set by git). */
	git_repository *git = NULL;
	if (git_repository_open_ext(&git, NULL, GIT_REPOSITORY_OPEN_FROM_ENV, NULL) < 0)
		git = NULL;
	struct publish_actor who = { user_id ? strtoll(user_id, NULL, 10) : 0, user ? user : "anonymous", NULL,
				     getenv("REMOTE_ADDR") ? getenv("REMOTE_ADDR") : "git" };
	char line[1024];
	while (fgets(line, sizeof(line), stdin)) {
		char old_sha[64], new_sha[64], ref[900];
		if (sscanf(line, "%63s %63s %899s", old_sha, new_sha, ref) != 3)
			continue;
		int deleted = strcmp(new_sha, zero_sha) == 0;
		json_t *details = json_pack("{s:s, s:s, s:s, s:s}", "ref", ref, "old", old_sha, "new", new_sha,
					    "request", getenv("KHUB_HOOK_REQUEST_ID") ? getenv("KHUB_HOOK_REQUEST_ID") : "");
		char *text = json_dumps(details, JSON_COMPACT);
		/* the objects came as a pack; the after-move steps are every
		 * writer's: touch, index (kernel repos), audit */
		publish_refs_moved(strtoll(repo_id, NULL, 10), git, deleted ? NULL : new_sha, PUBLISH_REFS_CHANGED, &who,
				   deleted ? "git.push.delete" : "git.push", repo, text);
		if (!deleted)
			publish_new_commit_notify(strtoll(repo_id, NULL, 10), git, ref,
						  strcmp(old_sha, zero_sha) == 0 ? NULL : old_sha, new_sha);
		free(text);
		json_decref(details);
	}
	git_repository_free(git);
	if (handed.fp)
		fclose(handed.fp);
	db_thread_done();
	return 0;
}

const char cmd_hook_usage[] =
	"usage: khub hook pre-receive|post-receive (run by git)\n";

int cmd_hook(int argc, char **argv)
{
	if (argc < 2) {
		fputs(cmd_hook_usage, stderr);
		return 2;
	}
	repo_store_global_init();
	if (strcmp(argv[1], "pre-receive") == 0)
		return pre_receive();
	if (strcmp(argv[1], "post-receive") == 0)
		return post_receive();
	fprintf(stderr, "khub hook: unknown hook %s\n", argv[1]);
	return 2;
}

const char *hooks_install(void)
{
	static char dir[PATH_MAX];
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		fatal("cannot find the khub binary: %s", strerror(errno));
	self[n] = '\0';
	snprintf(dir, sizeof(dir), "%s/hooks", config.data_dir);
	if (mkdir_p(dir, 0755) < 0)
		fatal("cannot create %s: %s", dir, strerror(errno));
	static const char *const hooks[] = { "pre-receive", "post-receive" };
	for (size_t i = 0; i < 2; i++) {
		char *path = xasprintf("%s/%s", dir, hooks[i]);
		char *tmp = xasprintf("%s.tmp", path);
		FILE *fp = fopen(tmp, "w");
		if (!fp)
			fatal("cannot write %s: %s", tmp, strerror(errno));
		fprintf(fp, "#!/bin/sh\n# written by khub serve: checks and records pushes\nexec '%s' hook %s\n", self,
			hooks[i]);
		fclose(fp);
		if (chmod(tmp, 0755) < 0 || rename(tmp, path) < 0)
			fatal("cannot install %s: %s", path, strerror(errno));
		free(tmp);
		free(path);
	}
	return dir;
}
