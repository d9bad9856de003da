/* build_path.c -- repo paths under build/: which variant directory a path
 * lies in (build/<variant>/<file>). */
#include "kernel/kernel.h"

#include <string.h>

int build_path_parse(const char *path, struct build_path *out)
{
	static const char prefix[] = BUILD_DIR "/";
	memset(out, 0, sizeof(*out));
	if (strncmp(path, prefix, sizeof(prefix) - 1) != 0)
		return KHUB_EINVAL;
	const char *variant = path + sizeof(prefix) - 1, *slash = strchr(variant, '/');
	size_t n = slash ? (size_t)(slash - variant) : strlen(variant);
	if (n == 0)
		return KHUB_EINVAL;
	out->variant = variant;
	out->variant_len = n;
	out->file = slash ? slash + 1 : NULL;
	return 0;
}
