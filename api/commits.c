/* commits.c -- GET /api/{type}s/{ns}/{name}/commits/{rev}: the history of a
 * revision newest first, ?limit=N (default 50, at most 1000) per page and
 * ?p=K for page K, with X-Total-Count and an absolute Link to the next page
 * (pinned to the resolved sha, so pages never mix two histories). Pages are
 * cached by sha: a commit's history never changes. */
#include "api/api.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMMITS_DEFAULT_LIMIT 50
#define COMMITS_MAX_LIMIT 1000
#define COMMITS_MAX_PAGE 100000000L

static void add_commit_json(struct strbuf *sb, const struct commit_info *c)
{
	char date[32];
	format_iso8601(c->time, date);
	/* git stores bytes: what is not UTF-8 becomes U+FFFD, the page stays JSON */
	strbuf_addf(sb, "{\"id\":\"%s\",\"title\":", c->sha);
	strbuf_add_json_quoted(sb, c->title);
	strbuf_adds(sb, ",\"message\":");
	strbuf_add_json_quoted(sb, c->message);
	strbuf_adds(sb, ",\"authors\":[{\"user\":");
	strbuf_add_json_quoted(sb, c->author_name);
	strbuf_addf(sb, ",\"avatar\":\"\"}],\"date\":\"%s\",\"parents\":[", date);
	for (size_t i = 0; i < c->nparents; i++)
		strbuf_addf(sb, "%s\"%s\"", i ? "," : "", c->parents[i]);
	strbuf_adds(sb, "]}");
}

/* A non-negative decimal query argument; 0 = absent (*out = dflt), -1 = bad. */
static int query_long(struct request *req, const char *key, long dflt, long *out)
{
	const char *v = request_query(req, key);
	*out = dflt;
	if (!v)
		return 0;
	char *end;
	long n = strtol(v, &end, 10);
	if (!*v || *end || n < 0)
		return -1;
	*out = n;
	return 0;
}

static enum MHD_Result handle_commits(struct request *req)
{
	struct repo_handle h;
	enum MHD_Result result;
	struct commit_log log;
	char sha[41];
	long limit, page;

	h = *req->repo;
	if (repo_resolve_or_respond(req, &h, req->rev, sha, &result) < 0)
		return result;
	if (query_long(req, "limit", COMMITS_DEFAULT_LIMIT, &limit) < 0 || limit < 1)
		return respond_error(req, 400, NULL, "limit must be a positive integer");
	if (limit > COMMITS_MAX_LIMIT)
		limit = COMMITS_MAX_LIMIT;
	if (query_long(req, "p", 0, &page) < 0 || page > COMMITS_MAX_PAGE)
		return respond_error(req, 400, NULL, "p must be a page number from 0");
	/* expand[]=formatted (huggingface_hub) is accepted; titles are plain. */

	const char *base = request_base_url(req);
	const char *plural = repo_type_plural(req->type);
	char *key = xasprintf("C|%" PRId64 "|%s/%s/%s|%s|%ld|%ld|%s", h.record.id, plural, h.record.ns,
			      h.record.name, sha, page, limit, base);
	enum MHD_Result cached;
	if (respond_cached_listing(req, key, 1, &cached)) {
		free(key);
		return cached;
	}

	size_t skip = (size_t)page * (size_t)limit;
	if (repo_log(h.git, sha, skip, (size_t)limit, &log) < 0) {
		free(key);
		return respond_error(req, 500, NULL, "cannot read the history of %s", sha);
	}
	struct strbuf page_buf = STRBUF_INIT;
	strbuf_addf(&page_buf, "%zu\n", log.total);
	if (skip + (size_t)limit < log.total)
		strbuf_addf(&page_buf, "%s/api/%s/%s/%s/commits/%s?p=%ld&limit=%ld", base, plural, h.record.ns,
			    h.record.name, sha, page + 1, limit);
	strbuf_adds(&page_buf, "\n[");
	for (size_t i = 0; i < log.count; i++) {
		if (i)
			strbuf_adds(&page_buf, ",");
		add_commit_json(&page_buf, &log.items[i]);
	}
	commit_log_release(&log);
	enum MHD_Result r = respond_new_listing_page(req, key, &page_buf, 1);
	free(key);
	return r;
}

const struct route commits_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/{type}/{ns}/{name}/commits/{rev}", handle_commits, 0, 0,
	  NULL, ACCESS_REPO_READ },
	{ 0, NULL, NULL, 0, 0 },
};
