/* router.c -- match a raw request path against the api/ route tables. The
 * path is split on '/' first and each segment decoded after, so a revision
 * sent as refs%2Fheads%2Fv1 stays one segment. */
#include "server/server.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>

const struct route *const router_tables[] = {
	orgs_routes, openapi_routes, kernels_routes, kernel_variants_routes,
	trusted_publishers_routes, benchmarks_routes, benchmark_queries_routes, benchmark_compare_routes, downloads_routes,
	refs_routes, tree_routes, resolve_routes, commit_routes, preupload_routes, lfs_routes,
	git_routes, mirror_admin_routes,
	repos_routes, repo_settings_routes, branches_routes, commits_routes,
	builds_routes, build_enqueue_routes, build_worker_routes, build_source_routes, build_output_routes,
	webhooks_routes,
	campaigns_routes,
	benchmark_jobs_routes,
	NULL,
};

/* The web UI's pages come after every API table, and never under /api/
 * (docs/web-ui.md, "Routing"). */
const struct route *const router_page_tables[] = { web_routes, NULL };

const struct route *router_row_without_access(void)
{
	for (size_t t = 0; router_tables[t]; t++)
		for (const struct route *r = router_tables[t]; r->pattern; r++)
			if (!access_name(r->access))
				return r;
	for (size_t t = 0; router_page_tables[t]; t++)
		for (const struct route *r = router_page_tables[t]; r->pattern; r++)
			if (!access_name(r->access) || !(r->flags & ROUTE_PAGE))
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

/* Patterns are split once, at the first request, into tokens: matching a
 * request then compares segments, with no copying or parsing per try. */
enum token_kind {
	TOK_LITERAL, TOK_TYPE, TOK_TPREFIX, TOK_NS, TOK_NAME, TOK_GNAME, TOK_ORG, TOK_ARG, TOK_REV, TOK_PATH,
};

#define MAX_TOKENS 16

struct compiled_route {
	const struct route *route;
	size_t ntokens;
	size_t min_segments, max_segments;	/* what a match can span: a cheap first test */
	struct { enum token_kind kind; const char *literal; } tokens[MAX_TOKENS];
};

static struct compiled_route *compiled;
static size_t ncompiled;
static pthread_once_t compile_once = PTHREAD_ONCE_INIT;

static void compile_routes(void)
{
	static const struct { const char *text; enum token_kind kind; } placeholders[] = {
		{ "{type}", TOK_TYPE }, { "{tprefix}", TOK_TPREFIX }, { "{ns}", TOK_NS }, { "{name}", TOK_NAME },
		{ "{gname}", TOK_GNAME }, { "{org}", TOK_ORG }, { "{arg}", TOK_ARG }, { "{rev}", TOK_REV },
		{ "{path*}", TOK_PATH },
	};
	const struct route *const *groups[] = { router_tables, router_page_tables };
	size_t n = 0;
	for (size_t g = 0; g < 2; g++)
		for (size_t t = 0; groups[g][t]; t++)
			for (const struct route *r = groups[g][t]; r->pattern; r++)
				n++;
	compiled = xcalloc(n, sizeof(*compiled));
	for (size_t g = 0; g < 2; g++) {
		for (size_t t = 0; groups[g][t]; t++) {
			for (const struct route *r = groups[g][t]; r->pattern; r++) {
				struct compiled_route *c = &compiled[ncompiled++];
				char *copy = xstrdup(r->pattern), *save = NULL;	/* kept: tokens point into it */
				c->route = r;
				for (char *tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
					assert(c->ntokens < MAX_TOKENS);
					c->tokens[c->ntokens].kind = TOK_LITERAL;
					c->tokens[c->ntokens].literal = tok;
					for (size_t k = 0; k < sizeof(placeholders) / sizeof(placeholders[0]); k++)
						if (strcmp(tok, placeholders[k].text) == 0)
							c->tokens[c->ntokens].kind = placeholders[k].kind;
					c->ntokens++;
				}
				if (c->ntokens == 0)
					free(copy);	/* "/": nothing points into it */
				c->min_segments = c->max_segments = 0;
				for (size_t k = 0; k < c->ntokens; k++) {
					if (c->tokens[k].kind == TOK_PATH) {
						c->max_segments = MAX_SEGMENTS;
						break;
					}
					c->min_segments++;
					c->max_segments += c->tokens[k].kind == TOK_REV ? 3 : 1;
				}
			}
		}
	}
}

/* Join segv[from, from + n) with '/' (the caller frees). */
static char *join_segments(struct request *req, size_t from, size_t n)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t k = 0; k < n; k++) {
		if (k)
			strbuf_adds(&sb, "/");
		strbuf_adds(&sb, req->segv[from + k]);
	}
	return sb.buf ? strbuf_detach(&sb, NULL) : xstrdup("");
}

