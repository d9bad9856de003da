/* test_build_target.c -- the variant a build must produce for a client
 * environment (variant_build_target): for the environments of the
 * compatibility tests (t0080), the name kernel-builder would give that
 * build, and the loader's rules (variant_resolve) take it ahead of every
 * noarch and older build; environments that load no compiled variant are
 * refused with a reason. Also kernel_environment_parse, which reads such an
 * environment for the API and for build requests, linked here without any
 * HTTP code. */
#include "kernel/kernel.h"
#include "tests/unit/tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct env_case {
	const char *query;	/* as GET .../variants?compatible=true takes it */
	const char *want;	/* the variant to build; NULL: refused */
};

static const struct env_case cases[] = {
	{ "torch=2.11&cuda=12.8&arch=x86_64&os=linux", "torch211-cxx11-cu128-x86_64-linux" },
	{ "torch=2.11&cuda=12.9", "torch211-cxx11-cu129-x86_64-linux" },
	{ "torch=2.11&cuda=12.4", "torch211-cxx11-cu124-x86_64-linux" },
	{ "torch=2.11&cuda=11.8", "torch211-cxx11-cu118-x86_64-linux" },
	{ "torch=2.11&cuda=13.0", "torch211-cxx11-cu130-x86_64-linux" },
	{ "torch=2.12&cuda=12.8", "torch212-cxx11-cu128-x86_64-linux" },
	{ "torch=2.13&cuda=12.8", "torch213-cxx11-cu128-x86_64-linux" },
	{ "torch=2.10&cuda=12.8", "torch210-cxx11-cu128-x86_64-linux" },
	{ "torch=2.11.0+cu128&cuda=12.8", "torch211-cxx11-cu128-x86_64-linux" },
	{ "torch=2.11&rocm=7.1", "torch211-cxx11-rocm71-x86_64-linux" },
	{ "torch=2.11&rocm=6.4", "torch211-cxx11-rocm64-x86_64-linux" },
	{ "torch=2.11&xpu=2025.3", "torch211-cxx11-xpu20253-x86_64-linux" },
	{ "torch=2.11", "torch211-cxx11-cpu-x86_64-linux" },
	{ "torch=1.13", "torch113-cxx11-cpu-x86_64-linux" },
	{ "torch=2.11&cuda=12.8&backend=cpu", "torch211-cxx11-cpu-x86_64-linux" },
	{ "torch=2.11&cuda=12.8&arch=aarch64", "torch211-cxx11-cu128-aarch64-linux" },
	{ "torch=2.11&arch=arm64&os=darwin", "torch211-cpu-aarch64-darwin" },
	{ "torch=2.11&arch=arm64&os=Darwin&backend=metal&macos=26.0", "torch211-metal-aarch64-darwin" },
	{ "torch=2.11&arch=x86_64&os=darwin", "torch211-cpu-x86_64-darwin" },
	{ "torch=2.11&cuda=12.8&cxx11=false", "torch211-cxx98-cu128-x86_64-linux" },
	{ "torch=2.11&cuda=12.8&os=windows&arch=AMD64", "torch211-cu128-x86_64-windows" },
	/* nothing compiled loads there */
	{ "torch=2.11&arch=arm64&os=darwin&backend=metal&macos=15.7", NULL },
	{ "cuda=12.8", NULL },
	{ "torch=2.11&cuda=12.8&free_threaded=true", NULL },
};

