/* jobs.c -- the scheduler of khub serve: one thread and one table of
 * periodic jobs (gc, scrub, repack, backup). A job is due when its interval
 * (schedule_NAME) has passed since its last success cluster-wide (the
 * scheduled_jobs table, storage/db/db_jobs.c), or when `khub jobs run` asked;
 * a node runs it under the job's DB_LOCK_JOB on the coordination session
 * and checks again under the lock, so one node runs each round, and a node
 * that dies mid-run frees the lock with its session. gc, repack and backup
 * run as child khub commands that die with the node; a scrub pass runs on
 * this thread. */
#include "server/server.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* After a failure a job is tried again this soon at the latest (or after
 * its interval when that is shorter). */
#define RETRY_AFTER_FAILURE_S 300

struct job {
	const char *name;
	enum db_job lock;
	char **schedule;	/* &config.schedule_NAME (reloadable) */
	/* 1 when this node can run it; else 0 and *why */
	int (*enabled)(const char **why);
	/* one run: 0 done, or an error with detail filled */
	int (*run)(char *detail, size_t len);
};

static struct bg_thread scheduler = BG_THREAD_INIT;
static pid_t child_pid;	/* a job's khub command running now (scheduler.lock) */
static char node_name[300];
static int no_session;	/* said once until a round gets a session again */

/* ---- intervals ------------------------------------------------------------------ */

int jobs_parse_interval(const char *text, long *seconds)
{
	static const struct { char unit; long seconds; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 }, { 'w', 7 * 86400 },
	};
	char *end;
	errno = 0;
	long n = text && *text >= '0' && *text <= '9' ? strtol(text, &end, 10) : -1;
	if (n < 0 || errno)
		return -1;
	long mult = *end == '\0' ? 1 : 0;
	for (size_t i = 0; !mult && i < sizeof(units) / sizeof(units[0]); i++)
		if (end[0] == units[i].unit && end[1] == '\0')
			mult = units[i].seconds;
	if (!mult || n > LONG_MAX / mult || n * mult > 10L * 366 * 86400)
		return -1;
	*seconds = n * mult;
	return 0;
}

/* ---- running a khub command --------------------------------------------------------- */

/* khub ARGS... with this process's configuration: its exit status, or -1. */
static int run_khub(const char *const *args)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	struct strvec argv = STRVEC_INIT;
	strvec_pushf(&argv, "%s", exe);
	for (size_t i = 0; args[i]; i++)
		strvec_pushf(&argv, "%s", args[i]);
	config_child_args(&argv);
	struct spawn_opts opts = { .argv = argv.items, .fd_in = -1, .fd_out = -1, .fd_err = -1,
				   .die_with_parent = 1, .reset_signals = 1 };
	pid_t pid;
	int status = -1;
	pthread_mutex_lock(&scheduler.lock);
	int rc = scheduler.stopping ? -1 : spawn_process(&opts, &pid);
	if (rc == 0)
		child_pid = pid;
	pthread_mutex_unlock(&scheduler.lock);
	if (rc == 0) {
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		pthread_mutex_lock(&scheduler.lock);
		child_pid = 0;
		pthread_mutex_unlock(&scheduler.lock);
		status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	}
	strvec_release(&argv);
	return status;
}

static int command_job(const char *const *args, char *detail, size_t len)
{
	int status = run_khub(args);
	if (status == 0)
		return 0;
	snprintf(detail, len, "khub %s exited with status %d (its output is in this node's log)", args[0], status);
	return KHUB_EIO;
}

/* ---- the jobs ------------------------------------------------------------------------ */

static int always(const char **why)
{
	(void)why;
	return 1;
}

static int scrub_enabled(const char **why)
{
	*why = "scrub_mb_per_s is 0 or the LFS store is remote (S3 verifies what it reads)";
	return config.scrub_mb_per_s > 0 && !config_lfs_backend()->remote;
}

static int backup_enabled(const char **why)
{
	*why = "backup_dir is not set";
	return config.backup_dir && *config.backup_dir;
}

static int run_gc(char *detail, size_t len)
{
	return command_job((const char *const[]){ "gc", NULL }, detail, len);
}

static int run_repack(char *detail, size_t len)
{
	return command_job((const char *const[]){ "repack", NULL }, detail, len);
}

static int run_scrub(char *detail, size_t len)
{
	int rc = lfs_scrub_pass();
	if (rc < 0)
		snprintf(detail, len, "the scrub pass %s",
			 rc == KHUB_ECONFLICT ? "was ended by a shutdown" : "could not walk the store");
	return rc;
}

static int run_backup(char *detail, size_t len)
{
	return jobs_backup_generation(config.backup_dir, config.backup_keep, run_khub, detail, len);
}

static const struct job jobs[] = {
	{ "gc", DB_JOB_GC, &config.schedule_gc, always, run_gc },
	{ "scrub", DB_JOB_LFS_SCRUB, &config.schedule_scrub, scrub_enabled, run_scrub },
	{ "repack", DB_JOB_REPACK, &config.schedule_repack, always, run_repack },
	{ "backup", DB_JOB_BACKUP, &config.schedule_backup, backup_enabled, run_backup },
};
#define NJOBS (sizeof(jobs) / sizeof(jobs[0]))

