/* downloads.c -- variant download statistics. Resolve requests are counted
 * in memory (sharded hash maps keyed by repo, UTC day, variant and the
 * client's kernels/, torch/ and backend/ User-Agent parts); a background
 * thread adds the counts to the database in one statement every flush
 * interval and once more at shutdown. GET /api/kernels/{ns}/{name}/downloads
 * answers the per-variant, per-day breakdown (every day of the range,
 * oldest first, 0 on a day without downloads).
 *
 * One download = one full GET (no Range) of build/<variant>/metadata.json
 * by a loader (its User-Agent names kernels/, hf_hub/, huggingface_hub/ or
 * hf-hub/: a browser showing a README that embeds the file is not one),
 * which every kernels version fetches exactly once per variant install; for
 * a variant without metadata.json (older builds) the GET of
 * build/<variant>/__init__.py counts instead. HEAD requests, ranged GETs and
 * files served from a client's cache are not downloads, and one client
 * address counts at most once per repo, variant and hour (a bounded set of
 * what was counted this hour, emptied when the hour changes; once full, new
 * clients are not counted until then: repeated GETs must not inflate). */
#include "api/api.h"
#include "kernel/kernel.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SHARDS 16
#define KEYS_PER_SHARD_MAX 4096	/* past this, new keys lose their client parts */
#define UA_PART_MAX 32
#define SEP "\x1f"		/* never in a repo path nor in a cleaned UA part */
#define SEEN_PER_SHARD_MAX 16384	/* client, repo, variant triples counted this hour */

struct shard {
	pthread_mutex_t lock;
	struct hashmap counts;	/* key -> int64_t* */
	struct hashmap seen;	/* client SEP repo id SEP variant -> (void *)1, this hour */
	time_t seen_hour;
};

static struct shard shards[SHARDS];
static int stats_enabled;
static long flush_interval_ms;
static struct bg_thread flush = { .lock = PTHREAD_MUTEX_INITIALIZER };	/* wake: on CLOCK_MONOTONIC */

/* ---- counting --------------------------------------------------------------- */

/* Add n under key. With client_at (the offset of the client parts in
 * key), a shard that is full takes the count without them instead. */
static void add_count(char *key, size_t client_at, int64_t n)
{
	struct shard *s = &shards[hash_string(key) % SHARDS];
	pthread_mutex_lock(&s->lock);
	int64_t *count = hashmap_get(&s->counts, key);
	if (!count && s->counts.count >= KEYS_PER_SHARD_MAX && client_at) {
		/* Many distinct User-Agents: keep the count exact, drop the detail. */
		pthread_mutex_unlock(&s->lock);
		strcpy(key + client_at, SEP SEP);
		add_count(key, 0, n);
		return;
	}
	if (!count) {
		count = xcalloc(1, sizeof(*count));
		hashmap_put(&s->counts, key, count);
	}
	*count += n;
	pthread_mutex_unlock(&s->lock);
}

/* 1 the first time this hour that this client fetches this variant of
 * this repo, else 0. */
static int first_this_hour(const char *client, int64_t repo_id, const char *variant, int variant_len, time_t now)
{
	char key[REPO_PATH_MAX + 128];
	snprintf(key, sizeof(key), "%s" SEP "%" PRId64 SEP "%.*s", client, repo_id, variant_len, variant);
	struct shard *s = &shards[hash_string(key) % SHARDS];
	int first = 0;
	pthread_mutex_lock(&s->lock);
	if (s->seen_hour != now / 3600) {
		hashmap_release(&s->seen, NULL);
		hashmap_init(&s->seen);
		s->seen_hour = now / 3600;
	}
	if (!hashmap_get(&s->seen, key) && s->seen.count < SEEN_PER_SHARD_MAX) {
		hashmap_put(&s->seen, key, (void *)1);
		first = 1;
	}
	pthread_mutex_unlock(&s->lock);
	return first;
}

/* The value of the first "name/value" part of a User-Agent, cleaned to
 * [A-Za-z0-9._+-] and at most UA_PART_MAX bytes; "" when absent. */
