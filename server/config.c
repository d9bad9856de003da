/* config.c -- the configuration table: one row per key drives the file
 * parser, KHUB_* environment overrides, --key options and the help text. */
#include "server/server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "farm/farm.h"

struct khub_config config;

static void apply_lfs_redirect(const struct khub_config *cfg);
static void apply_secure_cookies(const struct khub_config *cfg);
static void apply_abi_policy(const struct khub_config *cfg);

/* ROW: read at start-up only (a change needs a restart); LIVE: a running
 * serve takes a new value from the file on SIGHUP. After the help, where
 * else the value lives (config_apply_all): TO(field) copies it into a
 * module's settings field (long, long long or const char *, checked by
 * its type), TO_SCALED(field, n) copies it times n, CALL(fn) runs
 * fn(&config). */
#define ROW(name, type, dflt, min, max, help, ...) \
	{ #name, type, offsetof(struct khub_config, name), dflt, min, max, help, 0, { __VA_ARGS__ } }
#define LIVE(name, type, dflt, min, max, help, ...) \
	{ #name, type, offsetof(struct khub_config, name), dflt, min, max, help, 1, { __VA_ARGS__ } }
#define BIND_KIND(field) \
	_Generic(&(field), long *: CONFIG_BIND_LONG, long long *: CONFIG_BIND_LLONG, const char **: CONFIG_BIND_STRING)
#define TO_SCALED(field, n) { BIND_KIND(field), &(field), n, NULL }
#define TO(field) TO_SCALED(field, 1)
#define CALL(fn) { CONFIG_BIND_CALL, NULL, 0, fn }

static const struct config_row config_rows[] = {
	ROW(data_dir, CONFIG_STRING, "./var", 0, 0, "where repos, LFS objects and the embedded database live"),
	ROW(listen, CONFIG_STRING, "127.0.0.1:8080", 0, 0, "address:port the HTTP server listens on"),
	ROW(database_url, CONFIG_STRING, "", 0, 0, "PostgreSQL URL; empty = run an embedded cluster under data_dir/pg"),
	ROW(pg_bindir, CONFIG_STRING, KHUB_PG_BINDIR, 0, 0, "PostgreSQL server binaries for the embedded cluster"),
	ROW(embedded_db_linger_s, CONFIG_LONG, "0", 0, 86400, "seconds the embedded cluster keeps running after the last khub process using it exits, so that a series of commands does not start and stop PostgreSQL each time (a small process left behind stops it; 0 = the last one stops it)"),
	ROW(public_url, CONFIG_STRING, "", 0, 0, "base URL in absolute links; empty = from the Host header",
	    TO(http_ctx.public_url), CALL(apply_secure_cookies)),
	LIVE(log_level, CONFIG_STRING, "info", 0, 0, "error, warn, info or debug"),
	ROW(log_format, CONFIG_STRING, "text", 0, 0, "text (one line per event) or json (one JSON object per line: time, level, request_id, msg; request lines carry method, route, status, bytes, duration_ms, user, repo)"),
	ROW(threads, CONFIG_LONG, "0", 0, 1024, "HTTP event loops, a thread each; 0 = 1 per CPU this process may use, at least 2 (affinity mask and cgroup CPU quota; serve -n shows the count)"),
	ROW(connection_timeout, CONFIG_LONG, "60", 1, 3600, "seconds an idle or stalled connection is kept"),
	ROW(max_connections, CONFIG_LONG, "4096", 16, 1000000, "concurrent connections"),
	ROW(max_connections_per_ip, CONFIG_LONG, "256", 0, 1000000, "concurrent connections from one client address (0 = no limit)"),
	ROW(trusted_proxies, CONFIG_STRING, "", 0, 0, "comma-separated addresses and CIDR ranges of reverse proxies (nginx, HAProxy) whose X-Forwarded-For or Forwarded header names the client: a request from one gets the right-most address there that is not itself a trusted proxy, for the audit log, download counting and the access log (max_connections_per_ip still counts the proxy); empty = trust none, every request has its TCP peer's address"),
	ROW(connection_memory_kb, CONFIG_LONG, "16", 4, 1024, "KiB each connection has for its request line and headers and the response's headers (half of it reads a request body); a request whose headers do not fit is answered 431"),
	ROW(header_timeout, CONFIG_LONG, "30", 0, 3600, "seconds a connection has to send a request's complete headers, from opening or from the end of its previous request (0 = no limit)"),
	LIVE(max_body_bytes, CONFIG_LONG, "16777216", 1024, 1L << 30, "largest JSON/form request body (commit bodies and LFS uploads stream and have no limit)",
	    TO(http_ctx.max_body_bytes), TO(api_ctx.max_body_bytes)),
	ROW(body_timeout, CONFIG_LONG, "120", 0, 3600, "seconds a JSON/form request body has to arrive in full after its headers, however slowly it trickles in (then 408 and the connection is closed; 0 = no limit; streamed bodies are not bounded by it)"),
	ROW(body_buffer_max_mb, CONFIG_LONG, "256", 1, 1L << 20, "MiB of JSON/form request bodies held in memory by all requests together; a body that would pass it is refused 503 with Retry-After before it is read"),
	ROW(signing_key, CONFIG_STRING, "", 0, 0, "the hub's Ed25519 private key (PEM, as khub sync keygen makes one): signs every farm build's provenance (docs/build-farm.md, Provenance); empty = data_dir/signing.key, made at the first start with its public half data_dir/signing.pub (served at /api/signing-key)"),
	LIVE(sync_trusted_keys, CONFIG_STRING, "", 0, 0, "public keys `khub sync import` trusts: comma-separated .pub files or directories of them (nothing else is trusted)"),
	LIVE(lfs_url_ttl, CONFIG_LONG, "3600", 10, 7 * 86400, "seconds a signed LFS upload/download URL stays valid",
	    TO(api_ctx.lfs_url_ttl)),
	ROW(lfs_backend, CONFIG_STRING, "local", 0, 0, "where LFS objects live: local (data_dir/lfs) or s3 (the lfs_s3_* keys; khub lfs migrate --to s3 copies a local store)"),
	ROW(lfs_s3_endpoint, CONFIG_STRING, "", 0, 0, "S3 endpoint URL, http(s)://host[:port] (lfs_backend = s3)"),
	ROW(lfs_s3_bucket, CONFIG_STRING, "", 0, 0, "S3 bucket holding the LFS objects (objects/ab/cd/{sha256})"),
	ROW(lfs_s3_region, CONFIG_STRING, "us-east-1", 0, 0, "S3 region the requests are signed for (Ceph RGW: its zonegroup, often default)"),
	ROW(lfs_s3_path_style, CONFIG_LONG, "1", 0, 1, "1: endpoint/bucket/key URLs (RGW, MinIO); 0: virtual-host style bucket.host/key"),
	ROW(lfs_s3_credentials_file, CONFIG_STRING, "", 0, 0, "AWS-style credentials file (aws_access_key_id, aws_secret_access_key); empty = AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment"),
	ROW(lfs_s3_part_mb, CONFIG_LONG, "64", 5, 4096, "objects larger than this many MiB are uploaded to S3 as multipart uploads of parts this size"),
	ROW(lfs_s3_streams_max, CONFIG_LONG, "64", 1, 100000, "S3 reads khub streams at once (a thread and a 2 MiB buffer each, held until the client has the body or left); one more is refused 503 with Retry-After (see max_connections_per_ip for one client's share)"),
	ROW(lfs_s3_redirect, CONFIG_LONG, "0", 0, 1, "1: a GET of an LFS file answers 302 to a presigned S3 URL valid lfs_url_ttl seconds (clients must reach the object store); 0: khub streams it (HEAD is always answered by khub)",
	    CALL(apply_lfs_redirect)),
	ROW(cache_mb, CONFIG_LONG, "256", 0, 1L << 20, "memory for responses keyed by immutable commit shas"),
	LIVE(tree_page_size, CONFIG_LONG, "1000", 1, 100000, "tree entries per page before a Link header",
	    TO(api_ctx.tree_page_size)),
	ROW(commit_memory_mb, CONFIG_LONG, "256", 1, 1L << 20, "memory one commit's regular (non-LFS) files and git objects may take while it is built; a bigger commit is refused with 413 (send big files as LFS)"),
	LIVE(commits_in_flight_per_user, CONFIG_LONG, "4", 1, 1000, "pull-request commits one account without write access may stream at once (more: 429)",
	    TO(api_ctx.commits_in_flight_per_user)),
	LIVE(pull_requests_per_hour, CONFIG_LONG, "30", 0, 100000, "pull requests an account without write access may open per hour (0 = no limit)",
	    TO(api_ctx.pull_requests_per_hour)),
	LIVE(lock_wait_ms, CONFIG_LONG, "30000", 0, 600000, "longest wait of a write for a repo's lock (then 503); waiting holds no thread",
	    TO(api_ctx.lock_wait_ms)),
	ROW(work_threads, CONFIG_LONG, "4", 1, 256, "background threads for slow work (lazy mirror downloads, variant indexing, build source tars); requests wait for it without a thread"),
	ROW(work_queue_max, CONFIG_LONG, "256", 1, 1000000, "jobs that may wait for a background thread (more: 503 with Retry-After)"),
	ROW(work_wait_ms, CONFIG_LONG, "120000", 100, 3600000, "longest wait of a request for its background job (then 503 with Retry-After)"),
	ROW(variant_catch_up_ms, CONFIG_LONG, "5000", 100, 3600000, "how often a background thread indexes kernel repos whose branches are not indexed yet"),
	LIVE(repo_cache_ttl_ms, CONFIG_LONG, "1000", 0, 600000, "how long a repo record is reused without the database",
	    TO(http_ctx.repo_cache_ttl_ms)),
	ROW(token_cache_ttl_ms, CONFIG_LONG, "2000", 0, 600000, "how long a token lookup is reused without the database"),
	LIVE(outage_cache_s, CONFIG_LONG, "300", 0, 86400, "while the database is down, how long a token or repo record looked up before is still honoured, for reads only (0 = not at all)",
	    TO(http_ctx.outage_cache_s)),
	ROW(download_stats, CONFIG_LONG, "1", 0, 1, "count variant downloads per repo, variant, day and client (0 = off)"),
	LIVE(metrics_public, CONFIG_LONG, "0", 0, 1, "1 = /metrics answers anyone, with repo counts that leave private repos out (site admins always get everything)",
	    TO(api_ctx.metrics_public)),
	ROW(scrub_mb_per_s, CONFIG_LONG, "0", 0, 100000, "re-hash every local LFS object in the background at this many MiB/s at most, quarantining damaged ones (0 = off)"),
	LIVE(schedule_gc, CONFIG_STRING, "0", 0, 0, "how often one node runs khub gc: an interval from the last success (30s, 15m, 24h, 7d; a bare number is seconds; 0 = off); see operations.md, Scheduled jobs"),
	LIVE(schedule_scrub, CONFIG_STRING, "168h", 0, 0, "how often one node runs an LFS scrub pass (with scrub_mb_per_s above 0; same form as schedule_gc)"),
	LIVE(schedule_repack, CONFIG_STRING, "0", 0, 0, "how often one node runs khub repack (same form as schedule_gc)"),
	LIVE(schedule_backup, CONFIG_STRING, "0", 0, 0, "how often one node backs up into a new generation under backup_dir, verified (same form as schedule_gc)"),
	LIVE(backup_dir, CONFIG_STRING, "", 0, 0, "where scheduled backups go: backup_dir/<UTC time>/, one generation each (outside data_dir)"),
	ROW(jobs_poll_ms, CONFIG_LONG, "1000", 100, 3600000, "how often a node's scheduler looks for due jobs and for runs asked with khub jobs run (its first look comes after one interval)"),
	LIVE(backup_keep, CONFIG_LONG, "7", 1, 10000, "scheduled backup generations kept; older ones are removed after a new one is made and verified"),
	ROW(metrics_lfs_scan_s, CONFIG_LONG, "300", 1, 86400, "how often a background thread adds up the LFS store's size for /metrics (khub_lfs_store_bytes; never per scrape)"),
	ROW(db_pool_size, CONFIG_LONG, "16", 1, 1000, "database connections a process opens at most; a thread borrows one per query, or keeps it while it holds a lock or transaction"),
	ROW(db_pool_wait_ms, CONFIG_LONG, "2000", 0, 600000, "longest wait for a free database connection (then the request answers 503 with Retry-After)"),
	ROW(web_root, CONFIG_STRING, "", 0, 0, "serve the web UI's templates and static files from this folder (the source tree's web/) instead of the copies compiled in: for working on the UI",
	    TO(web_settings.root)),
	ROW(web_session_hours, CONFIG_LONG, "168", 1, 24 * 365, "hours a web UI sign-in lasts (a session also ends when its token is revoked or expires)",
	    TO_SCALED(web_settings.session_seconds, 3600)),
	ROW(build_lease_seconds, CONFIG_LONG, "60", 2, 3600, "build farm: seconds a worker's claim on a job lasts without a heartbeat (then the job is queued again)",
	    TO(farm_settings.lease_seconds)),
	ROW(build_heartbeat_seconds, CONFIG_LONG, "15", 1, 3600, "build farm: how often workers are told to heartbeat (less than build_lease_seconds)",
	    TO(farm_settings.heartbeat_seconds)),
	LIVE(build_max_attempts, CONFIG_LONG, "3", 1, 100, "build farm: attempts of a job (lost leases, failures marked retry) before it fails",
	    TO(farm_settings.max_attempts)),
	ROW(abi_policy, CONFIG_STRING, "enforce", 0, 0, "build farm: enforce (a build whose ABI report has violations is not published) or warn (published, report kept)",
	    CALL(apply_abi_policy)),
	ROW(abi_manylinux, CONFIG_STRING, "2_28", 0, 0, "build farm: the manylinux target of the ABI check (2_17, 2_24, 2_27, 2_28, 2_31, 2_34, 2_35): no symbol may need a newer glibc (or libstdc++) than it allows",
	    TO(farm_settings.abi_manylinux)),
	LIVE(build_output_max_mb, CONFIG_LONG, "4096", 1, 1L << 20, "build farm: largest output tar a worker may upload",
	    TO_SCALED(farm_settings.output_max_bytes, 1L << 20)),
	ROW(build_variants, CONFIG_STRING, "", 0, 0, "build farm: JSON file of required variants ({system: {backend: [names]}}) replacing the official list for default builds; empty = the official list",
	    TO(farm_settings.variants_file)),
	LIVE(build_wall_seconds, CONFIG_LONG, "7200", 10, 7 * 86400, "build farm: wall-clock limit told to workers per build",
	    TO(farm_settings.wall_seconds)),
	LIVE(build_cpu_seconds, CONFIG_LONG, "28800", 10, 30 * 86400, "build farm: CPU-time limit told to workers per build",
	    TO(farm_settings.cpu_seconds)),
	LIVE(build_memory_mb, CONFIG_LONG, "16384", 64, 1L << 24, "build farm: memory limit told to workers per build",
	    TO(farm_settings.memory_mb)),
	LIVE(build_disk_mb, CONFIG_LONG, "32768", 64, 1L << 30, "build farm: scratch-disk limit told to workers per build",
	    TO(farm_settings.disk_mb)),
	ROW(build_source_cache_mb, CONFIG_LONG, "4096", 1, 1L << 24, "build farm: disk kept for source tars already made (data_dir/build-source-cache; least recently served removed first)",
	    TO_SCALED(farm_settings.source_cache_bytes, 1L << 20)),
	LIVE(build_queue_per_repo, CONFIG_LONG, "128", 1, 1000000, "build farm: jobs one repo may have queued (not yet claimed) at once; an enqueue past it queues nothing and answers 429",
	    TO(farm_settings.queue_per_repo)),
	LIVE(build_queue_per_user, CONFIG_LONG, "512", 1, 1000000, "build farm: jobs one user's requests may have queued at once (builds on push count per repo only); past it: 429",
	    TO(farm_settings.queue_per_user)),
	LIVE(build_variants_per_request, CONFIG_LONG, "64", 1, 100000, "build farm: variants one build request (or push) may queue; more: 400",
	    TO(farm_settings.variants_per_request)),
	ROW(build_source_fetch_threads, CONFIG_LONG, "2", 1, 64, "build farm: background threads that fetch external git sources (their own queue: a stalled upstream never holds the threads commits use)"),
	ROW(build_source_fetch_queue_max, CONFIG_LONG, "16", 1, 10000, "build farm: external git fetches that may wait for a fetch thread (more: 503 with Retry-After)"),
	ROW(build_source_credentials, CONFIG_STRING, "", 0, 0, "build farm: a netrc file (machine HOST login USER password SECRET) the server reads for each external git fetch to answer the host's request for credentials; source URLs with user:password@ are refused and never shown",
	    TO(farm_settings.source_credentials)),
	ROW(build_source_connect_timeout_s, CONFIG_LONG, "10", 1, 600, "build farm: seconds an external git fetch waits for each TCP connection"),
	ROW(build_source_low_speed_bytes, CONFIG_LONG, "1024", 0, 1L << 30, "build farm: an external git fetch receiving fewer bytes a second than this over build_source_low_speed_s fails (0 = no limit)"),
	ROW(build_source_low_speed_s, CONFIG_LONG, "30", 1, 3600, "build farm: the window of build_source_low_speed_bytes, in seconds"),
	ROW(build_source_deadline_s, CONFIG_LONG, "600", 1, 86400, "build farm: seconds one external git fetch may take in all"),
	ROW(build_source_allow, CONFIG_STRING, "", 0, 0, "build farm: comma-separated addresses, CIDR ranges and host names external git sources may reach although loopback, private, link-local or reserved (all of those are refused otherwise, after DNS and on every redirect)"),
	LIVE(trash_keep_days, CONFIG_LONG, "7", 0, 36500, "khub gc removes the git directories of deleted repos (data_dir/repos/.trash) this many days after the deletion"),
	LIVE(build_log_max_kb, CONFIG_LONG, "4096", 16, 1L << 22, "build farm: log kept per build: its first and last halves, with a line saying how much was cut between them",
	    TO_SCALED(farm_settings.log_max_bytes, 1024)),
	LIVE(build_log_followers_max, CONFIG_LONG, "256", 0, 100000, "build farm: build logs followed at once (GET /api/builds/{id}/log?follow=1 and the log page's live stream), each an open connection waiting parked; more are answered 503 (0 = none)",
	    TO(api_ctx.build_log_followers_max)),
	LIVE(build_log_follow_idle_s, CONFIG_LONG, "600", 5, 86400, "build farm: a followed build log that gains no byte for this many seconds stops being followed (the page says so; plain text is cut, not ended)",
	    TO(api_ctx.build_log_follow_idle_s)),
	LIVE(build_worker_live_seconds, CONFIG_LONG, "300", 1, 30 * 86400, "build farm: a worker's variants count for planning only while its last registration, claim or heartbeat is this recent",
	    TO(farm_settings.worker_live_seconds)),
	LIVE(build_campaign_on_new_variant, CONFIG_LONG, "0", 0, 1, "build farm: 1 = when a worker registers a toolchain with a variant no live worker offered before, a fleet rebuild campaign of that variant starts for every kernel whose build.toml allows it (docs/build-farm.md, \"Fleet rebuilds\"); 0 = a site admin starts campaigns",
	    TO(farm_settings.campaign_on_new_variant)),
	ROW(build_plan_python, CONFIG_STRING, "python3", 0, 0, "build farm: the Python (3.11 or later, for tomllib) that reads build.toml to plan builds, found in /usr/local/bin:/usr/bin:/bin unless a path",
	    TO(farm_settings.plan_python)),
	LIVE(build_plan_wall_ms, CONFIG_LONG, "10000", 100, 600000, "build farm: wall-clock limit of the child that reads one build.toml to plan builds (it also gets 10 s of CPU, 512 MiB and 64 KiB of output)",
	    TO(farm_settings.plan_wall_ms)),
	ROW(build_plan_threads, CONFIG_LONG, "2", 1, 64, "build farm: threads of each of the two planner queues (pushes, planned after the commit was answered; build requests waiting for a plan): a slow build.toml never holds the threads commits use"),
	ROW(build_plan_queue_max, CONFIG_LONG, "256", 4, 100000, "build farm: plans that may wait in each planner queue (pushes: one owner at most a quarter of them, owners served in turn, more are logged and not planned; requests: more is 503 with Retry-After)"),
	ROW(build_lease_check_ms, CONFIG_LONG, "1000", 50, 600000, "build farm: how often a background thread looks for lapsed leases (and at the next lapse, when sooner)"),
	ROW(download_stats_flush_ms, CONFIG_LONG, "5000", 50, 3600000, "how often the download counts kept in memory are added to the database"),
	LIVE(webhooks_allow_private, CONFIG_LONG, "0", 0, 1, "1 = repo webhooks may target loopback, private, link-local and reserved addresses (refused when a hook is created and when each delivery connects, after DNS, while 0)",
	    TO(api_ctx.webhooks_allow_private)),
	LIVE(webhook_retry_delays, CONFIG_STRING, "10s,1m,5m,30m", 0, 0, "repo webhooks: the waits between a delivery's attempts (comma-separated, 30s, 5m, 1h; a bare number is seconds): one attempt more than there are waits, then the delivery has failed"),
	LIVE(webhook_timeout_s, CONFIG_LONG, "10", 1, 300, "repo webhooks: seconds one delivery attempt may take to connect and be answered"),
	ROW(webhook_poll_ms, CONFIG_LONG, "1000", 50, 3600000, "repo webhooks: how often a node looks for deliveries that are due"),
	LIVE(benchmark_regression_pct, CONFIG_LONG, "5", 0, 1000, "farm benchmarks: a commit whose median is this many percent slower than the previous version's on the same device and workload (and by more than the runs' spread) is a regression",
	    TO(api_ctx.benchmark_regression_pct)),
};

#define CONFIG_ROWS (sizeof(config_rows) / sizeof(config_rows[0]))

/* The file named at start-up and the --key options given, kept so that
 * config_reload reads the same sources in the same order. */
static char *config_file;
static struct config_option {
	const struct config_row *row;
	char *value, *source;
} *options;
static size_t noptions;
/* The values config_load produced, before serve made paths absolute: what a
 * reload compares the keys that need a restart against. */
static struct khub_config as_loaded;
/* By row: the key was set by the file, a KHUB_* variable or an option, not
 * left to its default (config_is_set). */
static unsigned char set_explicitly[CONFIG_ROWS];
/* Reloaded strings' old copies: a reader in another thread may still hold
 * one, so they are kept (reachable) until the process ends. */
static char **retired;
static size_t nretired;

static int set_value(struct khub_config *cfg, const struct config_row *row, const char *value, const char *source)
{
	char *field = (char *)cfg + row->offset;
	if (row->type == CONFIG_STRING) {
		char **s = (char **)field;
		free(*s);
		*s = xstrdup(value);
		return 0;
	}
	char *end;
	errno = 0;
	long v = strtol(value, &end, 10);
	if (errno || end == value || *end || v < row->min || v > row->max) {
		fprintf(stderr, "khub: %s: %s must be a number from %ld to %ld (got '%s')\n", source, row->name,
			row->min, row->max, value);
		return -1;
	}
	*(long *)field = v;
	return 0;
}

static const struct config_row *find_row(const char *name)
{
	for (size_t i = 0; i < CONFIG_ROWS; i++)
		if (strcmp(config_rows[i].name, name) == 0)
			return &config_rows[i];
	return NULL;
}

static void trim(char **s)
{
	while (isspace((unsigned char)**s))
		(*s)++;
	size_t n = strlen(*s);
	while (n > 0 && isspace((unsigned char)(*s)[n - 1]))
		(*s)[--n] = '\0';
}

/* One "key = value" line of path into cfg; -1 (said on stderr) when it is
 * not one or names an unknown key or a bad value. */
static int load_line(struct khub_config *cfg, char *line, const char *path, int lineno)
{
	char *p = line, *eq;
	trim(&p);
	if (!*p || *p == '#')
		return 0;
	if (!(eq = strchr(p, '='))) {
		fprintf(stderr, "khub: %s:%d: expected 'key = value'\n", path, lineno);
		return -1;
	}
	*eq = '\0';
	char *key = p, *value = eq + 1;
	trim(&key);
	trim(&value);
	size_t vlen = strlen(value);
	if (vlen >= 2 && value[0] == '"' && value[vlen - 1] == '"') {
		value[vlen - 1] = '\0';
		value++;
	}
	const struct config_row *row = find_row(key);
	if (!row) {
		fprintf(stderr, "khub: %s:%d: unknown key '%s' (see khub serve --help)\n", path, lineno, key);
		return -1;
	}
	char source[300];
	snprintf(source, sizeof(source), "%s:%d", path, lineno);
	set_explicitly[row - config_rows] = 1;
	return set_value(cfg, row, value, source);
}

static int load_file(struct khub_config *cfg, const char *path)
{
	FILE *fp = fopen(path, "r");
	if (!fp) {
		fprintf(stderr, "khub: cannot read config file %s: %s\n", path, strerror(errno));
		return -1;
	}
	char line[4096];
	int lineno = 0, rc = 0;
	while (rc == 0 && fgets(line, sizeof(line), fp))
		rc = load_line(cfg, line, path, ++lineno);
	fclose(fp);
	return rc;
}

static char *env_name(const char *key)
{
	char *name = xasprintf("KHUB_%s", key);
	for (char *p = name; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	return name;
}

/* Every schedule_* key parses (jobs_parse_interval): 0 or -1 (said). */
static int check_schedules(const struct khub_config *cfg)
{
	for (size_t i = 0; i < CONFIG_ROWS; i++) {
		const struct config_row *row = &config_rows[i];
		long seconds;
		if (strncmp(row->name, "schedule_", 9) != 0)
			continue;
		const char *value = *(char *const *)(const void *)((const char *)cfg + row->offset);
		if (jobs_parse_interval(value, &seconds) < 0) {
			fprintf(stderr, "khub: %s must be 0 (off) or an interval such as 30s, 15m, 24h or 7d (got '%s')\n",
				row->name, value);
			return -1;
		}
	}
	return 0;
}

/* Defaults, the file, KHUB_* variables, the kept options: into cfg (whose
 * strings it replaces); -1 (said on stderr) at the first bad one. */
static int fill(struct khub_config *cfg)
{
	memset(set_explicitly, 0, sizeof(set_explicitly));
	for (size_t i = 0; i < CONFIG_ROWS; i++)
		if (set_value(cfg, &config_rows[i], config_rows[i].dflt, "default") < 0)
			return -1;
	if (config_file && *config_file && load_file(cfg, config_file) < 0)
		return -1;
	for (size_t i = 0; i < CONFIG_ROWS; i++) {
		char *name = env_name(config_rows[i].name);
		const char *value = getenv(name);
		int rc = value ? set_value(cfg, &config_rows[i], value, name) : 0;
		free(name);
		if (rc < 0)
			return -1;
		set_explicitly[i] |= value != NULL;
	}
	for (size_t i = 0; i < noptions; i++) {
		if (set_value(cfg, options[i].row, options[i].value, options[i].source) < 0)
			return -1;
		set_explicitly[options[i].row - config_rows] = 1;
	}
	if (log_level_parse(cfg->log_level) < 0) {
		fprintf(stderr, "khub: log_level must be error, warn, info or debug (got '%s')\n", cfg->log_level);
		return -1;
	}
	if (strcmp(cfg->log_format, "text") != 0 && strcmp(cfg->log_format, "json") != 0) {
		fprintf(stderr, "khub: log_format must be text or json (got '%s')\n", cfg->log_format);
		return -1;
	}
	if (!lfs_backend_find(cfg->lfs_backend)) {
		fprintf(stderr, "khub: lfs_backend must be %s (got '%s')\n", lfs_backend_names(), cfg->lfs_backend);
		return -1;
	}
	return check_schedules(cfg);
}

static void keep_option(const struct config_row *row, const char *value, const char *arg)
{
	options = xrealloc(options, (noptions + 1) * sizeof(*options));
	options[noptions++] = (struct config_option){ row, xstrdup(value), xstrdup(arg) };
}

/* Take the --key value / --key=value options (dashes or underscores) and
 * --config FILE out of argv; returns the new argc. */
static int take_options(int argc, char **argv)
{
	int out = 1;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strncmp(arg, "--", 2) != 0 || strlen(arg) > 64) {
			argv[out++] = argv[i];
			continue;
		}
		char key[65];
		snprintf(key, sizeof(key), "%s", arg + 2);
		char *eq = strchr(key, '=');
		if (eq)
			*eq = '\0';
		for (char *p = key; *p; p++)
			if (*p == '-')
				*p = '_';
		if (strcmp(key, "config") == 0 && !eq && i + 1 < argc) {
			free(config_file);
			config_file = xstrdup(argv[++i]);
			continue;
		}
		const struct config_row *row = find_row(key);
		if (!row) {
			argv[out++] = argv[i];
			continue;
		}
		const char *value = eq ? arg + 2 + (eq - key) + 1 : (i + 1 < argc ? argv[++i] : NULL);
		if (!value)
			fatal("option %s needs a value", arg);
		keep_option(row, value, arg);
	}
	argv[out] = NULL;
	return out;
}

static void copy_config(struct khub_config *to, const struct khub_config *from)
{
	for (size_t i = 0; i < CONFIG_ROWS; i++) {
		const char *src = (const char *)from + config_rows[i].offset;
		char *dst = (char *)to + config_rows[i].offset;
		if (config_rows[i].type == CONFIG_STRING) {
			free(*(char **)dst);
			*(char **)dst = xstrdup(*(char *const *)src);
		} else {
			*(long *)dst = *(const long *)src;
		}
	}
}

static void free_config(struct khub_config *cfg)
{
	for (size_t i = 0; i < CONFIG_ROWS; i++)
		if (config_rows[i].type == CONFIG_STRING) {
			char **s = (char **)((char *)cfg + config_rows[i].offset);
			free(*s);
			*s = NULL;
		}
}

static const struct lfs_backend_info *lfs_backend;	/* config.lfs_backend's, set by config_load */

/* The S3 settings lfs_backend = s3 would use, for khub lfs migrate. */
const struct lfs_s3_settings *config_lfs_s3(void)
{
	static struct lfs_s3_settings s3;
	s3 = (struct lfs_s3_settings){ .endpoint = config.lfs_s3_endpoint, .bucket = config.lfs_s3_bucket,
				       .region = config.lfs_s3_region, .path_style = (int)config.lfs_s3_path_style,
				       .credentials_file = config.lfs_s3_credentials_file,
				       .part_bytes = config.lfs_s3_part_mb << 20,
				       .streams_max = config.lfs_s3_streams_max };
	return &s3;
}

const struct lfs_backend_info *config_lfs_backend(void)
{
	return lfs_backend;
}

int config_load(int argc, char **argv)
{
	const char *env_file = getenv("KHUB_CONFIG");
	config_file = env_file ? xstrdup(env_file) : NULL;
	int out = take_options(argc, argv);
	if (fill(&config) < 0)
		exit(1);
	copy_config(&as_loaded, &config);
	lfs_backend = lfs_backend_find(config.lfs_backend);	/* not reloaded: a restart changes it */
	if (lfs_backend->remote)	/* every command opens the store through lfs_store_open */
		lfs_store_set_default(config_lfs_s3());
	log_threshold = (enum log_level)log_level_parse(config.log_level);
	log_set_json(strcmp(config.log_format, "json") == 0);
	return out;
}

void config_child_args(struct strvec *argv)
{
	if (config_file && *config_file) {
		char real[4096];
		strvec_pushf(argv, "--config");
		strvec_pushf(argv, "%s", realpath(config_file, real) ? real : config_file);
	}
	for (size_t i = 0; i < noptions; i++) {
		strvec_pushf(argv, "--%s", options[i].row->name);
		strvec_pushf(argv, "%s", options[i].value);
	}
}

int config_is_set(const char *key)
{
	const struct config_row *row = find_row(key);
	return row && set_explicitly[row - config_rows];
}

static int row_equal(const struct config_row *row, const struct khub_config *a, const struct khub_config *b)
{
	const char *fa = (const char *)a + row->offset, *fb = (const char *)b + row->offset;
	if (row->type == CONFIG_STRING)
		return strcmp(*(char *const *)fa, *(char *const *)fb) == 0;
	return *(const long *)fa == *(const long *)fb;
}

/* Readers in other threads load these fields without a lock: a long is
 * stored whole, so each sees the old value or the new one. A reloadable
 * string is swapped and the old one kept (retired). */
static void take_row(const struct config_row *row, const struct khub_config *next)
{
	const char *src = (const char *)next + row->offset;
	char *dst = (char *)&config + row->offset;
	if (row->type == CONFIG_STRING) {
		retired = xrealloc(retired, (nretired + 1) * sizeof(*retired));
		retired[nretired++] = *(char **)dst;
		*(char **)dst = xstrdup(*(char *const *)src);
		log_info("reload: %s = %s", row->name, *(char **)dst);
	} else {
		*(long *)dst = *(const long *)src;
		log_info("reload: %s = %ld", row->name, *(long *)dst);
	}
}

const struct config_row *config_table(size_t *n)
{
	*n = CONFIG_ROWS;
	return config_rows;
}

/* api_ctx.lfs_redirect: asked for, and the backend can presign a URL. */
static void apply_lfs_redirect(const struct khub_config *cfg)
{
	api_ctx.lfs_redirect = cfg->lfs_s3_redirect && lfs_backend && lfs_backend->presigns;
}

static void apply_secure_cookies(const struct khub_config *cfg)
{
	web_settings.secure_cookies = strncmp(cfg->public_url, "https://", 8) == 0;
}

static void apply_abi_policy(const struct khub_config *cfg)
{
	farm_settings.abi_enforce = strcmp(cfg->abi_policy, "warn") != 0;
}

/* Readers in other threads load the destinations without a lock: a long is
 * stored whole, and a string's old copy is kept (take_row). */
static void apply_row(const struct config_row *row)
{
	const char *field = (const char *)&config + row->offset;
	for (size_t i = 0; i < CONFIG_BINDS_MAX && row->to[i].kind != CONFIG_BIND_NONE; i++) {
		const struct config_bind *b = &row->to[i];
		assert((b->kind == CONFIG_BIND_STRING) == (row->type == CONFIG_STRING) || b->kind == CONFIG_BIND_CALL);
		if (b->kind == CONFIG_BIND_LONG)
			*(long *)b->to = *(const long *)field * b->scale;
		else if (b->kind == CONFIG_BIND_LLONG)
			*(long long *)b->to = (long long)*(const long *)field * b->scale;
		else if (b->kind == CONFIG_BIND_STRING)
			*(const char **)b->to = *(char *const *)field;
		else
			b->apply(&config);
	}
}

void config_apply_all(void)
{
	for (size_t i = 0; i < CONFIG_ROWS; i++)
		apply_row(&config_rows[i]);
}

int config_reload(void)
{
	struct khub_config next = { 0 };
	if (fill(&next) < 0) {
		free_config(&next);
		log_error("reload: the configuration was not changed (see the line above)");
		return -1;
	}
	int changed = 0;
	for (size_t i = 0; i < CONFIG_ROWS; i++) {
		const struct config_row *row = &config_rows[i];
		if (row->reloadable && !row_equal(row, &next, &config)) {
			take_row(row, &next);
			changed++;
		} else if (!row->reloadable && !row_equal(row, &next, &as_loaded)) {
			log_warn("reload: %s changed; it takes effect when khub restarts", row->name);
		}
	}
	log_threshold = (enum log_level)log_level_parse(config.log_level);
	free_config(&next);
	if (changed)
		config_apply_all();
	return changed;
}

void config_print_help(FILE *fp)
{
	fprintf(fp, "Configuration (file 'key = value' via --config or KHUB_CONFIG; environment KHUB_<KEY>;\n"
		    "option --key value):\n\n");
	for (size_t i = 0; i < CONFIG_ROWS; i++) {
		char *env = env_name(config_rows[i].name);
		fprintf(fp, "  %-20s %-28s %s\n  %-20s default: %s%s\n", config_rows[i].name, env, config_rows[i].help,
			"", config_rows[i].dflt[0] ? config_rows[i].dflt : "(empty)",
			config_rows[i].reloadable ? "; reloaded on SIGHUP" : "");
		free(env);
	}
}

/* "# " + text, folded into lines of at most 78 columns at spaces. */
static void print_comment(FILE *fp, const char *text)
{
	while (*text) {
		size_t n = strlen(text);
		if (n > 76) {
			n = 76;
			while (n > 0 && text[n] != ' ')
				n--;
			if (n == 0)
				n = strcspn(text, " ");
		}
		fprintf(fp, "# %.*s\n", (int)n, text);
		text += n;
		while (*text == ' ')
			text++;
	}
}

void config_print_template(FILE *fp)
{
	fprintf(fp, "# khub.conf -- khub's configuration: every key of its configuration table\n"
		    "# (made by `khub serve --print-config-template`), each with its help and\n"
		    "# default. A line is `key = value`; '#' starts a comment. KHUB_<KEY>\n"
		    "# environment variables and --key options override this file.\n"
		    "# [reload]: a running `khub serve` takes a new value on SIGHUP\n"
		    "# (systemctl reload khub); the other keys take effect when it restarts.\n");
	for (size_t i = 0; i < CONFIG_ROWS; i++) {
		const struct config_row *row = &config_rows[i];
		char *help = xasprintf("%s%s", row->reloadable ? "[reload] " : "", row->help);
		fprintf(fp, "\n");
		print_comment(fp, help);
		free(help);
		const char *field = (const char *)&config + row->offset;
		/* a value other than the default (given when the template was
		 * made) is set; a default is shown commented out */
		if (row->type == CONFIG_STRING) {
			const char *v = *(char *const *)field;
			fprintf(fp, "%s%s =%s%s\n", strcmp(v, row->dflt) ? "" : "#", row->name, *v ? " " : "", v);
		} else {
			long v = *(const long *)field;
			fprintf(fp, "%s%s = %ld\n", v != strtol(row->dflt, NULL, 10) ? "" : "#", row->name, v);
		}
	}
}

void config_dump(FILE *fp)
{
	for (size_t i = 0; i < CONFIG_ROWS; i++) {
		const char *field = (const char *)&config + config_rows[i].offset;
		if (config_rows[i].type == CONFIG_STRING) {
			const char *v = *(char *const *)field;
			/* Never print a password in a database URL. */
			if (strcmp(config_rows[i].name, "database_url") == 0 && strchr(v, '@'))
				v = "(set; not shown)";
			fprintf(fp, "%s = %s\n", config_rows[i].name, v);
		} else {
			fprintf(fp, "%s = %ld\n", config_rows[i].name, *(const long *)field);
		}
	}
}

long config_http_threads(char *why, size_t why_len)
{
	if (config.threads > 0) {
		snprintf(why, why_len, "threads = %ld", config.threads);
		return config.threads;
	}
	char cpus_why[256];
	long cpus = usable_cpus(cpus_why, sizeof(cpus_why));
	long threads = cpus < 2 ? 2 : cpus > 1024 ? 1024 : cpus;
	snprintf(why, why_len, "threads = 0: 1 per CPU, at least 2; %s", cpus_why);
	return threads;
}

int config_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[256];
	const char *colon = strrchr(listen, ':');
	if (!colon || (size_t)(colon - listen) >= sizeof(host))
		return -1;
	const char *port_text = colon + 1;
	if (!*port_text || strlen(port_text) > 5 || strspn(port_text, "0123456789") != strlen(port_text))
		return -1;
	long port = strtol(port_text, NULL, 10);
	if (port > 65535)
		return -1;
	memcpy(host, listen, (size_t)(colon - listen));
	host[colon - listen] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		size_t n = strlen(host);
		if (n < 2 || host[n - 1] != ']')
			return -1;
		host[n - 1] = '\0';
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
			return -1;
		*len = sizeof(*a);
		return 0;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (!host[0] || strcmp(host, "*") == 0)
		a->sin_addr.s_addr = htonl(INADDR_ANY);
	else if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return -1;
	*len = sizeof(*a);
	return 0;
}

