/* fuzz_variant.c -- fuzz kernel/: the build variant name parser and the
 * resolver (a name that parses must format back to a name that parses to
 * the same parts, and resolving any set of names must decide each exactly
 * once), build/ path parsing and the metadata.json check. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	/* The whole input as a metadata.json of a variant, and as a path. */
	struct variant_check check;
	variant_check_init(&check, "torch211-cxx11-cu128-x86_64-linux");
	variant_check_metadata(&check, (const char *)data, size);
	assert(check.metadata_status == VARIANT_METADATA_OK || check.metadata_error[0]);
	for (size_t i = 0; i < check.warnings.count; i++)
		assert(check.warnings.items[i][0]);
	variant_check_release(&check);
	struct build_path bp;
	if (build_path_parse(s, &bp) == 0)
		assert(bp.variant == s + 6 && bp.variant_len > 0 && !memchr(bp.variant, '/', bp.variant_len) &&
		       (!bp.file || bp.file == bp.variant + bp.variant_len + 1));
	/* Lines are names; the first two parts of the first line also try to
	 * be an environment. */
	struct variant_name names[16];
	const char *texts[16];
	size_t n = 0;
	for (char *line = s, *next; line && n < 16; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		const char *why = NULL;
		if (variant_name_parse(line, &names[n], &why) < 0) {
			assert(why != NULL);
			continue;
		}
		char out[2 * VARIANT_NAME_MAX];
		struct variant_name again;
		variant_name_format(&names[n], out, sizeof(out));
		assert(variant_name_parse(out, &again, NULL) == 0);
		assert(again.framework == names[n].framework);
		assert(again.framework_major == names[n].framework_major);
		assert(again.framework_minor == names[n].framework_minor);
		assert(again.backend_major == names[n].backend_major);
		assert(strcmp(again.backend_tag, names[n].backend_tag) == 0);
		texts[n++] = line;
	}
	struct variant_env env;
	variant_env_init(&env);
	variant_env_set(&env, "cuda", "12.8", NULL);
	variant_env_set(&env, "torch", "2.11", NULL);
	if (size > 0) {
		static const char *const keys[] = { "torch", "cuda", "rocm", "xpu", "arch", "os", "macos", "backend" };
		variant_env_set(&env, keys[data[0] % 8], size > 1 ? (const char *)s + 1 : "", NULL);
	}
	variant_env_finish(&env);
	struct variant_decision d[16];
	variant_resolve(names, texts, n, &env, d);
	int seen[16] = { 0 };
	for (size_t i = 0; i < n; i++) {
		assert(d[i].index < n && !seen[d[i].index]);
		seen[d[i].index] = 1;
		assert(d[i].accepted || d[i].reason[0]);
	}
	free(s);
	return 0;
}
