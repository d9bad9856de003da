/* build_states.c -- the build job's one state machine: the table of
 * (from, event, to, guard, who, routes) rows, and the one entry point per
 * event that every handler, the lease timer, the publication and the CLI
 * call. Each passes storage the states its event may start from, read
 * from the table (the UPDATE changes nothing in any other), and checks
 * the state the change ended in against the table, then tells the repo's
 * webhooks (lease lapses and take-backs too, job by job, with a reason). */
#include "farm/farm.h"
#include "storage/db/webhooks.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define WORKER_JOB_ROUTE(verb) "POST /api/builds/{arg}/" verb
#define OUTPUT_ROUTE "PUT /api/builds/{arg}/output"
#define MERGE_ROUTE "POST /api/kernels/{ns}/{name}/campaigns/{arg}/merge"
#define LEASE_CHECKED "GET /api/builds/{arg}/source, " WORKER_JOB_ROUTE("heartbeat") ", " WORKER_JOB_ROUTE("log") \
	", " OUTPUT_ROUTE ", " WORKER_JOB_ROUTE("fail") ", " WORKER_JOB_ROUTE("release") ", " \
	WORKER_JOB_ROUTE("benchmark") ", " WORKER_JOB_ROUTE("measured") ", GET /api/builds/{arg}/variant"

