/* db.h -- storage: the PostgreSQL database behind typed functions (the
 * connection pool, transactions, advisory locks, migrations, the embedded
 * cluster, accounts and tokens, repo records, LFS links, the audit log,
 * benchmarks, download counters, the kernel listing, mirror tables). No
 * libpq type appears here. Every function returns 0 or a negative enum
 * khub_err unless it says otherwise. */
#ifndef KHUB_STORAGE_DB_H
#define KHUB_STORAGE_DB_H

#include <stdint.h>
#include <time.h>

#include "common/common.h"
#include "storage/git/repo.h"

/* ---- database (storage/db/db.c, db_*.c) ------------------------------------ */

/* Set the connection string of the pool's connections. */
void db_configure(const char *conninfo);
/* Bound the pool: at most `size` connections per process (only before the
 * first one is opened), and how long a thread waits for a free one before
 * its call fails with KHUB_EDB. */
void db_pool_configure(long size, long wait_ms);
/* Connections opened and borrowed now. */
int db_pool_stats(long *open, long *in_use);
/* The pool's size, the borrows that had to wait for a free connection and
 * those that waited in vain (counted since start). */
void db_pool_waits(long *size, uint64_t *waits, uint64_t *timeouts);
/* 0 when the database answers a query, else KHUB_EDB (db_last_error says why). */
int db_ping(void);
/* Whether the database is down: the last connect failed or the last query
 * lost its connection, and no query has succeeded since (other errors, a
 * pool with every connection in use, say nothing about it). 1 with *since
 * (wall-clock seconds, when it went down; NULL: not wanted), else 0. */
int db_is_down(time_t *since);
/* Outages seen since start (each up-to-down change counts one). */
uint64_t db_outages(void);
/* Give back this thread's connection (call before a thread exits); a lock
 * or transaction still held ends with its connection. */
void db_thread_done(void);
/* db_thread_done, then close every idle connection (at exit). */
void db_shutdown(void);
/* The server was restarted: every pooled connection is replaced before its
 * next query instead of failing one on a dead socket. */
void db_server_restarted(void);
/* Why this thread's last connection or query failed (one line; static per
 * thread). */
const char *db_last_error(void);

/* Explicit transactions on this thread's connection, which stays pinned to
 * the thread until commit or rollback. No nesting. If the connection dies
 * meanwhile, every database call of the thread fails with KHUB_EDB until
 * the rollback (a connection is never silently reset under a transaction). */
int db_tx_begin(void);
/* 0, or KHUB_EDB (then nothing was committed). Ends the transaction either way. */
int db_tx_commit(void);
void db_tx_rollback(void);	/* no-op without a transaction */

/* Advisory locks by name. Session locks (db_lock_try, db_lock_wait) pin
 * this thread's connection until db_unlock; while held, a dead connection
 * fails every call with KHUB_EDB (the lock is gone with it) until the
 * holder unlocks. Order: registry before repo write. */
enum db_lock {
	DB_LOCK_REPO_WRITE = 1,		/* id: repo id; every writer of a repo */
	DB_LOCK_REGISTRY = 2,		/* id 0: repo create, delete, move */
	DB_LOCK_MIGRATIONS = 3,		/* id 0: schema migrations (key 4242001, as always) */
	DB_LOCK_VARIANT_INDEX = 4,	/* id: repo id; one index write per repo (transaction scope) */
	DB_LOCK_BUILD_QUEUE = 5,	/* id 0: enqueues take turns, so the queue limits hold (transaction scope) */
	DB_LOCK_LFS_OBJECT = 6,		/* id: db_lfs_object_key(oid); gc's removal (exclusive) against a
					 * write starting (shared), transaction scope */
	DB_LOCK_LAZY_FETCH = 7,		/* id: db_lfs_object_key(oid); one upstream fetch of a lazily
					 * mirrored object however many nodes miss it at once */
	DB_LOCK_JOB = 8,		/* id: enum db_job; one round of a background job at a time
					 * across the nodes sharing this database (taken on the
					 * coordination session, storage/db/db_listen.c) */
};
/* Background jobs of khub serve that take DB_LOCK_JOB per round. */
enum db_job {
	DB_JOB_VARIANT_CATCH_UP = 1,
	DB_JOB_BUILD_LEASES = 2,
	DB_JOB_LFS_SCAN = 3,
	DB_JOB_MIRROR_RUN = 4,	/* held by the active `khub mirror run` for its life */
	DB_JOB_LFS_SCRUB = 5,	/* a pass of the LFS scrub (storage/lfs/lfs_scrub.c), run by the scheduler */
	DB_JOB_GC = 6,		/* the scheduled jobs of server/jobs.c, one round each */
	DB_JOB_REPACK = 7,
	DB_JOB_BACKUP = 8,
};
/* 0 taken, 1 held by another session, KHUB_EDB. */
int db_lock_try(enum db_lock kind, int64_t id);

/* Wait for it (command line and background work only). */
int db_lock_wait(enum db_lock kind, int64_t id);
void db_unlock(enum db_lock kind, int64_t id);
/* Take a lock until the end of this thread's transaction (which must be
 * open): pg_advisory_xact_lock. */
int db_lock_xact(enum db_lock kind, int64_t id);
/* The same, shared: pg_advisory_xact_lock_shared. */
int db_lock_xact_shared(enum db_lock kind, int64_t id);
/* Apply every migration not yet applied, in order, each in a transaction. */
int db_migrate(void);

/* Embedded PostgreSQL under {data_dir}/pg: initialise on first use, start
 * on a unix socket only (as an unprivileged user when run as root) and
 * return the connection string (caller frees). The last khub process using
 * the cluster stops it in db_embedded_release. */
