/* build_variants.c -- which variants a build means: the required list
 * (data/build-variants.json or build_variants), what live workers can
 * build (and what a worker registers), what a version branch lacks, the
 * names a request gives (judged against build.toml by farm/build_plan.c). */
#include "farm/farm.h"

#include <pthread.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- the official list ---------------------------------------------------------- */

static struct required_variants required_variants;	/* parsed data/build-variants.json */
static pthread_once_t required_once = PTHREAD_ONCE_INIT;

static void load_required_variants(void)
{
	char why[200];
	if (required_variants_parse(embedded_build_variants_json, embedded_build_variants_json_len, &required_variants,
				    why, sizeof(why)) < 0)
		log_error("data/build-variants.json: %s", why);
}

const struct required_variants *kernel_required_variants(void)
{
	pthread_once(&required_once, load_required_variants);
	return &required_variants;
}

/* ---- the required list ---------------------------------------------------------- */

static struct required_variants configured_list;
static int configured_ok;
static pthread_once_t configured_once = PTHREAD_ONCE_INIT;

static void load_configured_list(void)
{
	const char *path = farm_settings.variants_file;
	char why[200];
	if (!path || !path[0])
		return;
	size_t len = 0;
	char *text = read_file_limited(path, 4 * 1024 * 1024, &len);
	if (!text)
		log_error("build_variants %s: cannot read it; the official list is used", path);
	else if (required_variants_parse(text, len, &configured_list, why, sizeof(why)) < 0)
		log_error("build_variants %s: %s; the official list is used", path, why);
	else
		configured_ok = 1;
	free(text);
}

const struct required_variants *build_required_list(void)
{
	pthread_once(&configured_once, load_configured_list);
	return configured_ok ? &configured_list : kernel_required_variants();
}

void build_names_free(char **names, size_t n)
{
	free_strings(names, n);
}

void build_worker_offers_release(struct worker_offers *w)
{
	build_names_free(w->live, w->nlive);
	build_names_free(w->stale, w->nstale);
	build_names_free(w->hipify, w->nhipify);
	memset(w, 0, sizeof(*w));
}

int build_worker_offers(struct worker_offers *w)
{
	memset(w, 0, sizeof(*w));
	long secs = farm_settings.worker_live_seconds;
	if (db_worker_variants(secs, &w->live, &w->nlive, &w->stale, &w->nstale) < 0 ||
	    db_worker_hipify_variants(secs, &w->hipify, &w->nhipify) < 0) {
		build_worker_offers_release(w);
		return KHUB_EDB;
	}
	return 0;
}

int build_worker_variants(char ***names, size_t *n)
{
	char **stale;
	size_t nstale;
	int rc = db_worker_variants(farm_settings.worker_live_seconds, names, n, &stale, &nstale) < 0 ? KHUB_EDB : 0;
	build_names_free(stale, nstale);
	return rc;
}

int build_names_contain(char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return 1;
	return 0;
}

int build_default_variants(const struct build_plan *plan, char ***names, size_t *n, json_t *skipped)
{
	struct worker_offers w;
	if (build_worker_offers(&w) < 0)
		return KHUB_EDB;
	build_plan_default(plan, &w, build_required_list(), names, n, skipped);
	build_worker_offers_release(&w);
	return 0;
}

int build_unbuildable_variants(const struct build_plan *plan, json_t *out)
{
	struct worker_offers w;
	char **names;
	size_t n, i;
	json_t *skipped = json_array(), *s;
	if (build_worker_offers(&w) < 0) {
		json_decref(skipped);
		return KHUB_EDB;
	}
	build_plan_default(plan, &w, build_required_list(), &names, &n, skipped);
	/* what live workers offer and build.toml refuses is no matrix cell */
	json_array_foreach(skipped, i, s)
		if (!build_names_contain(w.live, w.nlive, json_string_value(json_object_get(s, "variant"))))
			json_array_append(out, s);
	json_decref(skipped);
	build_names_free(names, n);
	build_worker_offers_release(&w);
	return 0;
}

/* ---- what a request names or a branch lacks ---------------------------------------- */

int build_version_branch(git_repository *repo, git_repository *src, const char *source_sha, char head[41])
{
	char *toml = repo_read_text_file(src, source_sha, "build.toml", 1024 * 1024);
	long version = toml ? build_toml_version(toml) : -1;
	free(toml);
	char branch[32];
	snprintf(branch, sizeof(branch), "refs/heads/v%ld", version < 1 ? 1 : version);
	return repo_ref_read(repo, branch, head) == 0 ? 0 : KHUB_ENOTFOUND;
}

