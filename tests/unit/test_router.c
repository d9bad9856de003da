/* test_router.c -- route matching on raw paths: split first, decode each
 * segment after, unencoded special refs, prefixes by repo type. */
#include "server/server.h"
#include "tap.h"

#include <stdlib.h>

static struct request *match(const char *method, enum http_method m, const char *path, int *rc)
{
	struct request *req = calloc(1, sizeof(*req));
	req->method = m;
	req->method_name = method;
	*rc = router_match(req, path);
	return req;
}

static void drop(struct request *req)
{
	free(req->path_copy);
	free(req->rev);
	free(req->path);
	free(req);
}

/* A concrete path for a pattern: each placeholder filled with a value it
 * accepts (kernels as the type, a repo name with .git for git URLs). */
static char *instantiate(const char *pattern)
{
	static const struct { const char *ph, *value; } fill[] = {
		{ "{type}", "kernels" }, { "{tprefix}", "kernels" }, { "{ns}", "acme" }, { "{name}", "relu" },
		{ "{gname}", "relu.git" }, { "{org}", "acme" }, { "{arg}", "x" }, { "{rev}", "main" },
		{ "{path*}", "build/a.py" },
	};
	struct strbuf sb = STRBUF_INIT;
	const char *p = pattern;
	while (*p) {
		int done = 0;
		for (size_t i = 0; i < sizeof(fill) / sizeof(fill[0]) && !done; i++) {
			size_t n = strlen(fill[i].ph);
			if (strncmp(p, fill[i].ph, n) == 0) {
				strbuf_adds(&sb, fill[i].value);
				p += n;
				done = 1;
			}
		}
		if (!done)
			strbuf_add(&sb, p++, 1);
	}
	return strbuf_detach(&sb, NULL);
}

static enum http_method first_method(unsigned methods)
{
	for (unsigned m = METHOD_GET; m <= METHOD_DELETE; m <<= 1)
		if (methods & m)
			return (enum http_method)m;
	return METHOD_GET;
}

/* The routing rule of the web UI: no page shadows an API, git or resolve
 * path (every API row still gets its own requests), and every page is
 * reachable (no API row takes its paths). */
static void pages_shadow_nothing(void)
{
	int rc, shadowed = 0, unreachable = 0;
	for (size_t t = 0; router_tables[t]; t++)
		for (const struct route *row = router_tables[t]; row->pattern; row++) {
			char *path = instantiate(row->pattern);
			struct request *r = match("X", first_method(row->methods), path, &rc);
			if (rc != 0 || !r->route || (r->route->flags & ROUTE_PAGE)) {
				shadowed++;
				printf("# %s is answered by %s\n", path, r->route ? r->route->pattern : "nothing");
			}
			drop(r);
			free(path);
		}
	ok(shadowed == 0, "every API route's path is answered by an API route, never a page");
	for (size_t t = 0; router_page_tables[t]; t++)
		for (const struct route *row = router_page_tables[t]; row->pattern; row++) {
			char *path = instantiate(row->pattern);
			struct request *r = match("X", first_method(row->methods), path, &rc);
			if (rc != 0 || r->route != row) {
				unreachable++;
				printf("# page %s is answered by %s\n", path, r->route ? r->route->pattern : "nothing");
			}
			drop(r);
			free(path);
		}
	ok(unreachable == 0, "every page's path reaches its page");
	struct request *r = match("GET", METHOD_GET, "/api/no-such-thing", &rc);
	ok(rc == KHUB_ENOTFOUND, "an unknown path under /api/ is never a page");
	drop(r);
	r = match("GET", METHOD_GET, "/api", &rc);
	ok(rc == KHUB_ENOTFOUND, "nor is /api itself");
	drop(r);
	r = match("GET", METHOD_GET, "/acme", &rc);
	ok(rc == 0 && r->route && (r->route->flags & ROUTE_PAGE) && strcmp(r->org, "acme") == 0,
	   "/{ns} is the namespace page");
	drop(r);
}

