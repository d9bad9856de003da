/* api.h -- khub's HTTP endpoints: the route tables every file in api/
 * exports and what handlers share (repo access, kernels, the build farm).
 * The request a handler sees and the helpers it answers with are the HTTP
 * layer's (http/http.h); server/ owns the libmicrohttpd daemon and the
 * router; handlers here queue exactly one response per request. */
#ifndef KHUB_API_H
#define KHUB_API_H

#include <microhttpd.h>
#include <jansson.h>

#include "common/common.h"
#include "storage/git/repo.h"
#include "storage/lfs/lfs.h"
#include "storage/db/db.h"
#include "accounts/accounts.h"
#include "storage/publish/publish.h"
#include "storage/db/variant_index.h"
#include "http/http.h"

/* What the server tells the handlers (set once at start-up). */
struct api_context {
	const char *repo_root;		/* {data_dir}/repos */
	struct lfs_store *lfs;
	long tree_page_size;
	long max_body_bytes;
	long lock_wait_ms;		/* longest wait for a repo's write lock */
	long commits_in_flight_per_user;	/* commit bodies one account streams at once */
	long pull_requests_per_hour;	/* opened by an account without write access */
	unsigned char url_secret[32];	/* signs self-authenticating LFS URLs */
	long lfs_url_ttl;		/* seconds an LFS action URL stays valid */
	int lfs_redirect;		/* GET of an LFS file: 302 to a presigned URL (S3) */
	const char *lfs_root;		/* for the push hooks */
	char **lfs_env;			/* NAME=VALUE the hooks need to open the LFS backend (NULL-ended) */
	const char *hooks_dir;		/* core.hooksPath given to git receive-pack */
	const char *conninfo;		/* database, for the push hooks */
	long metrics_public;		/* anonymous /metrics: public repo counts only */
	long webhooks_allow_private;	/* webhook URLs may name loopback/private addresses */
	long build_log_followers_max;	/* build logs followed at once (api/builds_follow.c) */
	long build_log_follow_idle_s;	/* a follower with no new byte this long ends */
	long benchmark_regression_pct;	/* a farm run this much slower than the previous version's */
	/* Fetch a missing LFS object of a mirrored repo from its upstream
	 * (set by the server to the mirror module's; NULL = none). */
	int (*lazy_fetch)(int64_t repo_id, const char *commit_sha, const char *path, const char *oid, uint64_t size,
			  struct lfs_store *lfs);
};

extern struct api_context api_ctx;

/* The tables, each terminated by a row with a NULL pattern. */
extern const struct route orgs_routes[];	/* api/orgs.c: overview, whoami, harnesses */
extern const struct route refs_routes[];	/* api/refs.c */
extern const struct route tree_routes[];	/* api/tree.c: tree, paths-info, repo info */
extern const struct route resolve_routes[];	/* api/resolve.c: file bytes */
/* The same file answer for a page route (ROUTE_PAGE, req->repo opened for
 * the session's caller): browser-safe content types and disposition, a
 * sandbox CSP, no download counted, no HEAD answer kept. */
enum MHD_Result resolve_for_page(struct request *req);
extern const struct route commit_routes[];	/* api/commit.c: NDJSON commits */
extern const struct route preupload_routes[];	/* api/preupload.c */
extern const struct route lfs_routes[];		/* api/lfs.c: batch, upload, verify, download */
extern const struct route git_routes[];		/* api/git_http.c: smart HTTP */
extern const struct route mirror_admin_routes[];	/* api/mirror_admin.c: status, trigger, config, /metrics */
extern const struct route repos_routes[];	/* api/repos.c: create, delete, move */
extern const struct route repo_settings_routes[];	/* api/repo_settings.c: settings */
extern const struct route branches_routes[];	/* api/branches.c: branches and tags */
extern const struct route commits_routes[];	/* api/commits.c: commit history */
extern const struct route trusted_publishers_routes[];	/* api/trusted_publishers.c: admin API */
extern const struct route benchmarks_routes[];	/* api/benchmarks.c: upload */
extern const struct route benchmark_queries_routes[];	/* api/benchmark_queries.c: list, aggregate, regressions */
extern const struct route benchmark_compare_routes[];	/* api/benchmark_compare.c: two versions or variants */
extern const struct route downloads_routes[];	/* api/downloads.c: per-variant statistics */
extern const struct route kernels_routes[];	/* api/kernels.c: GET /api/kernels */
extern const struct route kernel_variants_routes[];	/* api/kernel_variants.c: variants, metadata, compliance */
extern const struct route openapi_routes[];	/* api/openapi.c: GET /api/openapi.json */
extern const struct route builds_routes[];	/* api/builds.c: build jobs for users, workers listed */
extern const struct route build_enqueue_routes[];	/* api/builds_enqueue.c: POST …/builds */
extern const struct route build_worker_routes[];	/* api/builds_worker.c: register, claim, lease, log */
extern const struct route build_source_routes[];	/* api/builds_source.c: a job's source tar */
extern const struct route build_output_routes[];	/* api/builds_output.c: a job's output, published */
extern const struct route webhooks_routes[];	/* api/webhooks.c: a repo's webhooks and their deliveries */
extern const struct route benchmark_jobs_routes[];	/* api/benchmark_jobs.c: benchmark jobs run, measured */
extern const struct route campaigns_routes[];	/* api/campaigns.c: fleet rebuilds */

