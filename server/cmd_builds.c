/* cmd_builds.c -- khub builds states [--json]: the build job's state
 * machine (farm/build_states.c) printed from its table, as khub routes
 * prints the route tables, so tests and docs are built from the table
 * itself (t0238 drives every route it names); khub builds campaign: fleet
 * rebuilds (farm/build_campaign.c), started and shown. */
#include "server/server.h"
#include "farm/farm.h"

#include <stdlib.h>
#include <string.h>

static void print_joined(json_t *array, const char *sep)
{
	size_t i;
	json_t *v;
	json_array_foreach(array, i, v)
		printf("%s%s", i ? sep : "", json_string_value(v));
}

static void print_table(json_t *doc)
{
	size_t i;
	json_t *row;
	printf("%-10s %-10s %-10s %-14s %s\n", "FROM", "EVENT", "TO", "WHO", "ROUTES / WHEN");
	json_array_foreach(json_object_get(doc, "transitions"), i, row) {
		printf("%-10s %-10s %-10s ", json_string_value(json_object_get(row, "from")),
		       json_string_value(json_object_get(row, "event")), json_string_value(json_object_get(row, "to")));
		struct strbuf who = STRBUF_INIT;
		size_t k;
		json_t *a;
		json_array_foreach(json_object_get(row, "actors"), k, a)
			strbuf_addf(&who, "%s%s", k ? "," : "", json_string_value(a));
		printf("%-14s ", who.buf);
		strbuf_release(&who);
		json_t *routes = json_object_get(row, "routes");
		print_joined(routes, ", ");
		printf("%s%s\n", json_array_size(routes) ? "\n                                              when: "
			       : "when: ", json_string_value(json_object_get(row, "guard")));
	}
}

const char cmd_builds_usage[] = "usage: khub builds states [--json]\n"
	"       khub builds campaign start --variant VARIANT | --toolchain NAME\n"
	"       khub builds campaign list | show ID\n";

/* Start a campaign per variant, each kernel planned here (no planner runs
 * in this process). */
static int campaign_start(const char *flag, const char *value)
{
	char **names = NULL, why[300];
	size_t n = 0;
	int rc = 0;
	if (strcmp(flag, "--variant") == 0) {
		names = xcalloc(2, sizeof(char *));
		names[n++] = xstrdup(value);
	} else if (build_toolchain_variants(value, &names, &n) < 0 || n == 0) {
		fprintf(stderr, "khub: no worker registered a toolchain named %s\n", value);
		rc = 1;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		int64_t id;
		if (build_campaign_start(names[i], "admin", "cli", &id, why, sizeof(why)) < 0) {
			fprintf(stderr, "khub: %s\n", why[0] ? why : "the database is unavailable");
			rc = 1;
		} else {
			printf("campaign %lld: %s\n", (long long)id, names[i]);
		}
	}
	build_names_free(names, n);
	return rc;
}

/* khub builds campaign list | show ID: the counts, and a campaign's kernels. */
static int campaign_show(int64_t id)
{
	struct db_campaign *c = NULL;
	size_t n = 0;
	if (db_campaign_list(id, 100, &c, &n) < 0) {
		fprintf(stderr, "khub: the database is unavailable\n");
		return 1;
	}
	printf("%-6s %-40s %6s %6s %6s %7s %7s %s\n", "ID", "VARIANT", "KERNELS", "BUILT", "FAILED", "WAITING",
	       "SKIPPED", "MERGED");
	for (size_t i = 0; i < n; i++)
		printf("%-6lld %-40s %7ld %6ld %6ld %7ld %7ld %ld\n", (long long)c[i].id, c[i].variant, c[i].kernels,
		       c[i].built, c[i].failed, c[i].waiting, c[i].skipped, c[i].merged);
	db_campaigns_free(c, n);
	json_t *kernels = id > 0 ? build_campaign_kernels_json(id) : NULL;
	if (kernels) {
		char *text = json_dumps(kernels, JSON_INDENT(1));
		printf("%s\n", text);
		free(text);
	}
	json_decref(kernels);
	return 0;
}

static int cmd_campaign(int argc, char **argv)
{
	int rc = 2;
	runtime_open_database();
	config_apply_all();	/* farm_settings */
	if (!farm_settings.repo_root)
		farm_settings.repo_root = runtime_repo_root();
	if (argc == 5 && strcmp(argv[2], "start") == 0 &&
	    (strcmp(argv[3], "--variant") == 0 || strcmp(argv[3], "--toolchain") == 0))
		rc = campaign_start(argv[3], argv[4]);
	else if (argc == 3 && strcmp(argv[2], "list") == 0)
		rc = campaign_show(0);
	else if (argc == 4 && strcmp(argv[2], "show") == 0 && atoll(argv[3]) > 0)
		rc = campaign_show(atoll(argv[3]));
	else
		fputs(cmd_builds_usage, stderr);
	runtime_close_database();
	return rc;
}

int cmd_builds(int argc, char **argv)
{
	int as_json = 0;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(cmd_builds_usage, stdout);
			return 0;
		}
	if (argc >= 2 && strcmp(argv[1], "campaign") == 0)
		return cmd_campaign(argc, argv);
	if (argc < 2 || strcmp(argv[1], "states") != 0)
		goto usage;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") != 0)
			goto usage;
		as_json = 1;
	}
	json_t *doc = build_states_json();
	if (as_json) {
		char *text = json_dumps(doc, JSON_INDENT(1));
		printf("%s\n", text);
		free(text);
	} else {
		print_table(doc);
	}
	json_decref(doc);
	return 0;
usage:
	fputs(cmd_builds_usage, stderr);
	return 2;
}
