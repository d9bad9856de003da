/* webhooks.h -- storage: repo webhooks (sql/0037_webhooks.sql). The hooks
 * a repo's managers register, the events that queue a delivery to each
 * hook subscribed to their scope (called where commits land and where
 * build jobs change state, in whatever process that is), and the durable
 * queue khub serve delivers from. Functions return 0 or a negative enum
 * khub_err unless they say otherwise. */
#ifndef KHUB_STORAGE_WEBHOOKS_H
#define KHUB_STORAGE_WEBHOOKS_H

#include "storage/db/db.h"

#include <jansson.h>

/* The scopes a hook subscribes to (names as in payloads' event.scope). */
#define WEBHOOK_SCOPE_CONTENT "repo.content"
#define WEBHOOK_SCOPE_BUILD "repo.build"
#define WEBHOOK_SCOPE_BENCHMARK "repo.benchmark"

/* A hook as listed (the secret is never read back). */
struct db_webhook {
	int64_t id;
	char *url;			/* owned */
	int content, build, benchmark;	/* subscribed to repo.content, repo.build, repo.benchmark */
	char created_by[REPO_NAME_MAX + 1];
	char created_at[40];		/* ISO 8601 UTC */
};
/* Free what each of n hooks holds, then the array (accepts NULL). */
void db_webhooks_free(struct db_webhook *hooks, size_t n);

/* Register a hook of repo_id: *id the new hook's. */
int db_webhook_create(int64_t repo_id, const char *url, const char *secret, int content, int build,
		      int benchmark, const char *created_by, int64_t *id);
/* repo_id's hooks, oldest first (the caller frees *out with db_webhooks_free). */
int db_webhook_list(int64_t repo_id, struct db_webhook **out, size_t *n);
/* Remove hook id of repo_id with its deliveries: KHUB_ENOTFOUND when repo_id has none such. */
int db_webhook_delete(int64_t repo_id, int64_t id);

/* One attempt of a delivery, as its log shows it. */
struct db_webhook_attempt {
	int64_t delivery_id;
	char event[40];
	char state[16];			/* the delivery's: pending, delivered, failed */
	int attempt;
	char at[40];			/* ISO 8601 UTC */
	int status_code;		/* 0: no HTTP answer */
	int64_t duration_ms;
	char *error;			/* owned; NULL when none */
};
void db_webhook_attempts_free(struct db_webhook_attempt *a, size_t n);
/* The attempts of hook id of repo_id, newest delivery first, at most limit:
 * KHUB_ENOTFOUND when repo_id has no such hook. */
int db_webhook_attempts(int64_t repo_id, int64_t id, long limit, struct db_webhook_attempt **out, size_t *n);

/* ---- events (storage/db/webhook_events.c) --------------------------------------- */

/* A ref of repo_id moved to new_sha (a commit by any path: the commit API,
 * a push, the build farm's publication, a mirror or sync import): queue a
 * repo.content delivery to each of its hooks. old_sha NULL or "" for a new
 * ref. Failures are logged, never returned: the commit has landed. */
void webhook_event_content(int64_t repo_id, const char *ref, const char *old_sha, const char *new_sha);
/* Build job id is now in state (its state machine's name: queued, running,
 * succeeded, failed, canceled) after transition (the state machine's event:
 * claim, lapse, take_back, …), for reason (NULL: none said): queue a
 * repo.build delivery to each hook of its repo. Logged, never returned. */
void webhook_event_build(int64_t job_id, const char *state, const char *transition, const char *reason);
/* A farm run of commit_sha measured regressions (an array of objects, the
 * API's shape; borrowed): queue a repo.benchmark delivery to each hook of
 * repo_id subscribed. Logged, never returned. */
void webhook_event_benchmark(int64_t repo_id, const char *commit_sha, int64_t run_id, json_t *regressions);

/* ---- the delivery queue --------------------------------------------------------- */

/* A delivery claimed for one attempt. */
struct db_webhook_delivery {
	int64_t id, webhook_id;
	int attempt;			/* this attempt's number, from 1 */
	char event[40];
	char *payload, *url, *secret;	/* owned */
};
void db_webhook_delivery_release(struct db_webhook_delivery *d);
/* Claim the pending delivery due first (FOR UPDATE SKIP LOCKED: another
 * node never gets the same one), counting its attempt and leasing it for
 * lease_s (an attempt whose node dies is due again then): 0 with it in
 * *out, KHUB_ENOTFOUND when none is due, KHUB_EDB. */
int db_webhook_claim(long lease_s, struct db_webhook_delivery *out);
/* Log an attempt (status_code 0: no answer; error NULL: none) and settle
 * the delivery: delivered (ok), failed (retry_s < 0), else pending again in
 * retry_s seconds. */
int db_webhook_attempt_done(const struct db_webhook_delivery *d, int ok, int status_code, int64_t duration_ms,
			    const char *error, long retry_s);

/* Remove deliveries settled (delivered or failed) more than days ago, with
 * their log: how many, or KHUB_EDB. */
int db_webhook_prune(long days);

#endif
