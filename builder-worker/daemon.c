/* daemon.c -- `khub-worker --url ...`: probe the toolchains, register with
 * khub, then claim jobs (long poll) and run up to --concurrency of them at
 * once, one thread each (job.c), until SIGTERM/SIGINT or, with --once, until
 * the queue is empty. The first signal stops claiming and lets running builds
 * finish (at most --drain-seconds when set); a second one kills them and
 * gives them back to the queue. */
#include "builder-worker/daemon_internal.h"
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct slot {
	pthread_t thread;
	json_t *job;
	int index;	/* in d->slots: its build uid (build_users_slot) */
	int busy, done;
	struct daemon *d;
};

struct daemon {
	struct daemon_config cfg;
	struct hub_client *hc;	/* the main thread's: register, claim */
	json_t *variants;	/* what this worker can build */
	int concurrency, once, poll_seconds, drain_seconds;
	const char *token_file, *work_dir;	/* from the command line (borrowed from argv) */
	int misconfigured;	/* a job showed this worker cannot build: stop, exit 1 */
	struct slot *slots;
	int running;
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* a slot freed, or a signal came */
};

/* Sleep up to seconds, or less when a signal or a freed slot wakes us. */
static void daemon_nap(struct daemon *d, unsigned seconds)
{
	struct timespec until = clock_after_usec(CLOCK_MONOTONIC, (uint64_t)seconds * 1000000);
	pthread_mutex_lock(&d->lock);
	if (!d->cfg.stopping)
		pthread_cond_timedwait(&d->cond, &d->lock, &until);
	pthread_mutex_unlock(&d->lock);
}

/* ---- signals ------------------------------------------------------------------------------ */

static void *signal_thread(void *arg)
{
	struct daemon *d = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	for (;;) {
		int sig = 0;
		if (sigwait(&set, &sig) != 0 || sig == SIGUSR1)
			break;
		pthread_mutex_lock(&d->lock);
		if (!d->cfg.stopping) {
			d->cfg.stopping = 1;
			log_info("signal %d: no more claims; %d running build(s) %s (a second signal kills and "
				 "releases them)", sig, d->running,
				 d->drain_seconds ? "get --drain-seconds to finish" : "finish");
		} else if (!d->cfg.releasing) {
			d->cfg.releasing = 1;
			log_info("signal %d: killing the running builds and giving them back", sig);
		}
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
	}
	return NULL;
}

/* ---- jobs ----------------------------------------------------------------------------------- */

static void *job_thread(void *arg)
{
	struct slot *s = arg;
	int misconfigured = job_run(&s->d->cfg, s->index, s->job);
	pthread_mutex_lock(&s->d->lock);
	if (misconfigured) {
		s->d->misconfigured = 1;
		s->d->cfg.stopping = 1;	/* no more claims: they would fail the same way */
	}
	s->done = 1;
	pthread_cond_broadcast(&s->d->cond);
	pthread_mutex_unlock(&s->d->lock);
	return NULL;
}

/* Join finished job threads; under d->lock. */
static void reap(struct daemon *d)
{
	for (int i = 0; i < d->concurrency; i++) {
		struct slot *s = &d->slots[i];
		if (s->busy && s->done) {
			pthread_join(s->thread, NULL);
			json_decref(s->job);
			s->job = NULL;
			s->busy = s->done = 0;
			d->running--;
		}
	}
}

