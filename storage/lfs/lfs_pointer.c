/* lfs_pointer.c -- parse and format git-lfs pointer files (spec v1). */
#include "storage/lfs/lfs.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char pointer_version[] = "version https://git-lfs.github.com/spec/v1\n";

int lfs_pointer_parse(const char *data, size_t len, struct lfs_pointer *out)
{
	size_t vlen = sizeof(pointer_version) - 1;
	if (len < vlen || len >= LFS_POINTER_MAX || memcmp(data, pointer_version, vlen) != 0)
		return KHUB_EINVAL;
	const char *p = data + vlen, *end = data + len;
	int have_oid = 0, have_size = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return KHUB_EINVAL;
		size_t n = (size_t)(nl - p);
		if (n > 11 && memcmp(p, "oid sha256:", 11) == 0) {
			if (n != 11 + 64 || have_oid)
				return KHUB_EINVAL;
			memcpy(out->oid, p + 11, 64);
			out->oid[64] = '\0';
			if (!is_lower_hex(out->oid, 64))
				return KHUB_EINVAL;
			have_oid = 1;
		} else if (n > 5 && memcmp(p, "size ", 5) == 0) {
			if (have_size || n - 5 > 20)
				return KHUB_EINVAL;
			uint64_t v = 0;
			for (size_t i = 5; i < n; i++) {
				if (p[i] < '0' || p[i] > '9')
					return KHUB_EINVAL;
				if (v > (UINT64_MAX - 9) / 10)
					return KHUB_EINVAL;
				v = v * 10 + (uint64_t)(p[i] - '0');
			}
			out->size = v;
			have_size = 1;
		} else if (n == 0 || memchr(p, ' ', n) == NULL) {
			return KHUB_EINVAL;	/* every line is "key value" */
		}
		p = nl + 1;
	}
	return have_oid && have_size ? 0 : KHUB_EINVAL;
}

size_t lfs_pointer_format(const struct lfs_pointer *ptr, char buf[LFS_POINTER_MAX])
{
	int n = snprintf(buf, LFS_POINTER_MAX, "%soid sha256:%s\nsize %" PRIu64 "\n", pointer_version,
			 ptr->oid, ptr->size);
	return (size_t)n;
}
