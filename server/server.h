/* server.h -- the khub binary: configuration, the HTTP server, the router,
 * authentication, and the command-line roles (serve, db, import, admin,
 * check). */
#ifndef KHUB_SERVER_H
#define KHUB_SERVER_H

#include <sys/socket.h>

#include "api/api.h"
#include "web/web.h"

/* ---- configuration (server/config.c) ------------------------------------ */

struct khub_config {
	char *data_dir;
	char *listen;
	char *database_url;
	char *pg_bindir;
	char *public_url;
	char *log_level;
	char *log_format;
	char *sync_trusted_keys;
	char *signing_key;
	long threads;
	long connection_timeout;
	long max_connections;
	long max_connections_per_ip;
	char *trusted_proxies;
	long connection_memory_kb;
	long header_timeout;
	long body_timeout;
	long max_body_bytes;
	long body_buffer_max_mb;
	long cache_mb;
	long commit_memory_mb;
	long tree_page_size;
	long repo_cache_ttl_ms;
	long lock_wait_ms;
	long work_threads;
	long work_queue_max;
	long work_wait_ms;
	long variant_catch_up_ms;
	long commits_in_flight_per_user;
	long pull_requests_per_hour;
	long token_cache_ttl_ms;
	long outage_cache_s;
	long lfs_url_ttl;
	char *lfs_backend;		/* local or s3 */
	char *lfs_s3_endpoint;
	char *lfs_s3_bucket;
	char *lfs_s3_region;
	char *lfs_s3_credentials_file;
	long lfs_s3_path_style;
	long lfs_s3_redirect;
	long lfs_s3_part_mb;
	long lfs_s3_streams_max;
	long download_stats;
	long download_stats_flush_ms;
	long embedded_db_linger_s;
	long db_pool_size;
	long db_pool_wait_ms;
	long metrics_public;
	long benchmark_regression_pct;
	long metrics_lfs_scan_s;
	long scrub_mb_per_s;
	char *schedule_gc, *schedule_scrub, *schedule_repack, *schedule_backup;
	char *backup_dir;
	long backup_keep;
	long jobs_poll_ms;
	char *web_root;
	long web_session_hours;
	long build_lease_seconds;
	long build_heartbeat_seconds;
	long build_log_followers_max, build_log_follow_idle_s;
	long build_max_attempts;
	char *abi_policy;
	char *abi_manylinux;
	long build_output_max_mb;
	char *build_variants;
	long build_wall_seconds;
	long build_cpu_seconds;
	long build_memory_mb;
	long build_disk_mb;
	long build_source_cache_mb;
	long build_lease_check_ms;
	long build_queue_per_repo;
	long build_queue_per_user;
	long build_variants_per_request;
	long build_source_fetch_threads;
	long build_source_fetch_queue_max;
	long build_plan_threads, build_plan_queue_max;
	char *build_source_credentials;
	long build_source_connect_timeout_s;
	long build_source_low_speed_bytes;
	long build_source_low_speed_s;
	long build_source_deadline_s;
	char *build_source_allow;
	long build_log_max_kb;
	long build_worker_live_seconds;
	long build_campaign_on_new_variant;
	char *build_plan_python;
	long build_plan_wall_ms;
	long trash_keep_days;
	long webhooks_allow_private;
	char *webhook_retry_delays;
	long webhook_timeout_s;
	long webhook_poll_ms;
};

extern struct khub_config config;

/* The configuration table (server/config.c): one row per key. Besides its
 * field in struct khub_config, a row names where else the value lives
 * (to[]): a field of a module's settings (api_ctx, http_ctx, farm_settings,
 * web_settings) that config_apply_all sets, a number times scale or a
 * string borrowed from config, or a function that makes it take effect.
 * Adding a key a module reads is adding its row. */