int db_embedded_acquire(const char *data_dir, const char *pg_bindir, char **conninfo);
/* Stops the watchdog first, when it runs. The last user stops the cluster,
 * or with a linger time leaves a process behind (its pid in pg/linger.pid)
 * that stops it once nobody has used it for that many seconds, or at once
 * on SIGTERM. */
void db_embedded_release(void);
/* Seconds the cluster outlives its last user (0, the default: none). */
void db_embedded_set_linger(int seconds);
/* Start a thread that checks every second that the cluster's postmaster
 * runs and restarts it when it is gone (backing off 1, 2, 4 … 30 s
 * between failed tries), under the start lock every process sharing the
 * cluster takes; once it is back, connections are renewed. Serve only. */
int db_embedded_watchdog_start(void);
/* What the watchdog knows is wrong with the cluster (one line into buf);
 * 0 when nothing is. */
int db_embedded_problem(char *buf, size_t size);

/* Accounts: users and orgs share one namespace of names. */
enum account_kind { ACCOUNT_USER, ACCOUNT_ORG };
enum role { ROLE_NONE = 0, ROLE_READ = 1, ROLE_WRITE = 2, ROLE_ADMIN = 3 };

const char *role_name(enum role role);
int role_parse(const char *s, enum role *out);

struct account {
	int64_t id;
	enum account_kind kind;
	char name[REPO_NAME_MAX + 1];
	char fullname[128];
	int is_site_admin;
	int trusted_kernel_publisher;
	time_t created_at;
};

int db_account_get(const char *name, struct account *out);	/* case-insensitive */
int db_account_create(enum account_kind kind, const char *name, const char *fullname,
		      int is_site_admin, int64_t *id);
/* Set a user's role in an org (ROLE_NONE: take the user out), with the
 * role before in *before; the org's row is locked for the change. Refused
 * with KHUB_ECONFLICT when it would take the org's only admin away (an org
 * that has an admin keeps one); KHUB_EINVAL when org is no org or user no
 * user. Called by accounts/ only (t0236). */
int db_membership_set(const char *org, const char *user, enum role role, enum role *before);
/* The user's role in an org in *out (ROLE_NONE when not a member); 0, or
 * KHUB_EDB (then *out is ROLE_NONE, which must not be taken for an answer). */
int db_membership_role(int64_t org_id, int64_t user_id, enum role *out);

/* A caller, as its token makes it. user_id 0 = anonymous. */
struct principal {
	int64_t user_id;
	int64_t worker_id;	/* a build worker's token (scope "worker"; user_id 0) */
	int64_t token_id;
	char name[REPO_NAME_MAX + 1];
	int is_site_admin;
	enum role scope;	/* what the token may do at most */
	char token_name[64];
	time_t token_created_at;
	time_t token_expires_at;	/* 0: never */
};

/* Mint a token "hf_" + 34 random chars for a user; stored as its SHA-256.
 * The caller frees *token. expires_at 0 = never. */
int db_token_create(const char *user, const char *name, enum role scope, time_t expires_at,
		    char **token, int64_t *token_id);
/* KHUB_ENOTFOUND for unknown, expired or revoked tokens. */
int db_token_lookup(const char *token, struct principal *out);
/* Revoke a token of owner (NULL: of anyone), naming its owner in
 * owner_out: 0; KHUB_ENOTFOUND when there is no such token (of owner);
 * KHUB_EEXIST when it was revoked before. */
int db_token_revoke(int64_t token_id, const char *owner, char owner_out[REPO_NAME_MAX + 1]);

struct repo_record {
	int64_t id;
	enum repo_type type;
	int64_t owner_id;	/* the namespace's account id */
	char ns[REPO_NAME_MAX + 1];
	char name[REPO_NAME_MAX + 1];
	int private;
	time_t last_modified;
	int64_t downloads;
	int mirrored;		/* kept in sync from an upstream: read-only to users */
};

/* Find a repo by type and id, case-insensitively. */
int db_repo_get(enum repo_type type, const char *ns, const char *name, struct repo_record *out);
/* Register a repo (owner account must exist). KHUB_EEXIST when taken. */
int db_repo_insert(enum repo_type type, const char *ns, const char *name, int private,
		   struct repo_record *out);
int db_repo_touch(int64_t repo_id);
/* Register a repo as a mirror (created when missing, with its owner
 * account as an org). Imports call it through repo_import_register. */
int db_repo_ensure_mirrored(enum repo_type type, const char *ns, const char *name, struct repo_record *out);
/* Unregister a repo. KHUB_ENOTFOUND when there is no such row. */
int db_repo_delete(int64_t repo_id);
/* Re-register a repo under namespace ns (its owner becomes that account)
 * and name. KHUB_EEXIST when taken, KHUB_ENOTFOUND when ns is unknown. */
int db_repo_rename(int64_t repo_id, const char *ns, const char *name, struct repo_record *out);

/* ---- repo settings (storage/db/db_repo_settings.c) ---------------------------- */

/* A repo's settings: one row each in repo_settings_table, which the API
 * (PUT …/settings), the web UI's settings form and the owner of the rule,
 * accounts/'s accounts_repo_settings_set, all read. Adding a setting is
 * adding its id here, its row there and a migration for its column. */
