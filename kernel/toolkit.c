/* toolkit.c -- whether a variant's toolkit can build a kernel as its
 * build.toml asks: the framework's and the backend's minver/maxver, and the
 * GPU capabilities its kernels name against the toolkit that compiles them
 * (nvcc's list for CUDA). Pure: judged over the build planner's JSON
 * (farm/build_plan.c) and a parsed variant name. */
#include "kernel/kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kernel_version_of(const char *s, long *major, long *minor)
{
	char *end;
	if (!s || !*s)
		return -1;
	*major = strtol(s, &end, 10);
	*minor = *end == '.' ? strtol(end + 1, &end, 10) : 0;
	return 0;
}

int kernel_version_cmp(long amaj, long amin, long bmaj, long bmin)
{
	return amaj != bmaj ? (amaj < bmaj ? -1 : 1) : amin != bmin ? (amin < bmin ? -1 : 1) : 0;
}

/* torch.minver/maxver (arch variants), and the toolkit's bounds
 * general.<backend>.minver/maxver (build.toml has them for cuda): the
 * plan carries them under the backend's name. */
static int judge_bounds(json_t *doc, const struct variant_name *v, const char *backend, int torch_only, char *why,
			size_t size)
{
	static const struct { const char *table, *key, *what; int sign; } bounds[] = {
		{ "torch", "minver", "torch", -1 }, { "torch", "maxver", "torch", 1 },
		{ NULL, "minver", NULL, -1 }, { NULL, "maxver", NULL, 1 },
	};
	const struct kernel_backend *kb = kernel_backend_find(backend);
	for (size_t i = 0; i < (torch_only ? 2 : sizeof(bounds) / sizeof(bounds[0])); i++) {
		int torch = bounds[i].table != NULL;
		long maj, min, bmaj, bmin;
		if (torch ? v->framework != VARIANT_TORCH : !kb || v->backend_major < 0)
			continue;
		const char *table = torch ? bounds[i].table : backend, *what = torch ? bounds[i].what : kb->title;
		maj = torch ? v->framework_major : v->backend_major;
		min = torch ? v->framework_minor : v->backend_minor;
		const char *bound = json_string_value(json_object_get(json_object_get(doc, table), bounds[i].key));
		if (kernel_version_of(bound, &bmaj, &bmin) == 0 && kernel_version_cmp(maj, min, bmaj, bmin) == bounds[i].sign) {
			snprintf(why, size, "%s %ld.%ld is %s %s%s.%s %s", what, maj, min, bounds[i].sign < 0 ? "below" : "above",
				 torch ? "" : "general.", table, bounds[i].key, bound);
			return 0;
		}
	}
	return 1;
}

/* Which CUDA toolkits compile a capability (nvcc's -arch list): from
 * min up to, not including, below (0: still supported). */
struct capability_row {
	long major, minor, min_maj, min_min, below_maj;
};
static const struct capability_row cuda_capabilities[] = {
	{ 5, 0, 6, 0, 13 }, { 5, 2, 7, 0, 13 }, { 5, 3, 7, 0, 13 }, { 6, 0, 8, 0, 13 }, { 6, 1, 8, 0, 13 },
	{ 6, 2, 8, 0, 13 }, { 7, 0, 9, 0, 13 }, { 7, 2, 9, 2, 13 }, { 7, 5, 10, 0, 0 }, { 8, 0, 11, 0, 0 },
	{ 8, 6, 11, 1, 0 }, { 8, 7, 11, 4, 0 }, { 8, 9, 11, 8, 0 }, { 9, 0, 11, 8, 0 }, { 10, 0, 12, 8, 0 },
	{ 10, 1, 12, 8, 13 }, { 10, 3, 12, 9, 0 }, { 11, 0, 13, 0, 0 }, { 12, 0, 12, 8, 0 }, { 12, 1, 12, 9, 0 },
};

/* The backends whose build.toml kernels name capabilities, and their
 * toolkits' tables (one row a backend, as kernel_backends). */
struct toolkit_capabilities {
	const char *backend, *title;
	const struct capability_row *rows;
	size_t n;
};
static const struct toolkit_capabilities toolkit_capability_tables[] = {
	{ "cuda", "CUDA", cuda_capabilities, sizeof(cuda_capabilities) / sizeof(cuda_capabilities[0]) },
};

static const struct toolkit_capabilities *toolkit_capabilities_of(const char *backend)
{
	for (size_t i = 0; i < sizeof(toolkit_capability_tables) / sizeof(toolkit_capability_tables[0]); i++)
		if (strcmp(toolkit_capability_tables[i].backend, backend) == 0)
			return &toolkit_capability_tables[i];
	return NULL;
}

/* 1 when the toolkit maj.min can compile capability text ("9.0a", "8.0+PTX"). */
static int capability_compiles(const struct toolkit_capabilities *tc, const char *text, long maj, long min)
{
	long cmaj, cmin;
	if (kernel_version_of(text, &cmaj, &cmin) < 0)
		return 0;
	for (size_t i = 0; i < tc->n; i++)
		if (tc->rows[i].major == cmaj && tc->rows[i].minor == cmin)
			return kernel_version_cmp(maj, min, tc->rows[i].min_maj, tc->rows[i].min_min) >= 0 &&
			       (!tc->rows[i].below_maj || maj < tc->rows[i].below_maj);
	return 0;
}

/* An arch variant of a backend whose kernels name their toolkit's
 * capabilities (the plan's "<backend>-kernels", made for cuda): some
 * [kernel.*] of it compiles with the variant's toolkit (its minver, and at
 * least one of its capabilities, by the backend's capability table). */