const struct build_transition build_job_transitions[] = {
	{ BUILD_NONE, BUILD_EV_ENQUEUE, BUILD_QUEUED, BUILD_BY_OWNER | BUILD_BY_SYSTEM,
	  "no job of the same commit and variant queued or running, none succeeded unless force; the queue's "
	  "limits hold (a push's default variants: the system); a benchmark job: no job of the same commit, "
	  "variant and device ever (a farm publication with benchmarkAfterPublish: the system)",
	  "POST /api/kernels/{ns}/{name}/builds, POST /api/kernels/{ns}/{name}/benchmarks/run" },
	{ BUILD_QUEUED, BUILD_EV_CLAIM, BUILD_RUNNING, BUILD_BY_WORKER,
	  "a variant in the claim's list, the worker's scope covers the repo, the backoff is over, the worker runs "
	  "fewer jobs than its concurrency: attempt + 1, leased for build_lease_seconds", "POST /api/workers/claim" },
	{ BUILD_RUNNING, BUILD_EV_HEARTBEAT, BUILD_RUNNING, BUILD_BY_WORKER,
	  "the worker holds the lease and it has not lapsed: extended", WORKER_JOB_ROUTE("heartbeat") },
	{ BUILD_CANCELED, BUILD_EV_HEARTBEAT, BUILD_CANCELED, BUILD_BY_WORKER,
	  "the worker held it when it was canceled: answered {\"cancel\": true}", WORKER_JOB_ROUTE("heartbeat") },
	{ BUILD_RUNNING, BUILD_EV_LOG, BUILD_RUNNING, BUILD_BY_WORKER,
	  "the lease holder, a chunk of the job's attempt", WORKER_JOB_ROUTE("log") },
	{ BUILD_CANCELED, BUILD_EV_LOG, BUILD_CANCELED, BUILD_BY_WORKER,
	  "the worker that held it when it was canceled, until it stops", WORKER_JOB_ROUTE("log") },
	{ BUILD_RUNNING, BUILD_EV_PUBLISH, BUILD_SUCCEEDED, BUILD_BY_WORKER,
	  "the lease holder's output checked and published (or identical to what is)", OUTPUT_ROUTE },
	{ BUILD_RUNNING, BUILD_EV_MEASURE, BUILD_SUCCEEDED, BUILD_BY_WORKER,
	  "the lease holder of a benchmark job has submitted its farm runs (a benchmark job never publishes)",
	  WORKER_JOB_ROUTE("measured") },
	{ BUILD_RUNNING, BUILD_EV_REFUSE, BUILD_FAILED, BUILD_BY_WORKER,
	  "the lease holder's output refused (too large, bad layout, not in the plan, the ABI policy)", OUTPUT_ROUTE },
	{ BUILD_RUNNING, BUILD_EV_FAIL, BUILD_QUEUED, BUILD_BY_WORKER,
	  "the lease holder, retry: true and attempts left: queued after the backoff", WORKER_JOB_ROUTE("fail") },
	{ BUILD_RUNNING, BUILD_EV_FAIL, BUILD_FAILED, BUILD_BY_WORKER,
	  "the lease holder, retry: false or its last attempt", WORKER_JOB_ROUTE("fail") },
	{ BUILD_RUNNING, BUILD_EV_RELEASE, BUILD_QUEUED, BUILD_BY_WORKER,
	  "the lease holder gives it back: the attempt not counted", WORKER_JOB_ROUTE("release") },
	{ BUILD_QUEUED, BUILD_EV_CANCEL, BUILD_CANCELED, BUILD_BY_OWNER,
	  "a writer of the repo", WORKER_JOB_ROUTE("cancel") },
	{ BUILD_RUNNING, BUILD_EV_CANCEL, BUILD_CANCELED, BUILD_BY_OWNER,
	  "a writer of the repo; the worker hears it at its next heartbeat", WORKER_JOB_ROUTE("cancel") },
	{ BUILD_FAILED, BUILD_EV_RETRY, BUILD_QUEUED, BUILD_BY_OWNER,
	  "a writer of the repo, the same commit and variant not queued or running again: attempts reset",
	  WORKER_JOB_ROUTE("retry") },
	{ BUILD_CANCELED, BUILD_EV_RETRY, BUILD_QUEUED, BUILD_BY_OWNER,
	  "a writer of the repo, the same commit and variant not queued or running again: attempts reset",
	  WORKER_JOB_ROUTE("retry") },
	{ BUILD_RUNNING, BUILD_EV_LAPSE, BUILD_QUEUED, BUILD_BY_SYSTEM,
	  "the lease lapsed with attempts left (the lease timer, or any claim): queued after the backoff", "" },
	{ BUILD_RUNNING, BUILD_EV_LAPSE, BUILD_FAILED, BUILD_BY_SYSTEM,
	  "the lease lapsed at the job's last attempt", "" },
	{ BUILD_RUNNING, BUILD_EV_STAGE, BUILD_STAGED, BUILD_BY_WORKER,
	  "the lease holder's output of a fleet rebuild checked and committed on the kernel's pull request refs/pr/N "
	  "(the repo's campaignPublish is pr): v<N> gets it when a writer merges", OUTPUT_ROUTE },
	{ BUILD_STAGED, BUILD_EV_MERGE, BUILD_SUCCEEDED, BUILD_BY_OWNER,
	  "a writer of the repo merges the campaign's pull request (the API or the web's Merge button): v<N> moves to it",
	  MERGE_ROUTE },
	{ BUILD_STAGED, BUILD_EV_SUPERSEDE, BUILD_SUPERSEDED, BUILD_BY_SYSTEM,
	  "a newer build of the same kernel and variant was staged or published (a newer commit, or a newer "
	  "campaign): its pull request is never merged over the newer work", OUTPUT_ROUTE },
	{ BUILD_RUNNING, BUILD_EV_TAKE_BACK, BUILD_QUEUED, BUILD_BY_SYSTEM | BUILD_BY_ADMIN,
	  "the worker's scope no longer covers the repo (made private, scope narrowed, worker removed): the attempt "
	  "not counted (the lease timer, khub admin worker, the lease check of a worker's route about the job)",
	  LEASE_CHECKED },
	{ BUILD_STATE_COUNT, 0, 0, 0, NULL, NULL },
};

static const char *const state_names[BUILD_STATE_COUNT] = {
	"none", "queued", "running", "succeeded", "failed", "canceled", "staged", "superseded",
};
/* The word the build matrix (pages and API) shows for each state. */
static const char *const state_statuses[BUILD_STATE_COUNT] = {
	"not built", "queued", "building", "published", "failed", "canceled", "staged", "superseded",
};
static const char *const event_names[BUILD_EVENT_COUNT] = {
	"enqueue", "claim", "heartbeat", "log", "publish", "refuse", "fail", "release", "cancel", "retry", "lapse",
	"take_back", "measure", "stage", "merge", "supersede",
};
static const char *const actor_names[] = { "worker", "owner", "admin", "system" };