enum config_type { CONFIG_STRING, CONFIG_LONG };
enum config_bind_kind { CONFIG_BIND_NONE, CONFIG_BIND_LONG, CONFIG_BIND_LLONG, CONFIG_BIND_STRING, CONFIG_BIND_CALL };
struct config_bind {
	enum config_bind_kind kind;
	void *to;		/* the destination field (LONG: long, LLONG: long long, STRING: const char *) */
	long scale;		/* LONG, LLONG: the value times this (KiB, MiB, hours to bytes, seconds) */
	void (*apply)(const struct khub_config *cfg);	/* CALL */
};
#define CONFIG_BINDS_MAX 2
struct config_row {
	const char *name;
	enum config_type type;
	size_t offset;		/* of its field in struct khub_config */
	const char *dflt;
	long min, max;
	const char *help;
	int reloadable;		/* serve applies a new value on SIGHUP (config_reload) */
	struct config_bind to[CONFIG_BINDS_MAX];	/* the first CONFIG_BIND_NONE ends them */
};
/* The rows (*n of them), for tests and tools; static. */
const struct config_row *config_table(size_t *n);

/* Defaults, then the file named by --config or KHUB_CONFIG (if any), then
 * KHUB_* environment variables, then --key value options. Options it uses
 * are removed from argv; returns the new argc. Exits on a bad value. */
int config_load(int argc, char **argv);
/* Onto argv: what a child khub command needs to load the configuration
 * this process loaded (--config FILE, the --key options given); KHUB_*
 * variables reach it through the environment. */
void config_child_args(struct strvec *argv);
/* 1 when key was set by the file, a KHUB_* variable or an option (to any
 * value, its default included), 0 when it is only the default. */
int config_is_set(const char *key);
/* Print the table (name, default, environment variable, help). */
void config_print_help(FILE *fp);
/* A commented config file: every key with its help, [reload] on the keys
 * serve reloads, and its default commented out, or set where the value in
 * effect differs from the default (khub serve --print-config-template). */
void config_print_template(FILE *fp);
/* Every row's bindings: its value in config put where the row says (the
 * modules' settings), its apply functions called. Serve at start-up (once
 * its stores are open) and khub import; config_reload calls it again. */
void config_apply_all(void);
/* SIGHUP (serve): read the same sources again (the file, KHUB_* variables,
 * the start-up options) and take the new values of the reloadable keys,
 * then config_apply_all when one changed (a start-up-only key keeps its
 * value, so its bindings do too); a changed key that needs a restart is
 * logged. Nothing changes when a value is bad (logged). Returns how many
 * keys changed, or -1. */
int config_reload(void);
/* Print the effective configuration. */
void config_dump(FILE *fp);
/* What serve -n checks beyond the bounds config_load enforces: listen
 * parses, data_dir exists or can be created, pg_bindir holds postgres and
 * initdb when the database is embedded, public_url is http(s). One line
 * per problem on err; returns how many. */
int config_check(FILE *err);
/* The S3 settings lfs_backend = s3 uses (valid until the next call). */
const struct lfs_s3_settings *config_lfs_s3(void);
/* The LFS store backend lfs_backend names, looked up once by config_load
 * (which refuses a name with no backend): ask its fields, never compare
 * its name. */
const struct lfs_backend_info *config_lfs_backend(void);
/* The HTTP loops to start: threads, or one per usable CPU (usable_cpus),
 * at least 2, when it is 0; why gets how the number was chosen. */
long config_http_threads(char *why, size_t why_len);
/* Parse "host:port" ("[v6]:port", "*:port" or ":port" = any IPv4
 * address); 0 or -1. */
int config_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len);

/* ---- integrity and garbage collection (server/store_scan.c, cmd_fsck.c, cmd_gc.c) */

/* Every LFS pointer in the history of every ref of a repo (pull request
 * refs and tags too): fn once per distinct pointer blob. 0, or KHUB_EIO when part
 * of the history could not be read (what could be read was reported). */
int store_scan_pointers(git_repository *git, void (*fn)(const struct lfs_pointer *ptr, void *arg), void *arg);
/* Call fn(oid, path, arg) for every file under {lfs_root}/objects. */
int store_each_lfs_object(const char *lfs_root, int (*fn)(const char *oid, const char *path, void *arg),
			  void *arg);
