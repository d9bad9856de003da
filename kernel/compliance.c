/* compliance.c -- a revision's build variants against the required build
 * list (data/build-variants.json): per system and backend, which required
 * variants are present with valid metadata, missing, or present with
 * broken metadata, and whether the revision aims at that system and
 * backend at all; and the Python-only alternative (torch-<backend>). */
#include "kernel/kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int required_variants_parse(const char *text, size_t len, struct required_variants *out, char *why, size_t why_size)
{
	json_error_t err;
	const char *system, *backend;
	json_t *backends, *list;
	memset(out, 0, sizeof(*out));
	json_t *doc = json_loadb(text, len, 0, &err);
	if (!json_is_object(doc)) {
		snprintf(why, why_size, "%s", doc ? "not a JSON object" : err.text);
		json_decref(doc);
		return KHUB_EINVAL;
	}
	json_object_foreach(doc, system, backends) {
		json_object_foreach(backends, backend, list) {
			out->groups = xrealloc(out->groups, (out->count + 1) * sizeof(*out->groups));
			struct required_group *g = &out->groups[out->count++];
			memset(g, 0, sizeof(*g));
			g->system = xstrdup(system);
			g->backend = xstrdup(backend);
			g->required = json_array_size(list);
			size_t i;
			json_t *v;
			json_array_foreach(list, i, v)
				if (json_is_string(v))
					strvec_pushf(&g->variants, "%s", json_string_value(v));
		}
	}
	json_decref(doc);
	return 0;
}

void required_variants_release(struct required_variants *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++) {
		strvec_release(&r->groups[i].variants);
		free(r->groups[i].system);
		free(r->groups[i].backend);
	}
	free(r->groups);
	memset(r, 0, sizeof(*r));
}

/* 1 when the revision has name with valid metadata; *exists says whether
 * it has it at all. */
static int usable(const struct variant_presence *have, size_t n, const char *name, int *exists)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(have[i].name, name) == 0) {
			*exists = 1;
			return have[i].metadata_ok;
		}
	}
	*exists = 0;
	return 0;
}

/* 1 when one of have is a valid arch variant of backend on system
 * ("x86_64-linux"). */
static int targets(const struct variant_presence *have, size_t n, const char *system, const char *backend)
{
	for (size_t i = 0; i < n; i++) {
		struct variant_name v;
		char sys[2 * sizeof(v.arch)];
		if (variant_name_parse(have[i].name, &v, NULL) < 0 || v.framework == VARIANT_TORCH_NOARCH)
			continue;
		snprintf(sys, sizeof(sys), "%s-%s", v.arch, v.os);
		if (strcmp(v.backend, backend) == 0 && strcmp(sys, system) == 0)
			return 1;
	}
	return 0;
}

void compliance_compute(const struct required_variants *list, const struct variant_presence *have, size_t n,
			struct compliance *out)
{
	memset(out, 0, sizeof(*out));
	out->groups = xcalloc(list->count ? list->count : 1, sizeof(*out->groups));
	out->ngroups = list->count;
	out->python_accepted = xcalloc(list->count ? list->count : 1, sizeof(*out->python_accepted));
	out->python_present = xcalloc(list->count ? list->count : 1, sizeof(*out->python_present));
	int any = 0;
	for (size_t i = 0; i < list->count; i++) {
		const struct required_group *r = &list->groups[i];
		struct compliance_group *g = &out->groups[i];
		size_t slots = r->variants.count ? r->variants.count : 1;
		g->system = r->system;
		g->backend = r->backend;
		g->required = r->required;
		g->present = xcalloc(slots, sizeof(*g->present));
		g->missing = xcalloc(slots, sizeof(*g->missing));
		g->invalid_metadata = xcalloc(slots, sizeof(*g->invalid_metadata));
		for (size_t k = 0; k < r->variants.count; k++) {
			int exists;
			const char *name = r->variants.items[k];
			if (usable(have, n, name, &exists))
				g->present[g->npresent++] = name;
			else if (exists)
				g->invalid_metadata[g->ninvalid++] = name;
			else
				g->missing[g->nmissing++] = name;
		}
		g->compliant = g->nmissing == 0 && g->ninvalid == 0;
		g->targeted = targets(have, n, r->system, r->backend);
		any |= g->compliant;

		/* Python-only kernels: torch-<backend> for every backend named. */
		const struct kernel_backend *b = kernel_backend_find(r->backend);
		char *noarch = xasprintf("torch-%s", b ? b->noarch : r->backend);
		int seen = 0;
		for (size_t k = 0; k < out->npython_accepted; k++)
			seen |= strcmp(out->python_accepted[k], noarch) == 0;
		if (seen) {
			free(noarch);
			continue;
		}
		int exists;
		out->python_accepted[out->npython_accepted++] = noarch;
		if (usable(have, n, noarch, &exists))
			out->python_present[out->npython_present++] = noarch;
	}
	out->python_compliant = out->npython_present > 0;
	out->compliant = any || out->python_compliant;
}

void compliance_release(struct compliance *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->ngroups; i++) {
		free(c->groups[i].present);
		free(c->groups[i].missing);
		free(c->groups[i].invalid_metadata);
	}
	free(c->groups);
	free_strings(c->python_accepted, c->npython_accepted);
	free(c->python_present);
	memset(c, 0, sizeof(*c));
}
