/* fuzz_lfs_pointer.c -- fuzz LFS pointer parsing; whatever parses must
 * format back to a pointer that parses to the same oid and size. */
#include <assert.h>
#include <string.h>

#include "storage/lfs/lfs.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct lfs_pointer p, q;
	if (lfs_pointer_parse((const char *)data, size, &p) != 0)
		return 0;
	char buf[LFS_POINTER_MAX];
	size_t n = lfs_pointer_format(&p, buf);
	assert(lfs_pointer_parse(buf, n, &q) == 0);
	assert(strcmp(p.oid, q.oid) == 0 && p.size == q.size);
	return 0;
}
