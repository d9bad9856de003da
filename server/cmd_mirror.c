/* cmd_mirror.c -- khub mirror sync|run|status: pull selections of an
 * upstream hub once (with progress on a terminal), as a daemon on each
 * selection's interval and on triggers from the admin API, or show status. */
#include "server/server.h"
#include "mirror/mirror.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

const char cmd_mirror_usage[] =
	"usage:\n"
	"  khub mirror sync [SELECTION] [--mirror-config FILE] [--repo NS/NAME]\n"
	"  khub mirror run [--mirror-config FILE]     (daemon: every selection on its interval,\n"
	"                                             and on POST /api/admin/mirror/sync)\n"
	"  khub mirror status\n"
	"The configuration is JSON (see mirror/mirror_config.c); without --mirror-config it is\n"
	"read from the database (PUT /api/admin/mirror/config).\n";

static void print_stats(const char *what, const struct mirror_stats *st, double seconds)
{
	log_info("khub mirror: %s: %" PRIu64 " repos (%" PRIu64 " unchanged), %" PRIu64 " refs moved, %" PRIu64
		 " kept by policy, %" PRIu64 " LFS objects, %.1f MiB in %.2f s (%.1f MiB/s), %" PRIu64 " errors",
		 what, st->repos, st->repos_unchanged, st->refs_moved, st->refs_kept, st->objects,
		 (double)st->bytes / 1048576.0, seconds, seconds > 0 ? (double)st->bytes / 1048576.0 / seconds : 0,
		 st->errors);
}

static int run_selection(struct mirror_run *run, const struct mirror_selection *sel, const char *only_repo)
{
	struct mirror_stats before = run->stats;
	uint64_t t0 = monotonic_usec();
	mirror_pull_selection(run, sel, only_repo);
	if (atomic_load(&run->fenced))
		return 1;	/* cut short: no summary */
	struct mirror_stats delta = run->stats;
	delta.repos -= before.repos;
	delta.repos_unchanged -= before.repos_unchanged;
	delta.refs_moved -= before.refs_moved;
	delta.refs_kept -= before.refs_kept;
	delta.objects -= before.objects;
	delta.bytes -= before.bytes;
	delta.errors -= before.errors;
	print_stats(sel->name, &delta, (double)(monotonic_usec() - t0) / 1e6);
	return delta.errors ? 1 : 0;
}

static int status(void)
{
	struct mirror_status_list list;
	if (db_mirror_status_list(&list) < 0)
		return 1;
	printf("%-40s %-12s %-20s %-8s %-12s %s\n", "repo", "selection", "last success", "behind", "bytes", "error");
	for (size_t i = 0; i < list.count; i++) {
		const struct mirror_status *m = &list.items[i];
		char success[32] = "never";
		if (m->last_success) {
			struct tm tm;
			strftime(success, sizeof(success), "%Y-%m-%d %H:%M:%S", localtime_r(&m->last_success, &tm));
		}
		printf("%-40s %-12s %-20s %-8" PRId64 " %-12" PRId64 " %s%s%s\n", m->repo, m->selection, success,
		       m->refs_behind, m->bytes, m->last_error ? m->last_error : "", m->warnings ? " warnings: " : "",
		       m->warnings ? m->warnings : "");
	}
	mirror_status_list_release(&list);
	return 0;
}

/* One `khub mirror run` pulls at a time among the nodes sharing this
 * database: the active one holds the mirror-run lock for its life (a
 * session lock, gone when it exits or dies); another stands by, trying
 * every 2 s, and takes over. A daemon that lost the lock (lost = 1)
 * first leaves it 5 s to a standby: its own connection just failed.
 * 0 once held, -1 when stopped first. */
static int hold_mirror_lock(int lost)
{
	int told = lost;
	for (int s = 0; lost && s < 50 && !stop_requested; s++)
		usleep(100 * 1000);
	while (!stop_requested) {
		int rc = db_lock_try(DB_LOCK_JOB, DB_JOB_MIRROR_RUN);
		if (rc == 0) {
			if (told)
				log_info("mirror: the mirror-run lock is free: this khub mirror run pulls now");
			return 0;
		}
		if (!told++)
			log_info(rc == 1 ? "mirror: another khub mirror run holds the mirror-run lock; standing by"
					 : "mirror: the database is unavailable; waiting for the mirror-run lock");
		for (int s = 0; s < 20 && !stop_requested; s++)
			usleep(100 * 1000);
	}
	return -1;
}

/* The fence: the mirror-run lock lives on this thread's database
 * connection. If that connection is lost, so is the lock, and a standby
 * may take it within 2 s: stop at once, before fetching or writing
 * anything more. Asked before each repo, git fetch and ref move (one
 * round trip on that connection) and every 2 s while idle. */
static int mirror_lock_held(void)
{
	if (db_ping() == 0)
		return 1;
	log_error("mirror: lost the mirror-run lock (its database connection is gone): stopped pulling; "
		  "a standby may take over; standing by until the lock is free");
	return 0;
}