static int match_pattern(struct request *req, const struct compiled_route *c)
{
	size_t i = 0, rev_at = 0, rev_n = 0;
	int path = 0;
	req->ns = req->name = req->org = NULL;
	req->name_in_git_url = 0;
	req->nargs = 0;
	req->type = c->route->fixed_type;
	for (size_t t = 0; t < c->ntokens; t++) {
		enum token_kind kind = c->tokens[t].kind;
		if (kind == TOK_PATH) {
			path = 1;
			break;
		}
		if (i >= req->segc)
			return -1;
		const char *seg = req->segv[i];
		switch (kind) {
		case TOK_LITERAL:
			if (strcmp(c->tokens[t].literal, seg) != 0)
				return -1;
			break;
		case TOK_TYPE:
		case TOK_TPREFIX:
			if (type_from_plural(seg, kind == TOK_TYPE, &req->type) < 0)
				return -1;
			break;
		case TOK_NS:
			req->ns = seg;
			break;
		case TOK_NAME:
		case TOK_GNAME:
			req->name = seg;
			req->name_in_git_url = kind == TOK_GNAME;
			break;
		case TOK_ORG:
			req->org = seg;
			break;
		case TOK_ARG:
			if (req->nargs == sizeof(req->args) / sizeof(req->args[0]))
				return -1;
			req->args[req->nargs++] = seg;
			break;
		case TOK_REV:
			rev_at = i;
			rev_n = revision_segments(req, i);
			i += rev_n - 1;
			break;
		case TOK_PATH:	/* handled before the switch */
			break;
		}
		if (seg[0] == '\0')
			return -1;
		i++;
	}
	if (!path && i != req->segc)
		return -1;
	/* matched: only now are the revision and path strings made */
	free(req->rev);
	free(req->path);
	req->rev = rev_n ? join_segments(req, rev_at, rev_n) : NULL;
	req->path = path ? join_segments(req, i, req->segc - i) : NULL;
	return 0;
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

	int path_matched = 0, api_path_matched = 0;
	pthread_once(&compile_once, compile_routes);
	int under_api = req->segc > 0 && strcmp(req->segv[0], "api") == 0;
	for (size_t k = 0; k < ncompiled; k++) {
		const struct route *r = compiled[k].route;
		if ((r->flags & ROUTE_PAGE) && (under_api || api_path_matched))
			break;	/* pages: after the API, never under /api/ or an API path */
		if (req->segc < compiled[k].min_segments || req->segc > compiled[k].max_segments)
			continue;
		if (match_pattern(req, &compiled[k]) < 0)
			continue;
		if (!(r->methods & req->method) && req->method != METHOD_OPTIONS) {
			path_matched = 1;
			api_path_matched |= !(r->flags & ROUTE_PAGE);
			continue;
		}
		req->route = r;
		/* only now that the route is chosen: the segment is shared by
		 * every pattern tried */
		size_t n = req->name_in_git_url ? strlen(req->name) : 0;
		if (n > 4 && strcmp(req->name + n - 4, ".git") == 0)
			((char *)req->name)[n - 4] = '\0';
		return 0;
	}
	reset_captures(req);
	return path_matched ? KHUB_EPERM : KHUB_ENOTFOUND;
}
