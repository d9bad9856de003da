/* build_trigger.c -- builds on push: a branch of a kernel repo that moved
 * to a commit with build.toml at its root, changing more than build/,
 * README.md and benchmarks/, gets the default variants of its plan queued
 * (farm/build_plan.c; what is left out is logged with its reason). Called
 * by the publish path after every new commit (commit API on the work
 * queue, import, git push through the hook: never a request thread, so
 * the planner runs here); never for the farm's own publications or
 * mirrors. */
#include "farm/farm.h"

#include <string.h>

/* What a change to these leaves alone: the outputs of a build. */
static int is_output_path(const char *name)
{
	return strcmp(name, "build") == 0 || strcmp(name, "README.md") == 0 || strcmp(name, "benchmarks") == 0;
}

static git_tree *commit_tree(git_repository *git, const char *sha)
{
	git_oid oid;
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	if (git_oid_fromstr(&oid, sha) == 0 && git_commit_lookup(&commit, git, &oid) == 0)
		git_commit_tree(&tree, commit);
	git_commit_free(commit);
	return tree;
}

/* 1 when a top-level entry other than the outputs differs (any change
 * below one changes its tree id). */
static int sources_changed(const git_tree *from, const git_tree *to)
{
	const git_tree *trees[2] = { from, to };
	for (int side = 0; side < 2; side++) {
		const git_tree *a = trees[side], *b = trees[1 - side];
		for (size_t i = 0; i < git_tree_entrycount(a); i++) {
			const git_tree_entry *e = git_tree_entry_byindex(a, i);
			if (is_output_path(git_tree_entry_name(e)))
				continue;
			const git_tree_entry *other = git_tree_entry_byname(b, git_tree_entry_name(e));
			if (!other || git_oid_cmp(git_tree_entry_id(e), git_tree_entry_id(other)) != 0 ||
			    git_tree_entry_filemode(e) != git_tree_entry_filemode(other))
				return 1;
		}
	}
	return 0;
}

/* Log what planning left out of a push's builds, one line per variant. */
static void log_skipped(int64_t repo_id, const char *sha, json_t *skipped)
{
	size_t i;
	json_t *s;
	json_array_foreach(skipped, i, s)
		log_info("build trigger: repo %lld %s: not building %s: %s", (long long)repo_id, sha,
			 json_string_value(json_object_get(s, "variant")), json_string_value(json_object_get(s, "reason")));
}

static void queue_planned(int64_t repo_id, git_repository *git, const char *ref, const char *sha)
{
	struct build_plan plan;
	char **names = NULL;
	size_t n = 0;
	json_t *skipped = json_array();
	if (build_plan_commit(git, sha, &plan) < 0) {
		log_warn("build trigger: repo %lld %s: the build planner cannot run; nothing queued", (long long)repo_id, sha);
		goto cleanup;
	}
	if (plan.refused) {
		log_warn("build trigger: repo %lld %s: nothing queued: %s", (long long)repo_id, sha, plan.refused);
		goto cleanup;
	}
	if (build_default_variants(&plan, &names, &n, skipped) < 0) {
		log_warn("build trigger: repo %lld %s: the database is unavailable; nothing queued", (long long)repo_id, sha);
		goto cleanup;
	}
	struct repo_record rec = { .id = repo_id };
	if (n && build_enqueue_all(&rec, sha, names, n, 0, "push", NULL, NULL, NULL, skipped) < 0)
		log_warn("build trigger: repo %lld %s: not queued (%s)", (long long)repo_id, sha,
			 build_queue_refusal() ? build_queue_refusal() : "database");
	else
		log_info("build trigger: repo %lld %s (%s): %zu variants", (long long)repo_id, sha, ref, n);
	log_skipped(repo_id, sha, skipped);
	const char *warning = json_string_value(json_object_get(plan.doc, "warning"));
	if (warning)
		log_warn("build trigger: repo %lld %s: %s", (long long)repo_id, sha, warning);
cleanup:
	build_names_free(names, n);
	build_plan_release(&plan);
	json_decref(skipped);
}

void builds_on_new_commit(int64_t repo_id, git_repository *git, const char *ref, const char *old_sha,
			  const char *new_sha)
{
	int on = 0, mirrored = 0;
	if (build_publishing || strncmp(ref, "refs/heads/", 11) != 0)
		return;
	if (db_repo_build_settings(repo_id, &on, &mirrored) < 0 || !on || mirrored)
		return;
	git_tree *to = commit_tree(git, new_sha), *from = NULL;
	if (!to || !git_tree_entry_byname(to, "build.toml"))
		goto cleanup;
	/* a new branch is compared with main (a version branch made from it
	 * by a publication changes no source) */
	char main_sha[41];
	if (old_sha)
		from = commit_tree(git, old_sha);
	else if (strcmp(ref, "refs/heads/main") != 0 && repo_ref_read(git, "refs/heads/main", main_sha) == 0)
		from = commit_tree(git, main_sha);
	if (from && !sources_changed(from, to))
		goto cleanup;
	queue_planned(repo_id, git, ref, new_sha);
cleanup:
	git_tree_free(from);
	git_tree_free(to);
}