enum repo_setting_id {
	REPO_SETTING_PRIVATE,
	REPO_SETTING_BUILD_ON_PUSH,
	REPO_SETTING_CAMPAIGN_PUBLISH,
	REPO_SETTING_BENCHMARK_AFTER_PUBLISH,
	REPO_SETTING_COUNT
};
#define REPO_SETTING_BIT(id) (1u << (id))
#define REPO_SETTING_TEXT_MAX 255
enum repo_setting_type { REPO_SETTING_BOOL, REPO_SETTING_INT, REPO_SETTING_ENUM, REPO_SETTING_TEXT };
struct repo_setting {
	const char *key;		/* the JSON key, as the API and the audit entry name it */
	const char *column;		/* in repos */
	enum repo_setting_type type;
	const char *const *values;	/* ENUM: the allowed texts, NULL-terminated */
	long min, max;			/* INT: the bounds; TEXT: max is the longest length */
	enum role who;			/* the caller's role on the repo (token scope included) that may change it */
	const char *audit_action;	/* one entry per changed setting, details {key: new value} */
	const char *default_value;	/* the column's DEFAULT, as text */
	int answered;			/* named in PUT …/settings's answer */
	int kernels_only;		/* answered false for repos that are not kernels */
	const char *why;		/* the sentence for a bad value (the API's 400) */
};
extern const struct repo_setting repo_settings_table[REPO_SETTING_COUNT];
/* All settings of a repo, typed: value[id] is a BOOL's 0/1, an INT, an
 * ENUM's index in values; text[id] a TEXT. Plus what the readers need of
 * the repo itself. */
struct repo_settings {
	long value[REPO_SETTING_COUNT];
	char text[REPO_SETTING_COUNT][REPO_SETTING_TEXT_MAX + 1];
	int is_kernel, mirrored;
};
/* The row of key, or -1. */
int repo_setting_find(const char *key);
/* The index of text in an ENUM row's values, or -1. */
int repo_setting_enum_index(const struct repo_setting *row, const char *text);
/* 0 when s's value of setting id is one its row allows, else KHUB_EINVAL. */
int repo_setting_check(enum repo_setting_id id, const struct repo_settings *s);
/* Every setting of repo_id: 0, KHUB_ENOTFOUND or KHUB_EDB. */
int db_repo_settings_get(int64_t repo_id, struct repo_settings *out);
/* Write the settings whose REPO_SETTING_BIT is in set to want's values in
 * one statement (all or nothing), each checked against its row first
 * (KHUB_EINVAL: nothing written). *before and *after: all settings before
 * and after, read in the same statement. 0, KHUB_EINVAL, KHUB_ENOTFOUND or
 * KHUB_EDB. Only accounts/ (the rule's owner) and the importer call it. */
int db_repo_settings_set(int64_t repo_id, unsigned set, const struct repo_settings *want,
			 struct repo_settings *before, struct repo_settings *after);

/* LFS objects usable by a repo (the store is shared; see sql/0005). */
int db_lfs_link(int64_t repo_id, const char *oid);
/* n of them in one statement (one commit). */
int db_lfs_link_many(int64_t repo_id, const char *const *oids, size_t n);
/* 1 when linked, 0 when not, negative on a database failure. */
int db_lfs_linked(int64_t repo_id, const char *oid);
/* Every LFS object linked to a repo (caller frees with free_strings). */
int db_lfs_links(int64_t repo_id, char ***oids, size_t *n);

/* ---- integrity and garbage collection (storage/db/db_store_check.c) --------- */

/* The DB_LOCK_LFS_OBJECT id of an LFS oid (its first 7 hex digits). */
int64_t db_lfs_object_key(const char *oid);
/* An LFS object is about to be stored and then linked: a row naming it
 * keeps khub gc away until db_lfs_inflight_end(*id). Waits while gc is
 * removing that object. */
int db_lfs_inflight_begin(const char *oid, int64_t *id);
void db_lfs_inflight_end(int64_t id);	/* id 0: nothing to end */
/* The same for n objects in one transaction (one commit): ids[i] names
 * oids[i]'s row (0 when the transaction failed); ended together. */
int db_lfs_inflight_begin_many(const char *const *oids, size_t n, int64_t *ids);
void db_lfs_inflight_end_many(const int64_t *ids, size_t n);	/* ids of 0 skipped */
/* Every oid linked to some repo, sorted and unique: n strings in a
 * NULL-terminated array; the caller frees each and the array. */
int db_lfs_linked_oids(char ***oids, size_t *n);
/* Remove an object when nothing may use it any more: under the object's
 * exclusive lock, when no repo links it and no in-flight row (younger than
 * a day) names it, call remove(oid, arg) (it re-checks the file's age and
 * deletes it; 1 removed, 0 kept). 1 removed, 0 kept, or KHUB_EDB. */
int db_lfs_collect(const char *oid, int (*remove)(const char *oid, void *arg), void *arg);
/* Delete in-flight rows older than a day (left by a crash); how many. */
int db_lfs_inflight_expire(void);
/* Drop one repo's link to an object. */
int db_lfs_unlink(int64_t repo_id, const char *oid);
/* The commits of a repo the variant index has rows for (their shas, in
 * order; the caller releases out with strvec_release). */
int db_kernel_commits_of(int64_t repo_id, struct strvec *out);
/* A branch head the variant index recorded. */
struct kernel_head {
	char *ref;			/* owned */
	char commit[41];
};
/* The repo's recorded heads by ref: *heads (owned; kernel_heads_free) and *n. */
int db_kernel_heads_of(int64_t repo_id, struct kernel_head **heads, size_t *n);
void kernel_heads_free(struct kernel_head *heads, size_t n);	/* accepts NULL */
/* A succeeded build that published an output. */
struct published_build {
	int64_t id;
	char *variant;			/* owned */
	char commit[41];		/* the published commit */
};
/* The repo's published builds by id: *builds (owned; published_builds_free) and *n. */
int db_build_outputs_of(int64_t repo_id, struct published_build **builds, size_t *n);
void published_builds_free(struct published_build *builds, size_t n);	/* accepts NULL */
/* Forget the index of a commit (its kernel_commits and kernel_variants rows). */
int db_kernel_commit_forget(int64_t repo_id, const char *commit_sha);