/* Call fn for every entry {root}/{type}s/{ns}/{name} (dot names skipped):
 * the repos' git directories, or the trash's. */
void store_each_repo_dir(const char *root,
			 void (*fn)(enum repo_type type, const char *ns, const char *name, const char *path, void *arg),
			 void *arg);
int cmd_fsck(int argc, char **argv);
int cmd_gc(int argc, char **argv);

/* ---- scheduled jobs (server/jobs.c, cmd_jobs.c, cmd_repack.c) ------------- */

/* "0" (off), "90" (seconds), "30s", "15m", "24h", "7d", "2w": *seconds; 0
 * or -1 (not one of those, or over ten years). */
int jobs_parse_interval(const char *text, long *seconds);
/* One row of the scheduler's table as this process's configuration has it. */
struct job_info {
	const char *name;
	const char *schedule;	/* the schedule_NAME value (borrowed) */
	long interval_s;	/* 0: off */
	int enabled;		/* this node can run it */
	const char *why_off;	/* when not enabled (static) */
};
/* Fill out (max rows) with the table: the number of rows. */
size_t jobs_describe(struct job_info *out, size_t max);
/* ---- repo webhooks (server/webhooks.c) ------------------------------------ */

/* The thread of khub serve that delivers queued webhook deliveries. */
void webhooks_start(void);
void webhooks_stop(void);
/* "sha256=" and the hex HMAC-SHA256 of body under secret, as sent in
 * X-Khub-Signature-256. */
#define WEBHOOK_SIGNATURE_MAX (7 + 64 + 1)
void webhook_sign(const char *secret, const char *body, size_t len, char out[WEBHOOK_SIGNATURE_MAX]);
/* Seconds before the next try after attempt (from 1) failed, from
 * webhook_retry_delays; -1 when it was the last. */
long webhook_retry_delay(int attempt);

/* The scheduler thread of khub serve (lfs: for the scrub; outlives jobs_stop). */
void jobs_start(struct lfs_store *lfs);
void jobs_stop(void);	/* a job's command is sent SIGTERM; a scrub pass ends */
int cmd_jobs(int argc, char **argv);
/* khub repack: every repo's objects into one pack, under its write lock. */
int cmd_repack(int argc, char **argv);

/* ---- backup and restore (server/backup_files.c, cmd_backup.c, cmd_restore.c) */

#define BACKUP_FORMAT 1

struct backup_tally {
	size_t files, present;		/* copied, already there */
	unsigned long long bytes;	/* copied */
};
/* Copy a regular file (never through a symbolic link) to `to` through a
 * temp file beside it (fsynced, renamed); with expect_sha256 the content
 * must hash to it (else KHUB_EINVAL and nothing is left). *bytes (may be
 * NULL): what was read. */
int backup_copy_file(const char *from, const char *to, const char *expect_sha256, uint64_t *bytes);
/* Copy the tree below `from` into `to`: directories made, files copied
 * unless `to` has a file of that name and size (objects never change);
 * entries for which skip(rel, name) is 1 are left out. */
int backup_copy_tree(const char *from, const char *to, int (*skip)(const char *rel, const char *name),
		     struct backup_tally *tally);
/* Where LFS objects are read from, by what the store backend is: files
 * under data_dir/lfs, or a remote store (lfs_backend_info.remote), which
 * asks wanted(oid, size, arg) before it downloads an object (0: the backup
 * has it already), set by backup_lfs_set_wanted. */
struct backup_lfs_source {
	int (*each)(const char *lfs_root, int (*fn)(const char *oid, const char *path, void *arg), void *arg);
	int (*wanted)(const char *oid, uint64_t size, void *arg);
};
const struct backup_lfs_source *backup_lfs_source(const struct lfs_backend_info *backend);
void backup_lfs_set_wanted(int (*wanted)(const char *oid, uint64_t size, void *arg));
/* "{lfs_root}/objects/ab/cd/{oid}"; the caller frees. */
char *backup_lfs_path(const char *lfs_root, const char *oid);
/* Run argv (argv[0] a path), its output inherited (quiet: thrown away);
 * its exit status, or -1. */