/* ---- access (api/repo_access.c) ------------------------------------------ */

/* "public", "signed-in", "repo-read"... (static), NULL for no value. */
const char *access_name(enum route_access access);
/* The least token scope a route of this access needs: ROLE_READ (any),
 * ROLE_WRITE (write or admin). */
enum role access_min_scope(enum route_access access);
/* The check the server runs once per request (access_for applied): 0 to go
 * on, with req->repo opened for ACCESS_REPO_*; -1 with the answer queued
 * in *result (401, 403, RepoNotFound, 503). */
int access_check(struct request *req, enum MHD_Result *result);

/* ---- repos, access and revisions (api/repo_access.c) --------------------- */

/* Find req->ns/req->name of req->type (a model id falls back to a kernel
 * repo of that id), check the caller may read it, open it. On failure a
 * response has been queued and *result holds what to return. */
int repo_open_for_read(struct request *req, struct repo_handle *h, enum MHD_Result *result);
/* For writes: the caller must be signed in (else 401), see the repo (else
 * RepoNotFound) and hold at least `needed` (else 403). type/ns/name come
 * from the request. On failure a response has been queued. */
int repo_open_for_write(struct request *req, struct repo_handle *h, enum role needed,
			enum MHD_Result *result);
/* Like repo_open_for_write for a repo named explicitly (JSON bodies). */
int repo_open_named(struct request *req, enum repo_type type, const char *ns, const char *name,
		    enum role needed, struct repo_handle *h, enum MHD_Result *result);
/* Delete, move and settings: repo_open_named for reading, then the write
 * role in the repo's namespace (as on the Hub), else 403. */
int repo_open_to_manage(struct request *req, enum repo_type type, const char *ns, const char *name,
			struct repo_handle *h, enum MHD_Result *result);
/* 401 unless the caller is signed in; returns 0 when signed in. */
int require_signed_in(struct request *req, enum MHD_Result *result);
/* What the caller may do in a namespace (own user name: admin; org: role),
 * in *out; 0, or KHUB_EDB (answer 503, never 403). */
int namespace_role(const struct principal *p, const struct account *ns, enum role *out);
/* Serialise writers of one repo, across processes (a PostgreSQL advisory
 * lock on this thread's connection), without holding a server thread while
 * another writer has it: 0 when taken (release with repo_write_unlock in the
 * same handler call), 1 when the request was parked (return *result, which
 * is MHD_YES: the handler is called again once the lock is released or
 * after a short delay, so everything before the lock must be safe to
 * repeat), -1 when an answer was queued: 503 with Retry-After when the
 * database is down or the lock stayed busy past lock_wait_ms. */
int repo_write_lock_request(struct request *req, int64_t repo_id, enum MHD_Result *result);
void repo_write_unlock(int64_t repo_id);
/* The same for a publication (storage/publish/publish.h): its lock is released by
 * publish_end. */
int publication_lock_request(struct request *req, struct publication *pub, int64_t repo_id, enum MHD_Result *result);
/* Registered with the publish module by the server: wake the requests
 * waiting for a repo's lock; drop caches after ref changes. */
void api_lock_released(int64_t repo_id);
void api_after_publish(int64_t repo_id, enum publish_change change);

/* "kernels/ns/name": how the audit log names a repo. The request owns it. */
const char *repo_audit_target(struct request *req, enum repo_type type, const char *ns, const char *name);
/* private (bool) or visibility ("public", "private", "protected") of a
 * create or settings body (api/repo_settings.c): *set says whether either
 * was given; -1 when one is malformed. */
int repo_visibility_from_body(json_t *doc, int *private_out, int *set);
/* Audit a write by the caller; details is JSON text or NULL. */
void api_audit(struct request *req, const char *action, const char *target, const char *details);
/* The request's caller, for an accounts/ change (borrows req). */
struct accounts_actor api_actor(const struct request *req);
/* Resolve rev to a commit sha; on failure RevisionNotFound is queued. */
int repo_resolve_or_respond(struct request *req, struct repo_handle *h, const char *rev, char sha[41],
			    enum MHD_Result *result);