/* ---- backup and restore (storage/db/db_backup.c) ---------------------------- */

/* Open a read-only repeatable-read transaction on this thread's (then
 * pinned) connection and export its snapshot: its name in snapshot, for
 * pg_dump --snapshot, valid until db_snapshot_release ends it. */
int db_snapshot_export(char *snapshot, size_t size);
void db_snapshot_release(void);
/* The server's major version (16 for 16.4). */
int db_server_major(int *major);
/* 1 when the database has no table, view or sequence outside the system
 * schemas, 0 when it has, or KHUB_EDB. */
int db_is_empty(void);
/* Delete every in-flight LFS write row (a restored hub has none running). */
int db_lfs_inflight_clear(void);
/* A connection string (key=value or URL) as key=value without its password
 * (*without, caller frees) and the password (*password, NULL when none;
 * caller frees): for a client tool's command line, which others can read. */
int db_conninfo_split_password(const char *conninfo, char **without, char **password);

/* How many times actor_id did `action` in the last `seconds` (audit log). */
int db_audit_count_recent(int64_t actor_id, const char *action, long seconds, long *count);
/* Append to the audit log; details is JSON text or NULL. */
int db_audit(int64_t actor_id, const char *actor_name, const char *action, const char *target,
	     const char *details, const char *remote_addr);

/* ---- trusted kernel publishers (storage/db/db_accounts.c) -------------------- */

/* Set or clear an account's trusted_kernel_publisher flag; a real change is
 * recorded in trusted_publisher_changes with changed_by. Fills out (the
 * account after the change) and *changed (0 when it already was so).
 * KHUB_ENOTFOUND for an unknown account. */
int db_trusted_publisher_set(const char *name, int trusted, const char *changed_by, struct account *out,
			     int *changed);
struct trusted_publisher {
	char name[REPO_NAME_MAX + 1];
	enum account_kind kind;
	time_t since;		/* the latest change to trusted; 0 when unknown */
	char *changed_by;	/* owned; NULL when unknown */
};
struct trusted_publisher_list {
	struct trusted_publisher *items;	/* owned */
	size_t count;
};
/* Trusted accounts by name (case-insensitive order). 0 or KHUB_EDB; release
 * with trusted_publisher_list_release either way. */
int db_trusted_publisher_list(struct trusted_publisher_list *out);
void trusted_publisher_list_release(struct trusted_publisher_list *list);	/* accepts NULL */

/* A mirror or an air-gap import copies its source's flag unless an admin
 * overrode it (through repo_import_copy_trust). */
int db_account_copy_upstream_trust(const char *name, int trusted);

/* ---- orgs and tokens, listed (storage/db/db_accounts.c) ------------------------ */

int db_org_member_count(int64_t org_id, int64_t *count);

struct org_membership {
	int64_t org_id;
	char name[REPO_NAME_MAX + 1];
	char fullname[128];
	enum role role;
};
struct org_membership_list {
	struct org_membership *items;	/* owned */
	size_t count;
};
/* The orgs a user belongs to, by name. 0 or KHUB_EDB; release either way. */
int db_user_orgs(int64_t user_id, struct org_membership_list *out);
void org_membership_list_release(struct org_membership_list *list);	/* accepts NULL */

struct token_info {
	int64_t id;
	char prefix[16];		/* the first characters, for listings */
	char name[64];
	enum role scope;
	time_t created_at, expires_at;	/* expires_at 0 = never */
	time_t last_used_at;		/* 0 = never (recorded once a minute at most) */
	int revoked, expired;
};
struct token_list {
	struct token_info *items;	/* owned */
	size_t count;
};
/* A user's tokens by id. 0 or KHUB_EDB; release either way. */
int db_token_list(const char *user, struct token_list *out);
void token_list_release(struct token_list *list);	/* accepts NULL */

/* ---- repos, counted and listed (storage/db/db_repos.c) ------------------------- */

/* Repos of an owner and type; private ones only when include_private. */
int db_repo_count_owned(int64_t owner_id, enum repo_type type, int include_private, int64_t *count);
/* Repos per type (counts[type]); public ones only unless include_private. */
int db_repo_count_by_type(int include_private, int64_t counts[REPO_TYPE_COUNT]);
/* Call fn for every repo, by id, until it returns non-zero (returned). */
int db_repo_each(int (*fn)(const struct repo_record *rec, void *arg), void *arg);

/* ---- PostgreSQL array literals (storage/db/db_arrays.c) ---------------------- */

/* Append one element to an array literal being built in sb (the caller
 * writes the braces and commas): NULL as NULL, anything else quoted. */
void db_array_add(struct strbuf *sb, const char *s);

/* ---- benchmarks (storage/db/db_benchmarks.c) --------------------------------- */

#define BENCHMARK_TEXT_MAX 256	/* machineInfo strings, workload names, script sha */

struct benchmark_result {
	char workload[BENCHMARK_TEXT_MAX + 1];
	double mean_ms, std_ms, min_ms, max_ms, q1_ms, q3_ms, iqr_ms;
	int64_t outliers, iterations;
	int verified;			/* -1 absent, 0 false, 1 true */
};

/* One upload, as kernels' BenchmarkResult.to_payload() sends it, plus
 * what the server derives. Strings are borrowed. */