/* One pass: every selection due or triggered. */
static void pull_due(struct mirror_run *run, const struct mirror_config *cfg, time_t *due)
{
	int64_t trigger_id = 0;
	char *wanted = NULL;
	int claimed = db_mirror_trigger_claim(&trigger_id, &wanted) == 0;
	time_t now = time(NULL);
	for (size_t i = 0; i < cfg->nselections && !stop_requested && !mirror_run_fenced(run); i++) {
		const struct mirror_selection *sel = &cfg->selections[i];
		int triggered = wanted && (!wanted[0] || strcmp(wanted, sel->name) == 0);
		if (!triggered && now < due[i])
			continue;
		run_selection(run, sel, NULL);
		due[i] = time(NULL) + sel->interval;
	}
	if (claimed && !atomic_load(&run->fenced))
		db_mirror_trigger_finish(trigger_id);
	free(wanted);
}

/* Pull while this process holds the mirror-run lock: until stopped, or
 * until the lock is lost (then run->fenced is set). */
static void pull_while_held(struct mirror_run *run, const char *config_file)
{
	time_t *due = NULL;
	size_t ndue = 0;
	while (!stop_requested && !mirror_run_fenced(run)) {
		struct mirror_config cfg;
		char err[300];
		if (mirror_config_load(config_file, &cfg, err, sizeof(err)) < 0) {
			log_warn("mirror: %s; retrying in 10 s", err);
			for (int s = 0; s < 100 && !stop_requested; s++)
				usleep(100 * 1000);
			continue;
		}
		run->cfg = &cfg;
		if (ndue != cfg.nselections) {
			due = xrealloc(due, (cfg.nselections + 1) * sizeof(*due));
			for (size_t i = ndue; i < cfg.nselections; i++)
				due[i] = 0;
			ndue = cfg.nselections;
		}
		pull_due(run, &cfg, due);
		mirror_config_release(&cfg);
		run->cfg = NULL;
		for (int s = 0; s < 20 && !stop_requested && !atomic_load(&run->fenced); s++)
			usleep(100 * 1000);
	}
	free(due);
}

/* Stand by until the lock is free, pull while it is held; after a lost
 * lock, stand by again like a fresh daemon. */
static int daemon_loop(struct mirror_run *run, const char *config_file)
{
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	run->holds_lock = mirror_lock_held;
	for (int lost = 0; hold_mirror_lock(lost) == 0; lost = 1) {
		pull_while_held(run, config_file);
		db_unlock(DB_LOCK_JOB, DB_JOB_MIRROR_RUN);	/* a lost one: drops the dead connection */
		if (stop_requested)
			break;
		atomic_store(&run->fenced, 0);
	}
	return 0;
}

int cmd_mirror(int argc, char **argv)
{
	const char *config_file = NULL, *only_repo = NULL, *selection = NULL;
	if (argc < 2) {
		fputs(cmd_mirror_usage, stderr);
		return 2;
	}
	const char *verb = argv[1];
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--mirror-config") == 0 && i + 1 < argc)
			config_file = argv[++i];
		else if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc)
			only_repo = argv[++i];
		else if (argv[i][0] != '-' && !selection)
			selection = argv[i];
		else {
			fputs(cmd_mirror_usage, stderr);
			return 2;
		}
	}
	if (strcmp(verb, "sync") != 0 && strcmp(verb, "run") != 0 && strcmp(verb, "status") != 0) {
		fputs(cmd_mirror_usage, stderr);
		return 2;
	}
	runtime_open_database();
	int rc = 0;
	if (strcmp(verb, "status") == 0) {
		rc = status();
		runtime_close_database();
		return rc;
	}
	struct mirror_run run = { 0 };
	run.repo_root = runtime_repo_root();
	run.lfs = lfs_store_open(runtime_lfs_root());
	run.progress = isatty(2) && !log_is_json();	/* progress is for a person at a terminal */
	if (!run.lfs)
		fatal("cannot open the LFS store");
	if (strcmp(verb, "run") == 0) {
		rc = daemon_loop(&run, config_file);
	} else {
		struct mirror_config cfg;
		char err[300];
		if (mirror_config_load(config_file, &cfg, err, sizeof(err)) < 0)
			fatal("%s", err);
		run.cfg = &cfg;
		uint64_t t0 = monotonic_usec();
		int found = 0;
		for (size_t i = 0; i < cfg.nselections; i++) {
			if (selection && strcmp(selection, cfg.selections[i].name) != 0)
				continue;
			found = 1;
			rc |= run_selection(&run, &cfg.selections[i], only_repo);
		}
		if (!found)
			fatal("no selection named %s", selection);
		print_stats("total", &run.stats, (double)(monotonic_usec() - t0) / 1e6);
		mirror_config_release(&cfg);
	}
	lfs_store_close(run.lfs);
	runtime_close_database();
	return rc;
}
