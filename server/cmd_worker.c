/* cmd_worker.c -- khub admin worker add|scope|rotate|remove|list: build
 * farm workers, their tokens (scope "worker") and what each may build. */
#include "server/server.h"
#include "farm/farm.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char worker_usage[] =
	"usage: khub admin worker add NAME [--org ORG]... [--repo NS/NAME]... [--private]\n"
	"       khub admin worker scope NAME [--org ORG]... [--repo NS/NAME]... [--private]\n"
	"       khub admin worker rotate NAME\n"
	"       khub admin worker remove NAME\n"
	"       khub admin worker list\n"
	"A worker builds public repos of every namespace unless --org/--repo name the namespaces and repos it\n"
	"may build; private repos (of those, or of all) only with --private. scope replaces the whole scope.\n";

static const struct accounts_actor cli = ACCOUNTS_CLI;

/* 0, or -1 having said why `worker VERB NAME` failed (accounts/ audits
 * the change it made). */
static int worker_changed(const char *verb, const char *name, int rc, const char *why)
{
	if (rc < 0) {
		fprintf(stderr, "khub admin: worker %s %s: %s\n", verb, name, why ? why : khub_strerror(rc));
		return -1;
	}
	return 0;
}

/* Jobs a change left outside some worker's scope went back to the queue. */
static void say_taken_back(int n)
{
	if (n > 0)
		fprintf(stderr, "%d running job(s) taken back: the worker may no longer build them\n", n);
}

/* --repo NS/NAME: an existing kernel repo. */
static int scope_repo_valid(const char *arg)
{
	const char *slash = strchr(arg, '/'), *why = NULL;
	char ns[REPO_NAME_MAX + 1];
	struct repo_record rec;
	if (!slash || (size_t)(slash - arg) > REPO_NAME_MAX) {
		fprintf(stderr, "khub admin: --repo %s: expected NAMESPACE/NAME\n", arg);
		return -1;
	}
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - arg), arg);
	if (repo_name_validate(ns, &why) < 0 || repo_name_validate(slash + 1, &why) < 0) {
		fprintf(stderr, "khub admin: --repo %s: %s\n", arg, why);
		return -1;
	}
	int rc = db_repo_get(REPO_KERNEL, ns, slash + 1, &rec);
	if (rc < 0)
		fprintf(stderr, "khub admin: --repo %s: %s\n", arg, rc == KHUB_ENOTFOUND ? "no such kernel repo"
										 : khub_strerror(rc));
	return rc < 0 ? -1 : 0;
}

/* --org ORG: an existing org or user (its namespace). */
static int scope_org_valid(const char *arg)
{
	struct account acct;
	int rc = db_account_get(arg, &acct);
	if (rc < 0)
		fprintf(stderr, "khub admin: --org %s: %s\n", arg, rc == KHUB_ENOTFOUND ? "no such org or user"
										: khub_strerror(rc));
	return rc < 0 ? -1 : 0;
}

/* The scope given by argv[from..argc): 0, or -1 having said why. */
static int scope_parse(int argc, char **argv, int from, struct worker_scope *scope)
{
	for (int i = from; i < argc; i++) {
		int is_org = strcmp(argv[i], "--org") == 0, is_repo = strcmp(argv[i], "--repo") == 0;
		if (strcmp(argv[i], "--private") == 0) {
			scope->private_repos = 1;
		} else if ((is_org || is_repo) && i + 1 < argc) {
			const char *arg = argv[++i];
			if (is_org ? scope_org_valid(arg) < 0 : scope_repo_valid(arg) < 0)
				return -1;
			strvec_pushf(is_org ? &scope->orgs : &scope->repos, "%s", arg);
		} else {
			fprintf(stderr, "khub admin: unexpected %s\n%s", argv[i], worker_usage);
			return -1;
		}
	}
	return 0;
}

/* The scope as one line of text (list, messages); the caller frees it. */
static char *scope_text(const struct worker_scope *scope)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, scope->private_repos ? "public and private repos" : "public repos only");
	if (scope->orgs.count + scope->repos.count == 0)
		strbuf_adds(&sb, ", every namespace");
	const char *sep = " of ";
	for (size_t i = 0; i < scope->orgs.count; i++, sep = ", ")
		strbuf_addf(&sb, "%s%s/*", sep, scope->orgs.items[i]);
	for (size_t i = 0; i < scope->repos.count; i++, sep = ", ")
		strbuf_addf(&sb, "%s%s", sep, scope->repos.items[i]);
	return strbuf_detach(&sb, NULL);
}