struct benchmark_run {
	int64_t repo_id;
	const char *commit_sha;			/* resolved, 40 hex */
	const char *kernel_commit_sha;		/* as sent */
	const char *benchmark_script_path;
	const char *benchmark_script_sha;	/* NULL when absent */
	const char *gpu, *backend, *pytorch_version, *os, *cpu;
	int64_t gpu_cores;			/* -1 when absent */
	const char *backend_family, *backend_key, *torch_key, *os_family;
	int64_t submitter_id;
	const char *submitter_name;
	const char *source;			/* "maintainer", "community" or "farm" */
	int64_t worker_id, build_id;		/* a farm run's worker and job; 0 otherwise */
	const char *payload;			/* the JSON body */
	const struct benchmark_result *results;
	size_t nresults;
};

/* Store a run and its results in one statement; *id is the new run id. */
int db_benchmark_insert(const struct benchmark_run *run, int64_t *id);

/* Every field NULL/0 = no filter. */
struct benchmark_filter {
	const char *commit_sha;
	const char *backend;		/* lowercase: family, key or the backend text */
	const char *torch_key, *backend_family, *backend_key, *os_family;	/* from a variant */
	const char *gpu;		/* case-insensitive substring */
	const char *workload;		/* exact */
	int64_t run_id;			/* one run */
	int64_t before_id;		/* runs older than this id */
	long limit;			/* runs; 0 = no limit */
	const char *source;		/* "maintainer", "community" or "farm"; NULL = all (the
				 * aggregate: all but farm) */
	int by_revision;		/* aggregate: one row per revision as well */
};

/* One result of a benchmark run, with its run (db_benchmark_rows). Strings
 * owned, "" where the column is NULL except script_sha and gpu_cores (NULL);
 * submitted_at is ISO 8601 UTC; numbers are PostgreSQL's shortest exact text. */
struct benchmark_row {
	int64_t run_id;
	char *submitted_at, *submitter, *commit, *kernel_commit, *script_path, *script_sha;
	char *gpu, *gpu_cores, *backend, *pytorch, *os, *cpu;
	char *workload, *mean, *std, *min, *max, *q1, *q3, *iqr, *outliers, *iterations;
	int verified;			/* 1, 0, or -1 when not recorded */
	char *source;
	int64_t build_id;		/* a farm run: the benchmark job (or build) it measured for; 0 none */
};
struct benchmark_rows {
	struct benchmark_row *items;
	size_t count;
};
void benchmark_rows_release(struct benchmark_rows *rows);	/* accepts NULL; leaves it empty */
/* The matching results of at most filter->limit runs (+1 more run, so the
 * caller knows whether there is a next page), newest run first, by
 * workload within one. 0 or KHUB_EDB; the caller releases out. */
int db_benchmark_rows(int64_t repo_id, const struct benchmark_filter *filter, struct benchmark_rows *out);

/* One workload and GPU (and revision) of db_benchmark_aggregate. Strings
 * owned ("" for NULL); numbers as PostgreSQL's text. */
struct benchmark_agg_row {
	char *workload, *gpu, *count, *median, *best, *latest_mean, *latest_std, *latest_run, *latest_commit;
	char *latest_at, *p25, *p75, *max;
	char *revision;			/* "" unless filter->by_revision */
};
struct benchmark_agg_rows {
	struct benchmark_agg_row *items;
	size_t count;
};
void benchmark_agg_rows_release(struct benchmark_agg_rows *rows);	/* accepts NULL; leaves it empty */
/* Median (of mean_ms), best (= min) mean, 25th and 75th percentiles, max
 * and the latest result per workload and GPU (and commit with
 * filter->by_revision) over the filtered results (before_id and limit are
 * ignored), by workload, GPU and latest run. */
int db_benchmark_aggregate(int64_t repo_id, const struct benchmark_filter *filter, struct benchmark_agg_rows *out);

/* One row of db_benchmark_regressions: a commit, device (gpu) and
 * workload measured slower than the version before it. Strings owned
 * ("" for NULL); times in milliseconds. */
struct benchmark_regression {
	char *commit, *gpu, *workload, *prev_commit;
	double median, spread, prev_median, prev_spread, slower_pct;
};
struct benchmark_regressions {
	struct benchmark_regression *items;
	size_t count;
};
void benchmark_regressions_release(struct benchmark_regressions *rows);	/* accepts NULL; leaves it empty */
/* The farm runs' regressions (of commit_sha only, unless NULL), newest
 * first: per commit, device and workload, the median of the runs' means
 * against the previous version's, the commit measured before it on the
 * same device and workload; a regression when it is more than pct percent
 * slower and the difference exceeds both sides' spread (each side's
 * largest std_ms or range of means, added). 0 or KHUB_EDB; the caller
 * releases out. */
int db_benchmark_regressions(int64_t repo_id, long pct, const char *commit_sha, struct benchmark_regressions *out);

/* One side of a comparison on a device and workload: runs = 0 when the
 * side has none; times in milliseconds, over the runs' means (spread:
 * db_benchmark_regressions' rule). */
struct benchmark_stats {
	int runs;
	double median, min, max, p25, p75, spread;
};
/* A device and workload compared (db_benchmark_compare). Strings owned. */
struct benchmark_compare_row {
	char *gpu, *workload;
	struct benchmark_stats base, head;
	int has_change;			/* both sides measured */
	double change_pct;		/* (head - base) / base in %, 1 decimal: > 0 slower */
	int regression;			/* db_benchmark_regressions' rule at pct */
};
struct benchmark_compare_rows {
	struct benchmark_compare_row *items;
	size_t count;
};
void benchmark_compare_rows_release(struct benchmark_compare_rows *rows);	/* accepts NULL; leaves it empty */
/* Base against head per device and workload (ordered so): each side is
 * base's or head's commit_sha and variant keys; source, gpu and workload
 * are base's and apply to both (source NULL = every source); the rest of
 * the filters are ignored. A regression is the head slower than the base
 * by db_benchmark_regressions' rule at pct. 0 or KHUB_EDB; the caller
 * releases out. */