const char *build_state_name(enum build_state s)
{
	return (unsigned)s < BUILD_STATE_COUNT ? state_names[s] : "?";
}

const char *build_state_status(enum build_state s)
{
	return (unsigned)s < BUILD_STATE_COUNT ? state_statuses[s] : "?";
}

const char *build_state_status_of_kind(enum build_state s, int benchmark)
{
	/* a benchmark job ends with measure: it publishes nothing */
	return benchmark && s == BUILD_SUCCEEDED ? "measured" : build_state_status(s);
}

const char *build_event_name(enum build_event e)
{
	return (unsigned)e < BUILD_EVENT_COUNT ? event_names[e] : "?";
}

enum build_state build_state_named(const char *name)
{
	for (int s = 0; name && s < BUILD_STATE_COUNT; s++)
		if (strcmp(name, state_names[s]) == 0)
			return (enum build_state)s;
	return BUILD_STATE_COUNT;
}

int build_transition_allowed(enum build_state from, enum build_event event, enum build_state to)
{
	for (const struct build_transition *t = build_job_transitions; t->from != BUILD_STATE_COUNT; t++)
		if (t->from == from && t->event == event && t->to == to)
			return 1;
	return 0;
}

/* The states event starts from, NULL-terminated, for storage's guard. */
struct from_states {
	const char *names[BUILD_STATE_COUNT + 1];
};

static struct from_states states_from(enum build_event event)
{
	struct from_states f = { { NULL } };
	size_t n = 0;
	for (int s = BUILD_QUEUED; s < BUILD_STATE_COUNT; s++)
		for (const struct build_transition *t = build_job_transitions; t->from != BUILD_STATE_COUNT; t++)
			if (t->event == event && t->from == (enum build_state)s) {
				f.names[n++] = state_names[s];
				break;
			}
	return f;
}

/* Why the system moved a job, as its webhook says (the job's error has
 * the details). */
#define LAPSE_REASON "the lease lapsed: its worker stopped heartbeating"
#define TAKE_BACK_REASON "taken back: the worker's scope no longer covers the repo"
#define SUPERSEDE_REASON "a newer build of the kernel and variant was staged or published"

/* After event changed job id: the state it ended in must be one of the
 * table's for that event (a programmer's error otherwise); the repo's
 * webhooks hear of it, with reason when not NULL. */
static void ended_in_because(int64_t id, enum build_event event, const char *to, const char *reason)
{
	enum build_state s = build_state_named(to);
	int known = 0;
	for (const struct build_transition *t = build_job_transitions; t->from != BUILD_STATE_COUNT; t++)
		known |= t->event == event && t->to == s;
	if (!known)
		log_error("build %" PRId64 ": %s ended in %s, which the state table does not allow", id,
			  build_event_name(event), to);
	assert(known);
	webhook_event_build(id, to, build_event_name(event), reason);	/* the hooks of scope repo.build */
}

static void ended_in(int64_t id, enum build_event event, const char *to)
{
	ended_in_because(id, event, to, NULL);
}

/* Each job of a bulk change by event ended in its state; changes released. */
static int ended_each(struct build_changes *changes, int count, enum build_event event, const char *reason)
{
	for (size_t i = 0; count > 0 && i < changes->count; i++)
		ended_in_because(changes->items[i].id, event, changes->items[i].state, reason);
	build_changes_release(changes);
	return count;
}