/* What principal may do with a repo (site admin, owner, org role, capped by
 * the token's scope), in *out; 0, or KHUB_EDB (answer 503, never 404). */
int repo_role_of(const struct principal *p, const struct repo_record *repo, enum role *out);

/* ---- download statistics (api/downloads.c) -------------------------------- */

/* Count a variant download when a resolve request is one (a full GET of
 * build/<variant>/metadata.json, or of build/<variant>/__init__.py when the
 * variant has no metadata.json) in memory; no database write here. */
void download_stats_note(struct request *req, const struct repo_handle *h, const char *sha, int ranged);
/* Start the thread that adds the counts to the database every flush_ms
 * (enabled = 0: count nothing). */
void download_stats_start(int enabled, long flush_ms);
/* Stop that thread after a last flush (call once no request runs). */
void download_stats_stop(void);

/* ---- kernel repos (api/kernels.c, api/kernel_variants.c) ----------------- */

/* GET /api/kernels's query, shared with the web listing (one implementation):
 * the filters of req's query arguments (author, search, backend,
 * backend_version, torch, arch, os, trusted, sort, direction, limit, cursor)
 * run for req's caller; author, when not NULL, replaces author=. With
 * wait_for_index, repos changed without indexing are caught up with first
 * (the API does; the web UI shows the background catch-up's state, at most
 * variant_catch_up_ms old, and answers sooner). 0 with *out filled (items as the API answers them;
 * the caller json_decrefs out->items); 1 when the request was parked (the
 * handler returns MHD_YES and runs again); KHUB_EINVAL with *error (static)
 * for a bad argument; KHUB_EDB. */
struct kernel_listing_page {
	json_t *items;
	long total, rows, limit, cursor;
};
int kernel_listing_query(struct request *req, const char *author, int wait_for_index, struct kernel_listing_page *out,
			 const char **error);
/* The "versions" array of a kernel's repo info: every vN branch, by N, with
 * its sha and variant names (indexing commits not indexed yet). The caller
 * owns the result. */
json_t *kernel_versions_json(struct repo_handle *h);
/* The vN branches of a repo, by N; release with ref_list_release. */
int kernel_version_branches(git_repository *git, struct ref_list *out);
/* The indexed variants of a commit (indexed now when needed); on failure
 * 503 is queued. Release rows with variant_rows_release. */
int kernel_variants_load(struct request *req, struct repo_handle *h, const char *sha, struct variant_rows *rows,
			 enum MHD_Result *result);
/* Index kernel repos whose branch heads are not indexed (written before the
 * index, or while the database was away) on a background thread: now and
 * every interval_ms; stop waits for the round in progress. */
void kernel_index_catch_up_start(long interval_ms);
void kernel_index_catch_up_stop(void);
/* One indexed variant as the variants API shows it (name parts, files,
 * size, metadata summary, warnings), and one revision's variants against the
 * required build list as the compliance API shows it. The caller owns both. */
json_t *kernel_variant_json(const struct variant_row *r);
json_t *kernel_compliance_json(const struct variant_rows *rows);
/* What the loader would pick from rows for env: adds environment, selected,
 * variants (accepted, best first), rejected (with reasons) and warnings to
 * body, as GET .../variants?compatible=true answers. */
void kernel_compatibility_add(json_t *body, const struct variant_rows *rows, const struct variant_env *env);

/* ---- the build farm, for the web UI too (api/builds*.c) ------------------ */

/* One implementation each, which the API's routes and the pages call, for
 * req->repo (opened by the route's access check; the caller's write access
 * checked for the changes). Each returns 0, or -1 with the answer queued in
 * *result (an error page for a page route). */
/* The farm benchmark runs' regressions of repo_id (of commit_sha only,
 * unless NULL), judged with benchmark_regression_pct: a JSON array of
 * {"commit", "previousCommit", "device", "workload", "medianMs",
 * "previousMedianMs", "spreadMs", "previousSpreadMs", "slowerPct"}, newest
 * first, in *out (owned); KHUB_EDB (api/benchmark_queries.c). */
int benchmark_regressions_json(int64_t repo_id, const char *commit_sha, json_t **out);
/* Which machines a variant name is for, into f's torch_key, os_family,
 * backend_family and backend_key (strings owned by req):
 * torch211-cxx11-cu128-x86_64-linux wants torch 2.11, CUDA 12.8 and Linux;
 * torch-cuda any CUDA; torch-cpu the CPU; torch-universal anything. 0, or
 * -1 when no part is understood (api/benchmark_queries.c). */