/* data_dir is usable when it is a writable directory, or when the nearest
 * existing ancestor is one (serve would create the rest). Nothing is
 * created here. */
static int check_data_dir(FILE *err, const char *dir)
{
	struct stat st;
	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			fprintf(err, "khub: data_dir %s is not a directory\n", dir);
			return 1;
		}
		if (access(dir, W_OK | X_OK) < 0) {
			fprintf(err, "khub: data_dir %s is not writable: %s\n", dir, strerror(errno));
			return 1;
		}
		return 0;
	}
	if (errno != ENOENT) {
		fprintf(err, "khub: data_dir %s cannot be created: %s\n", dir, strerror(errno));
		return 1;
	}
	char *parent = xstrdup(dir);
	int problems = 0;
	for (;;) {
		char *slash = strrchr(parent, '/');
		if (!slash) {
			strcpy(parent, ".");
		} else if (slash == parent) {
			parent[1] = '\0';
		} else {
			*slash = '\0';
		}
		if (stat(parent, &st) == 0) {
			if (!S_ISDIR(st.st_mode) || access(parent, W_OK | X_OK) < 0) {
				fprintf(err, "khub: data_dir %s does not exist and cannot be created under %s\n", dir,
					parent);
				problems = 1;
			}
			break;
		}
		if (errno != ENOENT || strcmp(parent, ".") == 0 || strcmp(parent, "/") == 0) {
			fprintf(err, "khub: data_dir %s cannot be created: %s: %s\n", dir, parent, strerror(errno));
			problems = 1;
			break;
		}
	}
	free(parent);
	return problems;
}