int backup_run(char *const argv[], int quiet);
/* Run PostgreSQL client tool (a path) with args (NULL-terminated) and the
 * database in use (--dbname; its password, if any, in PGPASSWORD); its
 * exit status, or -1. */
int backup_pg_run(const char *tool, char *const args[]);
/* The path of PostgreSQL tool `name` of that major version (pg_bindir's, or
 * Debian's /usr/lib/postgresql/{major}/bin); NULL (said on stderr) when
 * none. The caller frees. */
char *backup_pg_tool(const char *name, int major);
/* Write DIR/manifest.json (format and khub version added) atomically. */
int backup_manifest_write(const char *dir, json_t *manifest);
/* Every file below dir but the manifest and the lock, as the manifest's
 * "files": {"rel/path": {"size": N, "sha256": HEX}} (new reference), or
 * NULL when one cannot be read (said on stderr). (server/backup_verify.c) */
json_t *backup_manifest_files(const char *dir);
/* khub backup --verify DIR: every file the manifest lists present with its
 * size and sha256, and db.dump readable by pg_restore --list; each problem
 * said on stderr naming the file. 0 good, 1 not. */
int backup_verify(const char *dir);
/* A scheduled backup (server/backup_generations.c): khub backup into
 * dir/<UTC time>/ and khub backup --verify of it through run (which runs a
 * khub command and answers its exit status), then only the newest keep
 * generations left; a failed generation is removed. 0, or an error with
 * detail filled. */
int jobs_backup_generation(const char *dir, long keep, int (*run)(const char *const *args), char *detail,
			   size_t len);
/* DIR's manifest when it is a complete backup of a format this khub reads;
 * NULL with why otherwise. The caller decrefs. */
json_t *backup_manifest_read(const char *dir, char *why, size_t why_size);
int cmd_backup(int argc, char **argv);
int cmd_restore(int argc, char **argv);

/* ---- runtime shared by the commands (server/runtime.c) ------------------- */

/* Run as root with a data dir owned by another user: become that user
 * (its groups, then its uid), or exit saying to run as it; otherwise
 * nothing. Called once at start-up, before any command touches a file. */
void runtime_become_data_dir_owner(void);
/* Open the database (embedded or external) and migrate; exits on failure. */
void runtime_open_database(void);
/* The same without migrating (khub restore fills an empty database first). */
void runtime_connect_database(void);
void runtime_close_database(void);
/* Restart the embedded cluster when its postmaster dies (serve only; a
 * configured database_url is someone else's to run). */
void runtime_watch_database(void);
/* The connection string in use (embedded or configured); static. */
const char *runtime_conninfo(void);
/* "{data_dir}/repos" and "{data_dir}/lfs"; static. */
const char *runtime_repo_root(void);
const char *runtime_lfs_root(void);
/* The 32-byte secret that signs LFS action URLs, kept in {data_dir}/secret
 * (created on first use, mode 0600). Exits on failure. */
void runtime_load_secret(unsigned char out[32]);

/* ---- authentication (server/auth.c) ------------------------------------- */

/* Fill req->principal from Authorization (Bearer token, or Basic with the
 * token as password). An unknown, expired, revoked or malformed token sets
 * req->bad_token; a database failure during the lookup sets
 * req->auth_unavailable (the caller stays anonymous in both cases). */
void auth_identify(struct request *req);
/* One policy for every route that reads Authorization: answer 503 (with
 * Retry-After) when the database could not identify the caller, 401
 * "Invalid credentials in Authorization header" for a bad token; -1 when
 * an answer was queued, 0 to go on. */
int auth_refuse(struct request *req);
void auth_cache_init(long ttl_ms);
/* Forget every cached token lookup (a token or account changed, here or
 * on another node). */
void auth_cache_clear(void);

/* ---- several nodes on one database (server/cluster.c) --------------------- */