static void user_agent_part(const char *ua, const char *name, char out[UA_PART_MAX + 1])
{
	size_t len = strlen(name);
	out[0] = '\0';
	for (const char *p = ua; p && *p; p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL) {
		while (*p == ' ')
			p++;
		if (strncmp(p, name, len) != 0 || p[len] != '/')
			continue;
		size_t n = 0;
		for (p += len + 1; *p && *p != ';' && *p != ' ' && n < UA_PART_MAX; p++)
			if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			    *p == '.' || *p == '_' || *p == '+' || *p == '-')
				out[n++] = *p;
		out[n] = '\0';
		return;
	}
}

/* The User-Agent parts that say a loader, not a browser, fetched a file:
 * the kernels package passes its version to huggingface_hub, which writes
 * "kernels/0.15.2; hf_hub/1.29.0; python/..."; huggingface_hub alone
 * writes "unknown/None; hf_hub/..."; the Rust hf-hub crate "hf-hub/...". */
static const char *const loader_agents[] = { "kernels", "hf_hub", "huggingface_hub", "hf-hub" };

static int user_agent_is_loader(const char *ua)
{
	char part[UA_PART_MAX + 1];
	for (size_t i = 0; ua && i < sizeof(loader_agents) / sizeof(loader_agents[0]); i++) {
		user_agent_part(ua, loader_agents[i], part);
		if (part[0])
			return 1;
	}
	return 0;
}

void download_stats_note(struct request *req, const struct repo_handle *h, const char *sha, int ranged)
{
	struct build_path bp;
	const char *ua = request_header(req, "User-Agent");
	/* what a page embeds (a README's image of metadata.json) is fetched by
	 * every viewer's browser: only a loader's fetch is a download */
	if (!stats_enabled || req->method != METHOD_GET || ranged || h->record.type != REPO_KERNEL ||
	    !user_agent_is_loader(ua) || build_path_parse(req->path, &bp) < 0 || !bp.file)
		return;
	const char *variant = bp.variant;
	int variant_len = (int)bp.variant_len;
	if (strcmp(bp.file, "__init__.py") == 0) {
		/* Counts only for a variant that has no metadata.json. */
		struct tree_entry e;
		char *meta = xasprintf(BUILD_DIR "/%.*s/" BUILD_METADATA_FILE, variant_len, variant);
		int has_meta = repo_stat_path(h->git, sha, meta, &e) == 0;
		if (has_meta)
			tree_entry_release(&e);
		free(meta);
		if (has_meta)
			return;
	} else if (strcmp(bp.file, BUILD_METADATA_FILE) != 0) {
		return;
	}

	time_t now = time(NULL);
	if (!first_this_hour(req->remote_addr, h->record.id, variant, variant_len, now))
		return;
	char kernels[UA_PART_MAX + 1] = "", torch[UA_PART_MAX + 1] = "", backend[UA_PART_MAX + 1] = "";
	user_agent_part(ua, "kernels", kernels);
	user_agent_part(ua, "torch", torch);
	user_agent_part(ua, "backend", backend);
	/* The UTC day, formatted once a second per thread. */
	static __thread time_t day_of;
	static __thread char day[16];
	if (now != day_of) {
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(day, sizeof(day), "%Y-%m-%d", &tm);
		day_of = now;
	}
	char key[REPO_PATH_MAX + 4 * UA_PART_MAX + 64];
	int client_at = snprintf(key, sizeof(key), "%" PRId64 SEP "%s" SEP "%.*s" SEP, h->record.id, day,
				 variant_len, variant);
	if (client_at <= 0 || (size_t)client_at >= sizeof(key) - 3 * UA_PART_MAX - 3)
		return;
	snprintf(key + client_at, sizeof(key) - (size_t)client_at, "%s" SEP "%s" SEP "%s", kernels, torch, backend);
	add_count(key, (size_t)client_at, 1);
}

/* ---- flushing ----------------------------------------------------------------- */

/* Split a key into its six fields (in place). */
static int split_key(char *key, char *fields[6])
{
	for (int i = 0; i < 6; i++) {
		fields[i] = key;
		char *sep = strchr(key, SEP[0]);
		if (i < 5) {
			if (!sep)
				return -1;
			*sep = '\0';
			key = sep + 1;
		}
	}
	return 0;
}

