/* build_campaign.c -- fleet rebuilds (docs/build-farm.md, "Fleet
 * rebuilds"): one variant queued for every kernel whose build.toml allows
 * it, newest version first, each kernel planned on the push planner; the
 * policy that starts one when a toolchain brings a new variant; merging a
 * kernel's staged pull request into v<N>. The publication onto refs/pr/N
 * is farm/build_publish.c's. */
#include "farm/farm.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* What a kernel's plan needs, read from main's head while its store is
 * open (a push_plan with the campaign's fields); NULL when it has no main. */
static struct push_plan *candidate_read(const struct db_campaign_candidate *c, int64_t id, const char *variant)
{
	git_repository *git = NULL;
	char why[160], sha[41];
	struct push_plan *p = NULL;
	if (repo_store_open(farm_settings.repo_root, REPO_KERNEL, c->ns, c->name, &git) < 0 ||
	    repo_resolve_revision(git, "main", sha) < 0)
		goto cleanup;
	p = xcalloc(1, sizeof(*p));
	p->repo_id = c->id;
	p->owner_id = c->owner_id;
	p->ref = xstrdup("refs/heads/main");
	memcpy(p->sha, sha, sizeof(p->sha));
	p->campaign_id = id;
	p->variant = xstrdup(variant);
	p->version = -1;
	if (build_plan_read_toml(git, sha, &p->toml, &p->len, why, sizeof(why)) < 0)
		p->refused = xstrdup(why);
	else
		p->version = build_toml_version(p->toml);
cleanup:
	git_repository_free(git);
	return p;
}

/* Newest version first; then by repo, as listed. */
static int by_version(const void *a, const void *b)
{
	const struct push_plan *x = *(struct push_plan *const *)a, *y = *(struct push_plan *const *)b;
	if (x->version != y->version)
		return x->version > y->version ? -1 : 1;
	return x->repo_id < y->repo_id ? -1 : x->repo_id > y->repo_id;
}

int build_campaign_start(const char *variant, const char *reason, const char *requested_by, int64_t *id,
			 char *why, size_t why_size)
{
	struct variant_name parsed;
	struct db_campaign_candidate *c = NULL;
	const char *bad = NULL;
	size_t n = 0, np = 0;
	if (!variant || variant_name_parse(variant, &parsed, &bad) < 0) {
		snprintf(why, why_size, "\"variant\" must be a build variant name%s%s", bad ? ": " : "", bad ? bad : "");
		return KHUB_EINVAL;
	}
	int rc = db_campaign_create(variant, reason, requested_by, id);
	if (rc < 0 || (rc = db_campaign_candidates(&c, &n)) < 0)
		return rc;
	struct push_plan **plans = xcalloc(n + 1, sizeof(*plans));
	for (size_t i = 0; i < n; i++)
		if ((plans[np] = candidate_read(&c[i], *id, variant)) != NULL)
			np++;
	qsort(plans, np, sizeof(*plans), by_version);
	for (size_t i = 0; i < np; i++) {
		plans[i]->position = (int)i;
		/* recorded before it is planned: the campaign shows it waiting */
		db_campaign_kernel_add(*id, plans[i]->repo_id, (int)i, plans[i]->sha, plans[i]->version, 0, NULL);
		if (!build_planner_submit(plans[i])) {
			build_push_plan(plans[i]);	/* no planner here: the command line */
			push_plan_free(plans[i]);
		}
	}
	log_info("campaign %" PRId64 ": %s for %zu kernels (%s, by %s)", *id, variant, np, reason, requested_by);
	free(plans);
	free(c);
	return 0;
}

/* Queue the campaign's variant of p: 0 with *build, or the reason not in why. */
static int campaign_enqueue(const struct push_plan *p, int64_t *build, char *why, size_t why_size)
{
	struct repo_record rec = { .id = p->repo_id, .type = REPO_KERNEL, .owner_id = p->owner_id };
	char by[48], *names[2] = { p->variant, NULL };
	json_t *builds = json_array(), *skipped = json_array();
	snprintf(by, sizeof(by), "campaign #%" PRId64, p->campaign_id);
	int rc = build_enqueue_all(&rec, p->sha, names, 1, 0, by, NULL, NULL, builds, skipped);
	if (rc < 0)
		snprintf(why, why_size, "not queued: %s", build_queue_refusal() ? build_queue_refusal() : "database");
	else if (json_array_size(builds))
		*build = (int64_t)json_integer_value(json_object_get(json_array_get(builds, 0), "id"));
	else
		snprintf(why, why_size, "%s (build #%" JSON_INTEGER_FORMAT ")",
			 json_string_value(json_object_get(json_array_get(skipped, 0), "reason")),
			 json_integer_value(json_object_get(json_array_get(skipped, 0), "build")));
	json_decref(builds);
	json_decref(skipped);
	return *build ? 0 : -1;
}

void build_campaign_plan(const struct push_plan *p, const struct build_plan *plan)
{
	char why[800] = "", reason[600];
	int64_t build = 0;
	if (!plan)
		snprintf(why, sizeof(why), "the build planner cannot run");
	else if (plan->refused)
		snprintf(why, sizeof(why), "%.700s", plan->refused);
	else if (!build_plan_judge(plan, p->variant, reason, sizeof(reason)))
		snprintf(why, sizeof(why), "build.toml does not build it: %s", reason);
	else
		campaign_enqueue(p, &build, why, sizeof(why));
	if (db_campaign_kernel_add(p->campaign_id, p->repo_id, p->position, p->sha, p->version, build,
				   build ? NULL : why) < 0)
		log_warn("campaign %" PRId64 ": repo %" PRId64 ": not recorded (database)", p->campaign_id, p->repo_id);
	log_info("campaign %" PRId64 ": repo %" PRId64 " %s: %s%s", p->campaign_id, p->repo_id, p->variant,
		 build ? "queued" : "skipped: ", build ? "" : why);
}

void build_campaign_policy(char *const *before, size_t nbefore, char *const *offered, size_t noffered,
			   const char *worker)
{
	if (!farm_settings.campaign_on_new_variant)
		return;
	for (size_t i = 0; i < noffered; i++) {
		char reason[200], why[200];
		int64_t id;
		if (build_names_contain(before, nbefore, offered[i]) || build_names_contain(offered, i, offered[i]))
			continue;
		snprintf(reason, sizeof(reason), "policy: a toolchain of worker %s offers it first", worker);
		if (build_campaign_start(offered[i], reason, "policy", &id, why, sizeof(why)) < 0)
			log_warn("campaign of %s (worker %s) not started: database", offered[i], worker);
	}
}

int build_campaign_target(int64_t id, struct db_campaign_kernel *k)
{
	int rc = db_campaign_of_build(id, k);
	if (rc == KHUB_ENOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	if (k->publish_direct) {
		db_campaign_kernel_release(k);
		return 0;
	}
	return 1;
}

json_t *build_campaign_json(const struct db_campaign *c)
{
	return json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "id", (json_int_t)c->id, "variant",
			 c->variant, "reason", c->reason ? c->reason : "", "requested_by",
			 c->requested_by ? c->requested_by : "", "created", c->created, "total", (json_int_t)c->kernels,
			 "built", (json_int_t)c->built, "failed", (json_int_t)c->failed, "waiting",
			 (json_int_t)c->waiting, "skipped", (json_int_t)c->skipped, "merged", (json_int_t)c->merged);
}

const char *build_campaign_pr_status(const struct db_campaign_kernel *k)
{
	if (!k->pr_ref)
		return NULL;
	if (k->merged)
		return "merged";
	return strcmp(k->state, "superseded") == 0 ? "closed" : "open";
}

json_t *build_campaign_kernels_json(int64_t id)
{
	struct db_campaign_kernel *k = NULL;
	size_t n = 0;
	if (db_campaign_kernels(id, &k, &n) < 0)
		return NULL;
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++) {
		char kernel[2 * REPO_NAME_MAX + 2];
		snprintf(kernel, sizeof(kernel), "%s/%s", k[i].ns, k[i].name);
		json_t *o = json_pack("{s:s, s:s, s:b}", "kernel", kernel, "commit", k[i].commit, "merged", k[i].merged);
		json_object_set_new(o, "version", k[i].version >= 0 ? json_integer(k[i].version) : json_null());
		json_object_set_new(o, "build", k[i].build_id ? json_integer(k[i].build_id) : json_null());
		json_object_set_new(o, "state", json_string(k[i].state[0] ? k[i].state
							   : k[i].skipped ? "skipped" : "planning"));
		json_object_set_new(o, "skipped", k[i].skipped ? json_string(k[i].skipped) : json_null());
		json_object_set_new(o, "pr", k[i].pr_ref ? json_string(k[i].pr_ref) : json_null());
		const char *pr_status = build_campaign_pr_status(&k[i]);
		json_object_set_new(o, "pr_status", pr_status ? json_string(pr_status) : json_null());
		json_object_set_new(o, "superseded_by", k[i].superseded_by ? json_integer(k[i].superseded_by) : json_null());
		json_object_set_new(o, "description", k[i].description ? json_string(k[i].description) : json_null());
		json_object_set_new(o, "publish", json_string(k[i].publish_direct ? "direct" : "pr"));
		json_array_append_new(list, o);
	}
	db_campaign_kernels_free(k, n);
	return list;
}

