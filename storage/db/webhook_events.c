/* webhook_events.c -- the events that queue webhook deliveries: the
 * payload (the Hub's shape: event {action, scope}, repo {type, name, id,
 * private, headSha}, and updatedRefs or build) made once and queued for
 * every hook of the repo subscribed to the event's scope, in one INSERT.
 * Called where a commit lands (storage/publish/publish.c), where a build job
 * changes state (farm/build_states.c) and where a farm benchmark run finds
 * a regression (api/benchmarks.c), whichever process that is. */
#include "storage/db/db_internal.h"
#include "storage/db/db_builds.h"
#include "storage/db/webhooks.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The "repo" object of repo_id when it has a hook subscribed to scope:
 * 0 with *out (owned), KHUB_ENOTFOUND when none is, KHUB_EDB. */
static int repo_object(int64_t repo_id, const char *scope, const char *head_sha, json_t **out)
{
	char rid[24];
	struct db_rows rows;
	const char *params[2] = { db_param_int(rid, repo_id), scope };
	int rc = db_query_one(&rows, "SELECT r.type, r.namespace || '/' || r.name, r.private::int FROM repos r"
			      " WHERE r.id = $1 AND EXISTS (SELECT 1 FROM webhooks w WHERE w.repo_id = r.id"
			      " AND $2 = ANY(w.scopes))", 2, params);
	if (rc == 0)
		*out = json_pack("{s:s, s:s, s:s, s:b, s:s?}", "type", db_rows_get(&rows, 0, 0), "name",
				 db_rows_get(&rows, 0, 1), "id", rid, "private", db_rows_int(&rows, 0, 2, 0) != 0,
				 "headSha", head_sha);
	db_rows_release(&rows);
	return rc;
}

/* Queue payload (taken) for repo_id's hooks subscribed to scope. */
static int enqueue(int64_t repo_id, const char *scope, json_t *payload)
{
	char rid[24], event[64];
	snprintf(event, sizeof(event), "%s.update", scope);
	char *text = json_dumps(payload, JSON_COMPACT);
	json_decref(payload);
	if (!text)
		return KHUB_EIO;
	const char *params[4] = { db_param_int(rid, repo_id), event, text, scope };
	int rc = db_run("INSERT INTO webhook_deliveries (webhook_id, event, payload)"
			" SELECT id, $2, $3 FROM webhooks WHERE repo_id = $1 AND $4 = ANY(scopes)", 4, params);
	free(text);
	return rc;
}

void webhook_event_content(int64_t repo_id, const char *ref, const char *old_sha, const char *new_sha)
{
	json_t *repo = NULL;
	int rc = repo_object(repo_id, WEBHOOK_SCOPE_CONTENT, new_sha, &repo);
	if (rc == KHUB_ENOTFOUND)
		return;	/* no hook listens: the usual case, one indexed query */
	if (rc == 0) {
		json_t *refs = json_pack("[{s:s, s:s?, s:s}]", "ref", ref, "oldSha", old_sha && old_sha[0] ? old_sha : NULL,
					 "newSha", new_sha);
		rc = enqueue(repo_id, WEBHOOK_SCOPE_CONTENT,
			     json_pack("{s:{s:s, s:s}, s:o, s:o}", "event", "action", "update", "scope",
				       WEBHOOK_SCOPE_CONTENT, "repo", repo, "updatedRefs", refs));
	}
	if (rc < 0)
		log_error("webhooks: repo %" PRId64 ": the %s event of %s is lost (database)", repo_id, ref, new_sha);
}

/* The state as webhooks name it (the state machine's names are internal). */
static const char *build_state_public(const char *state)
{
	static const char *const names[][2] = {
		{ "queued", "queued" }, { "running", "building" }, { "succeeded", "published" },
		{ "failed", "failed" }, { "canceled", "cancelled" },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(state, names[i][0]) == 0)
			return names[i][1];
	return state;
}

/* The "build" object of job b. */
static json_t *build_object(int64_t job_id, const struct build_row *b, const char *state, const char *transition,
			    const char *reason)
{
	return json_pack("{s:I, s:s, s:s, s:s, s:I, s:s?, s:s, s:s?}", "id", (json_int_t)job_id, "state",
			 build_state_public(state), "variant", b->variant, "commit", b->commit, "attempt",
			 (json_int_t)b->attempt, "error", b->error ? b->error : "", "transition", transition, "reason",
			 reason);
}

void webhook_event_build(int64_t job_id, const char *state, const char *transition, const char *reason)
{
	struct build_row b = { 0 };
	json_t *repo = NULL;
	int rc = db_build_get(job_id, &b);
	int64_t repo_id = rc == 0 ? b.repo_id : 0;
	if (rc == 0)
		rc = repo_object(repo_id, WEBHOOK_SCOPE_BUILD, b.commit, &repo);
	if (rc == 0)
		rc = enqueue(repo_id, WEBHOOK_SCOPE_BUILD,
			     json_pack("{s:{s:s, s:s}, s:o, s:o}", "event", "action", "update", "scope",
				       WEBHOOK_SCOPE_BUILD, "repo", repo, "build",
				       build_object(job_id, &b, state, transition, reason)));
	if (rc < 0 && rc != KHUB_ENOTFOUND)
		log_error("webhooks: build %" PRId64 ": the %s event is lost (database)", job_id, state);
	build_row_release(&b);
}

void webhook_event_benchmark(int64_t repo_id, const char *commit_sha, int64_t run_id, json_t *regressions)
{
	json_t *repo = NULL;
	int rc = repo_object(repo_id, WEBHOOK_SCOPE_BENCHMARK, commit_sha, &repo);
	if (rc == 0)
		rc = enqueue(repo_id, WEBHOOK_SCOPE_BENCHMARK,
			     json_pack("{s:{s:s, s:s}, s:o, s:{s:I, s:s, s:s, s:O}}", "event", "action", "update", "scope",
				       WEBHOOK_SCOPE_BENCHMARK, "repo", repo, "benchmark", "runId", (json_int_t)run_id,
				       "commit", commit_sha, "source", "farm", "regressions", regressions));
	if (rc < 0 && rc != KHUB_ENOTFOUND)
		log_error("webhooks: repo %" PRId64 ": the benchmark event of run %" PRId64 " is lost (database)", repo_id,
			  run_id);
}