static int start_job(struct daemon *d, json_t *job)
{
	pthread_mutex_lock(&d->lock);
	struct slot *s = NULL;
	for (int i = 0; i < d->concurrency && !s; i++)
		if (!d->slots[i].busy)
			s = &d->slots[i];
	int ret = -1;
	if (s) {
		s->job = json_incref(job);
		s->d = d;
		s->busy = 1;
		s->done = 0;
		if (pthread_create(&s->thread, NULL, job_thread, s) == 0) {
			d->running++;
			ret = 0;
		} else {
			json_decref(s->job);
			s->job = NULL;
			s->busy = 0;
		}
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* A job that came while stopping goes straight back. */
static void release_claimed(struct daemon *d, json_t *job)
{
	json_t *id = json_object_get(job, "id");
	char *path = json_is_integer(id) ? xasprintf("/api/builds/%lld/release", (long long)json_integer_value(id))
					 : xasprintf("/api/builds/%s/release", json_string_value(id));
	struct hub_reply r = { 0 };
	hub_call(d->hc, "POST", path, "{}", 2, NULL, 30, &r);
	if (r.status == 200)
		log_info("released build #%s just claimed (worker stopping)", path + strlen("/api/builds/"));
	else
		log_warn("releasing %s failed (%s); its lease will expire", path, hub_reply_error(&r));
	hub_reply_release(&r);
	free(path);
}

/* ---- register and claim ------------------------------------------------------------------------ */

static json_t *register_body(struct daemon *d)
{
	json_t *tcs = json_array();
	d->variants = json_array();
	const struct toolchain_set *set = d->cfg.toolchains;
	for (size_t i = 0; i < set->count; i++) {
		const struct toolchain *tc = &set->items[i];
		if (!tc->usable)
			continue;
		json_t *vs = json_array();
		for (size_t k = 0; k < tc->nvariants; k++) {
			json_array_append_new(vs, json_string(tc->variants[k]));
			int seen = 0;
			for (size_t m = 0; m < json_array_size(d->variants); m++)
				seen |= strcmp(json_string_value(json_array_get(d->variants, m)), tc->variants[k]) == 0;
			if (!seen)
				json_array_append_new(d->variants, json_string(tc->variants[k]));
		}
		json_t *entry = json_pack("{s:s, s:o, s:s?, s:s?, s:s?, s:b, s:s?, s:s?, s:s?, s:s?}", "name", tc->name,
					  "variants", vs, "torch", tc->torch_version, "cuda", tc->cuda_version, "rocm",
					  tc->rocm_version, "cxx11_abi", tc->cxx11_abi, "python", tc->python, "root", tc->root,
					  "root_digest", tc->root_digest, "hipify", tc->hipify_version);
		if (tc->benchmarks) {	/* a farm benchmark worker: its device as probed */
			json_object_set_new(entry, "benchmarks", json_true());
			json_object_set_new(entry, "device", json_string(tc->device ? tc->device : "cpu"));
			json_object_set_new(entry, "driver", json_string(tc->driver ? tc->driver : ""));
		}
		json_array_append_new(tcs, entry);
	}
	return json_pack("{s:s, s:s, s:i, s:o}", "name", d->cfg.name, "version", PACKAGE_VERSION, "concurrency",
			 d->concurrency, "toolchains", tcs);
}

/* 0 when registered; -1 when it must give up (message logged). */
static int register_worker(struct daemon *d)
{
	json_t *body = register_body(d);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	unsigned delay = 1, tries = 0;
	int ret = -1;
	while (!d->cfg.stopping) {
		struct hub_reply r = { 0 };
		hub_call(d->hc, "POST", "/api/workers/register", text, strlen(text), NULL, 30, &r);
		tries++;
		if (r.status == 200) {
			json_t *a = hub_reply_json(&r);
			json_int_t hb = a ? json_integer_value(json_object_get(a, "heartbeat_seconds")) : 0;
			json_int_t lease = a ? json_integer_value(json_object_get(a, "lease_seconds")) : 0;
			d->cfg.heartbeat_seconds = hb > 0 ? (int)hb : 15;
			d->cfg.lease_seconds = lease > 0 ? (int)lease : 60;
			log_info("registered with %s as %s: %zu variant(s), concurrency %d, heartbeat %d s",
				 d->cfg.url, d->cfg.name, json_array_size(d->variants), d->concurrency,
				 d->cfg.heartbeat_seconds);
			json_decref(a);
			hub_reply_release(&r);
			ret = 0;
			break;
		}
		if (r.status == 401 || r.status == 403) {
			log_error("worker token rejected by %s (%s)", d->cfg.url, hub_reply_error(&r));
			hub_reply_release(&r);
			break;
		}
		if (!hub_reply_retryable(&r)) {
			log_error("registering with %s failed: %s%s", d->cfg.url, hub_reply_error(&r),
				  r.status == 404 ? " (a khub without the build farm?)" : "");
			hub_reply_release(&r);
			break;
		}
		if (d->once && tries >= 3) {
			log_error("cannot reach khub at %s: %s", d->cfg.url, hub_reply_error(&r));
			hub_reply_release(&r);
			break;
		}
		log_warn("khub at %s unreachable or failing (%s); retrying in %u s", d->cfg.url, hub_reply_error(&r),
			 delay);
		hub_reply_release(&r);
		daemon_nap(d, delay);
		delay = delay < 60 ? delay * 2 : 60;
	}
	free(text);
	return ret;
}

/* The claim loop; 0, or 1 when khub refused this worker. */
static int claim_loop(struct daemon *d)
{
	json_t *req = json_pack("{s:O, s:i}", "variants", d->variants, "wait_seconds", d->once ? 0 : d->poll_seconds);
	char *text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	unsigned delay = 1, failures = 0;
	int ret = 0;
	for (;;) {
		pthread_mutex_lock(&d->lock);
		reap(d);
		while (d->running == d->concurrency && !d->cfg.stopping) {
			pthread_cond_wait(&d->cond, &d->lock);
			reap(d);
		}
		int stop = d->cfg.stopping;
		pthread_mutex_unlock(&d->lock);
		if (stop)
			break;
		struct hub_reply r = { 0 };
		uint64_t asked = monotonic_usec();
		hub_call(d->hc, "POST", "/api/workers/claim", text, strlen(text), NULL, d->poll_seconds + 30, &r);
		if (r.status == 200 || r.status == 204)
			failures = 0;
		if (r.status == 200) {
			delay = 1;
			json_t *a = hub_reply_json(&r);
			json_t *job = a ? json_object_get(a, "build") : NULL;
			if (!json_is_object(job))
				log_error("claim answered 200 without a build: %s", hub_reply_error(&r));
			else if (d->cfg.stopping || start_job(d, job) < 0)
				release_claimed(d, job);
			json_decref(a);
		} else if (r.status == 204) {
			delay = 1;
			if (d->once) {
				log_info("queue empty: no more claims (--once)");
				hub_reply_release(&r);
				break;
			}
			/* no long poll (wait_seconds 0, or khub answered at once): no tight loop */
			if (monotonic_usec() - asked < 1000000)
				daemon_nap(d, 1);
		} else if (r.status == 401 || r.status == 403) {
			log_error("worker token rejected by %s (%s)", d->cfg.url, hub_reply_error(&r));
			hub_reply_release(&r);
			ret = 1;
			break;
		} else if (d->once && ++failures >= 3) {
			log_error("claim failed %u times (%s); giving up (--once)", failures, hub_reply_error(&r));
			hub_reply_release(&r);
			ret = 1;
			break;
		} else {
			log_warn("claim failed (%s); again in %u s", hub_reply_error(&r), delay);
			daemon_nap(d, delay);
			delay = delay < 60 ? delay * 2 : 60;
		}
		hub_reply_release(&r);
	}
	free(text);
	return ret;
}

/* Wait for the running builds; after --drain-seconds, have them released. */
static void drain(struct daemon *d)
{
	uint64_t deadline = d->drain_seconds ? monotonic_usec() + (uint64_t)d->drain_seconds * 1000000 : 0;
	pthread_mutex_lock(&d->lock);
	reap(d);
	if (d->running)
		log_info("waiting for %d running build(s)", d->running);
	while (d->running) {
		if (deadline && !d->cfg.releasing) {
			if (monotonic_usec() >= deadline) {
				log_info("--drain-seconds passed: killing and releasing %d build(s)", d->running);
				d->cfg.releasing = 1;
				continue;
			}
			struct timespec until = clock_after_usec(CLOCK_MONOTONIC, deadline - monotonic_usec());
			pthread_cond_timedwait(&d->cond, &d->lock, &until);
		} else {
			pthread_cond_wait(&d->cond, &d->lock);
		}
		reap(d);
	}
	pthread_mutex_unlock(&d->lock);
}

/* ---- start-up ------------------------------------------------------------------------------------- */

static char *read_token(const char *path)
{
	size_t len = 0;
	char *t = read_file_limited(path, 4096, &len);
	if (!t)
		fatal("khub-worker: cannot read the token file %s: %s", path, strerror(errno));
	while (len && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' '))
		t[--len] = '\0';
	if (!len || strpbrk(t, "\r\n"))
		fatal("khub-worker: %s does not hold one token", path);
	struct stat st;
	if (stat(path, &st) == 0 && (st.st_mode & 077))
		log_warn("token file %s is readable by others (chmod 600 it)", path);
	return t;
}

/* <work-dir>/<name>, locked for this process; leftovers of a killed run removed.
 * A root worker's slots (the first `slots` uids of --build-user) must reach it. */
static char *claim_work_dir(const struct daemon_config *cfg, int slots, const char *work_dir, const char *name,
			    int *lock_fd)
{
	char *root = xasprintf("%s/%s", work_dir, name);
	/* a root worker's builds run as the build uid, which must reach its
	 * scratch below (search, never list) */
	mode_t mode = geteuid() == 0 ? 0711 : 0700;
	if (mkdir_p(root, mode) < 0 || chmod(root, mode) < 0)
		fatal("khub-worker: cannot make %s: %s", root, strerror(errno));
	char real[PATH_MAX];
	if (!realpath(root, real))
		fatal("khub-worker: %s: %s", root, strerror(errno));
	free(root);
	root = xstrdup(real);	/* builds run elsewhere: no relative path may reach them */
	for (int slot = 0; geteuid() == 0 && slot < slots; slot++) {
		long uid, gid;
		build_users_slot(&cfg->build_users, slot, &uid, &gid);
		if (!sandbox_reachable(root, (uid_t)uid, (gid_t)gid, 1))
			fatal("khub-worker: the build uid %ld cannot reach %s: every directory above it must be "
			      "searchable by that uid (chmod o+x), or choose another --work-dir", uid, root);
	}
	char *lock = xasprintf("%s/.lock", root);
	*lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (*lock_fd < 0 || flock(*lock_fd, LOCK_EX | LOCK_NB) < 0)
		fatal("khub-worker: %s is in use by another khub-worker named %s (give each a --name "
		      "or --work-dir)", root, name);
	free(lock);
	DIR *dir = opendir(root);
	struct dirent *de;
	while (dir && (de = readdir(dir))) {
		if (strncmp(de->d_name, "build-", 6) != 0)
			continue;
		char *p = xasprintf("%s/%s", root, de->d_name);
		log_info("removing %s, left by an earlier run", p);
		tree_remove(p);
		free(p);
	}
	if (dir)
		closedir(dir);
	return root;
}

/* ---- the command line ----------------------------------------------------------------------- */

/* --token: refused (ps would show it). */
static int refuse_token(const char *arg, void *field)
{
	fprintf(stderr, "khub-worker: the token is not taken on the command line (ps would show it): "
		"--token-file FILE or KHUB_WORKER_TOKEN\n");
	return -1;
}

/* --log-level into log_threshold. */
static int parse_log_level(const char *arg, void *field)
{
	int level = log_level_parse(arg);
	if (level < 0) {
		fprintf(stderr, "khub-worker: --log-level: error, warn, info or debug\n");
		return -1;
	}
	log_threshold = (enum log_level)level;
	return 0;
}

#define DAEMON_OPT(field) offsetof(struct daemon, field)
static const struct worker_option daemon_option_rows[] = {
	{ .name = "url", .arg = "URL", .kind = WOPT_STRING, .offset = DAEMON_OPT(cfg.url),
	  .help = "khub's address (or KHUB_URL)" },
	{ .name = "token-file", .arg = "FILE", .kind = WOPT_STRING, .offset = DAEMON_OPT(token_file),
	  .help = "the worker token (or KHUB_WORKER_TOKEN; never on the command line)" },
	{ .name = "toolchains", .arg = "FILE", .kind = WOPT_STRING, .offset = DAEMON_OPT(cfg.toolchains_path),
	  .required = 1, .help = "toolchains.json" },
	{ .name = "concurrency", .arg = "N", .kind = WOPT_INT, .offset = DAEMON_OPT(concurrency), .min = 1, .max = 256,
	  .help = "builds at once (1)" },
	{ .name = "work-dir", .arg = "DIR", .kind = WOPT_STRING, .offset = DAEMON_OPT(work_dir),
	  .help = "scratch space ($TMPDIR/khub-worker, else /var/tmp/khub-worker)" },
	{ .name = "name", .arg = "NAME", .kind = WOPT_STRING, .offset = DAEMON_OPT(cfg.name),
	  .help = "this worker's name (the host name)" },
	{ .name = "once", .kind = WOPT_FLAG, .offset = DAEMON_OPT(once),
	  .help = "exit when the queue is empty and the builds are done" },
	{ .name = "poll-seconds", .arg = "N", .kind = WOPT_INT, .offset = DAEMON_OPT(poll_seconds), .min = 0, .max = 30,
	  .help = "how long one claim waits for a job (20)" },
	{ .name = "drain-seconds", .arg = "N", .kind = WOPT_INT, .offset = DAEMON_OPT(drain_seconds), .min = 0,
	  .max = 7 * 24 * 3600, .help = "after SIGTERM, how long running builds may go on (0: to their end)" },
	{ .name = "kill-grace-seconds", .arg = "N", .kind = WOPT_INT, .offset = DAEMON_OPT(cfg.kill_grace_seconds),
	  .min = 0, .max = 3600, .help = "between SIGTERM and SIGKILL of a build's processes (10)" },
	{ .name = "build-user", .arg = "UID[-LAST][:GID]", .kind = WOPT_CALL, .offset = DAEMON_OPT(cfg.build_users),
	  .parse = worker_option_build_users,
	  .help = "who build code runs as when the worker is root: the i-th build at once as UID+i, at least "
		  "--concurrency uids (65534:65534; with --concurrency N over 1, 2000000000 to 2000000000+N-1)" },
	{ .name = "max-processes", .arg = "N", .kind = WOPT_LONG, .offset = DAEMON_OPT(cfg.max_processes), .min = 0,
	  .max = 1 << 22, .help = "processes (and threads) of each build's uid at once (512)" },
	{ .name = "no-build-cache", .kind = WOPT_FLAG, .offset = DAEMON_OPT(cfg.no_build_cache),
	  .help = "compile without the build cache (ccache per repo and toolchain under the work dir)" },
	{ .name = "build-cache-mb", .arg = "N", .kind = WOPT_LONG, .offset = DAEMON_OPT(cfg.build_cache_mb), .min = 1,
	  .max = 1L << 30, .help = "the size of each repo's build cache, per toolchain (2048)" },
	{ .name = "log-level", .arg = "LEVEL", .kind = WOPT_CALL, .parse = parse_log_level,
	  .help = "error, warn, info, debug" },
	{ .name = "token", .arg = "TOKEN", .kind = WOPT_CALL, .parse = refuse_token,
	  .help = "refused: ps would show it (--token-file)" },
	{ .name = "help", .kind = WOPT_HELP, .help = "this text" },
	{ .name = NULL },
};

static const struct worker_command daemon_command = {
	.synopsis = "usage: khub-worker --url URL --token-file FILE --toolchains FILE [options]",
	.options = daemon_option_rows,
	.epilogue = "       khub-worker --check --toolchains FILE\n"
		    "       khub-worker build --help\n",
};

/* --build-user's default, or a refusal of too few uids for --concurrency:
 * 0, or -1 after saying why on stderr. */
static int daemon_build_users(struct daemon *d)
{
	struct build_users *u = &d->cfg.build_users;
	if (!u->uid) {	/* not given */
		long first = d->concurrency > 1 ? SANDBOX_BUILD_UIDS_DEFAULT : SANDBOX_BUILD_UID_DEFAULT;
		*u = (struct build_users){ .uid = first, .last = first + d->concurrency - 1 };
		return 0;
	}
	if (u->last - u->uid + 1 >= d->concurrency)
		return 0;
	fprintf(stderr, "khub-worker: --build-user %ld-%ld has %ld uid(s) for --concurrency %d: each build at once "
		"needs a uid of its own (a uid's process limit counts all its processes, so one build's fork "
		"bomb would stop the others'): give a range UID-LAST of at least %d uids\n", u->uid, u->last,
		u->last - u->uid + 1, d->concurrency, d->concurrency);
	return -1;
}

/* The command line into d: 0 to go on, else the exit status (0 after --help). */
static int daemon_parse(struct daemon *d, int argc, char **argv)
{
	d->concurrency = 1;
	d->poll_seconds = 20;
	d->cfg.kill_grace_seconds = 10;
	d->cfg.max_processes = SANDBOX_MAX_PROCESSES_DEFAULT;
	d->cfg.build_cache_mb = BUILD_CACHE_MAX_MB_DEFAULT;
	d->cfg.url = getenv("KHUB_URL");
	int parsed = worker_options_parse(&daemon_command, argc, argv, d);
	if (parsed == WORKER_OPTIONS_HELP) {
		worker_options_usage(&daemon_command, stdout);
		return -1;
	}
	if (parsed == WORKER_OPTIONS_BAD_VALUE)
		return 64;	/* the row said why */
	if (parsed < 0 || !d->cfg.url || !*d->cfg.url) {
		worker_options_usage(&daemon_command, stderr);
		return 64;
	}
	if (daemon_build_users(d) < 0)
		return 64;
	long cpus = usable_cpus(NULL, 0);	/* shared by the builds that run at once */
	d->cfg.build_jobs = cpus / d->concurrency > 0 ? cpus / d->concurrency : 1;
	return 0;
}

/* The worker token from --token-file or KHUB_WORKER_TOKEN (then wiped from
 * the environment); fatal without one. The caller frees it. */
static char *daemon_token(const struct daemon *d)
{
	char *from_env = getenv("KHUB_WORKER_TOKEN"), *token = NULL;
	if (d->token_file)
		token = read_token(d->token_file);
	else if (from_env && *from_env)
		token = xstrdup(from_env);
	else
		fatal("khub-worker: no worker token: --token-file FILE or KHUB_WORKER_TOKEN");
	/* Held in memory only: nothing started later inherits it, and the
	 * process's own environment block (/proc/PID/environ) no longer has it. */
	if (from_env)
		explicit_bzero(from_env, strlen(from_env));
	unsetenv("KHUB_WORKER_TOKEN");
	return token;
}

/* Probe every toolchain of --toolchains into set, logging what each builds:
 * 0, or -1 when none is usable (logged). */
static int daemon_toolchains(struct daemon *d, char *toolchains_real, struct toolchain_set *set)
{
	char *cache_dir = xasprintf("%s/toolchain-probe", d->cfg.scratch_root);
	/* absolute: `khub-worker build` runs in each job's scratch directory */
	if (!realpath(d->cfg.toolchains_path, toolchains_real))
		fatal("khub-worker: --toolchains %s: %s", d->cfg.toolchains_path, strerror(errno));
	d->cfg.toolchains_path = toolchains_real;
	char why[512];
	if (toolchains_load(d->cfg.toolchains_path, set, why, sizeof(why)) != KHUB_OK)
		fatal("khub-worker: %s: %s", d->cfg.toolchains_path, why);
	size_t usable = 0;
	for (size_t i = 0; i < set->count; i++) {
		struct toolchain *tc = &set->items[i];
		if (toolchain_probe(tc, cache_dir) != KHUB_OK || !tc->usable) {
			log_warn("toolchain %s is not usable: %s", tc->name, tc->why);
			continue;
		}
		usable++;
		log_info("toolchain %s: %zu variant(s)%s%s", tc->name, tc->nvariants,
			 tc->nvariants ? ", first " : "", tc->nvariants ? tc->variants[0] : "");
		if (tc->root)
			log_info("toolchain %s: root %s, %s", tc->name, tc->root, tc->root_digest);
		if (tc->allow_no_sandbox)
			log_warn("toolchain %s sets allow_no_sandbox: where bubblewrap is missing its builds run WITHOUT "
				 "A SANDBOX (network, the whole machine); khub-worker --check says what it gets", tc->name);
	}
	free(cache_dir);
	if (!usable) {
		log_error("no usable toolchain in %s (khub-worker --check says why)", d->cfg.toolchains_path);
		return -1;
	}
	d->cfg.toolchains = set;
	return 0;
}

/* --work-dir, else $TMPDIR/khub-worker, else /var/tmp/khub-worker (buf holds it). */
static const char *daemon_work_dir(const struct daemon *d, char *buf, size_t size)
{
	const char *tmp = getenv("TMPDIR");
	if (d->work_dir)
		return d->work_dir;
	if (!tmp || !*tmp)
		return "/var/tmp/khub-worker";
	snprintf(buf, size, "%s/khub-worker", tmp);
	return buf;
}

/* Who the builds run as, logged: a root worker's slots each their own uid;
 * an unprivileged worker's builds all its own uid, whose process limit they
 * share (a warning when several run at once). */
static void log_build_users(const struct daemon *d)
{
	const struct build_users *u = &d->cfg.build_users;
	if (geteuid() == 0 && d->concurrency > 1)
		log_info("builds run as uids %ld to %ld (the i-th build at once as %ld+i), group %ld", u->uid,
			 u->uid + d->concurrency - 1, u->uid, u->gid ? u->gid : u->uid);
	else if (geteuid() == 0)
		log_info("builds run as uid %ld", u->uid);
	else if (d->concurrency > 1)
		log_warn("not root: the %d builds at once all run as this worker's uid %ld and share its process limit "
			 "(one build's fork bomb stops the others' sandboxes); as root each gets a uid of its own "
			 "(--build-user)", d->concurrency, (long)getuid());
}

/* Signals to one thread (every other thread, curl's and the jobs', has
 * them blocked), the lock and condition, the slots, libcurl: the signal
 * thread started into *sig_thread. */
static void daemon_start(struct daemon *d, pthread_t *sig_thread)
{
	sigset_t set_sig;
	sigemptyset(&set_sig);
	sigaddset(&set_sig, SIGTERM);
	sigaddset(&set_sig, SIGINT);
	sigaddset(&set_sig, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set_sig, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&d->lock, NULL);
	d->slots = xcalloc((size_t)d->concurrency, sizeof(*d->slots));
	for (int i = 0; i < d->concurrency; i++)
		d->slots[i].index = i;
	if (hub_global_init() < 0)
		fatal("khub-worker: libcurl initialisation failed");
	if (pthread_create(sig_thread, NULL, signal_thread, d) != 0)
		fatal("khub-worker: cannot start a thread");
	d->hc = hub_client_new(d->cfg.url, d->cfg.token);
	if (!d->hc)
		fatal("khub-worker: libcurl initialisation failed");
}

/* Register, claim until stopped, wait for the builds: the exit status. */
static int daemon_run(struct daemon *d)
{
	int ret = 1;
	if (register_worker(d) == 0) {
		ret = claim_loop(d);
		drain(d);
		if (d->misconfigured) {
			log_error("khub-worker %s is misconfigured (see above): stopped; its job went back to the queue",
				  d->cfg.name);
			ret = 1;
		}
	} else if (d->cfg.stopping) {
		ret = 0;
	}
	log_info("khub-worker %s stopped", d->cfg.name);
	return ret;
}

/* Undo daemon_start. */
static void daemon_stop(struct daemon *d, pthread_t sig_thread)
{
	pthread_kill(sig_thread, SIGUSR1);
	pthread_join(sig_thread, NULL);
	hub_client_free(d->hc);
	hub_global_cleanup();
	json_decref(d->variants);
	free(d->slots);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
}

int daemon_main(int argc, char **argv)
{
	struct daemon d;
	memset(&d, 0, sizeof(d));
	int ret = daemon_parse(&d, argc, argv), lock_fd = -1;
	if (ret != 0)
		return ret < 0 ? 0 : ret;
	fds_set_cloexec_from(3);	/* what it inherited goes to no program it starts */
	char host[256], self[PATH_MAX], toolchains_real[PATH_MAX], work_buf[PATH_MAX];
	struct toolchain_set set = { 0 };
	char *token = daemon_token(&d), *url = xstrdup(d.cfg.url);
	d.cfg.token = token;
	while (strlen(url) && url[strlen(url) - 1] == '/')
		url[strlen(url) - 1] = '\0';
	d.cfg.url = url;
	if (!d.cfg.name) {
		if (gethostname(host, sizeof(host)) < 0)
			snprintf(host, sizeof(host), "worker");
		host[sizeof(host) - 1] = '\0';
		d.cfg.name = host;
	}
	if (!realpath("/proc/self/exe", self))
		fatal("khub-worker: cannot find its own program: %s", strerror(errno));
	d.cfg.self_exe = self;
	ret = 1;
	char *scratch_root = claim_work_dir(&d.cfg, d.concurrency, daemon_work_dir(&d, work_buf, sizeof(work_buf)),
					    d.cfg.name, &lock_fd);
	d.cfg.scratch_root = scratch_root;
	log_build_users(&d);
	if (daemon_toolchains(&d, toolchains_real, &set) == 0) {
		pthread_t sig_thread;
		daemon_start(&d, &sig_thread);
		ret = daemon_run(&d);
		daemon_stop(&d, sig_thread);
	}
	free(scratch_root);
	if (lock_fd >= 0)
		close(lock_fd);
	toolchains_release(&set);
	explicit_bzero(token, strlen(token));
	free(token);
	free(url);
	return ret;
}
