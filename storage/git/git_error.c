/* git_error.c -- libgit2's last error in the log, for every storage/ file
 * that calls libgit2 (its own file: building commits and creating repos
 * both use it, and neither depends on the other for it). */
#include "storage/git/repo.h"

#include <stdarg.h>

void log_git_error(const char *fmt, ...)
{
	const git_error *e = git_error_last();
	struct strbuf what = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&what, fmt, ap);
	va_end(ap);
	log_error("%s: %s", what.buf, e ? e->message : "unknown git error");
	strbuf_release(&what);
}
