/* cmd_admin.c -- khub admin: orgs, users, memberships, tokens and trusted
 * kernel publishers from the command line, through accounts/ (which
 * audits every change). */
#include "server/server.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char cmd_admin_usage[] =
	"usage:\n"
	"  khub admin org create NAME [--fullname F]\n"
	"  khub admin user create NAME [--fullname F] [--site-admin]\n"
	"  khub admin member set ORG USER read|write|admin|none\n"
	"  khub admin token create USER [--token-name N] [--scope read|write|admin] [--expires-in-days D]\n"
	"  khub admin token revoke TOKEN_ID\n"
	"  khub admin token list USER\n"
	"  khub admin trust set|unset ORG\n"
	"  khub admin trust list\n"
	"  khub admin worker add NAME [--org ORG]... [--repo NS/NAME]... [--private]\n"
	"  khub admin worker scope NAME [--org ORG]... [--repo NS/NAME]... [--private]\n"
	"  khub admin worker rotate|remove NAME\n"
	"  khub admin worker list\n"
	"  khub admin repo settings NS/NAME [--type kernel|model|dataset|space] [KEY=VALUE]...\n";

/* The value after flag in argv, or NULL. */
static const char *option(int argc, char **argv, const char *flag)
{
	for (int i = 0; i < argc - 1; i++)
		if (strcmp(argv[i], flag) == 0)
			return argv[i + 1];
	return NULL;
}

static int has_flag(int argc, char **argv, const char *flag)
{
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], flag) == 0)
			return 1;
	return 0;
}

static const struct accounts_actor cli = ACCOUNTS_CLI;

/* 0, or 1 having said why the accounts/ call failed. */
static int report(int rc, const char *what, const char *why)
{
	if (rc == 0)
		return 0;
	fprintf(stderr, "khub admin: %s: %s\n", what, why ? why : khub_strerror(rc));
	return 1;
}

static int account_create(enum account_kind kind, int argc, char **argv)
{
	if (argc < 4)
		return fprintf(stderr, "%s", cmd_admin_usage), 2;
	const char *name = argv[3], *why;
	const char *fullname = option(argc, argv, "--fullname");
	int site_admin = kind == ACCOUNT_USER && has_flag(argc, argv, "--site-admin");
	int64_t id;
	int rc = accounts_create(&cli, kind, name, fullname, site_admin, &id, &why);
	if (rc == KHUB_EINVAL) {
		fprintf(stderr, "khub admin: invalid name '%s': %s\n", name, why);
		return 2;
	}
	if (rc == KHUB_EEXIST) {
		fprintf(stderr, "khub admin: the name %s is taken\n", name);
		return 1;
	}
	if (report(rc, "create", why))
		return 1;
	printf("%s %s created (id %" PRId64 ")\n", kind == ACCOUNT_ORG ? "org" : "user", name, id);
	return 0;
}

static int member_set(int argc, char **argv)
{
	if (argc < 6)
		return fprintf(stderr, "%s", cmd_admin_usage), 2;
	enum role role = ROLE_NONE;
	const char *why;
	if (accounts_member_role_parse(argv[5], &role) < 0)
		return fprintf(stderr, "khub admin: role must be read, write, admin or none\n"), 2;
	int rc = accounts_member_set(&cli, argv[3], argv[4], role, &why);
	if (report(rc, "member set", why))
		return 1;
	printf("%s is now %s in %s\n", argv[4], argv[5], argv[3]);
	return 0;
}

static int token_create(int argc, char **argv)
{
	if (argc < 4)
		return fprintf(stderr, "%s", cmd_admin_usage), 2;
	enum role scope = ROLE_WRITE;
	const char *scope_arg = option(argc, argv, "--scope"), *why;
	if (scope_arg && role_parse(scope_arg, &scope) < 0)
		return fprintf(stderr, "khub admin: scope must be read, write or admin\n"), 2;
	const char *days = option(argc, argv, "--expires-in-days");
	time_t expires = 0;
	if (days) {
		char *end;
		double d = strtod(days, &end);
		if (*end || end == days || !(d > 0) || d > 36500)
			return fprintf(stderr, "khub admin: --expires-in-days must be a positive number of days\n"), 2;
		double seconds = d * 86400;
		expires = time(NULL) + (time_t)(seconds < 1 ? 1 : seconds);
	}
	char *token = NULL;
	int64_t id;
	int rc = accounts_token_create(&cli, argv[3], option(argc, argv, "--token-name"), scope, expires, &token, &id,
				       &why);
	if (report(rc, "token create", why))
		return 1;
	printf("%s\n", token);
	fprintf(stderr, "token id %" PRId64 " for %s (scope %s)\n", id, argv[3], role_name(scope));
	free(token);
	return 0;
}

static int token_revoke(int argc, char **argv)
{
	if (argc < 4)
		return fprintf(stderr, "%s", cmd_admin_usage), 2;
	const char *why;
	int rc = accounts_token_revoke(&cli, strtoll(argv[3], NULL, 10), NULL, &why);
	if (report(rc, "token revoke", why))
		return 1;
	printf("token %s revoked\n", argv[3]);
	return 0;
}

