/* kernels.c -- GET /api/kernels: the kernel repos a caller may see, filtered
 * by author, search text and what their branches' variants offer (backend,
 * torch version, arch, os), sorted, with absolute Link pagination; and the
 * versions block of a kernel's repo info (api/tree.c). */
#include "api/api.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 1000
/* Repos the background catch-up indexes per round. */
#define CATCH_UP_PER_ROUND 50
/* How long a listing waits (parked) for the round it asked for. */
#define CATCH_UP_LISTING_WAIT_MS 2000

/* ---- the versions block of repo info --------------------------------------- */

json_t *kernel_versions_json(struct repo_handle *h)
{
	struct ref_list refs;
	json_t *versions = json_array();
	if (kernel_version_branches(h->git, &refs) < 0)
		return versions;
	for (size_t i = 0; i < refs.count; i++) {
		const struct ref_item *r = &refs.items[i];
		json_t *names = json_array();
		struct variant_rows rows;
		if (variant_index_ensure(h->record.id, h->git, r->sha) == 0 &&
		    variant_index_load(h->record.id, r->sha, &rows) == 0) {
			for (size_t k = 0; k < rows.count; k++)
				json_array_append_new(names, json_string(rows.items[k].name));
			variant_rows_release(&rows);
		} else {
			log_warn("variant index unavailable for %s/%s %s", h->record.ns, h->record.name, r->sha);
		}
		json_array_append_new(versions, json_pack("{s:i, s:s, s:s, s:s, s:o}", "version", atoi(r->name + 1),
							  "name", r->name, "ref", r->ref, "sha", r->sha, "variants",
							  names));
	}
	ref_list_release(&refs);
	return versions;
}

/* ---- catching up with repos written without indexing ------------------------ */

/* Commits, pushes and imports index what they write; repos imported before
 * the index existed, written while the database was away or behind khub's
 * back are indexed by this thread: at start-up, every interval, and when a
 * listing asks for a round (the listing waits parked, holding no thread, and
 * every listing that asks meanwhile shares the round). */
static pthread_mutex_t catch_up_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t catch_up_changed = PTHREAD_COND_INITIALIZER;
static int catch_up_stopping;
static pthread_t catch_up_thread;
static int catch_up_running;
static long catch_up_interval_ms;
static uint64_t catch_up_rounds_started;	/* a listing waits for the next one to end */
static int catch_up_asked;

static void catch_up_park_key(char out[48], uint64_t round)
{
	snprintf(out, 48, "catch-up:%" PRIu64, round);
}