/* Keep this node's caches coherent with the other nodes' writes (the
 * storage/db/db_listen.c thread); cluster_stop ends it. */
void cluster_start(void);
void cluster_stop(void);
/* Drain (on = 1) or serve again: /api/health answers 503 meanwhile. */
void cluster_drain(int on);

/* ---- HTTP server (server/http.c) and router (server/router.c) ------------ */

/* What serve does around the HTTP server's life (server/main.c): ready
 * once it accepts connections, reload on each SIGHUP, stopping on SIGINT or
 * SIGTERM before it shuts down. Any may be NULL. */
struct http_hooks {
	void (*ready)(void);
	void (*reload)(void);
	void (*stopping)(void);
	void (*drain)(int on);	/* SIGUSR1: on, SIGUSR2: off */
};
int http_serve(const struct http_hooks *hooks);	/* runs until SIGINT/SIGTERM */

/* The listening socket (server/acceptor.c): bound and listening (port
 * filled: the one bound, for port 0), -1 with errno. acceptor_start hands
 * every connection accepted on it to the HTTP loops (http_loops_add);
 * acceptor_stop stops accepting and closes the socket (before the loops
 * stop). */
int acceptor_listen(const struct sockaddr_storage *addr, socklen_t addr_len, int backlog, unsigned *port);
void acceptor_start(void);
void acceptor_stop(void);

/* The HTTP event loops (server/http_loop.c): count libmicrohttpd daemons in
 * external-epoll mode, each made by start(arg) and run by a thread of its
 * own. http_loops_add admits an accepted connection (max_connections in
 * all, max_connections_per_ip from one address: over a limit it is closed
 * unanswered) and gives it to the loop holding the fewest; the daemons'
 * connection-closed notification must call http_loops_connection_closed.
 * http_loops_stop joins the threads and stops the daemons. */
struct http_loop_options {
	struct MHD_Daemon *(*start)(void *arg);
	void *arg;
	long max_connections, max_connections_per_ip;	/* 0 per ip = no limit */
};
int http_loops_start(long count, const struct http_loop_options *opts);
void http_loops_add(int fd, const struct sockaddr *peer, socklen_t len);
void http_loops_connection_closed(struct MHD_Connection *conn);
/* The resume hook (http_ctx.resumed): wakes the loop holding conn. */
void http_loops_resumed(struct MHD_Connection *conn);
void http_loops_stop(void);
/* The monotonic time (monotonic_usec) of the least recent turn among the
 * loops, and which loop took it; 0 without loops. A loop turns at least
 * once a second while it runs (the service watchdog's sign of life). */
uint64_t http_loops_oldest_turn_usec(long *which);

/* The header-completion and body deadlines (server/conn_guard.c).
 * conn_guard_notify is the daemon's MHD_OPTION_NOTIFY_CONNECTION callback;
 * the access handler calls conn_guard_request_begin once a request's
 * headers are in, and the completion callback conn_guard_request_end. The
 * body deadline runs from conn_guard_body_begin (a body khub keeps in
 * memory is about to be read) to conn_guard_body_end (it is all in, or the
 * request ended): past body_timeout_s the client is answered 408 and the
 * connection dropped. A timeout of 0 = no deadline. */
void conn_guard_start(long header_timeout_s, long body_timeout_s);
void conn_guard_stop(void);
void conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		       enum MHD_ConnectionNotificationCode toe);
void conn_guard_request_begin(struct MHD_Connection *conn);
void conn_guard_request_end(struct MHD_Connection *conn);
void conn_guard_body_begin(struct MHD_Connection *conn);
void conn_guard_body_end(struct MHD_Connection *conn);
/* libmicrohttpd 0.9.75 answers a request it cannot parse (a Content-Length
 * of "+5" or "5, 5", a missing Host) by itself, before khub sees it, and
 * writes that answer's status line and headers twice. The request-line
 * callback (MHD_OPTION_URI_LOG_CALLBACK) marks the connection as reading
 * headers; the logger (MHD_OPTION_EXTERNAL_LOGGER) hears of the error
 * before libmicrohttpd writes anything, answers once itself (JSON, like
 * every khub error) and shuts the socket for writing, so libmicrohttpd's
 * answer never goes out and it closes the connection. */
