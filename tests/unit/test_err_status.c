/* test_err_status.c -- the one table from enum khub_err to an HTTP status
 * (http/respond.c): every error has its row, and the statuses are the ones
 * docs/api.md promises. */
#include "http/http.h"
#include "tap.h"

int main(void)
{
	static const struct { int rc; int status; } want[] = {
		{ KHUB_ENOTFOUND, 404 }, { KHUB_EINVAL, 400 }, { KHUB_EEXIST, 409 },
		{ KHUB_ECONFLICT, 409 }, { KHUB_EIO, 500 }, { KHUB_EDB, 503 },
		{ KHUB_ETOOBIG, 413 }, { KHUB_EPERM, 403 }, { KHUB_ENOTDIR, 400 },
		{ KHUB_ENOSPC, 507 }, { KHUB_EBUSY, 503 },
	};
	size_t n = sizeof(want) / sizeof(want[0]);
	for (size_t i = 0; i < n; i++)
		ok(khub_err_http_status(want[i].rc) == want[i].status, "%s answers %d",
		   khub_strerror(want[i].rc), want[i].status);
	/* Every value from the first error to the last is one of the above:
	 * a new error added to the enum without a row fails here. */
	for (int rc = KHUB_ENOTFOUND; strcmp(khub_strerror(rc), "unknown error") != 0; rc--) {
		int listed = 0;
		for (size_t i = 0; i < n; i++)
			listed |= want[i].rc == rc;
		ok(listed, "error %d (%s) is in the table", rc, khub_strerror(rc));
	}
	ok(khub_err_http_status(KHUB_OK) == 500, "KHUB_OK is no answer: 500");
	ok(khub_err_http_status(-1000) == 500, "an unknown error: 500");
	return done_testing();
}
