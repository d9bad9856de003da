/* kernels.c -- GET /api/kernels: the kernel repos a caller may see, filtered
 * by author, search text and what their branches' variants offer (backend,
 * torch version, arch, os), sorted, with absolute Link pagination; and the
 * versions block of a kernel's repo info (api/tree.c). */
#include "api/api.h"
#include "kernel/kernel.h"
#include "storage/db/variant_index.h"

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
static struct bg_thread catch_up = BG_THREAD_INIT;
static long catch_up_interval_ms;
static uint64_t catch_up_rounds_started;	/* a listing waits for the next one to end */
static int catch_up_asked;

/* One round, under the job lock: several nodes never index at once. */
static void catch_up_round(void *arg)
{
	*(int *)arg = variant_index_catch_up(api_ctx.repo_root, CATCH_UP_PER_ROUND);
}

static void *catch_up_loop(void *arg)
{
	(void)arg;
	log_set_request_id("index");
	pthread_mutex_lock(&catch_up.lock);
	while (!catch_up.stopping) {
		uint64_t round = ++catch_up_rounds_started;
		catch_up_asked = 0;
		pthread_mutex_unlock(&catch_up.lock);
		int done = 0;	/* 0 too when another node runs the round */
		if (db_job_round(DB_JOB_VARIANT_CATCH_UP, catch_up_round, &done) < 0 || done < 0)
			log_warn("variant index: catch-up failed");
		char key[PARK_KEY_MAX];
		park_key(key, "catch-up", round);
		request_wake(key);
		pthread_mutex_lock(&catch_up.lock);
		if (done >= CATCH_UP_PER_ROUND || catch_up_asked)
			continue;	/* more to do, or asked for while it ran */
		struct timespec ts = clock_after_usec(CLOCK_REALTIME, (uint64_t)catch_up_interval_ms * 1000);
		if (!catch_up.stopping)
			pthread_cond_timedwait(&catch_up.wake, &catch_up.lock, &ts);
	}
	pthread_mutex_unlock(&catch_up.lock);
	return NULL;
}

void kernel_index_catch_up_start(long interval_ms)
{
	catch_up_interval_ms = interval_ms;
	bg_thread_start(&catch_up, catch_up_loop, "variant index catch-up thread");
}

/* Ask for a catch-up round and park until it ends: 1 parked, 0 when this
 * request already waited (or there is no catch-up thread). */
static int catch_up_wait(struct request *req)
{
	if (req->park_rounds || !catch_up.running)
		return 0;
	char key[PARK_KEY_MAX];
	pthread_mutex_lock(&catch_up.lock);
	catch_up_asked = 1;
	park_key(key, "catch-up", catch_up_rounds_started + 1);
	/* parked before the lock is released: the round cannot end unseen */
	request_park(req, key, CATCH_UP_LISTING_WAIT_MS);
	pthread_cond_signal(&catch_up.wake);
	pthread_mutex_unlock(&catch_up.lock);
	return 1;
}

void kernel_index_catch_up_stop(void)
{
	bg_thread_stop(&catch_up);
}

/* ---- GET /api/kernels -------------------------------------------------------- */

/* The variant filters of the query (backend, backend_version, torch, arch,
 * os) into f. */
static int variant_filters(struct request *req, struct kernel_listing_filter *f, const char **error)
{
	f->backend = request_query(req, "backend");
	f->arch = request_query(req, "arch");
	f->os = request_query(req, "os");
	const char *torch = request_query(req, "torch");
	if (torch && torch[0]) {
		struct variant_env env;
		variant_env_init(&env);
		if (variant_env_set(&env, "torch", torch, error) < 0) {
			*error = "invalid torch= (want a version such as 2.8)";
			return -1;
		}
		f->torch = 1;
		f->torch_major = env.torch_major;
		f->torch_minor = env.torch_minor;
	}
	const char *bv = request_query(req, "backend_version");
	if (bv && bv[0]) {
		char *end;
		long major = strtol(bv, &end, 10), minor = 0;
		if (*end == '.')
			minor = strtol(end + 1, &end, 10);
		if (end == bv || *end || major < 0 || major > 1000 || minor < 0 || minor > 1000) {
			*error = "invalid backend_version= (want a version such as 12.8)";
			return -1;
		}
		f->backend_version = 1;
		f->backend_major = major;
		f->backend_minor = minor;
	}
	return 0;
}