json_t *build_states_json(void)
{
	json_t *states = json_array(), *events = json_array(), *actors = json_array(), *rows = json_array();
	for (int s = 0; s < BUILD_STATE_COUNT; s++)
		json_array_append_new(states, json_string(state_names[s]));
	for (int e = 0; e < BUILD_EVENT_COUNT; e++)
		json_array_append_new(events, json_string(event_names[e]));
	for (size_t a = 0; a < sizeof(actor_names) / sizeof(actor_names[0]); a++)
		json_array_append_new(actors, json_string(actor_names[a]));
	for (const struct build_transition *t = build_job_transitions; t->from != BUILD_STATE_COUNT; t++) {
		json_t *who = json_array(), *routes = json_array();
		for (size_t a = 0; a < sizeof(actor_names) / sizeof(actor_names[0]); a++)
			if (t->actors & (1u << a))
				json_array_append_new(who, json_string(actor_names[a]));
		for (const char *p = t->routes; *p;) {
			size_t len = strcspn(p, ",");
			json_array_append_new(routes, json_stringn(p, len));
			p += len;
			p += strspn(p, ", ");
		}
		json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:o, s:s, s:o}", "from", state_names[t->from],
						      "event", event_names[t->event], "to", state_names[t->to],
						      "actors", who, "guard", t->guard, "routes", routes));
	}
	return json_pack("{s:o, s:o, s:o, s:o}", "states", states, "events", events, "actors", actors,
			 "transitions", rows);
}

/* ---- the transitions -------------------------------------------------------- */

int build_job_enqueue(const struct build_request *r, const char *variant, enum build_enqueue_outcome *outcome,
		      int64_t *id)
{
	int rc = db_build_enqueue(r, variant, outcome, id);
	if (rc == 0 && *outcome == BUILD_ENQUEUED)
		ended_in(*id, BUILD_EV_ENQUEUE, "queued");
	return rc;
}

int build_job_enqueue_benchmark(const struct build_request *r, const char *variant, const char *variant_commit,
				const char *device, enum build_enqueue_outcome *outcome, int64_t *id)
{
	int rc = db_build_enqueue_benchmark(r, variant, variant_commit, device, outcome, id);
	if (rc == 0 && *outcome == BUILD_ENQUEUED)
		ended_in(*id, BUILD_EV_ENQUEUE, "queued");
	return rc;
}

int build_job_claim(int64_t worker_id, const char *const *variants, size_t n, struct build_row *out,
		    int64_t *head_left)
{
	struct build_changes lapsed = { 0 };
	*head_left = -1;
	int rc = db_build_claim(worker_id, variants, n, farm_settings.lease_seconds, out, &lapsed);
	ended_each(&lapsed, (int)lapsed.count, BUILD_EV_LAPSE, LAPSE_REASON);
	if (rc != 0)
		return rc;
	int64_t id = out->id;
	ended_in(id, BUILD_EV_CLAIM, out->state);
	/* the log's cap: its head stored as it comes, its tail held by the
	 * worker and sent at the end (bytes between never sent) */
	if (db_build_log_head_left(id, farm_settings.log_max_bytes, head_left) < 0)
		*head_left = -1;
	return 0;
}

int build_job_lease(int64_t id, int64_t worker_id, char state[16])
{
	/* the job's worker whose scope no longer covers it loses it first */
	int taken_back = 0;
	int rc = db_build_lease_check(id, worker_id, state, &taken_back);
	if (rc != KHUB_EDB && taken_back) {
		ended_in_because(id, BUILD_EV_TAKE_BACK, "queued", TAKE_BACK_REASON);
		farm_queue_changed();
	}
	return rc;
}

int build_job_heartbeat(int64_t id, int64_t worker_id, char expires[40], int *cancel)
{
	struct from_states f = states_from(BUILD_EV_HEARTBEAT);
	return db_build_heartbeat(id, worker_id, f.names, farm_settings.lease_seconds, expires, cancel);
}

int build_job_log_append(int64_t id, int64_t worker_id, int attempt, int64_t at, const void *data, size_t len,
			 int tail, int64_t *length)
{
	struct from_states f = states_from(BUILD_EV_LOG);
	return db_build_log_append(id, worker_id, f.names, attempt, at, data, len, tail, farm_settings.log_max_bytes,
				   length);
}

int build_job_fail(int64_t id, int64_t worker_id, const char *error, int retry, const char *abi_report,
		   char state[16])
{
	struct from_states f = states_from(BUILD_EV_FAIL);
	int rc = db_build_fail(id, worker_id, f.names, error, retry, abi_report, state);
	if (rc == 0) {
		ended_in(id, BUILD_EV_FAIL, state);
		if (strcmp(state, "queued") == 0)
			farm_queue_changed();
	}
	return rc;
}