static void flush_counts(void)
{
	struct hashmap taken[SHARDS];
	size_t n = 0;
	for (int s = 0; s < SHARDS; s++) {
		pthread_mutex_lock(&shards[s].lock);
		taken[s] = shards[s].counts;
		hashmap_init(&shards[s].counts);
		pthread_mutex_unlock(&shards[s].lock);
		n += taken[s].count;
	}
	if (n == 0) {
		for (int s = 0; s < SHARDS; s++)
			hashmap_release(&taken[s], free);
		return;
	}
	struct download_count *counts = xcalloc(n, sizeof(*counts));
	char **keys = xcalloc(n, sizeof(*keys));
	int64_t total = 0;
	size_t k = 0;
	for (int s = 0; s < SHARDS; s++)
		for (size_t b = 0; b < taken[s].nbuckets; b++)
			for (struct hashmap_entry *e = taken[s].buckets[b]; e; e = e->next) {
				char *fields[6];
				keys[k] = xstrdup(e->key);
				if (split_key(keys[k], fields) < 0) {
					free(keys[k]);
					continue;
				}
				counts[k].repo_id = strtoll(fields[0], NULL, 10);
				snprintf(counts[k].day, sizeof(counts[k].day), "%s", fields[1]);
				counts[k].variant = fields[2];
				counts[k].kernels_version = fields[3];
				counts[k].torch_version = fields[4];
				counts[k].backend = fields[5];
				counts[k].count = *(int64_t *)e->value;
				total += counts[k].count;
				k++;
			}
	if (db_downloads_add(counts, k) < 0) {
		/* Keep them for the next flush. */
		log_error("downloads: cannot store %" PRId64 " download counts; kept for the next try", total);
		for (int s = 0; s < SHARDS; s++)
			for (size_t b = 0; b < taken[s].nbuckets; b++)
				for (struct hashmap_entry *e = taken[s].buckets[b]; e; e = e->next)
					add_count(e->key, 0, *(int64_t *)e->value);
	} else {
		log_debug("downloads: stored %" PRId64 " downloads in %zu rows", total, k);
	}
	free_strings(keys, k);
	free(counts);
	for (int s = 0; s < SHARDS; s++)
		hashmap_release(&taken[s], free);
}

static void *flush_main(void *arg)
{
	(void)arg;
	log_set_request_id("downloads");
	pthread_mutex_lock(&flush.lock);
	while (!flush.stopping) {
		struct timespec until = clock_after_usec(CLOCK_MONOTONIC, (uint64_t)flush_interval_ms * 1000);
		while (!flush.stopping && pthread_cond_timedwait(&flush.wake, &flush.lock, &until) == 0)
			;
		if (flush.stopping)
			break;
		pthread_mutex_unlock(&flush.lock);
		flush_counts();
		pthread_mutex_lock(&flush.lock);
	}
	pthread_mutex_unlock(&flush.lock);
	flush_counts();		/* the last counts, after the server stopped answering */
	db_thread_done();
	return NULL;
}

void download_stats_start(int enabled, long flush_ms)
{
	for (int s = 0; s < SHARDS; s++) {
		pthread_mutex_init(&shards[s].lock, NULL);
		hashmap_init(&shards[s].counts);
		hashmap_init(&shards[s].seen);
	}
	stats_enabled = enabled;
	flush_interval_ms = flush_ms;
	if (!enabled)
		return;
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&flush.wake, &attr);
	pthread_condattr_destroy(&attr);
	/* SIGINT/SIGTERM must reach the thread that waits for them, not this one. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	bg_thread_start(&flush, flush_main, "download statistics thread");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void download_stats_stop(void)
{
	if (flush.running) {
		bg_thread_stop(&flush);
		pthread_cond_destroy(&flush.wake);
	}
	for (int s = 0; s < SHARDS; s++) {
		if (shards[s].counts.buckets)
			hashmap_release(&shards[s].counts, free);
		if (shards[s].seen.buckets)
			hashmap_release(&shards[s].seen, NULL);
		pthread_mutex_destroy(&shards[s].lock);
	}
	stats_enabled = 0;
}

/* ---- the breakdown ---------------------------------------------------------- */

static time_t utc_midnight(time_t t)
{
	return t - t % 86400;
}

