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

int main(void)
{
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
