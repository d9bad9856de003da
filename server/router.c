/* router.c -- match a raw request path against the api/ route tables. The
 * path is split on '/' first and each segment decoded after, so a revision
 * sent as refs%2Fheads%2Fv1 stays one segment. */
#include "server/server.h"

#include <string.h>

const struct route *const router_tables[] = {
	orgs_routes, openapi_routes, kernels_routes, kernel_variants_routes,
	trusted_publishers_routes, benchmarks_routes, downloads_routes,
	refs_routes, tree_routes, resolve_routes, commit_routes, preupload_routes, lfs_routes,
	git_routes, mirror_admin_routes,
	repos_routes, branches_routes, commits_routes,
	NULL,
};

const struct route *router_row_without_access(void)
{
	for (size_t t = 0; router_tables[t]; t++)
		for (const struct route *r = router_tables[t]; r->pattern; r++)
			if (!access_name(r->access))
				return r;
	return NULL;
}

static int type_from_plural(const char *seg, int allow_model, enum repo_type *out)
{
	enum repo_type t;
	size_t n = strlen(seg);
	if (n < 2 || seg[n - 1] != 's' || repo_type_parse(seg, &t) < 0 || strcmp(seg, repo_type_plural(t)) != 0)
		return -1;
	if (t == REPO_MODEL && !allow_model)
		return -1;
	*out = t;
	return 0;
}

/* Unencoded special refs span several segments: refs/pr/N, refs/heads/X,
 * refs/tags/X, refs/convert/X. Returns how many segments the revision uses. */
static size_t revision_segments(struct request *req, size_t i)
{
	if (strcmp(req->segv[i], "refs") != 0 || i + 2 >= req->segc)
		return 1;
	const char *kind = req->segv[i + 1];
	if (strcmp(kind, "pr") == 0 || strcmp(kind, "heads") == 0 || strcmp(kind, "tags") == 0 ||
	    strcmp(kind, "convert") == 0)
		return 3;
	return 1;
}

static void reset_captures(struct request *req)
{
	free(req->rev);
	free(req->path);
	req->rev = req->path = NULL;
	req->ns = req->name = req->org = NULL;
	req->name_in_git_url = 0;
	req->nargs = 0;
}

static int match_pattern(struct request *req, const struct route *route)
{
	char pattern[256];
	snprintf(pattern, sizeof(pattern), "%s", route->pattern);
	char *save = NULL;
	size_t i = 0;
	reset_captures(req);
	req->type = route->fixed_type;
	for (char *tok = strtok_r(pattern, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (strcmp(tok, "{path*}") == 0) {
			struct strbuf sb = STRBUF_INIT;
			for (; i < req->segc; i++) {
				if (sb.len)
					strbuf_adds(&sb, "/");
				strbuf_adds(&sb, req->segv[i]);
			}
			req->path = strbuf_detach(&sb, NULL);
			return 0;
		}
		if (i >= req->segc)
			return -1;
		const char *seg = req->segv[i];
		if (tok[0] != '{') {
			if (strcmp(tok, seg) != 0)
				return -1;
		} else if (strcmp(tok, "{type}") == 0) {
			if (type_from_plural(seg, 1, &req->type) < 0)
				return -1;
		} else if (strcmp(tok, "{tprefix}") == 0) {
			if (type_from_plural(seg, 0, &req->type) < 0)
				return -1;
		} else if (strcmp(tok, "{ns}") == 0) {
			req->ns = seg;
		} else if (strcmp(tok, "{name}") == 0 || strcmp(tok, "{gname}") == 0) {
			req->name = seg;
			req->name_in_git_url = tok[1] == 'g';
		} else if (strcmp(tok, "{org}") == 0) {
			req->org = seg;
		} else if (strcmp(tok, "{arg}") == 0) {
			if (req->nargs == sizeof(req->args) / sizeof(req->args[0]))
				return -1;
			req->args[req->nargs++] = seg;
		} else if (strcmp(tok, "{rev}") == 0) {
			size_t n = revision_segments(req, i);
			struct strbuf sb = STRBUF_INIT;
			for (size_t k = 0; k < n; k++) {
				if (k)
					strbuf_adds(&sb, "/");
				strbuf_adds(&sb, req->segv[i + k]);
			}
			req->rev = strbuf_detach(&sb, NULL);
			i += n - 1;
		} else {
			return -1;
		}
		if (seg[0] == '\0')
			return -1;
		i++;
	}
	return i == req->segc ? 0 : -1;
}

int router_match(struct request *req, const char *raw_path)
{
	req->path_copy = xstrdup(raw_path);
	req->segc = 0;
	char *p = req->path_copy;
	if (*p == '/')
		p++;
	while (*p) {
		if (req->segc == MAX_SEGMENTS)
			return KHUB_EINVAL;
		char *slash = strchr(p, '/');
		if (slash)
			*slash = '\0';
		req->segv[req->segc++] = p;
		if (percent_decode_inplace(p) < 0)
			return KHUB_EINVAL;
		if (!slash)
			break;
		p = slash + 1;
	}
	/* A trailing slash adds nothing. */
	if (req->segc > 0 && req->segv[req->segc - 1][0] == '\0')
		req->segc--;

	int path_matched = 0;
	for (size_t t = 0; router_tables[t]; t++) {
		for (const struct route *r = router_tables[t]; r->pattern; r++) {
			if (match_pattern(req, r) < 0)
				continue;
			if (!(r->methods & req->method) && req->method != METHOD_OPTIONS) {
				path_matched = 1;
				continue;
			}
			req->route = r;
			/* only now that the route is chosen: the segment is shared
			 * by every pattern tried */
			size_t n = req->name_in_git_url ? strlen(req->name) : 0;
			if (n > 4 && strcmp(req->name + n - 4, ".git") == 0)
				((char *)req->name)[n - 4] = '\0';
			return 0;
		}
	}
	reset_captures(req);
	return path_matched ? KHUB_EPERM : KHUB_ENOTFOUND;
}