int db_benchmark_compare(int64_t repo_id, const struct benchmark_filter *base, const struct benchmark_filter *head,
			 long pct, struct benchmark_compare_rows *out);

/* ---- download counters (storage/db/db_downloads.c) --------------------------- */

struct download_count {
	int64_t repo_id;
	char day[11];			/* YYYY-MM-DD, UTC */
	const char *variant, *kernels_version, *torch_version, *backend;	/* borrowed */
	int64_t count;
};

/* Add counts in one statement: download_counts rows upserted and
 * repos.downloads increased. Counts of repos deleted meanwhile are dropped.
 * On failure nothing was added. */
int db_downloads_add(const struct download_count *counts, size_t n);
/* One download_counts row (strings owned; day YYYY-MM-DD, UTC). */
struct download_row {
	char *day, *variant, *kernels_version, *torch_version, *backend;
	int64_t count;
};
struct download_rows {
	struct download_row *items;
	size_t count;
};
/* Accepts NULL; leaves it empty. */
void download_rows_release(struct download_rows *rows);
/* Rows of the last `days` UTC days, newest first, then by variant, count
 * (largest first), kernels_version, torch_version, backend. 0 or KHUB_EDB;
 * the caller releases out with download_rows_release. */
int db_downloads_rows(int64_t repo_id, long days, struct download_rows *out);

/* ---- the kernel listing (storage/db/db_kernels.c) ------------------------------ */

enum kernel_sort {
	KERNEL_SORT_LAST_MODIFIED, KERNEL_SORT_DOWNLOADS, KERNEL_SORT_TRENDING, KERNEL_SORT_CREATED, KERNEL_SORT_ID,
	KERNEL_SORT_BENCH,		/* bench_workload's farm result; kernels without one last */
};

/* Strings borrowed; NULL or "" = no filter. */
struct kernel_listing_filter {
	int64_t user_id;		/* the caller (0 = anonymous): private repos it may see */
	int is_site_admin;
	const char *author, *search;
	/* variants of the main and vN heads: one must match all of these */
	const char *backend;
	int torch;			/* filter on torch_major.torch_minor */
	long torch_major, torch_minor;
	const char *arch, *os;		/* arch may be "x86_64-linux" */
	int backend_version;		/* filter on backend_major.backend_minor (CUDA, ROCm...) */
	long backend_major, backend_minor;
	int trusted_only;		/* owners that are trusted kernel publishers */
	enum kernel_sort sort;
	int descending;
	long limit, offset;
	/* KERNEL_SORT_BENCH: the workload and a device substring (NULL: any) */
	const char *bench_workload, *bench_device;
};

struct kernel_listing_item {
	struct repo_record record;
	time_t created_at;
	int64_t trending;		/* downloads of the last 7 UTC days */
	char *versions;			/* owned: JSON array of the vN branch names */
	char *backends;			/* owned: JSON array of the variants' backends */
	int trusted_publisher;		/* the owner's flag */
	/* main's README card (kernel_cards), all owned: "" and "[]" when none */
	char *description, *license;
	char *tags;			/* JSON array of the card's tags */
	int has_bench;			/* KERNEL_SORT_BENCH: the farm has a result */
	double bench_ms;		/* db_benchmark_farm_result_sql's median */
};

struct kernel_listing {
	struct kernel_listing_item *items;
	size_t count;
	long total;			/* matches over every page */
};

/* One page of kernel repos. 0 or KHUB_EDB; release either way. */
int db_kernel_listing(const struct kernel_listing_filter *filter, struct kernel_listing *out);
void kernel_listing_release(struct kernel_listing *list);	/* accepts NULL */

/* ---- mirror tables (storage/db/db_mirror.c) ---------------------------------- */

/* One mirrored repo's pull status. Strings owned by the list. */
struct mirror_status {
	char *repo;			/* ns/name */
	enum repo_type type;
	char *selection, *upstream_name, *upstream_url, *upstream_repo;
	time_t last_sync_started, last_sync_finished, last_success;	/* 0 = never */
	int64_t lag_seconds;		/* since the last success; -1 = never */
	int64_t refs_behind;
	char *last_error, *warnings;	/* NULL when none */
	int64_t bytes, objects, syncs;
	int lazy;
};
struct mirror_status_list {
	struct mirror_status *items;
	size_t count;
};
/* Every mirrored repo by name. 0 or KHUB_EDB; release either way. */
int db_mirror_status_list(struct mirror_status_list *out);
void mirror_status_list_release(struct mirror_status_list *list);	/* accepts NULL */

/* What a pull of a repo records as it starts (strings borrowed). */
struct mirror_pull_start {
	int64_t repo_id;
	const char *selection, *upstream_name, *upstream_url, *upstream_repo;
	const char *token_env, *token_file;	/* NULL when absent */
	int lazy;
};
int db_mirror_pull_started(const struct mirror_pull_start *start);
/* error, warnings: NULL when none; the counts are added to the totals. */
int db_mirror_pull_finished(int64_t repo_id, int ok, const char *error, const char *warnings, uint64_t bytes,
			    uint64_t objects, int refs_behind);
/* Add bytes and objects transferred outside a pull (lazy fetches). */
int db_mirror_count_transfer(int64_t repo_id, uint64_t bytes, uint64_t objects);