void build_missing_variants(const struct variant_rows *published, char ***names, size_t *n)
{
	struct variant_presence *have = xcalloc(published->count + 1, sizeof(*have));
	for (size_t i = 0; i < published->count; i++) {
		have[i].name = published->items[i].name;
		have[i].metadata_ok = published->items[i].metadata_status == VARIANT_METADATA_OK;
	}
	struct compliance c;
	compliance_compute(build_required_list(), have, published->count, &c);
	size_t cap = 0;
	for (size_t g = 0; g < c.ngroups; g++)
		cap += c.groups[g].nmissing + c.groups[g].ninvalid;
	*names = xcalloc(cap + 1, sizeof(char *));
	*n = 0;
	for (size_t g = 0; g < c.ngroups; g++) {
		const struct compliance_group *grp = &c.groups[g];
		for (size_t k = 0; k < grp->nmissing + grp->ninvalid; k++) {
			const char *name = k < grp->nmissing ? grp->missing[k] : grp->invalid_metadata[k - grp->nmissing];
			if (!build_names_contain(*names, *n, name))
				(*names)[(*n)++] = xstrdup(name);
		}
	}
	compliance_release(&c);
	free(have);
}

int build_named_variants(json_t *variants, char ***names, size_t *n, char *why, size_t why_size)
{
	size_t i;
	json_t *v;
	*names = xcalloc(json_array_size(variants) + 1, sizeof(char *));
	*n = 0;
	json_array_foreach(variants, i, v) {
		struct variant_name parsed;
		const char *bad = NULL;
		if (!json_is_string(v) || variant_name_parse(json_string_value(v), &parsed, &bad) < 0) {
			build_names_free(*names, *n);
			*names = NULL;
			*n = 0;
			snprintf(why, why_size, "variants[%zu] is not a build variant name%s%s", i, bad ? ": " : "",
				 bad ? bad : "");
			return KHUB_EINVAL;
		}
		if (!build_names_contain(*names, *n, json_string_value(v)))
			(*names)[(*n)++] = xstrdup(json_string_value(v));
	}
	return 0;
}

/* ---- what a worker offers --------------------------------------------------------- */

char **build_variant_list(json_t *array, size_t *n, size_t *bad)
{
	size_t i;
	json_t *v;
	char **names = xcalloc(json_array_size(array) + 1, sizeof(char *));
	*n = 0;
	json_array_foreach(array, i, v) {
		struct variant_name parsed;
		const char *why;
		if (!json_is_string(v) || variant_name_parse(json_string_value(v), &parsed, &why) < 0) {
			*bad = i;
			build_names_free(names, *n);
			return NULL;
		}
		names[(*n)++] = xstrdup(json_string_value(v));
	}
	return names;
}

/* The variants of a registration's toolchains (owned, build_names_free):
 * 0, or KHUB_EINVAL with why. */
static int registered_variants(json_t *toolchains, char ***all, size_t *count, char *why, size_t why_size)
{
	size_t i;
	json_t *tc;
	*all = xcalloc(1, sizeof(char *));
	*count = 0;
	json_array_foreach(toolchains, i, tc) {
		json_t *list = json_object_get(tc, "variants");
		size_t n = 0, bad = 0;
		char **names = json_is_object(tc) && json_is_array(list) ? build_variant_list(list, &n, &bad) : NULL;
		if (!names) {
			snprintf(why, why_size, "toolchains[%zu]: variants must be an array of build variant names (entry %zu "
				 "is not)", i, bad);
			return KHUB_EINVAL;
		}
		*all = xrealloc(*all, (*count + n + 1) * sizeof(char *));
		memcpy(*all + *count, names, n * sizeof(char *));
		*count += n;
		(*all)[*count] = NULL;
		free(names);
	}
	return 0;
}

int build_worker_register(int64_t worker_id, const char *version, long concurrency, json_t *toolchains,
			  size_t *count, char *why, size_t why_size)
{
	struct strbuf variants = STRBUF_INIT;
	char **all = NULL, **before = NULL, name[32];
	size_t nbefore = 0;
	int rc = registered_variants(toolchains, &all, count, why, why_size);
	if (rc < 0)
		goto cleanup;
	strbuf_adds(&variants, "{");
	for (size_t k = 0; k < *count; k++) {
		if (k)
			strbuf_adds(&variants, ",");
		db_array_add(&variants, all[k]);
	}
	strbuf_adds(&variants, "}");
	/* what live workers offered until now, for the campaign policy */
	int policy = farm_settings.campaign_on_new_variant && build_worker_variants(&before, &nbefore) == 0;
	snprintf(name, sizeof(name), "#%" PRId64, worker_id);
	char *caps = json_dumps(toolchains, JSON_COMPACT);
	rc = db_worker_register(worker_id, version, concurrency, caps, variants.buf);
	free(caps);
	if (rc == 0 && policy)
		build_campaign_policy(before, nbefore, all, *count, name);
	rc = rc < 0 && rc != KHUB_ENOTFOUND ? KHUB_EDB : rc;
cleanup:
	build_names_free(all, *count);
	build_names_free(before, nbefore);
	strbuf_release(&variants);
	return rc;
}