static void *catch_up_loop(void *arg)
{
	(void)arg;
	log_set_request_id("index");
	pthread_mutex_lock(&catch_up_lock);
	while (!catch_up_stopping) {
		uint64_t round = ++catch_up_rounds_started;
		catch_up_asked = 0;
		pthread_mutex_unlock(&catch_up_lock);
		int done = variant_index_catch_up(api_ctx.repo_root, CATCH_UP_PER_ROUND);
		if (done < 0)
			log_warn("variant index: catch-up failed");
		char key[48];
		catch_up_park_key(key, round);
		request_wake(key);
		pthread_mutex_lock(&catch_up_lock);
		if (done >= CATCH_UP_PER_ROUND || catch_up_asked)
			continue;	/* more to do, or asked for while it ran */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += catch_up_interval_ms / 1000;
		ts.tv_nsec += (catch_up_interval_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (!catch_up_stopping)
			pthread_cond_timedwait(&catch_up_changed, &catch_up_lock, &ts);
	}
	pthread_mutex_unlock(&catch_up_lock);
	return NULL;
}

void kernel_index_catch_up_start(long interval_ms)
{
	catch_up_interval_ms = interval_ms;
	catch_up_stopping = 0;
	if (pthread_create(&catch_up_thread, NULL, catch_up_loop, NULL) != 0)
		fatal("cannot start the variant index catch-up thread");
	catch_up_running = 1;
}

/* Ask for a catch-up round and park until it ends: 1 parked, 0 when this
 * request already waited (or there is no catch-up thread). */
static int catch_up_wait(struct request *req)
{
	if (req->park_rounds || !catch_up_running)
		return 0;
	char key[48];
	pthread_mutex_lock(&catch_up_lock);
	catch_up_asked = 1;
	catch_up_park_key(key, catch_up_rounds_started + 1);
	/* parked before the lock is released: the round cannot end unseen */
	request_park(req, key, CATCH_UP_LISTING_WAIT_MS);
	pthread_cond_signal(&catch_up_changed);
	pthread_mutex_unlock(&catch_up_lock);
	return 1;
}

void kernel_index_catch_up_stop(void)
{
	if (!catch_up_running)
		return;
	pthread_mutex_lock(&catch_up_lock);
	catch_up_stopping = 1;
	pthread_cond_signal(&catch_up_changed);
	pthread_mutex_unlock(&catch_up_lock);
	pthread_join(catch_up_thread, NULL);
	catch_up_running = 0;
}

/* ---- GET /api/kernels -------------------------------------------------------- */

struct query {
	struct strbuf sql;
	const char *params[16];
	char *owned[16];
	int n;
};

/* Add a text parameter; returns its $N. */
static int query_param(struct query *q, const char *value)
{
	q->params[q->n] = value;
	return ++q->n;
}

static int query_param_owned(struct query *q, char *value)
{
	q->owned[q->n] = value;
	return query_param(q, value);
}

static void query_release(struct query *q)
{
	for (int i = 0; i < q->n; i++)
		free(q->owned[i]);
	strbuf_release(&q->sql);
}

/* The variant filters, as one EXISTS over the main and vN heads: a repo
 * matches when one variant satisfies every filter given. The torch filter
 * follows the loader: torchXY of that version, a stable ABI not newer, or a
 * Python-only variant; backend=cuda also takes torch-universal (and
 * backend=cann the loader's torch-npu). */
static int add_variant_filters(struct request *req, struct query *q, const char **error)
{
	const char *backend = request_query(req, "backend"), *torch = request_query(req, "torch");
	const char *arch = request_query(req, "arch"), *os = request_query(req, "os");
	if (!(backend && backend[0]) && !(torch && torch[0]) && !(arch && arch[0]) && !(os && os[0]))
		return 0;
	strbuf_adds(&q->sql, " AND EXISTS (SELECT 1 FROM kernel_heads h JOIN kernel_variants v"
			     " ON v.repo_id = h.repo_id AND v.commit_sha = h.commit_sha WHERE h.repo_id = r.id"
			     " AND (h.ref = 'refs/heads/main' OR h.ref ~ '^refs/heads/v[0-9]+$') AND v.name_valid");
	if (backend && backend[0]) {
		const struct kernel_backend *b = kernel_backend_find(backend);
		int p = query_param(q, backend), noarch = query_param(q, b ? b->noarch : backend);
		strbuf_addf(&q->sql, " AND (v.backend = $%d OR v.backend_tag = $%d OR (v.framework = 'torch-noarch' AND"
				     " v.backend IN ($%d, '" VARIANT_NOARCH_UNIVERSAL "')))", p, p, noarch);
	}
	if (torch && torch[0]) {
		struct variant_env env;
		variant_env_init(&env);
		if (variant_env_set(&env, "torch", torch, error) < 0)
			return -1;
		int maj = query_param_owned(q, xasprintf("%ld", env.torch_major));
		int min = query_param_owned(q, xasprintf("%ld", env.torch_minor));
		strbuf_addf(&q->sql, " AND ((v.framework = 'torch' AND v.framework_major = $%d::int"
				     " AND v.framework_minor = $%d::int) OR (v.framework = 'torch-stable-abi' AND"
				     " (v.framework_major, v.framework_minor) <= ($%d::int, $%d::int)) OR"
				     " v.framework = 'torch-noarch')", maj, min, maj, min);
	}
	if (arch && arch[0]) {
		/* arch=x86_64 or arch=x86_64-linux */
		const char *dash = strchr(arch, '-');
		int p = query_param_owned(q, dash ? xstrndup(arch, (size_t)(dash - arch)) : xstrdup(arch));
		strbuf_addf(&q->sql, " AND (v.arch IS NULL OR v.arch = $%d)", p);
		if (dash)
			strbuf_addf(&q->sql, " AND (v.os IS NULL OR v.os = $%d)", query_param(q, dash + 1));
	}
	if (os && os[0])
		strbuf_addf(&q->sql, " AND (v.os IS NULL OR v.os = $%d)", query_param(q, os));
	strbuf_adds(&q->sql, ")");
	return 0;
}

static const char *const passed_on[] = { "author", "search", "backend", "torch", "arch", "os", "sort", "direction",
					  "limit" };

static char *next_link(struct request *req, long limit, long next)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s/api/kernels?", request_base_url(req));
	for (size_t i = 0; i < sizeof(passed_on) / sizeof(passed_on[0]); i++) {
		const char *v = request_query(req, passed_on[i]);
		if (!v || strcmp(passed_on[i], "limit") == 0)
			continue;
		strbuf_addf(&sb, "%s=", passed_on[i]);
		strbuf_add_urlencoded(&sb, v, 0);
		strbuf_adds(&sb, "&");
	}
	strbuf_addf(&sb, "limit=%ld&cursor=%ld", limit, next);
	return strbuf_detach(&sb, NULL);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!s[0] || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

enum { COL_ID, COL_NS, COL_NAME, COL_PRIVATE, COL_MODIFIED, COL_CREATED, COL_DOWNLOADS, COL_OWNER, COL_TRENDING,
       COL_VERSIONS, COL_FAMILIES, COL_TRUSTED, COL_TOTAL };

static enum MHD_Result handle_list(struct request *req)
{
	struct query q = { STRBUF_INIT, { 0 }, { 0 }, 0 };
	const char *error = NULL;
	long limit = LIST_LIMIT_DEFAULT, cursor = 0, direction = -1;
	const char *limit_arg = request_query(req, "limit"), *cursor_arg = request_query(req, "cursor");
	const char *direction_arg = request_query(req, "direction"), *sort = request_query(req, "sort");
	const char *author = request_query(req, "author"), *search = request_query(req, "search");
	if (limit_arg && parse_long(limit_arg, 1, LIST_LIMIT_MAX, &limit) < 0)
		return respond_error(req, 400, NULL, "limit must be between 1 and %d", LIST_LIMIT_MAX);
	if (cursor_arg && parse_long(cursor_arg, 0, 1000000000L, &cursor) < 0)
		return respond_error(req, 400, NULL, "invalid cursor");
	if (direction_arg && (parse_long(direction_arg, -1, 1, &direction) < 0 || direction == 0))
		return respond_error(req, 400, NULL, "direction is -1 (descending) or 1 (ascending)");
	const char *order;
	if (!sort || strcmp(sort, "lastModified") == 0)
		order = "r.last_modified";
	else if (strcmp(sort, "downloads") == 0)
		order = "r.downloads";
	else if (strcmp(sort, "trending") == 0 || strcmp(sort, "trendingScore") == 0)
		order = "trending";
	else if (strcmp(sort, "createdAt") == 0)
		order = "r.created_at";
	else if (strcmp(sort, "id") == 0)
		order = "id";
	else
		return respond_error(req, 400, NULL, "sort is lastModified, downloads, trending, createdAt or id");

	/* repos changed without indexing are caught up with first (on the
	 * catch-up thread, while this request waits parked) */
	if (catch_up_wait(req)) {
		query_release(&q);
		return MHD_YES;
	}

	char uid[24];
	snprintf(uid, sizeof(uid), "%" PRId64, req->principal.user_id);
	int p_uid = query_param(&q, uid);
	int p_admin = query_param(&q, req->principal.is_site_admin ? "true" : "false");
	/* trending: downloads of the last 7 UTC days */
	strbuf_addf(&q.sql,
		    "SELECT r.id, r.namespace, r.name, r.private, extract(epoch FROM r.last_modified)::bigint,"
		    " extract(epoch FROM r.created_at)::bigint, r.downloads, r.owner_id, trending,"
		    " (SELECT coalesce(json_agg(substr(h.ref, 12) ORDER BY substr(h.ref, 13)::bigint), '[]')::text"
		    "  FROM kernel_heads h WHERE h.repo_id = r.id AND h.ref ~ '^refs/heads/v[0-9]{1,9}$'),"
		    " (SELECT coalesce(json_agg(DISTINCT v.backend ORDER BY v.backend), '[]')::text"
		    "  FROM kernel_heads h JOIN kernel_variants v ON v.repo_id = h.repo_id AND v.commit_sha = h.commit_sha"
		    "  WHERE h.repo_id = r.id AND (h.ref = 'refs/heads/main' OR h.ref ~ '^refs/heads/v[0-9]+$')"
		    "  AND v.name_valid AND v.backend <> '" VARIANT_NOARCH_UNIVERSAL "'),"
		    " (SELECT a.trusted_kernel_publisher FROM accounts a WHERE a.id = r.owner_id),"
		    " count(*) OVER ()"
		    " FROM repos r, LATERAL (SELECT coalesce(sum(d.count), 0)::bigint AS trending FROM download_counts d"
		    "  WHERE d.repo_id = r.id AND d.day > (now() AT TIME ZONE 'UTC')::date - 7) t"
		    " WHERE r.type = 'kernel' AND (NOT r.private OR $%d::boolean OR r.owner_id = $%d::bigint"
		    " OR r.owner_id IN (SELECT org_id FROM memberships WHERE user_id = $%d::bigint))",
		    p_admin, p_uid, p_uid);
	if (author && author[0])
		strbuf_addf(&q.sql, " AND lower(r.namespace) = lower($%d)", query_param(&q, author));
	if (search && search[0])
		strbuf_addf(&q.sql, " AND strpos(lower(r.namespace || '/' || r.name), lower($%d)) > 0",
			    query_param(&q, search));
	if (add_variant_filters(req, &q, &error) < 0) {
		query_release(&q);
		return respond_error(req, 400, NULL, "invalid torch=: %s", error);
	}
	const char *dir = direction < 0 ? "DESC" : "ASC";
	if (strcmp(order, "id") == 0)
		strbuf_addf(&q.sql, " ORDER BY lower(r.namespace) %s, lower(r.name) %s, r.id %s", dir, dir, dir);
	else
		strbuf_addf(&q.sql, " ORDER BY %s %s, r.id %s", order, dir, dir);
	strbuf_addf(&q.sql, " LIMIT %ld OFFSET %ld", limit, cursor);

	PGresult *res = db_exec(q.sql.buf, q.n, q.params, NULL);
	query_release(&q);
	if (!res)
		return respond_db_unavailable(req);
	json_t *list = json_array();
	long total = PQntuples(res) ? strtol(PQgetvalue(res, 0, COL_TOTAL), NULL, 10) : 0;
	for (int i = 0; i < PQntuples(res); i++) {
		struct repo_record rec = { 0 };
		rec.id = strtoll(PQgetvalue(res, i, COL_ID), NULL, 10);
		rec.type = REPO_KERNEL;
		rec.owner_id = strtoll(PQgetvalue(res, i, COL_OWNER), NULL, 10);
		snprintf(rec.ns, sizeof(rec.ns), "%s", PQgetvalue(res, i, COL_NS));
		snprintf(rec.name, sizeof(rec.name), "%s", PQgetvalue(res, i, COL_NAME));
		rec.private = PQgetvalue(res, i, COL_PRIVATE)[0] == 't';
		/* The SQL already hides what the caller may not read; the same
		 * rule as every other read decides in the end. */
		enum role role = ROLE_READ;
		if (rec.private && repo_role_of(&req->principal, &rec, &role) < 0) {
			json_decref(list);
			PQclear(res);
			return respond_db_unavailable(req);
		}
		if (role < ROLE_READ)
			continue;
		char id[2 * REPO_NAME_MAX + 2], modified[32], created[32];
		snprintf(id, sizeof(id), "%s/%s", rec.ns, rec.name);
		format_iso8601((time_t)strtoll(PQgetvalue(res, i, COL_MODIFIED), NULL, 10), modified);
		format_iso8601((time_t)strtoll(PQgetvalue(res, i, COL_CREATED), NULL, 10), created);
		json_t *versions = json_loads(PQgetvalue(res, i, COL_VERSIONS), 0, NULL);
		json_t *families = json_loads(PQgetvalue(res, i, COL_FAMILIES), 0, NULL);
		json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:I, s:i, s:I, s:[], s:s, s:o}",
						      "_id", PQgetvalue(res, i, COL_ID), "id", id, "author", rec.ns,
						      "private", rec.private, "lastModified", modified, "createdAt",
						      created, "downloads",
						      (json_int_t)strtoll(PQgetvalue(res, i, COL_DOWNLOADS), NULL, 10),
						      "likes", 0, "trendingScore",
						      (json_int_t)strtoll(PQgetvalue(res, i, COL_TRENDING), NULL, 10),
						      "tags", "repoType", "kernel", "versions",
						      versions ? versions : json_array()));
		json_t *item = json_array_get(list, json_array_size(list) - 1);
		json_object_set_new(item, "supportedDriverFamilies", families ? families : json_array());
		json_object_set_new(item, "trustedPublisher",
				    json_boolean(PQgetvalue(res, i, COL_TRUSTED)[0] == 't'));
	}
	int rows = PQntuples(res);
	PQclear(res);

	char *text = json_dumps(list, JSON_COMPACT);
	json_decref(list);
	struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(resp, "Content-Type", "application/json; charset=utf-8");
	char count[24];
	snprintf(count, sizeof(count), "%ld", total);
	MHD_add_response_header(resp, "X-Total-Count", count);
	if (rows > 0 && cursor + rows < total) {
		char *url = next_link(req, limit, cursor + rows);
		char *link = xasprintf("<%s>; rel=\"next\"", url);
		MHD_add_response_header(resp, "Link", link);
		free(link);
		free(url);
	}
	req->bytes_out = strlen(text);
	return respond(req, 200, resp);
}

const struct route kernels_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/kernels", handle_list, 0, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ 0, NULL, NULL, 0, 0 },
};
