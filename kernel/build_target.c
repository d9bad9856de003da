/* build_target.c -- the variant a build must produce so that a client
 * environment loads it: the gap-filling half of the build farm. Pure: the
 * loader's own rules (variant.c) decide whether the answer is taken. */
#include "kernel/kernel.h"

#include <stdio.h>
#include <string.h>

static int refuse(char *why, size_t why_size, const char *text)
{
	snprintf(why, why_size, "%s", text);
	return KHUB_EINVAL;
}

int variant_build_target(const struct variant_env *env, struct variant_name *out, char *why, size_t why_size)
{
	memset(out, 0, sizeof(*out));
	const struct kernel_backend *b = kernel_backend_find(env->backend);
	if (!b)
		return refuse(why, why_size, "unknown backend");
	if (env->torch_major < 0)
		return refuse(why, why_size, "the environment names no torch version");
	if (env->free_threaded)
		return refuse(why, why_size, "a free-threaded Python loads no compiled variant");
	if (b->variant_prefix && env->backend_major < 0)
		return refuse(why, why_size, "the backend needs its version (cuda=13.0, rocm=7.1)");
	if (strcmp(env->os, "linux") != 0 && strcmp(env->os, "darwin") != 0 &&
	    strcmp(env->os, "windows") != 0)
		return refuse(why, why_size, "unknown operating system (linux, darwin, windows)");
	out->framework = VARIANT_TORCH;
	out->framework_major = env->torch_major;
	out->framework_minor = env->torch_minor;
	/* Linux names carry torch's C++ ABI; an unknown one is cxx11, which
	 * every official torch for Linux uses since 2.7. */
	out->cxx11_abi = strcmp(env->os, "linux") == 0 ? (env->cxx11_abi < 0 ? 1 : env->cxx11_abi) : -1;
	snprintf(out->backend, sizeof(out->backend), "%s", b->name);
	kernel_backend_tag(b, b->variant_prefix ? env->backend_major : -1, env->backend_minor, out->backend_tag,
			   sizeof(out->backend_tag));
	out->backend_major = b->variant_prefix ? env->backend_major : -1;
	out->backend_minor = b->variant_prefix ? env->backend_minor : -1;
	snprintf(out->arch, sizeof(out->arch), "%s", env->cpu);
	snprintf(out->os, sizeof(out->os), "%s", env->os);

	/* The loader has the last word (macOS too old for Metal, ...). */
	struct variant_decision d;
	char name[VARIANT_NAME_MAX + 1];
	variant_name_format(out, name, sizeof(name));
	const char *names[1] = { name };
	variant_resolve(out, names, 1, env, &d);
	if (!d.accepted) {
		snprintf(why, why_size, "the loader would not load %s here: %s", name, d.reason);
		return KHUB_EINVAL;
	}
	return 0;
}