static int token_list(int argc, char **argv)
{
	if (argc < 4)
		return fprintf(stderr, "%s", cmd_admin_usage), 2;
	struct token_list tokens;
	if (db_token_list(argv[3], &tokens) < 0)
		return 1;
	for (size_t i = 0; i < tokens.count; i++) {
		const struct token_info *t = &tokens.items[i];
		char created[32], expires[32] = "never";
		format_iso8601(t->created_at, created);
		if (t->expires_at)
			format_iso8601(t->expires_at, expires);
		printf("%" PRId64 "\t%s…\t%s\t%s\tcreated %s\texpires %s\t%s\n", t->id, t->prefix, t->name,
		       role_name(t->scope), created, expires, t->revoked ? "revoked" : t->expired ? "expired" : "active");
	}
	token_list_release(&tokens);
	return 0;
}

static int trust(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[2], "list") == 0) {
		struct trusted_publisher_list tp;
		int rc = db_trusted_publisher_list(&tp);
		for (size_t i = 0; i < tp.count; i++)
			printf("%s\t%s\n", tp.items[i].name, tp.items[i].kind == ACCOUNT_ORG ? "org" : "user");
		trusted_publisher_list_release(&tp);
		return rc < 0 ? 1 : 0;
	}
	if (argc < 4 || (strcmp(argv[2], "set") != 0 && strcmp(argv[2], "unset") != 0))
		return fprintf(stderr, "%s", cmd_admin_usage), 2;
	int trusted = strcmp(argv[2], "set") == 0;
	struct account acct;
	const char *why;
	int rc = accounts_trust_set(&cli, argv[3], trusted, &acct, NULL, &why);
	if (report(rc, argv[3], why))
		return 1;
	printf("%s is %s a trusted kernel publisher\n", acct.name, trusted ? "now" : "no longer");
	return 0;
}

/* KEY=VALUE arguments (after argv[3], --type T skipped) as the API's JSON
 * body, each value by its row's type: 0, or 2 having said which is not a
 * setting. */
static int settings_body(int argc, char **argv, json_t *doc)
{
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--type") == 0) {
			i++;
			continue;
		}
		char *eq = strchr(argv[i], '=');
		char *key = eq ? xstrndup(argv[i], (size_t)(eq - argv[i])) : NULL;
		int id = key ? repo_setting_find(key) : -1;
		free(key);
		if (id < 0) {
			fprintf(stderr, "khub admin: %s: not KEY=VALUE of a repo setting\n", argv[i]);
			return 2;
		}
		json_object_set_new(doc, repo_settings_table[id].key, accounts_repo_setting_from_text(id, eq + 1));
	}
	return 0;
}

/* khub admin repo settings NS/NAME [--type T] [KEY=VALUE]...: change the
 * given settings through their owner (as the API and the web UI do), then
 * print every setting as JSON. */
static int repo_settings(int argc, char **argv)
{
	const char *type_text = option(argc, argv, "--type"), *slash, *why;
	enum repo_type type = REPO_KERNEL;
	struct repo_settings_change change;
	struct repo_settings after;
	struct repo_record rec;
	if (argc < 4 || strcmp(argv[2], "settings") != 0 || !(slash = strchr(argv[3], '/')) ||
	    (type_text && repo_type_parse(type_text, &type) < 0))
		return fprintf(stderr, "%s", cmd_admin_usage), 2;
	char *ns = xstrndup(argv[3], (size_t)(slash - argv[3]));
	int rc = db_repo_get(type, ns, slash + 1, &rec);
	free(ns);
	if (report(rc, argv[3], rc == KHUB_ENOTFOUND ? "no such repo" : NULL))
		return 1;
	json_t *doc = json_object();
	rc = settings_body(argc, argv, doc);
	if (rc == 0 && (report(accounts_repo_settings_from_json(doc, &change, &why), argv[3], why) ||
			report(accounts_repo_settings_set(&cli, &rec, ROLE_ADMIN, &change, &after, &why), argv[3], why)))
		rc = 1;
	json_decref(doc);
	if (rc)
		return rc;
	json_t *out = accounts_repo_settings_json(&after, 0);
	char *text = json_dumps(out, JSON_COMPACT);
	printf("%s\n", text);
	free(text);
	json_decref(out);
	return 0;
}

int cmd_admin(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "%s", cmd_admin_usage);
		return argc >= 2 && strcmp(argv[1], "help") == 0 ? 0 : 2;
	}
	const char *what = argv[1], *verb = argv[2];
	int rc;
	runtime_open_database();
	if (strcmp(what, "org") == 0 && strcmp(verb, "create") == 0)
		rc = account_create(ACCOUNT_ORG, argc, argv);
	else if (strcmp(what, "user") == 0 && strcmp(verb, "create") == 0)
		rc = account_create(ACCOUNT_USER, argc, argv);
	else if (strcmp(what, "member") == 0 && strcmp(verb, "set") == 0)
		rc = member_set(argc, argv);
	else if (strcmp(what, "token") == 0 && strcmp(verb, "create") == 0)
		rc = token_create(argc, argv);
	else if (strcmp(what, "token") == 0 && strcmp(verb, "revoke") == 0)
		rc = token_revoke(argc, argv);
	else if (strcmp(what, "token") == 0 && strcmp(verb, "list") == 0)
		rc = token_list(argc, argv);
	else if (strcmp(what, "trust") == 0)
		rc = trust(argc, argv);
	else if (strcmp(what, "worker") == 0)
		rc = admin_worker(argc, argv);
	else if (strcmp(what, "repo") == 0)
		rc = repo_settings(argc, argv);
	else {
		fprintf(stderr, "%s", cmd_admin_usage);
		rc = 2;
	}
	runtime_close_database();
	return rc;
}