/* webhook_retry_delays: intervals jobs_parse_interval reads, at most 20. */
static int check_webhook_retry_delays(FILE *err)
{
	char *list = xstrdup(config.webhook_retry_delays), *save = NULL;
	int n = 0, bad = 0;
	long s;
	for (char *item = strtok_r(list, ", ", &save); item; item = strtok_r(NULL, ", ", &save))
		bad |= ++n > 20 || jobs_parse_interval(item, &s) < 0;
	free(list);
	if (bad)
		fprintf(err, "khub: webhook_retry_delays '%s' must be at most 20 comma-separated intervals (10s, 5m, 1h)\n",
			config.webhook_retry_delays);
	return bad;
}

int config_check(FILE *err)
{
	int problems = 0;
	struct sockaddr_storage ss;
	socklen_t len;
	if (config_parse_listen(config.listen, &ss, &len) < 0) {
		fprintf(err, "khub: listen '%s' is not an address: want IPV4:PORT, [IPV6]:PORT or *:PORT "
			     "(port 0 to 65535)\n", config.listen);
		problems++;
	}
	if (!config.data_dir[0]) {
		fprintf(err, "khub: data_dir is empty\n");
		problems++;
	} else {
		problems += check_data_dir(err, config.data_dir);
	}
	if (!config.database_url[0]) {
		static const char *const programs[] = { "postgres", "initdb" };
		for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++) {
			char *path = xasprintf("%s/%s", config.pg_bindir, programs[i]);
			if (access(path, X_OK) < 0) {
				fprintf(err, "khub: pg_bindir %s has no %s (%s); the embedded database needs it "
					     "(or set database_url)\n", config.pg_bindir, programs[i], strerror(errno));
				problems++;
			}
			free(path);
		}
	}
	if (lfs_backend->remote && (!config.lfs_s3_endpoint[0] || !config.lfs_s3_bucket[0])) {
		fprintf(err, "khub: lfs_backend = s3 needs lfs_s3_endpoint and lfs_s3_bucket\n");
		problems++;
	}
	if (strcmp(config.abi_policy, "enforce") != 0 && strcmp(config.abi_policy, "warn") != 0) {
		fprintf(err, "khub: abi_policy '%s' must be enforce or warn\n", config.abi_policy);
		problems++;
	}
	if (!farm_abi_target_valid(config.abi_manylinux)) {
		fprintf(err, "khub: abi_manylinux '%s' must be 2_N (a glibc 2.N: 2_28, 2_31...)\n",
			config.abi_manylinux);
		problems++;
	}
	if (config.build_heartbeat_seconds >= config.build_lease_seconds) {
		fprintf(err, "khub: build_heartbeat_seconds (%ld) must be less than build_lease_seconds (%ld)\n",
			config.build_heartbeat_seconds, config.build_lease_seconds);
		problems++;
	}
	if (config.build_variants[0] && access(config.build_variants, R_OK) < 0) {
		fprintf(err, "khub: build_variants %s: %s\n", config.build_variants, strerror(errno));
		problems++;
	}
	if (config.signing_key[0] && access(config.signing_key, R_OK) < 0) {
		fprintf(err, "khub: signing_key %s: %s\n", config.signing_key, strerror(errno));
		problems++;
	}
	struct source_net_limits limits = { 0 };
	char why[256];
	if (source_net_configure(config.build_source_allow, &limits, why, sizeof(why)) < 0) {
		fprintf(err, "khub: %s\n", why);
		problems++;
	}
	source_net_release();
	struct trusted_proxies proxies;
	if (trusted_proxies_parse(config.trusted_proxies, &proxies, why, sizeof(why)) < 0) {
		fprintf(err, "khub: %s\n", why);
		problems++;
	}
	trusted_proxies_release(&proxies);
	problems += check_webhook_retry_delays(err);
	if (config.public_url[0] && strncmp(config.public_url, "http://", 7) != 0 &&
	    strncmp(config.public_url, "https://", 8) != 0) {
		fprintf(err, "khub: public_url '%s' must start with http:// or https://\n", config.public_url);
		problems++;
	}
	return problems;
}