int benchmark_variant_filter(const char *variant, struct request *req, struct benchmark_filter *f);
/* What a comparison of farm (or other) runs is asked for, all borrowed,
 * NULL or "" = absent: the base and head revisions (a version branch, any
 * ref or a SHA; head absent = base's), a variant for both sides or one per
 * side (base_variant, head_variant win over variant), the source (absent =
 * "farm"), a GPU substring and a workload. */
struct benchmark_compare_ask {
	const char *base, *head, *variant, *base_variant, *head_variant, *source, *gpu, *workload;
};
/* The comparison of h's runs (db_benchmark_compare, judged with
 * benchmark_regression_pct) into out (the caller releases it), the sides'
 * commits into base_sha and head_sha: 0; KHUB_ENOTFOUND with *bad the
 * revision that names nothing; KHUB_EINVAL with *bad the variant or source
 * that is none; KHUB_EDB (api/benchmark_compare.c). */
int benchmark_compare(struct request *req, struct repo_handle *h, const struct benchmark_compare_ask *ask,
		      char base_sha[41], char head_sha[41], struct benchmark_compare_rows *out, const char **bad);
/* "slower", "faster" or "same" for a compared row; NULL when a side has no
 * result. */
const char *benchmark_change_word(const struct benchmark_compare_row *c);
/* The build matrices of req->repo (docs/build-farm.md, "The build
 * matrix"): of commit (a sha), or of the repo's newest commits with builds
 * (commit NULL; limit and offset count commits): a JSON array of
 * {"commit", "url", "variants": [BUILD with "status", "duration_seconds",
 * "log", "log_page"]} (the caller owns it); KHUB_EDB. */
int builds_matrices(struct request *req, const char *commit, long limit, long offset, json_t **out);
/* One commit's matrix (empty when it has no builds); with_plan adds "plan"
 * and "unbuildable" (what build.toml allows that no live worker builds,
 * with the planner's reasons), planning on the plan pool the first time
 * (parked: everything before must be safe to repeat). *out owned. */
int builds_matrix_of_commit(struct request *req, const char *sha, int with_plan, json_t **out,
			    enum MHD_Result *result);
/* A ?commit= argument: a 40-hex sha as given, else a revision of the repo
 * resolved (RevisionNotFound). */
int builds_matrix_commit_arg(struct request *req, const char *commit, char sha[41], enum MHD_Result *result);
/* POST /api/builds/{id}/cancel and /retry for a job of req->repo (another
 * repo's: 404): *answer is the API's 200 body (owned); audited. */
int builds_cancel(struct request *req, int64_t id, json_t **answer, enum MHD_Result *result);
int builds_retry(struct request *req, int64_t id, json_t **answer, enum MHD_Result *result);
/* POST /api/kernels/{ns}/{name}/campaigns/{id}/merge for req->repo (the
 * API and the web's Merge button): v<N> moved to the campaign's pull
 * request, its build staged -> succeeded, audited (campaign.merge);
 * *answer the API's 200 body (owned), else -1 with *result answered (404,
 * 409 moved, merged or superseded) or parked. */
int campaigns_merge(struct request *req, int64_t id, json_t **answer, enum MHD_Result *result);
/* POST .../builds {"revision": sha}: the default variants of sha's plan
 * queued (those queued, running or published skipped): *status 202 or 422
 * (nothing to build) with *answer (owned), as the API answers them. */
int builds_enqueue_default(struct request *req, const char *sha, int *status, json_t **answer,
			   enum MHD_Result *result);
/* At most max bytes of job id's log from byte from, as GET
 * /api/builds/{id}/log answers it (terminal sequences dropped, control
 * bytes as \xNN) into shown; *length and *next as its headers say. */
int builds_log_text(struct request *req, int64_t id, int64_t from, size_t max, struct strbuf *shown,
		    int64_t *length, int64_t *next, enum MHD_Result *result);
/* Answer job id's log from byte from as it grows, escaped as
 * builds_log_text escapes it, until the build ends (api/builds_follow.c;
 * docs/build-farm.md, "Live logs"): plain text (GET
 * /api/builds/{id}/log?follow=1), or sse: server-sent events (the log
 * page's stream; each event's id the offset to read on from, then "end"
 * with the build's status, or "idle"). The stream waits parked between
 * pieces; past build_log_follow_idle_s without a new byte it ends ("idle";
 * plain text: cut, never a clean end). 503 when build_log_followers_max
 * streams are open. The caller checked the caller's access to the job. */
enum MHD_Result builds_log_follow(struct request *req, int64_t id, int64_t from, int sse);

/* Files compiled in by api/embed_files.sh (NUL-terminated). */
extern const char embedded_openapi_json[];
extern const size_t embedded_openapi_json_len;

#endif
