/* cmd_routes.c -- khub routes [--pages] [--json]: every row of every route
 * table with who may call it, so tests and docs are built from the tables
 * themselves (t0056 derives its permission matrix from this); --pages lists
 * the web UI's page table instead. */
#include "server/server.h"

#include <stdlib.h>
#include <string.h>

static const struct {
	enum http_method method;
	const char *name;
} method_names[] = {
	{ METHOD_GET, "GET" }, { METHOD_HEAD, "HEAD" }, { METHOD_POST, "POST" },
	{ METHOD_PUT, "PUT" }, { METHOD_DELETE, "DELETE" },
};

/* One object per row: methods, pattern, access, the token scope it needs,
 * whether the handler decides more per request (access_for), flags. The
 * caller owns the result. */
static json_t *route_json(const struct route *r)
{
	json_t *methods = json_array();
	for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]); i++)
		if (r->methods & method_names[i].method)
			json_array_append_new(methods, json_string(method_names[i].name));
	const char *access = access_name(r->access);
	int dynamic = r->access_for || (r->flags & ROUTE_HANDLER_ACCESS) || r->access == ACCESS_GIT;
	return json_pack("{s:o, s:s, s:s?, s:s, s:b, s:b, s:b, s:b}", "methods", methods, "pattern", r->pattern,
			 "access", access, "scope", role_name(access_min_scope(r->access)), "dynamic", dynamic,
			 "git", (r->flags & ROUTE_GIT) != 0, "noAuth", (r->flags & ROUTE_NO_AUTH) != 0,
			 "stream", r->stream != NULL);
}

const char cmd_routes_usage[] =
	"usage: khub routes [--pages] [--json]\n";

int cmd_routes(int argc, char **argv)
{
	int as_json = 0, pages = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			as_json = 1;
		else if (strcmp(argv[i], "--pages") == 0)
			pages = 1;
		else {
			fputs(cmd_routes_usage, stderr);
			return 2;
		}
	}
	const struct route *const *tables = pages ? router_page_tables : router_tables;
	json_t *all = json_array();
	for (size_t t = 0; tables[t]; t++)
		for (const struct route *r = tables[t]; r->pattern; r++)
			json_array_append_new(all, route_json(r));
	if (as_json) {
		char *text = json_dumps(all, JSON_INDENT(1));
		printf("%s\n", text);
		free(text);
	} else {
		size_t i;
		json_t *row;
		json_array_foreach(all, i, row) {
			struct strbuf m = STRBUF_INIT;
			size_t k;
			json_t *name;
			json_array_foreach(json_object_get(row, "methods"), k, name) {
				if (m.len)
					strbuf_adds(&m, ",");
				strbuf_adds(&m, json_string_value(name));
			}
			const char *access = json_string_value(json_object_get(row, "access"));
			int dynamic = json_is_true(json_object_get(row, "dynamic"));
			printf("%-12s %-60s %s%s\n", m.buf, json_string_value(json_object_get(row, "pattern")),
			       access ? access : "(none)", dynamic ? " (+handler)" : "");
			strbuf_release(&m);
		}
	}
	json_decref(all);
	/* A row without an access value is a bug: say so in the exit status. */
	return router_row_without_access() ? 1 : 0;
}