/* Where a lazily mirrored repo's files come from. */
struct mirror_lazy_source {
	char *upstream_url, *upstream_repo;	/* owned */
	char *token_env, *token_file;		/* owned; NULL when absent */
	enum repo_type type;
};
/* KHUB_ENOTFOUND when the repo is no lazy mirror; release on success. */
int db_mirror_lazy_source(int64_t repo_id, struct mirror_lazy_source *out);
void mirror_lazy_source_release(struct mirror_lazy_source *src);	/* accepts NULL */

/* Queue a pull (selection NULL = all); *id is the trigger's. */
int db_mirror_trigger_add(const char *selection, const char *requested_by, int64_t *id);
/* Claim the oldest pending trigger: 0 with *id and *selection ("" = all;
 * the caller frees), 1 when none is pending, KHUB_EDB. */
int db_mirror_trigger_claim(int64_t *id, char **selection);
int db_mirror_trigger_finish(int64_t id);
/* The configuration stored through the admin API, as JSON text (the caller
 * frees). KHUB_ENOTFOUND when none is stored. */
int db_mirror_config_get(char **json);
/* KHUB_EDB also when PostgreSQL rejects the JSON. */
int db_mirror_config_put(const char *json, const char *updated_by);


/* ---- air-gap bundles (storage/db/db_sync.c) --------------------------------- */

/* Exporting side: the next bundle's sequence (1, 2, ...) and this hub's
 * exporter id (candidate, a uuid, is taken the first time). */
int db_sync_next_sequence(const char *candidate, char exporter[37], int64_t *seq);
/* Remember a repo as exported (its deletion travels in later bundles). */
int db_sync_exported_add(enum repo_type type, const char *ns, const char *name);
/* cb for each repo of type exported once and no longer here; stops at a negative return. */
int db_sync_exported_gone(enum repo_type type, int (*cb)(const char *ns, const char *name, void *arg), void *arg);

/* Importing side: a bundle applied (or being applied). */
struct sync_import_record {
	char bundle[37];
	char exporter[37];
	char key_id[17];
	int64_t sequence;
	int done;		/* 0: its apply was interrupted */
	char *hub, *operator_, *started;	/* db_sync_history only */
	int64_t refs_moved;
};
/* The highest sequence applied from exporter by the key bound to it (a
 * bundle another key signed never counts); KHUB_ENOTFOUND when none. */
int db_sync_import_last(const char *exporter, struct sync_import_record *out);
/* The key bound to an exporter id (the only one that may sign for it):
 * 0 with key_id, KHUB_ENOTFOUND when the id is bound to none yet. */
int db_sync_exporter_key_get(const char *exporter, char key_id[17]);
/* Bind an exporter id to a key: replace 1 replaces the key bound before
 * (the operator's choice), replace 0 binds only an unbound id (the first
 * bundle of it). 1 when the row was written, 0 when not, or KHUB_EDB. */
int db_sync_exporter_key_set(const char *exporter, const char *key_id, const char *bound_by, int replace);
/* cb for every exporter id bound to a key, by exporter; stops at a negative return. */
int db_sync_exporter_key_list(int (*cb)(const char *exporter, const char *key_id, const char *bound_by,
					const char *bound_at, void *arg),
			      void *arg);
/* Record a bundle as being applied (kept when it is already recorded). */
int db_sync_import_begin(const char *exporter, int64_t seq, const char *bundle, const char *key_id,
			 const char *hub, const char *operator_);
int db_sync_import_done(const char *bundle, long refs_moved);
/* Every bundle recorded, oldest first (free with db_sync_history_free). */
struct sync_import_record *db_sync_history(size_t *count, int *rc);
void db_sync_history_free(struct sync_import_record *items, size_t count);
/* Per signing key (its 16-hex key id), the orgs it may bring in: a
 * comma-separated list of names or globs (*orgs, caller frees), or
 * KHUB_ENOTFOUND when the key has no scope (any org). */
int db_sync_key_scope_get(const char *key_id, char **orgs);
/* Set a key's scope (orgs comma-separated), or remove it (orgs NULL). */
int db_sync_key_scope_set(const char *key_id, const char *orgs, const char *set_by);
/* cb for every key with a scope, by key id; stops at a negative return. */
int db_sync_key_scope_list(int (*cb)(const char *key_id, const char *orgs, const char *set_by, const char *set_at,
				     void *arg),
			   void *arg);
enum { SYNC_ACCOUNT_NONE = 0, SYNC_ACCOUNT_MIRRORED = 1, SYNC_ACCOUNT_LOCAL = 2 };
/* Whether an account exists and was made by an import or the mirror
 * (SYNC_ACCOUNT_*), or a negative error. */
int db_sync_account_kind(const char *name);
/* 1 when an import would change the account's trust flag (a mirrored
 * account, no admin override, another value), 0 when not, or an error. */
int db_sync_trust_differs(const char *name, int trusted);
/* 1 (with its id) when a repo deleted at a bundle's source may be deleted
 * here: it exists, is mirrored, and is not kept by `khub mirror` (another
 * source); 0 when not, or an error. */
int db_sync_deletable(enum repo_type type, const char *ns, const char *name, int64_t *repo_id);
/* Register a mirrored repo (and its namespace as a mirrored org) when
 * missing, with statements that cannot fail on a conflict (safe inside a
 * transaction). The caller has checked neither is local. */
int db_sync_register_repo(enum repo_type type, const char *ns, const char *name, int private_);

/* ---- the web UI (storage/db/db_web.c) ------------------------------------------- */

/* A browser session opened with a token, stored by the SHA-256 of its id,
 * expiring after ttl_seconds: 0 or KHUB_EDB. */
int db_web_session_create(const char *id_sha256, int64_t token_id, long ttl_seconds);
/* The caller a session stands for, as db_token_lookup: 0, KHUB_ENOTFOUND
 * (unknown, expired, or its token revoked or expired) or KHUB_EDB. */
