/* build_environment.c -- builds asked for by client environment: POST
 * .../builds with {"environment": {"torch": "2.11", "cuda": "13.0", ...}}
 * names the variant that environment would load (kernel/'s
 * variant_build_target, checked against the loader's rules); nothing is
 * queued when a published variant already loads there or no registered
 * worker can build it. */
#include "api/builds.h"

#include <stdio.h>
#include <string.h>

/* Reads environment keys from the JSON object: strings as they are,
 * booleans as true/false, numbers as written (2.11 -> "2.11"). */
struct json_env_reader {
	json_t *object;
	char numbers[16][32];
	size_t used;
};

static const char *json_env_value(void *ctx, const char *key)
{
	struct json_env_reader *r = ctx;
	json_t *v = json_object_get(r->object, key);
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_boolean(v))
		return json_is_true(v) ? "true" : "false";
	if (json_is_number(v) && r->used < sizeof(r->numbers) / sizeof(r->numbers[0])) {
		char *out = r->numbers[r->used++];
		if (json_is_integer(v))
			snprintf(out, sizeof(r->numbers[0]), "%lld", (long long)json_integer_value(v));
		else
			snprintf(out, sizeof(r->numbers[0]), "%g", json_real_value(v));
		return out;
	}
	return NULL;
}

/* The first variant of rows the loader takes in env, or NULL (borrowed). */
static const char *published_choice(const struct variant_rows *rows, const struct variant_env *env)
{
	size_t n = 0;
	struct variant_name *parsed = xcalloc(rows->count + 1, sizeof(*parsed));
	const char **names = xcalloc(rows->count + 1, sizeof(*names));
	struct variant_decision *d = xcalloc(rows->count + 1, sizeof(*d));
	for (size_t i = 0; i < rows->count; i++)
		if (rows->items[i].metadata_status == VARIANT_METADATA_OK &&
		    variant_name_parse(rows->items[i].name, &parsed[n], NULL) == 0)
			names[n++] = rows->items[i].name;
	const char *choice = NULL;
	if (n > 0) {
		variant_resolve(parsed, names, n, env, d);
		if (d[0].accepted)
			choice = names[d[0].index];
	}
	free(parsed);
	free(names);
	free(d);
	return choice;
}

/* The name the kernel of plan is built as for env, given the arch variant
 * target: torch-<backend> for a noarch kernel, torch-stable-abi<MM>-… when
 * build.toml targets the stable ABI (and env's torch is not older). */
static void planned_name(const struct build_plan *plan, const struct variant_env *env,
			 const struct variant_name *target, char *name, size_t size)
{
	const char *fw = json_string_value(json_object_get(plan->doc, "framework"));
	const char *stable = json_string_value(json_object_get(json_object_get(plan->doc, "stable-abi"), target->backend));
	const struct kernel_backend *row = kernel_backend_find(target->backend);
	long maj = -1, min = -1;
	if (strcmp(fw, "torch-noarch") == 0 || (strcmp(fw, "torch") == 0 && !json_is_true(json_object_get(plan->doc, "compiled"))))
		snprintf(name, size, "torch-%s", row && row->noarch ? row->noarch : target->backend);
	else if (stable && sscanf(stable, "%ld.%ld", &maj, &min) == 2 &&
		 (env->torch_major > maj || (env->torch_major == maj && env->torch_minor >= min)))
		snprintf(name, size, "torch-stable-abi%ld%ld-%s-%s-%s", maj, min, target->backend_tag, target->arch,
			 target->os);
	else
		variant_name_format(target, name, size);
}

int build_environment_variants(struct request *req, json_t *environment, git_repository *src,
			       const char *source_sha, const struct build_plan *plan, char ***names, size_t *n,
			       json_t **info, enum MHD_Result *result)
{
	struct json_env_reader reader = { .object = environment };
	struct variant_env env;
	struct variant_name target;
	char why[VARIANT_REASON_MAX + 128], name[VARIANT_NAME_MAX + 1], tag[48];
	if (!json_is_object(environment)) {
		*result = respond_error(req, 400, NULL, "environment must be an object with the keys of GET "
						       ".../variants (torch, cuda, rocm, backend, arch, os, cxx11...)");
		return -1;
	}
	if (kernel_environment_parse(req, json_env_value, &reader, &env, result) < 0)
		return -1;
	variant_env_backend_tag(&env, tag, sizeof(tag));
	if (variant_build_target(&env, &target, why, sizeof(why)) < 0) {
		*result = respond_error(req, 422, NULL, "nothing to build for this environment: %s", why);
		return -1;
	}
	planned_name(plan, &env, &target, name, sizeof(name));
	if (!build_plan_judge(plan, name, why, sizeof(why))) {
		*result = respond_error(req, 422, NULL, "%s, the variant this environment loads, is not built for this "
						       "kernel: %s", name, why);
		return -1;
	}

	struct variant_rows rows;
	if (build_version_branch_variants(req, src, source_sha, &rows, result) < 0)
		return -1;
	const char *loads = published_choice(&rows, &env);
	if (loads) {
		*result = respond_json(req, 200, json_pack("{s:s, s:s, s:s, s:[], s:s+}", "variant", name, "loads", loads,
							   "backend", tag, "builds", "message",
							   "a published variant already loads in this environment: ",
							   loads));
		variant_rows_release(&rows);
		return -1;
	}
	variant_rows_release(&rows);

	char **workers;
	size_t nworkers;
	if (build_worker_variants(&workers, &nworkers) < 0) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	int buildable = build_names_contain(workers, nworkers, name);
	build_names_free(workers, nworkers);
	if (!buildable) {
		*result = respond_error(req, 422, NULL, "no registered worker can build %s (the variant this "
						       "environment loads; none seen within build_worker_live_seconds): "
						       "register a worker with a toolchain for it",
					name);
		return -1;
	}
	*names = xcalloc(2, sizeof(char *));
	(*names)[0] = xstrdup(name);
	*n = 1;
	*info = json_pack("{s:s, s:s}", "variant", name, "backend", tag);
	return 1;
}