static int worker_add(const char *name, int argc, char **argv)
{
	struct worker_scope scope = WORKER_SCOPE_INIT;
	char *token = NULL, *text = NULL;
	const char *why;
	int64_t id;
	int ret = 1;
	if (scope_parse(argc, argv, 4, &scope) < 0) {
		ret = 2;
		goto cleanup;
	}
	int rc = accounts_worker_add(&cli, name, &scope, &token, &id, &why);
	if (worker_changed("add", name, rc, why) < 0)
		goto cleanup;
	text = scope_text(&scope);
	printf("%s\n", token);
	fprintf(stderr, "worker %s (id %" PRId64 ") may build %s: keep the token above, it is shown once\n", name, id,
		text);
	ret = 0;
cleanup:
	free(token);
	free(text);
	strvec_release(&scope.orgs);
	strvec_release(&scope.repos);
	return ret;
}

static int worker_scope(const char *name, int argc, char **argv)
{
	struct worker_scope scope = WORKER_SCOPE_INIT;
	char *text = NULL;
	const char *why;
	int ret = 1, taken_back = 0;
	if (scope_parse(argc, argv, 4, &scope) < 0) {
		ret = 2;
		goto cleanup;
	}
	int rc = accounts_worker_scope(&cli, name, &scope, &taken_back, &why);
	if (worker_changed("scope", name, rc, why) < 0)
		goto cleanup;
	say_taken_back(taken_back);
	text = scope_text(&scope);
	printf("worker %s may build %s\n", name, text);
	ret = 0;
cleanup:
	free(text);
	strvec_release(&scope.orgs);
	strvec_release(&scope.repos);
	return ret;
}

static int worker_rotate(const char *name, int argc, char **argv)
{
	(void)argc, (void)argv;
	char *token = NULL;
	const char *why;
	int rc = accounts_worker_rotate(&cli, name, &token, &why);
	if (worker_changed("rotate", name, rc, why) < 0)
		return 1;
	printf("%s\n", token);
	fprintf(stderr, "worker %s: new token above (shown once); the old one no longer works. Its jobs and history "
			"stay its own; restart the worker with the new token\n", name);
	free(token);
	return 0;
}

static int worker_remove(const char *name, int argc, char **argv)
{
	(void)argc, (void)argv;
	const char *why;
	int taken_back = 0;
	int rc = accounts_worker_remove(&cli, name, &taken_back, &why);
	if (worker_changed("remove", name, rc, why) < 0)
		return 1;
	say_taken_back(taken_back);
	printf("worker %s removed (its token no longer works)\n", name);
	return 0;
}

/* The scope of a db_worker_list row (the caller releases its lists). */
static void scope_from_row(const struct worker_row *w, struct worker_scope *scope)
{
	const char *json[2] = { w->scope_orgs, w->scope_repos };
	struct strvec *lists[2] = { &scope->orgs, &scope->repos };
	for (int l = 0; l < 2; l++) {
		json_t *arr = json_loads(json[l], 0, NULL), *v;
		size_t k;
		json_array_foreach(arr, k, v)
			strvec_pushf(lists[l], "%s", json_string_value(v));
		json_decref(arr);
	}
	scope->private_repos = w->scope_private;
}

static int worker_list(void)
{
	struct worker_row *rows;
	size_t n;
	if (db_worker_list(&rows, &n) < 0) {
		fprintf(stderr, "khub admin: worker list: %s\n", khub_strerror(KHUB_EDB));
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		const struct worker_row *w = &rows[i];
		struct worker_scope scope = WORKER_SCOPE_INIT;
		scope_from_row(w, &scope);
		char *text = scope_text(&scope);
		printf("%s\t%s…\tversion %s\tconcurrency %ld\tlast heartbeat %s\tscope %s\tvariants %s\tjobs %s\n",
		       w->name, w->token_prefix, w->version[0] ? w->version : "-", w->concurrency,
		       w->heartbeat ? w->heartbeat : "never", text, w->variants, w->jobs);
		free(text);
		strvec_release(&scope.orgs);
		strvec_release(&scope.repos);
	}
	worker_rows_release(rows, n);
	return 0;
}

static const struct {
	const char *verb;
	int (*run)(const char *name, int argc, char **argv);
} worker_verbs[] = {
	{ "add", worker_add },
	{ "scope", worker_scope },
	{ "rotate", worker_rotate },
	{ "remove", worker_remove },
};

int admin_worker(int argc, char **argv)
{
	const char *verb = argc >= 3 ? argv[2] : "";
	if (strcmp(verb, "list") == 0)
		return worker_list();
	for (size_t i = 0; argc >= 4 && i < sizeof(worker_verbs) / sizeof(worker_verbs[0]); i++) {
		if (strcmp(verb, worker_verbs[i].verb) != 0)
			continue;
		const char *name = argv[3], *why;
		if (repo_name_validate(name, &why) < 0) {
			fprintf(stderr, "khub admin: invalid worker name '%s': %s\n", name, why);
			return 2;
		}
		return worker_verbs[i].run(name, argc, argv);
	}
	fprintf(stderr, "%s", worker_usage);
	return 2;
}
