/* main.c -- the khub binary: load the configuration and dispatch to a role. */
#include "server/server.h"
#include "mirror/mirror.h"
#include "api/builds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static const char cmd_db_usage[] = "usage: khub db migrate\n";

/* Each command's usage (its own file's text) is what `khub COMMAND ...
 * --help` prints to stdout, exit 0, before the command parses anything;
 * serve's is the whole help with the configuration table (NULL). */
static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
	const char *help;
} commands[] = {
	{ "serve", cmd_serve, NULL, "run the HTTP server (-n: check the configuration and exit; --print-config-template: a commented config file)" },
	{ "db", cmd_db, cmd_db_usage, "db migrate: apply the schema migrations" },
	{ "import", cmd_import, cmd_import_usage, "import DIR --repo NS/NAME [--type kernel] [--branch B] [--message M] [--private]" },
	{ "mirror", cmd_mirror, cmd_mirror_usage, "mirror sync|run|status: keep repos in sync with an upstream hub" },
	{ "sync", cmd_sync, cmd_sync_usage, "sync keygen|export|verify|import|state: air-gap bundles (khub sync help)" },
	{ "hook", cmd_hook, cmd_hook_usage, "hook pre-receive|post-receive: run by git receive-pack during a push (internal)" },
	{ "lfs", cmd_lfs, cmd_lfs_usage, "lfs migrate --to s3: copy the local LFS store to the S3 backend (resumable, verified, while serving)" },
	{ "check", cmd_check, cmd_check_usage, "check lfs-pointers [--fix]: report LFS pointers to objects not linked to their repo" },
	{ "fsck", cmd_fsck, cmd_fsck_usage, "fsck [--repair] [--json] [--quick]: check git repos, LFS objects and the database against each other" },
	{ "backup", cmd_backup, cmd_backup_usage, "backup DIR | backup --verify DIR: a consistent backup of the serving hub (database, repos, LFS objects); check one" },
	{ "restore", cmd_restore, cmd_restore_usage, "restore DIR: a backup into an empty data dir and database" },
	{ "jobs", cmd_jobs, cmd_jobs_usage, "jobs [--json] | jobs run NAME [--no-wait]: the scheduled jobs (gc, scrub, repack, backup), their last runs; run one now" },
	{ "repack", cmd_repack, cmd_repack_usage, "repack: pack each repo's objects into one pack, under its write lock (unreachable objects kept)" },
	{ "gc", cmd_gc, cmd_gc_usage, "gc [--dry-run] [--grace HOURS]: remove unreferenced LFS objects, temp files and expired trash" },
	{ "admin", cmd_admin, cmd_admin_usage, "admin org|user|member|token|trust ...: manage accounts (khub admin help)" },
	{ "routes", cmd_routes, cmd_routes_usage, "routes [--json]: every endpoint with who may call it (the route tables)" },
	{ "benchmark", cmd_benchmark, cmd_benchmark_usage, "benchmark submit FILE --repo NS/NAME: post a `kernels benchmark --output` file to a hub (not huggingface.co)" },
	{ "builds", cmd_builds, cmd_builds_usage, "builds states [--json]: the build job's state machine (states, events, who, routes); builds campaign start|list|show: fleet rebuilds" },
	{ "verify-build", cmd_verify_build, cmd_verify_build_usage, "verify-build DIR --provenance FILE [--key PUB]: check a downloaded variant against its signed provenance, offline" },
};