int db_web_session_lookup(const char *id_sha256, struct principal *out);
int db_web_session_delete(const char *id_sha256);	/* 0 or KHUB_EDB */
/* A session's one-time message (sql/0033_web_session_flash.sql): set it
 * (NULL clears), or take it: *out (the caller frees it) is the message, or
 * NULL when there was none, and the session has none afterwards. 0 or
 * KHUB_EDB. */
int db_web_session_flash_set(const char *id_sha256, const char *flash);
int db_web_session_flash_take(const char *id_sha256, char **out);
/* An org's member (strings owned). */
struct org_member_row {
	char *name, *role;
};
/* An org's members by name: *rows (owned; org_member_rows_free) and *n.
 * 0 or KHUB_EDB. */
int db_org_members(int64_t org_id, struct org_member_row **rows, size_t *n);
void org_member_rows_free(struct org_member_row *rows, size_t n);	/* accepts NULL */
/* An account as the admin page lists it (strings owned). */
struct account_row {
	char *kind, *name;
	int site_admin, trusted;
	char created[11];		/* YYYY-MM-DD, UTC */
};
/* Accounts, orgs first, then by name: *rows (owned; account_rows_free)
 * and *n. 0 or KHUB_EDB. */
int db_account_rows(long limit, struct account_row **rows, size_t *n);
void account_rows_free(struct account_row *rows, size_t n);	/* accepts NULL */
/* A repo's downloads of one day. */
struct download_day {
	int64_t repo_id;
	long days_ago;			/* 0 = today (UTC) */
	long count;
};
/* Downloads per repo and day of the last `days` UTC days, for sparklines:
 * *rows (owned; free()) and *n. 0 or KHUB_EDB. */
int db_downloads_daily(const int64_t *repo_ids, size_t n, long days, struct download_day **rows, size_t *nrows);
/* An audit log entry (strings owned; at is UTC text). */
struct audit_row {
	char *at, *actor, *action, *target;
};
/* The newest audit log entries: *rows (owned; audit_rows_free) and *n.
 * 0 or KHUB_EDB. */
int db_audit_recent(long limit, struct audit_row **rows, size_t *n);
void audit_rows_free(struct audit_row *rows, size_t n);	/* accepts NULL */

/* ---- figures for /metrics (storage/db/db_metrics.c) ------------------------- */

struct db_mirror_lag {
	char *repo, *selection;	/* "ns/name" */
	double lag_s;		/* seconds since its last successful pull */
};
struct db_metrics {
	int64_t builds_queued, builds_running;
	double build_queued_oldest_s, build_running_oldest_s;	/* ages; 0 when none */
	int64_t sync_imports_done, sync_imports_applying;
	double sync_import_last;	/* when the last import finished (epoch); 0 when none */
	struct db_mirror_lag *mirrors;	/* those pulled at least once (owned) */
	size_t nmirrors;
};
/* 0 or KHUB_EDB; release out with db_metrics_release (accepts NULL). */
int db_metrics_read(struct db_metrics *out);
void db_metrics_release(struct db_metrics *m);

/* ---- scheduled jobs (storage/db/db_jobs.c, sql/0032_scheduled_jobs.sql) -------- */

/* A periodic job's last run, the same for every node; times are seconds
 * since the epoch, 0 for never. */
struct db_sched_job {
	char name[32];
	double requested_at, last_started_at, last_success_at, last_failure_at;
	double db_now;			/* the database's clock when read: what the others compare with */
	int64_t last_duration_ms;	/* -1: never finished */
	int64_t successes, failures;
	int running;			/* a run began and has not ended (or its node died) */
	char last_node[128];
	char last_error[256];
};
/* Make a row for each name that has none: 0 or KHUB_EDB. */
int db_sched_jobs_ensure(const char *const *names, size_t n);
/* Every job's row, by name: 0 with *out (owned, free()) and *n, or KHUB_EDB. */
int db_sched_jobs_list(struct db_sched_job **out, size_t *n);
/* One job's row: 0, KHUB_ENOTFOUND or KHUB_EDB. */
int db_sched_job_get(const char *name, struct db_sched_job *out);
/* A run begins on node (the caller holds the job's DB_LOCK_JOB): a run
 * left unfinished by a node that died is closed as failed first; *run_id
 * gets the new run's id. 0 or KHUB_EDB. */
int db_sched_job_started(const char *name, const char *node, int64_t *run_id);
/* The run ends: ok or not, its duration and a line about it. 0 or KHUB_EDB. */
int db_sched_job_finished(const char *name, int64_t run_id, int ok, int64_t duration_ms, const char *detail);
/* Ask for a run now (khub jobs run): 0 with *at the request's time, KHUB_ENOTFOUND, KHUB_EDB. */
int db_sched_job_request(const char *name, double *at);

/* ---- cache coherence between nodes (storage/db/db_listen.c) ------------------- */

/* Start the thread that LISTENs on khub_cache on a connection of its own
 * and calls drop with each cache name a write notified ("repos",
 * "tokens"), and with "*" after every (re)connect. */
void db_listen_start(const char *conninfo, void (*drop)(const char *cache));
void db_listen_stop(void);
/* Run one round of a background job unless another node runs one now,
 * its lock taken on the coordination session (no pooled connection is
 * pinned): 0 ran, 1 skipped (another holds it), KHUB_EDB (no session:
 * not started, or the database is away). round's result is its own. */
int db_job_round(enum db_job job, void (*round)(void *arg), void *arg);
/* 1 while the listening connection is up. */
int db_listen_connected(void);
/* How many times it connected (a reconnect after an outage counts). */
uint64_t db_listen_connects(void);

#endif
