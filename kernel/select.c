/* select.c -- which repos, refs and build variants a selection takes: the
 * glob matching shared by the mirror (mirror/) and air-gap bundles (sync/). */
#include "kernel/kernel.h"

#include <fnmatch.h>
#include <string.h>

int select_glob_any(char *const *globs, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (fnmatch(globs[i], s, 0) == 0)
			return 1;
	return 0;
}

int select_ref(char *const *refs, size_t nrefs, const char *full)
{
	if (strncmp(full, "refs/heads/", 11) == 0) {
		for (size_t i = 0; i < nrefs; i++)
			if (strcmp(refs[i], "all") == 0 ||
			    (strcmp(refs[i], "tags") != 0 && fnmatch(refs[i], full + 11, 0) == 0))
				return 1;
		return 0;
	}
	if (strncmp(full, "refs/tags/", 10) == 0) {
		for (size_t i = 0; i < nrefs; i++)
			if (strcmp(refs[i], "all") == 0 || strcmp(refs[i], "tags") == 0)
				return 1;
		return 0;
	}
	return 0;
}

int select_variant_path(char *const *globs, size_t n, const char *path)
{
	struct build_path bp;
	if (build_path_parse(path, &bp) < 0 || !bp.file)
		return 1;
	char name[256];
	size_t len = bp.variant_len < sizeof(name) - 1 ? bp.variant_len : sizeof(name) - 1;
	memcpy(name, bp.variant, len);
	name[len] = '\0';
	return select_glob_any(globs, n, name);
}
