/* cmd_jobs.c -- khub jobs: the scheduler's table (server/jobs.c) with each
 * job's last runs as the database has them for every node; khub jobs run
 * NAME asks the nodes for a run now, which the scheduler of one node makes
 * through the same lock and record as a scheduled one. */
#include "server/server.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A node must begin a requested run within this long, or we say so. */
#define START_WAIT_S 60

static void format_when(double t, char out[32])
{
	if (t <= 0)
		snprintf(out, 32, "never");
	else
		format_iso8601((time_t)t, out);
}

static const struct db_sched_job *find_row(const struct db_sched_job *rows, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].name, name) == 0)
			return &rows[i];
	return NULL;
}

static json_t *job_json(const struct job_info *j, const struct db_sched_job *r)
{
	static const struct db_sched_job none = { .last_duration_ms = -1 };
	if (!r)
		r = &none;
	return json_pack("{s:s, s:s, s:I, s:b, s:s?, s:b, s:f, s:f, s:f, s:I, s:I, s:I, s:s, s:s}", "name", j->name,
			 "schedule", j->schedule, "interval_seconds", (json_int_t)j->interval_s, "enabled_here",
			 j->enabled, "why_off", j->why_off, "running", r->running, "last_started", r->last_started_at,
			 "last_success", r->last_success_at, "last_failure", r->last_failure_at, "last_duration_ms",
			 (json_int_t)r->last_duration_ms, "successes", (json_int_t)r->successes, "failures",
			 (json_int_t)r->failures, "last_node", r->last_node, "last_error", r->last_error);
}

static void print_job(const struct job_info *j, const struct db_sched_job *r)
{
	char ok[32], bad[32];
	static const struct db_sched_job none = { .last_duration_ms = -1 };
	if (!r)
		r = &none;
	format_when(r->last_success_at, ok);
	format_when(r->last_failure_at, bad);
	printf("%-7s %-9s %-8s %-24s %-24s %9lld %5lld %5lld  %s\n", j->name,
	       j->interval_s ? j->schedule : "off", r->running ? "running" : j->enabled ? "idle" : "disabled", ok,
	       bad, (long long)r->last_duration_ms, (long long)r->successes, (long long)r->failures,
	       r->last_error[0] ? r->last_error : r->last_node);
}

static int list_jobs(int as_json)
{
	struct job_info info[16];
	size_t n = jobs_describe(info, 16), nrows = 0;
	struct db_sched_job *rows = NULL;
	if (db_sched_jobs_list(&rows, &nrows) < 0) {
		fprintf(stderr, "khub jobs: cannot read the scheduled jobs from the database\n");
		return 1;
	}
	json_t *arr = json_array();
	if (!as_json)
		printf("%-7s %-9s %-8s %-24s %-24s %9s %5s %5s  %s\n", "JOB", "SCHEDULE", "STATE", "LAST SUCCESS",
		       "LAST FAILURE", "LAST MS", "OK", "FAIL", "NODE / ERROR");
	for (size_t i = 0; i < n; i++) {
		const struct db_sched_job *r = find_row(rows, nrows, info[i].name);
		if (as_json)
			json_array_append_new(arr, job_json(&info[i], r));
		else
			print_job(&info[i], r);
	}
	if (as_json) {
		json_dumpf(arr, stdout, JSON_INDENT(2));
		putchar('\n');
	}
	json_decref(arr);
	free(rows);
	return 0;
}

/* Wait until a run begun after `asked` ends: 0 it succeeded, 1 not. */
static int wait_for_run(const char *name, double asked)
{
	time_t until = time(NULL) + START_WAIT_S;
	struct db_sched_job r;
	for (;;) {
		if (db_sched_job_get(name, &r) < 0) {
			fprintf(stderr, "khub jobs run: cannot read %s's state from the database\n", name);
			return 1;
		}
		if (r.last_started_at >= asked && !r.running)
			break;
		if (r.last_started_at < asked && time(NULL) > until) {
			fprintf(stderr, "khub jobs run: no node began %s within %d s (is khub serve running with it "
				"enabled?); the request stays until one does\n", name, START_WAIT_S);
			return 1;
		}
		usleep(250000);
	}
	if (r.last_success_at >= r.last_started_at) {
		printf("%s: succeeded in %lld ms on %s\n", name, (long long)r.last_duration_ms, r.last_node);
		return 0;
	}
	fprintf(stderr, "%s: failed on %s: %s\n", name, r.last_node, r.last_error);
	return 1;
}

static int run_job(const char *name, int wait)
{
	struct job_info info[16];
	size_t n = jobs_describe(info, 16);
	const struct job_info *j = NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(info[i].name, name) == 0)
			j = &info[i];
	if (!j) {
		fprintf(stderr, "khub jobs run: no job %s (khub jobs lists them)\n", name);
		return 2;
	}
	if (!j->enabled) {
		fprintf(stderr, "khub jobs run: %s cannot run: %s\n", name, j->why_off);
		return 2;
	}
	const char *names[1] = { name };
	double asked = 0;
	if (db_sched_jobs_ensure(names, 1) < 0 || db_sched_job_request(name, &asked) < 0) {
		fprintf(stderr, "khub jobs run: cannot record the request in the database\n");
		return 1;
	}
	printf("%s: requested; the first node free to take its lock runs it\n", name);
	return wait ? wait_for_run(name, asked) : 0;
}

const char cmd_jobs_usage[] =
	"usage: khub jobs [--json]\n"
	"       khub jobs run NAME [--no-wait]   (NAME: gc, scrub, repack, backup)\n";

int cmd_jobs(int argc, char **argv)
{
	int rc;
	if (argc == 1 || (argc == 2 && strcmp(argv[1], "--json") == 0)) {
		runtime_open_database();
		rc = list_jobs(argc == 2);
	} else if ((argc == 3 || argc == 4) && strcmp(argv[1], "run") == 0 &&
		   (argc == 3 || strcmp(argv[3], "--no-wait") == 0)) {
		runtime_open_database();
		rc = run_job(argv[2], argc == 3);
	} else {
		fputs(cmd_jobs_usage, stderr);
		return 2;
	}
	runtime_close_database();
	return rc;
}
