/* cmd_builds.c -- khub builds states [--json]: the build job's state
 * machine (farm/build_states.c) printed from its table, as khub routes
 * prints the route tables, so tests and docs are built from the table
 * itself (t0238 drives every route it names). */
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

const char cmd_builds_usage[] = "usage: khub builds states [--json]\n";

int cmd_builds(int argc, char **argv)
{
	int as_json = 0;
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