static const char *const passed_on[] = { "author", "search", "backend", "backend_version", "torch", "arch", "os",
					  "trusted", "sort", "direction", "limit", "workload", "device" };

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

/* The sort= values, "" and absent being lastModified. */
static const struct {
	const char *name;
	enum kernel_sort sort;
} listing_sorts[] = {
	{ "", KERNEL_SORT_LAST_MODIFIED }, { "lastModified", KERNEL_SORT_LAST_MODIFIED },
	{ "downloads", KERNEL_SORT_DOWNLOADS }, { "trending", KERNEL_SORT_TRENDING },
	{ "trendingScore", KERNEL_SORT_TRENDING }, { "createdAt", KERNEL_SORT_CREATED }, { "id", KERNEL_SORT_ID },
	{ "bench", KERNEL_SORT_BENCH },
};

/* sort=bench: by workload='s farm result (device= narrows it), fastest
 * first unless direction=-1. */
static int bench_order(struct request *req, struct kernel_listing_filter *f, long *direction, const char **error)
{
	const char *workload = request_query(req, "workload"), *device = request_query(req, "device");
	if (f->sort != KERNEL_SORT_BENCH)
		return 0;
	if (!workload || !*workload) {
		*error = "sort=bench needs workload=, the benchmark workload (Class.method) to sort by";
		return KHUB_EINVAL;
	}
	f->bench_workload = workload;
	f->bench_device = device && *device ? device : NULL;
	if (!request_query(req, "direction"))
		*direction = 1;
	return 0;
}

/* The paging and order arguments (limit, cursor, direction, sort) into f:
 * 0, or KHUB_EINVAL with *error (static). */
static int listing_order(struct request *req, struct kernel_listing_filter *f, const char **error)
{
	long limit = LIST_LIMIT_DEFAULT, cursor = 0, direction = -1;
	const char *limit_arg = request_query(req, "limit"), *cursor_arg = request_query(req, "cursor");
	const char *direction_arg = request_query(req, "direction"), *sort = request_query(req, "sort");
	if (limit_arg && parse_long(limit_arg, 1, LIST_LIMIT_MAX, &limit) < 0) {
		*error = "limit must be between 1 and 1000";
		return KHUB_EINVAL;
	}
	if (cursor_arg && parse_long(cursor_arg, 0, 1000000000L, &cursor) < 0) {
		*error = "invalid cursor";
		return KHUB_EINVAL;
	}
	if (direction_arg && (parse_long(direction_arg, -1, 1, &direction) < 0 || direction == 0)) {
		*error = "direction is -1 (descending) or 1 (ascending)";
		return KHUB_EINVAL;
	}
	size_t i = 0, n = sizeof(listing_sorts) / sizeof(listing_sorts[0]);
	while (i < n && strcmp(sort ? sort : "", listing_sorts[i].name) != 0)
		i++;
	if (i == n) {
		*error = "sort is lastModified, downloads, trending, createdAt, id or bench";
		return KHUB_EINVAL;
	}
	f->sort = listing_sorts[i].sort;
	if (bench_order(req, f, &direction, error) < 0)
		return KHUB_EINVAL;
	f->descending = direction < 0;
	f->limit = limit;
	f->offset = cursor;
	return 0;
}

/* One listed repo as GET /api/kernels answers it; sorted by a farm result,
 * with "benchmark": {"workload", "device", "medianMs"} (null: none). */