static int judge_capabilities(json_t *doc, const struct variant_name *v, char *why, size_t size)
{
	const struct toolkit_capabilities *tc = toolkit_capabilities_of(v->backend);
	char key[sizeof(v->backend) + 16];
	snprintf(key, sizeof(key), "%s-kernels", v->backend);
	json_t *kernels = json_object_get(doc, key), *k;
	size_t i;
	if (v->framework == VARIANT_TORCH_NOARCH || !tc || v->backend_major < 0 || json_array_size(kernels) == 0)
		return 1;
	json_array_foreach(kernels, i, k) {
		long kmaj, kmin;
		const char *minver = json_string_value(json_object_get(k, "minver"));
		if (minver && kernel_version_of(minver, &kmaj, &kmin) == 0 &&
		    kernel_version_cmp(v->backend_major, v->backend_minor, kmaj, kmin) < 0)
			continue;
		json_t *caps = json_object_get(k, "capabilities"), *c;
		size_t j;
		if (json_array_size(caps) == 0)
			return 1;	/* the toolkit's default set */
		json_array_foreach(caps, j, c)
			if (capability_compiles(tc, json_string_value(c), v->backend_major, v->backend_minor))
				return 1;
	}
	snprintf(why, size, "no [kernel.*] for %s compiles with %s %ld.%ld (its %s-minver or %s-capabilities)",
		 v->backend, tc->title, v->backend_major, v->backend_minor, v->backend, v->backend);
	return 0;
}


int kernel_toolkit_judge(json_t *plan, const struct variant_name *v, char *why, size_t size)
{
	const char *backend = variant_implied_backend_type(v);
	return backend && judge_bounds(plan, v, backend, 0, why, size) && judge_capabilities(plan, v, why, size);
}

int kernel_torch_outside_bounds(json_t *plan, const struct variant_name *v)
{
	char why[160];
	const char *backend = variant_implied_backend_type(v);
	return v->framework == VARIANT_TORCH && backend && !judge_bounds(plan, v, backend, 1, why, sizeof(why));
}

void kernel_torch_bounds_text(json_t *plan, char *out, size_t size)
{
	json_t *torch = json_object_get(plan, "torch");
	const char *min = json_string_value(json_object_get(torch, "minver"));
	const char *max = json_string_value(json_object_get(torch, "maxver"));
	snprintf(out, size, "%s%s%s%s%s", min ? ">=" : "", min ? min : "", min && max ? "," : "", max ? "<=" : "",
		 max ? max : "");
}

/* Why the toolkit maj.min does not build capability text of its table. */
static void capability_why(const struct toolkit_capabilities *tc, const char *text, long maj, long min, char *why,
			   size_t size)
{
	long cmaj = -1, cmin = -1;
	const struct capability_row *row = NULL, *oldest = NULL;
	kernel_version_of(text, &cmaj, &cmin);
	for (size_t i = 0; i < tc->n; i++) {
		if (tc->rows[i].major == cmaj && tc->rows[i].minor == cmin)
			row = &tc->rows[i];
		if (!oldest && (!tc->rows[i].below_maj || maj < tc->rows[i].below_maj) &&
		    kernel_version_cmp(maj, min, tc->rows[i].min_maj, tc->rows[i].min_min) >= 0)
			oldest = &tc->rows[i];
	}
	if (!row)
		snprintf(why, size, "capability %s left out: no %s toolkit khub knows builds it", text, tc->title);
	else if (kernel_version_cmp(maj, min, row->min_maj, row->min_min) < 0)
		snprintf(why, size, "capability %s left out: %s %ld.%ld cannot build it (first %s with it: %ld.%ld)", text,
			 tc->title, maj, min, tc->title, row->min_maj, row->min_min);
	else if (oldest)
		snprintf(why, size, "capability %s left out: %s %ld.%ld cannot build it (oldest it builds: %ld.%ld)", text,
			 tc->title, maj, min, oldest->major, oldest->minor);
	else
		snprintf(why, size, "capability %s left out: %s %ld.%ld cannot build it", text, tc->title, maj, min);
}

/* One {"capability", "reason"} into out unless one for text is there. */
static void left_out_add(json_t *out, const char *text, const char *why)
{
	size_t i;
	json_t *e;
	json_array_foreach(out, i, e)
		if (strcmp(json_string_value(json_object_get(e, "capability")), text) == 0)
			return;
	json_array_append_new(out, json_pack("{s:s, s:s}", "capability", text, "reason", why));
}

void kernel_toolkit_left_out(json_t *plan, const struct variant_name *v, json_t *out)
{
	const struct toolkit_capabilities *tc = toolkit_capabilities_of(v->backend);
	char key[sizeof(v->backend) + 16], why[256];
	snprintf(key, sizeof(key), "%s-kernels", v->backend);
	json_t *k, *c;
	size_t i, j;
	if (v->framework == VARIANT_TORCH_NOARCH || !tc || v->backend_major < 0)
		return;
	json_array_foreach(json_object_get(plan, key), i, k) {
		json_array_foreach(json_object_get(k, "capabilities"), j, c) {
			const char *text = json_string_value(c);
			if (!text || capability_compiles(tc, text, v->backend_major, v->backend_minor))
				continue;
			capability_why(tc, text, v->backend_major, v->backend_minor, why, sizeof(why));
			left_out_add(out, text, why);
		}
	}
}
