/* environment.c -- a client environment given as keys (the query of GET
 * .../variants, the "environment" of a build request): torch, one
 * versioned backend, backend, arch, os, cxx11, macos, tvm_ffi,
 * free_threaded, checked as the kernels loader checks them. */
#include "kernel/kernel.h"

#include <stdio.h>
#include <string.h>

/* Keys of the environment besides torch and one per versioned backend of
 * the table (cuda, rocm, xpu, cann). */
static const char *const env_keys[] = { "arch", "os", "cxx11", "macos", "tvm_ffi", "free_threaded" };

/* One environment key, when given (*versioned: the backend key seen so
 * far): 0, or KHUB_EINVAL with why. */
static int environment_key(environment_getter get, void *ctx, struct variant_env *env, const char *key,
			   const char **versioned, char *why, size_t why_size)
{
	const char *bad = NULL, *value = get(ctx, key);
	const struct kernel_backend *b = kernel_backend_find(key);
	if (!value)
		return 0;
	if (b && b->variant_prefix) {
		if (*versioned) {
			snprintf(why, why_size, "give one of cuda=, rocm=, xpu= or cann= (got %s= and %s=)", *versioned, key);
			return KHUB_EINVAL;
		}
		*versioned = key;
	}
	if (variant_env_set(env, key, value, &bad) < 0) {
		snprintf(why, why_size, "invalid %s=%s: %s", key, value, bad);
		return KHUB_EINVAL;
	}
	return 0;
}

/* backend= picks among what the system has, as kernels' _select_backend:
 * cpu always, else the detected backend itself (versioned). */
static int environment_backend(const char *backend, const char *versioned, struct variant_env *env, char *why,
			       size_t why_size)
{
	const char *bad = NULL;
	const struct kernel_backend *b;
	if (versioned && strcmp(backend, versioned) == 0)
		return 0;	/* the detected backend, already set */
	if (versioned && strcmp(backend, "cpu") != 0)
		snprintf(why, why_size, "Invalid backend '%s', system supported backends: %s, cpu", backend, versioned);
	else if (!versioned && (b = kernel_backend_find(backend)) && b->variant_prefix)
		snprintf(why, why_size, "backend=%s needs %s=MAJOR.MINOR (the %s version)", backend, backend, backend);
	else if (variant_env_set(env, "backend", backend, &bad) < 0)
		snprintf(why, why_size, "invalid backend=%s: %s", backend, bad);
	else
		return 0;
	return KHUB_EINVAL;
}

int kernel_environment_parse(environment_getter get, void *ctx, struct variant_env *env, char *why, size_t why_size)
{
	const char *versioned = NULL;
	variant_env_init(env);
	int rc = environment_key(get, ctx, env, "torch", &versioned, why, why_size);
	for (const struct kernel_backend *b = kernel_backends; rc == 0 && b->name; b++)
		if (b->variant_prefix)
			rc = environment_key(get, ctx, env, b->name, &versioned, why, why_size);
	for (size_t i = 0; rc == 0 && i < sizeof(env_keys) / sizeof(env_keys[0]); i++)
		rc = environment_key(get, ctx, env, env_keys[i], &versioned, why, why_size);
	if (rc < 0)
		return rc;
	const char *backend = get(ctx, "backend");
	if (backend && backend[0] && (rc = environment_backend(backend, versioned, env, why, why_size)) < 0)
		return rc;
	variant_env_finish(env);
	return 0;
}