size_t jobs_describe(struct job_info *out, size_t max)
{
	size_t n = 0;
	for (; n < NJOBS && n < max; n++) {
		const char *why = NULL;
		out[n] = (struct job_info){ .name = jobs[n].name, .schedule = *jobs[n].schedule };
		if (jobs_parse_interval(*jobs[n].schedule, &out[n].interval_s) < 0)
			out[n].interval_s = 0;
		out[n].enabled = jobs[n].enabled(&why);
		out[n].why_off = out[n].enabled ? NULL : why;
	}
	return n;
}

/* ---- the schedule --------------------------------------------------------------------- */

/* Whether job should run now, by its shared row (times by the database's clock). */
static int job_due(const struct job *job, const struct db_sched_job *row)
{
	const char *why;
	long interval = 0;
	if (!job->enabled(&why))
		return 0;
	if (row->requested_at > row->last_started_at)
		return 1;
	if (jobs_parse_interval(*job->schedule, &interval) < 0 || interval <= 0)
		return 0;
	double last_end = row->last_success_at > row->last_failure_at ? row->last_success_at : row->last_failure_at;
	long retry = interval < RETRY_AFTER_FAILURE_S ? interval : RETRY_AFTER_FAILURE_S;
	return row->db_now >= row->last_success_at + (double)interval && row->db_now >= last_end + (double)retry;
}

/* Under the job's lock: due still (another node may have just run it)? Then run and record. */
static void job_round(void *arg)
{
	const struct job *job = arg;
	struct db_sched_job row;
	int64_t run_id = 0;
	char detail[512] = "";
	if (db_sched_job_get(job->name, &row) < 0 || !job_due(job, &row))
		return;
	if (db_sched_job_started(job->name, node_name, &run_id) < 0) {
		log_warn("jobs: %s: cannot record the start of a run; not run", job->name);
		return;
	}
	log_info("jobs: %s begins", job->name);
	uint64_t t0 = monotonic_usec();
	int rc = job->run(detail, sizeof(detail));
	int64_t ms = (int64_t)((monotonic_usec() - t0) / 1000);
	if (rc == 0)
		snprintf(detail, sizeof(detail), "ok");
	if (db_sched_job_finished(job->name, run_id, rc == 0, ms, detail) < 0)
		log_error("jobs: %s: cannot record the end of its run", job->name);
	if (rc == 0)
		log_info("jobs: %s succeeded in %lld ms", job->name, (long long)ms);
	else
		log_error("jobs: %s failed after %lld ms: %s", job->name, (long long)ms, detail);
}

static void tick(void)
{
	struct db_sched_job *rows = NULL;
	size_t n = 0;
	if (db_sched_jobs_list(&rows, &n) < 0)
		return;
	for (size_t j = 0; j < NJOBS; j++) {
		for (size_t i = 0; i < n; i++) {
			if (strcmp(rows[i].name, jobs[j].name) != 0 || !job_due(&jobs[j], &rows[i]))
				continue;
			/* 1: another node runs it now; its row says when it ended */
			int rc = db_job_round(jobs[j].lock, job_round, (void *)&jobs[j]);
			if (rc < 0 && !no_session)
				log_warn("jobs: no database session for the job locks; trying again every second");
			no_session = rc < 0;
		}
	}
	free(rows);
}

static void *jobs_loop(void *arg)
{
	const char *names[NJOBS];
	(void)arg;
	log_set_request_id("jobs");
	for (size_t j = 0; j < NJOBS; j++)
		names[j] = jobs[j].name;
	int ready = 0;
	pthread_mutex_lock(&scheduler.lock);
	for (;;) {	/* the first look one interval after start, as the lease timer's */
		struct timespec ts = clock_after_usec(CLOCK_REALTIME, (uint64_t)config.jobs_poll_ms * 1000u);
		while (!scheduler.stopping && pthread_cond_timedwait(&scheduler.wake, &scheduler.lock, &ts) == 0)
			;
		if (scheduler.stopping)
			break;
		pthread_mutex_unlock(&scheduler.lock);
		if (ready || (ready = db_sched_jobs_ensure(names, NJOBS) == 0))
			tick();
		pthread_mutex_lock(&scheduler.lock);
	}
	pthread_mutex_unlock(&scheduler.lock);
	return NULL;
}

void jobs_start(struct lfs_store *lfs)
{
	char host[256] = "";
	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "?");
	snprintf(node_name, sizeof(node_name), "%s %s pid %ld", host, config.listen, (long)getpid());
	lfs_scrub_start(lfs, config.scrub_mb_per_s);	/* passes: run_scrub */
	bg_thread_start(&scheduler, jobs_loop, "job scheduler");
}

void jobs_stop(void)
{
	pthread_mutex_lock(&scheduler.lock);
	scheduler.stopping = 1;	/* no command starts after this */
	if (child_pid > 0)	/* a job's command: ended with the node (recorded as failed) */
		kill(child_pid, SIGTERM);
	pthread_mutex_unlock(&scheduler.lock);
	lfs_scrub_stop();
	bg_thread_stop(&scheduler);
}
