/* db_jobs.c -- the scheduled jobs' shared state (sql/0032_scheduled_jobs.sql):
 * one row per job with its last run, one row per run. Every node reads the
 * same rows, so the interval runs from the last success cluster-wide. */
#include "storage/db/db_internal.h"

#include <stdlib.h>
#include <string.h>

#define JOB_COLUMNS                                                                                              \
	"name, coalesce(extract(epoch FROM requested_at), 0), coalesce(extract(epoch FROM last_started_at), 0),"   \
	" coalesce(extract(epoch FROM last_success_at), 0), coalesce(extract(epoch FROM last_failure_at), 0),"     \
	" coalesce(last_duration_ms, -1), successes, failures,"                                                    \
	" EXISTS (SELECT 1 FROM scheduled_job_runs r WHERE r.job = j.name AND r.finished_at IS NULL),"             \
	" coalesce(last_node, ''), coalesce(last_error, ''), extract(epoch FROM now())"

static void fill_job(void *item, const struct db_rows *rows, size_t row)
{
	struct db_sched_job *j = item;
	db_rows_read(rows, row, DB_FIELDS(DB_TEXT(0, j->name, sizeof(j->name)), DB_DOUBLE(1, &j->requested_at),
					  DB_DOUBLE(2, &j->last_started_at), DB_DOUBLE(3, &j->last_success_at),
					  DB_DOUBLE(4, &j->last_failure_at), DB_I64_OR(5, &j->last_duration_ms, -1),
					  DB_I64(6, &j->successes), DB_I64(7, &j->failures), DB_BOOL(8, &j->running),
					  DB_TEXT(9, j->last_node, sizeof(j->last_node)),
					  DB_TEXT(10, j->last_error, sizeof(j->last_error)), DB_DOUBLE(11, &j->db_now)));
}

int db_sched_jobs_ensure(const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *params[1] = { names[i] };
		int rc = db_run("INSERT INTO scheduled_jobs (name) VALUES ($1) ON CONFLICT DO NOTHING", 1, params);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int db_sched_jobs_list(struct db_sched_job **out, size_t *n)
{
	int rc;
	*out = db_query_items(sizeof(**out), fill_job, n, &rc,
			      "SELECT " JOB_COLUMNS " FROM scheduled_jobs j ORDER BY name", 0, NULL);
	return rc;
}

int db_sched_job_get(const char *name, struct db_sched_job *out)
{
	const char *params[1] = { name };
	struct db_rows rows;
	memset(out, 0, sizeof(*out));
	int rc = db_query_one(&rows, "SELECT " JOB_COLUMNS " FROM scheduled_jobs j WHERE name = $1", 1, params);
	if (rc == 0)
		fill_job(out, &rows, 0);
	db_rows_release(&rows);
	return rc;
}

int db_sched_job_started(const char *name, const char *node, int64_t *run_id)
{
	const char *params[2] = { name, node };
	/* the job's lock is ours: a run still open is one whose node died */
	int abandoned = db_run_count("UPDATE scheduled_job_runs SET finished_at = now(), ok = false,"
				     " detail = 'abandoned: its node stopped mid-run'"
				     " WHERE job = $1 AND finished_at IS NULL", 1, params);
	if (abandoned < 0)
		return abandoned;
	int rc = db_run("DELETE FROM scheduled_job_runs WHERE job = $1 AND started_at < now() - interval '90 days'", 1,
			params);
	if (rc == 0)
		rc = db_run("INSERT INTO scheduled_jobs (name) VALUES ($1) ON CONFLICT DO NOTHING", 1, params);
	if (rc == 0 && abandoned > 0)
		rc = db_run("UPDATE scheduled_jobs SET failures = failures + 1, last_failure_at = now(),"
			    " last_error = 'abandoned: its node stopped mid-run' WHERE name = $1", 1, params);
	if (rc == 0)
		rc = db_run("UPDATE scheduled_jobs SET last_started_at = now(), last_node = $2 WHERE name = $1", 2,
			    params);
	if (rc < 0)
		return rc;
	rc = db_query_row("INSERT INTO scheduled_job_runs (job, node) VALUES ($1, $2) RETURNING id", 2, params,
			  DB_FIELDS(DB_I64(0, run_id)));
	return rc < 0 ? KHUB_EDB : 0;
}

int db_sched_job_finished(const char *name, int64_t run_id, int ok, int64_t duration_ms, const char *detail)
{
	char id[24], ms[24];
	const char *run[4] = { name, db_param_int(id, run_id), ok ? "t" : "f", detail ? detail : "" };
	int rc = db_run("UPDATE scheduled_job_runs SET finished_at = now(), ok = $3::boolean, detail = $4"
			" WHERE id = $2::bigint AND job = $1", 4, run);
	if (rc < 0)
		return rc;
	const char *job[3] = { name, db_param_int(ms, duration_ms), detail && *detail ? detail : "failed" };
	if (ok)
		return db_run("UPDATE scheduled_jobs SET last_success_at = now(), successes = successes + 1,"
			      " last_duration_ms = $2::bigint, last_error = NULL WHERE name = $1", 2, job);
	return db_run("UPDATE scheduled_jobs SET last_failure_at = now(), failures = failures + 1,"
		      " last_duration_ms = $2::bigint, last_error = $3 WHERE name = $1", 3, job);
}

int db_sched_job_request(const char *name, double *at)
{
	const char *params[1] = { name };
	return db_query_row("UPDATE scheduled_jobs SET requested_at = now() WHERE name = $1"
			    " RETURNING extract(epoch FROM requested_at)", 1, params, DB_FIELDS(DB_DOUBLE(0, at)));
}
