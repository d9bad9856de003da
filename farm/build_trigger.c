/* build_trigger.c -- builds on push: a branch of a kernel repo that moved
 * to a commit with build.toml at its root, changing more than build/,
 * README.md and benchmarks/, gets the default variants of its plan queued
 * (farm/build_plan.c; what is left out is logged with its reason). Called
 * by the publish path after every new commit (commit API on the work
 * queue, import, git push through the hook); never for the farm's own
 * publications or mirrors. The server plans on its push planner
 * (farm/build_planner.c), after the commit was answered; the push hook
 * hands what it read to the server that ran the push, which plans it
 * there after the push was answered. */
#include "farm/farm.h"

#include <stdlib.h>
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

/* Log what planning left out of a push's builds, one line per variant,
 * and per capability a planned variant's toolkit does not build. */
static void log_skipped(int64_t repo_id, const char *sha, json_t *skipped, json_t *left_out)
{
	size_t i;
	json_t *s;
	json_array_foreach(skipped, i, s)
		log_info("build trigger: repo %lld %s: not building %s: %s", (long long)repo_id, sha,
			 json_string_value(json_object_get(s, "variant")), json_string_value(json_object_get(s, "reason")));
	json_array_foreach(left_out, i, s)
		log_info("build trigger: repo %lld %s: building %s: %s", (long long)repo_id, sha,
			 json_string_value(json_object_get(s, "variant")), json_string_value(json_object_get(s, "reason")));
}

void push_plan_free(struct push_plan *p)
{
	if (!p)
		return;
	free(p->ref);
	free(p->toml);
	free(p->refused);
	free(p->variant);
	free(p);
}

/* The plan of p: its build.toml planned, or its refusal. */
static int push_plan_read(const struct push_plan *p, struct build_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	if (!p->toml) {
		plan->refused = xstrdup(p->refused ? p->refused : "cannot read build.toml");
		return 0;
	}
	return build_plan_text(p->toml, p->len, plan);
}

void build_push_plan(const struct push_plan *p)
{
	struct build_plan plan;
	char **names = NULL;
	size_t n = 0;
	long long repo_id = (long long)p->repo_id;
	json_t *skipped = json_array();
	if (p->campaign_id) {	/* a fleet rebuild's kernel: its one variant */
		int rc = push_plan_read(p, &plan);
		build_campaign_plan(p, rc < 0 ? NULL : &plan);
		goto cleanup;
	}
	if (push_plan_read(p, &plan) < 0) {
		log_warn("build trigger: repo %lld %s: the build planner cannot run; nothing queued", repo_id, p->sha);
		goto cleanup;
	}
	if (plan.refused) {
		log_warn("build trigger: repo %lld %s: nothing queued: %s", repo_id, p->sha, plan.refused);
		goto cleanup;
	}
	if (build_default_variants(&plan, &names, &n, skipped) < 0) {
		log_warn("build trigger: repo %lld %s: the database is unavailable; nothing queued", repo_id, p->sha);
		goto cleanup;
	}
	struct repo_record rec = { .id = p->repo_id };
	if (n && build_enqueue_all(&rec, p->sha, names, n, 0, "push", NULL, NULL, NULL, skipped) < 0)
		log_warn("build trigger: repo %lld %s: not queued (%s)", repo_id, p->sha,
			 build_queue_refusal() ? build_queue_refusal() : "database");
	else
		log_info("build trigger: repo %lld %s (%s): %zu variants", repo_id, p->sha, p->ref, n);
	json_t *left_out = build_plan_left_out(&plan, names, n);
	log_skipped(p->repo_id, p->sha, skipped, left_out);
	json_decref(left_out);
	const char *warning = json_string_value(json_object_get(plan.doc, "warning"));
	if (warning)
		log_warn("build trigger: repo %lld %s: %s", repo_id, p->sha, warning);
cleanup:
	build_names_free(names, n);
	build_plan_release(&plan);
	json_decref(skipped);
}

static void (*hand_off)(struct push_plan *p);

void build_trigger_hand_off(void (*fn)(struct push_plan *p))
{
	hand_off = fn;
}

/* Read what planning sha needs and hand it to the planner (the server),
 * to the server that ran the push (the push hook), or plan it here (khub
 * import). */
static void queue_planned(int64_t repo_id, git_repository *git, const char *ref, const char *sha)
{
	char why[160];
	struct push_plan *p = xcalloc(1, sizeof(*p));
	p->repo_id = repo_id;
	p->ref = xstrdup(ref);
	snprintf(p->sha, sizeof(p->sha), "%s", sha);
	int rc = build_plan_read_toml(git, sha, &p->toml, &p->len, why, sizeof(why));
	if (rc == KHUB_EIO) {
		log_warn("build trigger: repo %lld %s: cannot read build.toml; nothing queued", (long long)repo_id, sha);
		push_plan_free(p);
		return;
	}
	if (rc < 0)
		p->refused = xstrdup(why);
	if (db_repo_build_owner(repo_id, &p->owner_id) < 0)
		p->owner_id = 0;	/* planned all the same, in the unknown owner's turn */
	if (build_planner_submit(p))
		return;
	if (hand_off) {
		hand_off(p);
		return;
	}
	build_push_plan(p);
	push_plan_free(p);
}

void builds_on_new_commit(int64_t repo_id, git_repository *git, const char *ref, const char *old_sha,
			  const char *new_sha)
{
	struct repo_settings settings;
	if (build_publishing || strncmp(ref, "refs/heads/", 11) != 0)
		return;
	if (db_repo_settings_get(repo_id, &settings) < 0 || !settings.value[REPO_SETTING_BUILD_ON_PUSH] ||
	    !settings.is_kernel || settings.mirrored)
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