static void usage(FILE *fp)
{
	fprintf(fp, "usage: khub COMMAND [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(fp, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(fp, "  %-8s %s\n\n", "version", "print the version");
	config_print_help(fp);
}

/* serve -n: the configuration in effect and its problems. */
static int serve_check(void)
{
	config_dump(stdout);
	char why[320];
	long threads = config_http_threads(why, sizeof(why));
	printf("http threads in use = %ld (%s)\n", threads, why);
	int problems = config_check(stderr);
	if (problems) {
		fprintf(stderr, "khub: configuration has %d problem%s\n", problems, problems == 1 ? "" : "s");
		return 1;
	}
	printf("configuration ok\n");
	return 0;
}

/* The hub's signing key: signing_key, else data_dir/signing.key, made (with
 * signing.pub) when there is none yet. */
static const char *serve_signing_key(void)
{
	if (config.signing_key[0]) {
		if (access(config.signing_key, R_OK) < 0)
			fatal("signing_key %s: %s", config.signing_key, strerror(errno));
		return config.signing_key;
	}
	char *prefix = xasprintf("%s/signing", config.data_dir), *path = xasprintf("%s.key", prefix);
	char id[ED25519_KEY_ID_LEN + 1], err[512];
	int rc = access(path, F_OK) == 0 ? KHUB_EEXIST : ed25519_keygen(prefix, id, err, sizeof(err));
	if (rc == 0)
		log_info("made the hub's signing key %s (key id %s): it signs build provenance", path, id);
	else if (rc != KHUB_EEXIST)
		fatal("cannot make the hub's signing key: %s", err);
	free(prefix);
	return path;
}

/* The build farm's stores, hooks and directories (its settings from the
 * table are in place: config_apply_all), and the checks of external git
 * sources. */
static void serve_configure_builds(void)
{
	struct farm_settings *b = &farm_settings;
	b->repo_root = api_ctx.repo_root;
	b->lfs = api_ctx.lfs;
	b->queue_changed = builds_wake_claimers;
	b->tmp_dir = xasprintf("%s/build-tmp", config.data_dir);
	b->sources_dir = xasprintf("%s/build-sources", config.data_dir);
	b->source_cache_dir = xasprintf("%s/build-source-cache", config.data_dir);
	b->signing_key = serve_signing_key();
	char *hub = config.public_url[0] ? xstrdup(config.public_url) : xasprintf("http://%s", config.listen);
	for (size_t n = strlen(hub); n > 0 && hub[n - 1] == '/'; n--)
		hub[n - 1] = '\0';
	b->hub_url = hub;
	struct source_net_limits limits = {
		config.build_source_connect_timeout_s, config.build_source_low_speed_bytes,
		config.build_source_low_speed_s, config.build_source_deadline_s,
	};
	char why[256];
	if (source_net_configure(config.build_source_allow, &limits, why, sizeof(why)) < 0)
		fatal("%s", why);
	if (source_net_register() < 0)
		fatal("cannot route libgit2's connections through the build source checks");
	if (mkdir_p(b->tmp_dir, 0700) < 0)
		fatal("cannot create %s: %s", b->tmp_dir, strerror(errno));
	build_source_cache_init();
	build_sources_clean();
}

/* The database, the stores and everything requests read from api_ctx. */
static void serve_open(void)
{
	static struct trusted_proxies proxies;	/* for the process's life */
	char why[256];
	if (trusted_proxies_parse(config.trusted_proxies, &proxies, why, sizeof(why)) < 0)
		fatal("%s", why);	/* before the database starts */
	http_ctx.trusted_proxies = &proxies;
	runtime_open_database();
	runtime_watch_database();
	api_ctx.repo_root = runtime_repo_root();
	api_ctx.lfs = lfs_store_open(runtime_lfs_root());
	if (!api_ctx.lfs)
		fatal("cannot open the LFS store under %s", runtime_lfs_root());
	int stale = lfs_store_clean_tmp(api_ctx.lfs, 0);
	if (stale)
		log_info("removed %d partial uploads left by an earlier crash", stale);
	config_apply_all();	/* the table's keys into api_ctx, http_ctx, web_settings, farm_settings */
	publish_set_unlock_notify(api_lock_released);
	publish_set_after_move(api_after_publish);
	runtime_load_secret(api_ctx.url_secret);
	api_ctx.lfs_root = runtime_lfs_root();
	api_ctx.lfs_env = lfs_hook_env();
	api_ctx.conninfo = runtime_conninfo();
	api_ctx.hooks_dir = hooks_install();
	api_ctx.lazy_fetch = mirror_lazy_fetch;
	http_ctx.page_headers = web_page_headers;
	http_ctx.page_error = web_page_error;
	serve_configure_builds();
	publish_set_on_new_commit(builds_on_new_commit);
	publish_set_memory_limit((uint64_t)config.commit_memory_mb << 20);
	response_cache_init((size_t)config.cache_mb * 1024 * 1024);
	auth_cache_init(config.token_cache_ttl_ms);
	repo_cache_invalidate();
}

static void serve_reload(void)
{
	service_notify_reloading();
	log_info("SIGHUP: reading the configuration again");
	config_reload();	/* applies the reloaded keys (config_apply_all) */
	service_notify_ready();
}

static const struct http_hooks serve_hooks = {
	.ready = service_notify_ready, .reload = serve_reload, .stopping = service_notify_stopping,
	.drain = cluster_drain,
};

static int serve_run(void)
{
	cluster_start();	/* first: the background jobs lock on its session */
	download_stats_start((int)config.download_stats, config.download_stats_flush_ms);
	work_queue_start(config.work_threads, config.work_queue_max, config.work_wait_ms);
	work_pool_start(WORK_POOL_FETCH, config.build_source_fetch_threads, config.build_source_fetch_queue_max,
			config.work_wait_ms);
	work_pool_start(WORK_POOL_PLAN, config.build_plan_threads, config.build_plan_queue_max, config.work_wait_ms);
	build_planner_start(config.build_plan_threads, config.build_plan_queue_max);
	kernel_index_catch_up_start(config.variant_catch_up_ms);
	build_lease_timer_start(config.build_lease_check_ms);
	jobs_start(api_ctx.lfs);	/* gc, scrub, repack, backup: one node per round */
	webhooks_start();	/* the queued deliveries: one node per delivery */
	int rc = http_serve(&serve_hooks);
	webhooks_stop();
	jobs_stop();
	build_lease_timer_stop();
	build_planner_stop();
	kernel_index_catch_up_stop();
	int busy = work_queue_stop(5000);
	download_stats_stop();	/* after the last request: its counts are stored */
	cluster_stop();
	source_net_release();
	if (!busy)	/* else a job still uses the store: left to the exit */
		lfs_store_close(api_ctx.lfs);
	runtime_close_database();
	return rc;
}

int cmd_serve(int argc, char **argv)
{
	int check_only = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-n") == 0) {
			check_only = 1;
		} else if (strcmp(argv[i], "--print-config-template") == 0) {
			config_print_template(stdout);
			return 0;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "khub serve: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (check_only)
		return serve_check();
	service_block_signals();	/* before any thread starts */
	serve_open();
	return serve_run();
}

int cmd_db(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "migrate") != 0) {
		fputs(cmd_db_usage, stderr);
		return 2;
	}
	runtime_open_database();	/* migrates */
	printf("database is up to date\n");
	runtime_close_database();
	return 0;
}

/* --help or -h anywhere after the command (`khub lfs migrate --help`). */
static int help_asked(int argc, char **argv)
{
	for (int i = 2; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("khub %s\n", PACKAGE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) == 0) {
			if (help_asked(argc, argv)) {
				if (commands[i].usage)
					fputs(commands[i].usage, stdout);
				else
					usage(stdout);
				return 0;
			}
			int n = config_load(argc - 1, argv + 1);
			runtime_become_data_dir_owner();
			return commands[i].run(n, argv + 1);
		}
	}
	fprintf(stderr, "khub: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