/* Days from first (a UTC midnight) to day ("YYYY-MM-DD"); -1 when unreadable. */
static long day_index(const char *day, time_t first)
{
	struct tm tm = { 0 };
	if (sscanf(day, "%d-%d-%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	time_t t = timegm(&tm);
	return t < first ? -1 : (long)((t - first) / 86400);
}

/* A variant's entry with every day of the range, oldest first, at 0: the
 * API fills the days without downloads, so every client draws them as 0. */
static json_t *variant_days(const char *variant, long days, time_t first)
{
	json_t *list = json_array();
	for (long d = 0; d < days; d++) {
		char day[16];
		time_t t = first + (time_t)d * 86400;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(day, sizeof(day), "%Y-%m-%d", &tm);
		json_array_append_new(list, json_pack("{s:s, s:I}", "day", day, "count", (json_int_t)0));
	}
	return json_pack("{s:s, s:I, s:o}", "variant", variant, "total", (json_int_t)0, "days", list);
}

/* The rows as CSV; releases res. */
static enum MHD_Result respond_downloads_csv(struct request *req, struct download_rows *res)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "day,variant,kernels_version,torch_version,backend,count\r\n");
	for (size_t i = 0; i < res->count; i++) {
		const struct download_row *d = &res->items[i];
		char count[24];
		snprintf(count, sizeof(count), "%" PRId64, d->count);
		const char *fields[] = { d->day, d->variant, d->kernels_version, d->torch_version, d->backend, count };
		for (size_t c = 0; c < sizeof(fields) / sizeof(fields[0]); c++)
			strbuf_add_csv_field(&sb, fields[c], c + 1 == sizeof(fields) / sizeof(fields[0]));
	}
	download_rows_release(res);
	size_t len;
	char *body = strbuf_detach(&sb, &len);
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "text/csv; charset=utf-8");
	answer_body_take(&a, body, len);
	return answer_send(req, &a);
}

static enum MHD_Result handle_downloads(struct request *req)
{
	struct repo_handle h;
	h = *req->repo;
	long days = 30;
	const char *v = request_query(req, "days"), *format = request_query(req, "format");
	if (v) {
		char *end;
		days = strtol(v, &end, 10);
		if (*end || days < 1 || days > 3660)
			return respond_error(req, 400, NULL, "days must be between 1 and 3660");
	}
	int csv = format && strcmp(format, "csv") == 0;
	if (format && !csv && strcmp(format, "json") != 0)
		return respond_error(req, 400, NULL, "format must be json or csv");
	struct download_rows res;
	if (db_downloads_rows(h.record.id, days, &res) < 0)
		return respond_db_unavailable(req);
	size_t rows = res.count;

	if (csv)
		return respond_downloads_csv(req, &res);

	/* Rows come newest day first, then by variant. */
	json_t *variants = json_object(), *flat = json_array();
	json_int_t total = 0;
	time_t first = utc_midnight(time(NULL)) - (time_t)(days - 1) * 86400;
	for (size_t i = 0; i < rows; i++) {
		const struct download_row *d = &res.items[i];
		const char *day = d->day, *variant = d->variant;
		json_int_t n = (json_int_t)d->count;
		total += n;
		json_array_append_new(flat, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "day", day, "variant", variant,
						      "kernels", d->kernels_version, "torch", d->torch_version, "backend",
						      d->backend, "count", n));
		json_t *entry = json_object_get(variants, variant);
		if (!entry) {
			entry = variant_days(variant, days, first);
			json_object_set_new(variants, variant, entry);
		}
		json_object_set_new(entry, "total", json_integer(json_integer_value(json_object_get(entry, "total")) + n));
		json_t *at = json_array_get(json_object_get(entry, "days"), (size_t)day_index(day, first));
		if (at)
			json_object_set_new(at, "count", json_integer(json_integer_value(json_object_get(at, "count")) + n));
	}
	download_rows_release(&res);
	json_t *list = json_array();
	const char *key;
	json_t *entry;
	json_object_foreach(variants, key, entry)
		json_array_append(list, entry);
	json_decref(variants);

	char id[2 * REPO_NAME_MAX + 2], since[16];
	struct tm tm;
	gmtime_r(&first, &tm);
	strftime(since, sizeof(since), "%Y-%m-%d", &tm);
	snprintf(id, sizeof(id), "%s/%s", h.record.ns, h.record.name);
	return respond_json(req, 200, json_pack("{s:s, s:I, s:i, s:s, s:I, s:o, s:o}", "id", id, "downloads",
						(json_int_t)h.record.downloads, "days", (int)days, "since", since,
						"total", total, "variants", list, "rows", flat));
}

const struct route downloads_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/downloads", handle_downloads, 0, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ 0, NULL, NULL, 0, 0 },
};
