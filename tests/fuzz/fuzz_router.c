/* fuzz_router.c -- fuzz route matching on raw request paths: never crash,
 * and a match always captures what its handler will dereference. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *path = malloc(size + 2);
	path[0] = '/';
	memcpy(path + 1, data, size);
	path[size + 1] = '\0';
	if (memchr(data, '\0', size)) {
		free(path);
		return 0;
	}
	static const enum http_method methods[] = { METHOD_GET, METHOD_HEAD, METHOD_POST, METHOD_DELETE };
	for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
		struct request req;
		memset(&req, 0, sizeof(req));
		req.method = methods[m];
		if (router_match(&req, path) == 0) {
			assert(req.route != NULL);
			if (strstr(req.route->pattern, "{rev}"))
				assert(req.rev != NULL);
			if (strstr(req.route->pattern, "{path*}"))
				assert(req.path != NULL);
			if (strstr(req.route->pattern, "{ns}"))
				assert(req.ns != NULL && req.name != NULL);
		}
		free(req.path_copy);
		free(req.rev);
		free(req.path);
	}
	free(path);
	return 0;
}