int build_campaign_merge(git_repository *git, const struct db_campaign_kernel *k, char branch[32], char sha[41],
			 char *why, size_t why_size)
{
	char ref[48], head[41] = "";
	if (!k->pr_ref || k->version < 0 || repo_ref_read(git, k->pr_ref, sha) < 0) {
		snprintf(why, why_size, "campaign #%" PRId64 " staged no pull request on %s/%s", k->campaign_id, k->ns,
			 k->name);
		return KHUB_ENOTFOUND;
	}
	if (k->merged) {
		snprintf(why, why_size, "%s was merged already", k->pr_ref);
		return KHUB_EEXIST;
	}
	if (strcmp(k->state, "superseded") == 0) {	/* never over newer work */
		snprintf(why, why_size, "build #%" PRId64 " on %s was superseded by a newer build of %s: nothing merged",
			 k->build_id, k->pr_ref, k->variant);
		return KHUB_ECONFLICT;
	}
	snprintf(branch, 32, "v%ld", k->version);
	snprintf(ref, sizeof(ref), "refs/heads/%s", branch);
	int exists = repo_ref_read(git, ref, head) == 0;
	const char *base = k->pr_base ? k->pr_base : "";
	if (exists ? strcmp(head, base) != 0 : base[0] != '\0') {
		snprintf(why, why_size, "%s moved since %s was staged (from %.12s, now %.12s): nothing merged", branch,
			 k->pr_ref, base[0] ? base : "none", exists ? head : "none");
		return KHUB_ECONFLICT;
	}
	int rc = repo_branch_set(git, branch, sha, exists, "merge of a fleet rebuild's pull request");
	if (rc == KHUB_ECONFLICT || rc == KHUB_EEXIST) {
		snprintf(why, why_size, "%s moved meanwhile", branch);
		return KHUB_ECONFLICT;
	}
	if (rc < 0)
		return KHUB_EIO;
	if (db_campaign_set_merged(k->campaign_id, k->repo_id) == KHUB_EDB)
		return KHUB_EDB;
	/* staged -> succeeded (a build staged before the state existed is
	 * succeeded already) */
	if (strcmp(k->state, "staged") == 0 && build_job_merge(k->build_id) == KHUB_EDB)
		return KHUB_EDB;
	return 0;
}

int build_toolchain_variants(const char *toolchain, char ***names, size_t *n)
{
	struct worker_row *rows = NULL;
	size_t count = 0;
	*names = xcalloc(1, sizeof(char *));
	*n = 0;
	int rc = db_worker_list(&rows, &count);
	if (rc < 0)
		return rc;
	for (size_t r = 0; r < count; r++) {
		json_t *caps = json_loads(rows[r].capabilities, 0, NULL), *tc, *v;
		size_t i, k;
		json_array_foreach(caps, i, tc) {
			if (!json_is_string(json_object_get(tc, "name")) ||
			    strcmp(json_string_value(json_object_get(tc, "name")), toolchain) != 0)
				continue;
			json_array_foreach(json_object_get(tc, "variants"), k, v) {
				if (!json_is_string(v) || build_names_contain(*names, *n, json_string_value(v)))
					continue;
				*names = xrealloc(*names, (*n + 2) * sizeof(char *));
				(*names)[(*n)++] = xstrdup(json_string_value(v));
				(*names)[*n] = NULL;
			}
		}
		json_decref(caps);
	}
	worker_rows_release(rows, count);
	return 0;
}