void *conn_guard_request_line(void *cls, const char *uri, struct MHD_Connection *conn);
void conn_guard_mhd_log(void *cls, const char *fmt, va_list ap);
/* Split req's raw path and match it against every route table. 0 = matched
 * (req->route set), KHUB_ENOTFOUND = no route, KHUB_EPERM = path matched
 * but not the method, KHUB_EINVAL = malformed path. */
int router_match(struct request *req, const char *raw_path);
/* Every route table, in the order they are matched; NULL-terminated. */
extern const struct route *const router_tables[];
/* The web UI's page tables (web/web.h), matched after every API table and
 * never for a path under /api/; NULL-terminated. */
extern const struct route *const router_page_tables[];
/* The first row whose access is not a valid value (NULL: none): the
 * server refuses to start with one (a route nobody decided who may call). */
const struct route *router_row_without_access(void);

/* ---- command-line roles --------------------------------------------------- */

int cmd_serve(int argc, char **argv);
/* systemd integration of serve (server/service.c). service_block_signals
 * blocks SIGINT, SIGTERM and SIGHUP in the calling thread, first thing in
 * serve, so that every thread started later inherits the mask and only
 * http_serve's sigwait takes them (SIGHUP's default action would end the
 * process). The notifications go to $NOTIFY_SOCKET (sd_notify; nothing
 * without it): READY=1 once khub answers, RELOADING=1 then READY=1 around
 * a reload, STOPPING=1 when it begins to shut down. With WatchdogSec=
 * (WATCHDOG_USEC), a thread started at the first READY=1 sends WATCHDOG=1
 * every half interval while every HTTP loop has turned within that half
 * (2 s at least), and stops at STOPPING=1. */
void service_block_signals(void);
void service_notify_ready(void);
void service_notify_reloading(void);
void service_notify_stopping(void);
int cmd_db(int argc, char **argv);
/* Each command's usage text (`khub COMMAND --help` prints it). */
extern const char cmd_import_usage[], cmd_mirror_usage[], cmd_sync_usage[], cmd_hook_usage[], cmd_lfs_usage[],
	cmd_check_usage[], cmd_fsck_usage[], cmd_backup_usage[], cmd_restore_usage[], cmd_gc_usage[],
	cmd_admin_usage[], cmd_routes_usage[];
int cmd_import(int argc, char **argv);
int cmd_admin(int argc, char **argv);
/* khub admin worker add|remove|list (server/cmd_worker.c) */
int admin_worker(int argc, char **argv);
int cmd_hook(int argc, char **argv);
int cmd_mirror(int argc, char **argv);
int cmd_sync(int argc, char **argv);
int cmd_check(int argc, char **argv);	/* server/cmd_check.c */
int cmd_lfs(int argc, char **argv);	/* server/cmd_lfs.c */
/* NAME=VALUE strings (NULL-ended, kept for the process) that give a push
 * hook the LFS backend's settings and credentials; empty for local. */
char **lfs_hook_env(void);
int cmd_routes(int argc, char **argv);	/* server/cmd_routes.c */
int cmd_builds(int argc, char **argv);	/* server/cmd_builds.c */
extern const char cmd_builds_usage[], cmd_jobs_usage[], cmd_repack_usage[];
/* khub benchmark submit (server/cmd_benchmark.c): a client of a hub's
 * benchmark upload endpoint; opens no database. */
int cmd_benchmark(int argc, char **argv);
extern const char cmd_benchmark_usage[];
/* khub verify-build (server/cmd_verify_build.c): a downloaded variant
 * against its signed provenance, offline; opens no database. */
int cmd_verify_build(int argc, char **argv);
extern const char cmd_verify_build_usage[];
/* Write {data_dir}/hooks/{pre,post}-receive calling this binary; returns
 * the directory (static). */
const char *hooks_install(void);

#endif