int build_job_release(int64_t id, int64_t worker_id)
{
	struct from_states f = states_from(BUILD_EV_RELEASE);
	int rc = db_build_release(id, worker_id, f.names);
	if (rc == 0) {
		ended_in(id, BUILD_EV_RELEASE, "queued");
		farm_queue_changed();
	}
	return rc;
}

/* After job id was staged or published: the older staged jobs of its repo
 * and variant are superseded (their pull requests never merged over it). */
static void supersede_older(int64_t id)
{
	struct from_states f = states_from(BUILD_EV_SUPERSEDE);
	struct build_changes older = { 0 };
	int n = db_build_supersede_older(id, f.names, &older);
	if (n < 0)
		log_error("build %" PRId64 ": the older staged builds are not marked superseded (database)", id);
	ended_each(&older, n, BUILD_EV_SUPERSEDE, SUPERSEDE_REASON);
}

int build_job_publish(int64_t id, int64_t worker_id, const char *abi_report, const char *branch, const char *commit,
		      const char *note)
{
	struct from_states f = states_from(BUILD_EV_PUBLISH);
	int rc = db_build_finish(id, worker_id, f.names, "succeeded", NULL, abi_report, branch, commit, note);
	if (rc == 0) {
		ended_in(id, BUILD_EV_PUBLISH, "succeeded");
		supersede_older(id);
	}
	return rc;
}

int build_job_stage(int64_t id, int64_t worker_id, const char *abi_report, const char *pr_ref, const char *commit,
		    const char *note)
{
	struct from_states f = states_from(BUILD_EV_STAGE);
	int rc = db_build_finish(id, worker_id, f.names, "staged", NULL, abi_report, pr_ref, commit, note);
	if (rc == 0) {
		ended_in(id, BUILD_EV_STAGE, "staged");
		supersede_older(id);
	}
	return rc;
}

int build_job_merge(int64_t id)
{
	struct from_states f = states_from(BUILD_EV_MERGE);
	int rc = db_build_merged(id, f.names);
	if (rc == 0)
		ended_in(id, BUILD_EV_MERGE, "succeeded");
	return rc;
}

int build_job_measured(int64_t id, int64_t worker_id, const char *note)
{
	struct from_states f = states_from(BUILD_EV_MEASURE);
	int rc = db_build_finish(id, worker_id, f.names, "succeeded", NULL, NULL, NULL, NULL, note);
	if (rc == 0)
		ended_in(id, BUILD_EV_MEASURE, "succeeded");
	return rc;
}

int build_job_refuse(int64_t id, int64_t worker_id, const char *why, const char *abi_report)
{
	struct from_states f = states_from(BUILD_EV_REFUSE);
	int rc = db_build_finish(id, worker_id, f.names, "failed", why, abi_report, NULL, NULL, NULL);
	if (rc == 0)
		ended_in(id, BUILD_EV_REFUSE, "failed");
	return rc;
}

int build_job_cancel(int64_t id, char state[16])
{
	struct from_states f = states_from(BUILD_EV_CANCEL);
	int rc = db_build_cancel(id, f.names, state);
	if (rc == 0)
		ended_in(id, BUILD_EV_CANCEL, state);
	return rc;
}

int build_job_retry(int64_t id)
{
	struct from_states f = states_from(BUILD_EV_RETRY);
	int rc = db_build_retry(id, f.names);
	if (rc == 0) {
		ended_in(id, BUILD_EV_RETRY, "queued");
		farm_queue_changed();
	}
	return rc;
}

int build_jobs_expire_leases(void)
{
	struct build_changes lapsed = { 0 };
	return ended_each(&lapsed, db_build_expire_leases(&lapsed), BUILD_EV_LAPSE, LAPSE_REASON);
}

int build_jobs_take_back(void)
{
	struct build_changes back = { 0 };
	return ended_each(&back, db_build_take_back_out_of_scope(&back), BUILD_EV_TAKE_BACK, TAKE_BACK_REASON);
}