int main(void)
{
	pages_shadow_nothing();
	int rc;
	struct request *r;

	r = match("GET", METHOD_GET, "/api/kernels/acme/relu/tree/refs%2Fheads%2Fv1/build", &rc);
	ok(rc == 0 && r->type == REPO_KERNEL, "tree route, kernel type");
	is_str(r->rev, "refs/heads/v1", "encoded full ref is one revision");
	is_str(r->path, "build", "path after the revision");
	drop(r);

	r = match("GET", METHOD_GET, "/api/kernels/acme/relu/tree/v1/build%2Ftorch-cpu", &rc);
	is_str(r->path, "build/torch-cpu", "encoded path decoded after split");
	drop(r);

	r = match("GET", METHOD_GET, "/api/kernels/acme/relu/tree/refs/pr/3/build", &rc);
	is_str(r->rev, "refs/pr/3", "unencoded refs/pr/N spans three segments");
	is_str(r->path, "build", "path after an unencoded PR ref");
	drop(r);

	r = match("GET", METHOD_GET, "/api/kernels/acme/relu/tree/main", &rc);
	ok(rc == 0, "tree without a path");
	is_str(r->path, "", "empty path");
	drop(r);

	r = match("HEAD", METHOD_HEAD, "/kernels/acme/relu/resolve/0123456789abcdef0123456789abcdef01234567/build/torch-cpu/__init__.py", &rc);
	ok(rc == 0 && r->type == REPO_KERNEL, "kernel resolve");
	is_str(r->ns, "acme", "namespace");
	is_str(r->name, "relu", "name");
	is_str(r->path, "build/torch-cpu/__init__.py", "file path keeps its slashes");
	drop(r);

	r = match("GET", METHOD_GET, "/acme/relu/resolve/main/README.md", &rc);
	ok(rc == 0 && r->type == REPO_MODEL, "model resolve has no prefix");
	drop(r);

	r = match("GET", METHOD_GET, "/datasets/acme/data/resolve/main/x.csv", &rc);
	ok(rc == 0 && r->type == REPO_DATASET, "dataset resolve");
	drop(r);

	r = match("GET", METHOD_GET, "/api/models/acme/relu/revision/main", &rc);
	ok(rc == 0 && r->type == REPO_MODEL, "model revision");
	drop(r);

	r = match("GET", METHOD_GET, "/api/kernels/acme/relu", &rc);
	ok(rc == 0 && r->rev == NULL, "repo info without revision");
	drop(r);

	r = match("GET", METHOD_GET, "/api/organizations/acme/overview", &rc);
	ok(rc == 0, "org overview");
	is_str(r->org, "acme", "org captured");
	drop(r);

	r = match("GET", METHOD_GET, "/kernels/acme/relu.git/info/refs", &rc);
	ok(rc == 0 && r->type == REPO_KERNEL, "git remote URL with .git");
	is_str(r->name, "relu", "the .git of a remote URL is dropped from the repo name");
	drop(r);

	r = match("POST", METHOD_POST, "/kernels/acme/relu/info/lfs/objects/batch", &rc);
	is_str(r->name, "relu", "LFS batch without .git");
	drop(r);

	r = match("DELETE", METHOD_DELETE, "/api/kernels/acme/relu/refs", &rc);
	ok(rc == KHUB_EPERM, "known path, wrong method");
	drop(r);

	r = match("GET", METHOD_GET, "/api/widgets/acme/relu/refs", &rc);
	ok(rc == KHUB_ENOTFOUND, "unknown repo type");
	drop(r);

	r = match("GET", METHOD_GET, "/api/kernels/acme/relu/tree/main/a%2", &rc);
	ok(rc == KHUB_EINVAL, "broken escape");
	drop(r);

	r = match("GET", METHOD_GET, "/api/kernels/acme/relu/tree/main/a%00b", &rc);
	ok(rc == KHUB_EINVAL, "encoded NUL");
	drop(r);

	r = match("GET", METHOD_GET, "/api/kernels//relu/refs", &rc);
	ok(rc == KHUB_ENOTFOUND, "empty namespace segment");
	drop(r);
	return done_testing();
}
