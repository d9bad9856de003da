/* fuzz_paths.c -- fuzz the name, path and ref validators and percent
 * decoding; a path that passes must really be safe to join to a repo root. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "storage/git/repo.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	if (repo_path_validate(s, NULL) == 0) {
		assert(s[0] != '/');
		assert(strstr(s, "//") == NULL);
		assert(strcmp(s, "..") != 0 && strncmp(s, "../", 3) != 0);
		assert(strstr(s, "/../") == NULL);
		size_t n = strlen(s);
		assert(!(n >= 3 && strcmp(s + n - 3, "/..") == 0));
		assert(strchr(s, '\\') == NULL);
		assert(n <= REPO_PATH_MAX);
	}
	if (repo_name_validate(s, NULL) == 0) {
		assert(strchr(s, '/') == NULL);
		assert(strstr(s, "..") == NULL);
	}
	if (ref_name_validate(s, NULL) == 0)
		assert(strstr(s, "..") == NULL && strchr(s, ' ') == NULL);
	if (percent_decode_inplace(s) == 0)
		assert(strlen(s) <= size);
	free(s);
	return 0;
}