/* Fill env from a query string; 0 or -1. */
static int env_from_query(const char *query, struct variant_env *env)
{
	char *copy = strdup(query), *save = NULL;
	int rc = 0;
	variant_env_init(env);
	for (char *kv = strtok_r(copy, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		const char *why = NULL;
		if (!eq) {
			rc = -1;
			break;
		}
		*eq = '\0';
		if (variant_env_set(env, kv, eq + 1, &why) < 0) {
			printf("# %s: %s\n", kv, why);
			rc = -1;
			break;
		}
	}
	free(copy);
	variant_env_finish(env);
	return rc;
}

/* The loader must prefer the target over what a hub usually has besides:
 * the noarch builds and an arch build of an older torch. */
static void check_preferred(const struct variant_env *env, const char *target)
{
	char older[VARIANT_NAME_MAX + 1];
	struct variant_name parsed;
	variant_name_parse(target, &parsed, NULL);
	parsed.framework_minor = parsed.framework_minor > 0 ? parsed.framework_minor - 1 : 0;
	variant_name_format(&parsed, older, sizeof(older));
	const char *names[] = { "torch-universal", "torch-cpu", "torch-cuda", "torch-rocm", "torch-metal", older,
				target };
	size_t n = sizeof(names) / sizeof(names[0]);
	struct variant_name parsed_all[sizeof(names) / sizeof(names[0])];
	struct variant_decision d[sizeof(names) / sizeof(names[0])];
	for (size_t i = 0; i < n; i++)
		variant_name_parse(names[i], &parsed_all[i], NULL);
	variant_resolve(parsed_all, names, n, env, d);
	ok(d[0].accepted && strcmp(names[d[0].index], target) == 0, "the loader picks %s first", target);
}

/* kernel_environment_parse's getter over a query string ("k=v&k=v"). */
static const char *query_get(void *ctx, const char *key)
{
	static char value[128];
	const char *q = ctx;
	size_t klen = strlen(key);
	while (q && *q) {
		const char *end = strchr(q, '&');
		size_t len = end ? (size_t)(end - q) : strlen(q);
		if (len > klen && strncmp(q, key, klen) == 0 && q[klen] == '=') {
			snprintf(value, sizeof(value), "%.*s", (int)(len - klen - 1), q + klen + 1);
			return value;
		}
		q = end ? end + 1 : NULL;
	}
	return NULL;
}

/* The environment as the API and a build request read it: the same as
 * variant_env_set key by key, and its refusals said (400 by callers). */
static void check_environment_parse(void)
{
	static const struct { const char *query, *why; } bad[] = {
		{ "torch=2.11&cuda=12.8&rocm=7.1", "give one of cuda=, rocm=, xpu= or cann= (got cuda= and rocm=)" },
		{ "torch=2.11&cuda=12.8&backend=rocm", "Invalid backend 'rocm', system supported backends: cuda, cpu" },
		{ "torch=2.11&backend=cuda", "backend=cuda needs cuda=MAJOR.MINOR (the cuda version)" },
		{ "torch=banana", "invalid torch=banana: " },
	};
	struct variant_env a, b;
	char why[256] = "";
	int rc = kernel_environment_parse(query_get, (void *)"torch=2.11&cuda=12.8&arch=aarch64", &a, why, sizeof(why));
	env_from_query("torch=2.11&cuda=12.8&arch=aarch64", &b);
	ok(rc == 0 && memcmp(&a, &b, sizeof(a)) == 0, "kernel_environment_parse reads what variant_env_set does (%s)", why);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		rc = kernel_environment_parse(query_get, (void *)bad[i].query, &a, why, sizeof(why));
		ok(rc == KHUB_EINVAL && strncmp(why, bad[i].why, strlen(bad[i].why)) == 0, "%s: refused: %s", bad[i].query,
		   why);
	}
}

int main(void)
{
	check_environment_parse();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct env_case *c = &cases[i];
		struct variant_env env;
		struct variant_name target;
		char why[VARIANT_REASON_MAX + 64] = "", name[VARIANT_NAME_MAX + 1] = "";
		if (env_from_query(c->query, &env) < 0) {
			ok(0, "%s: parses", c->query);
			continue;
		}
		int rc = variant_build_target(&env, &target, why, sizeof(why));
		if (!c->want) {
			ok(rc == KHUB_EINVAL && why[0], "%s: nothing to build (%s)", c->query, why);
			continue;
		}
		if (rc == 0)
			variant_name_format(&target, name, sizeof(name));
		is_str(rc == 0 ? name : why, c->want, "%s: build %s", c->query, c->want);
		if (rc == 0)
			check_preferred(&env, name);
	}
	return done_testing();
}
