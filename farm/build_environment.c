/* build_environment.c -- builds asked for by client environment: POST
 * .../builds with {"environment": {"torch": "2.11", "cuda": "13.0", ...}}
 * names the variant that environment would load (kernel/'s
 * variant_build_target, checked against the loader's rules); nothing is
 * queued when a published variant already loads there or no registered
 * worker can build it. */
#include "farm/farm.h"

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

int build_environment_target(json_t *environment, const struct build_plan *plan, struct build_env_target *t,
			     char *why, size_t why_size)
{
	struct json_env_reader reader = { .object = environment };
	struct variant_name target;
	char reason[VARIANT_REASON_MAX + 128];
	if (!json_is_object(environment)) {
		snprintf(why, why_size, "environment must be an object with the keys of GET .../variants (torch, cuda, "
			 "rocm, backend, arch, os, cxx11...)");
		return KHUB_EINVAL;
	}
	if (kernel_environment_parse(json_env_value, &reader, &t->env, why, why_size) < 0)
		return KHUB_EINVAL;
	variant_env_backend_tag(&t->env, t->tag, sizeof(t->tag));
	if (variant_build_target(&t->env, &target, reason, sizeof(reason)) < 0) {
		snprintf(why, why_size, "nothing to build for this environment: %s", reason);
		return FARM_EREFUSED;
	}
	planned_name(plan, &t->env, &target, t->name, sizeof(t->name));
	if (!build_plan_judge(plan, t->name, reason, sizeof(reason))) {
		snprintf(why, why_size, "%s, the variant this environment loads, is not built for this kernel: %s",
			 t->name, reason);
		return FARM_EREFUSED;
	}
	return 0;
}

int build_environment_variants(const struct build_env_target *t, const struct variant_rows *published,
			       char ***names, size_t *n, json_t **info, char *why, size_t why_size)
{
	const char *loads = published_choice(published, &t->env);
	if (loads) {
		*info = json_pack("{s:s, s:s, s:s, s:[], s:s+}", "variant", t->name, "loads", loads, "backend", t->tag,
				  "builds", "message", "a published variant already loads in this environment: ", loads);
		return 0;
	}
	char **workers;
	size_t nworkers;
	if (build_worker_variants(&workers, &nworkers) < 0)
		return KHUB_EDB;
	int buildable = build_names_contain(workers, nworkers, t->name);
	build_names_free(workers, nworkers);
	if (!buildable) {
		snprintf(why, why_size, "no registered worker can build %s (the variant this environment loads; none "
			 "seen within build_worker_live_seconds): register a worker with a toolchain for it", t->name);
		return FARM_EREFUSED;
	}
	*names = xcalloc(2, sizeof(char *));
	(*names)[0] = xstrdup(t->name);
	*n = 1;
	*info = json_pack("{s:s, s:s}", "variant", t->name, "backend", t->tag);
	return 1;
}