static json_t *listing_item_json(const struct kernel_listing_item *it, const struct kernel_listing_filter *f)
{
	const struct repo_record *rec = &it->record;
	char id[2 * REPO_NAME_MAX + 2], rid[24], modified[32], created[32];
	snprintf(id, sizeof(id), "%s/%s", rec->ns, rec->name);
	snprintf(rid, sizeof(rid), "%" PRId64, rec->id);
	format_iso8601(rec->last_modified, modified);
	format_iso8601(it->created_at, created);
	json_t *versions = json_loads(it->versions, 0, NULL);
	json_t *families = json_loads(it->backends, 0, NULL);
	json_t *item = json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:I, s:i, s:I, s:[], s:s, s:o}", "_id", rid, "id", id,
				 "author", rec->ns, "private", rec->private, "lastModified", modified, "createdAt",
				 created, "downloads", (json_int_t)rec->downloads, "likes", 0, "trendingScore",
				 (json_int_t)it->trending, "tags", "repoType", "kernel", "versions",
				 versions ? versions : json_array());
	json_object_set_new(item, "supportedDriverFamilies", families ? families : json_array());
	json_object_set_new(item, "trustedPublisher", json_boolean(it->trusted_publisher));
	/* main's README card: its tags (and license:<id>, as the Hub tags a
	 * repo), its first paragraph */
	json_t *tags = json_loads(it->tags, 0, NULL);
	if (!json_is_array(tags)) {
		json_decref(tags);
		tags = json_array();
	}
	if (it->license[0]) {
		char *license = xasprintf("license:%s", it->license);
		json_array_append_new(tags, json_string(license));
		free(license);
	}
	json_object_set_new(item, "tags", tags);
	json_object_set_new(item, "description", json_string(it->description));
	json_object_set_new(item, "license", it->license[0] ? json_string(it->license) : json_null());
	if (f->sort == KERNEL_SORT_BENCH)
		json_object_set_new(item, "benchmark", json_pack("{s:s, s:s?, s:o}", "workload", f->bench_workload,
								 "device", f->bench_device, "medianMs",
								 it->has_bench ? json_real(it->bench_ms) : json_null()));
	return item;
}

int kernel_listing_query(struct request *req, const char *author, int wait_for_index, struct kernel_listing_page *out,
			 const char **error)
{
	struct kernel_listing_filter f = { 0 };
	memset(out, 0, sizeof(*out));
	*error = NULL;
	if (listing_order(req, &f, error) < 0 || variant_filters(req, &f, error) < 0)
		return KHUB_EINVAL;

	/* repos changed without indexing are caught up with first (on the
	 * catch-up thread, while this request waits parked) */
	if (wait_for_index && catch_up_wait(req))
		return 1;

	f.user_id = req->principal.user_id;
	f.is_site_admin = req->principal.is_site_admin;
	f.author = author ? author : request_query(req, "author");
	f.search = request_query(req, "search");
	f.trusted_only = request_query_bool(req, "trusted", 0);

	struct kernel_listing page;
	if (db_kernel_listing(&f, &page) < 0)
		return KHUB_EDB;
	json_t *list = json_array();
	for (size_t i = 0; i < page.count; i++) {
		const struct repo_record *rec = &page.items[i].record;
		/* The SQL already hides what the caller may not read; the same
		 * rule as every other read decides in the end. */
		enum role role = ROLE_READ;
		if (rec->private && repo_role_of(&req->principal, rec, &role) < 0) {
			json_decref(list);
			kernel_listing_release(&page);
			return KHUB_EDB;
		}
		if (role >= ROLE_READ)
			json_array_append_new(list, listing_item_json(&page.items[i], &f));
	}
	out->items = list;
	out->total = page.total;
	out->rows = (long)page.count;
	out->limit = f.limit;
	out->cursor = f.offset;
	kernel_listing_release(&page);
	return 0;
}

static enum MHD_Result handle_list(struct request *req)
{
	struct kernel_listing_page page;
	const char *error;
	int rc = kernel_listing_query(req, NULL, 1, &page, &error);
	if (rc == 1)
		return MHD_YES;
	if (rc == KHUB_EINVAL)
		return respond_error(req, 400, NULL, "%s", error);
	if (rc < 0)
		return respond_db_unavailable(req);

	char *text = json_dumps(page.items, JSON_COMPACT);
	json_decref(page.items);
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "application/json; charset=utf-8");
	answer_headerf(&a, "X-Total-Count", "%ld", page.total);
	if (page.rows > 0 && page.cursor + page.rows < page.total) {
		char *url = next_link(req, page.limit, page.cursor + page.rows);
		answer_headerf(&a, "Link", "<%s>; rel=\"next\"", url);
		free(url);
	}
	answer_body_take(&a, text, strlen(text));
	return answer_send(req, &a);
}

const struct route kernels_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/kernels", handle_list, 0, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ 0, NULL, NULL, 0, 0 },
};
