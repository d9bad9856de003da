/* test_routes.c -- the route tables as data: every row says who may call it
 * (a valid access value, with the token scope it implies), and every route
 * is documented in api/openapi.json under its path and method. */
#include "server/server.h"
#include "tap.h"

#include <stdlib.h>

/* "/api/{type}/x/{path*}" against "/api/{type}/x/{path}": literal segments
 * equal, each {param} of the route a {param} of the document ({gname} is a
 * {name}, {arg} any name, {path*} a trailing {path}). */
static int same_path(const char *pattern, const char *doc)
{
	char a[256], b[256];
	snprintf(a, sizeof(a), "%s", pattern);
	snprintf(b, sizeof(b), "%s", doc);
	char *sa = NULL, *sb = NULL;
	char *x = strtok_r(a, "/", &sa), *y = strtok_r(b, "/", &sb);
	for (; x && y; x = strtok_r(NULL, "/", &sa), y = strtok_r(NULL, "/", &sb)) {
		if ((x[0] == '{') != (y[0] == '{'))
			return 0;
		if (x[0] != '{' && strcmp(x, y) != 0)
			return 0;
		if (x[0] == '{' && strcmp(x, "{arg}") != 0) {
			const char *want = strcmp(x, "{gname}") == 0 ? "{name}"
					 : strcmp(x, "{path*}") == 0 ? "{path}" : x;
			if (strcmp(want, y) != 0)
				return 0;
		}
	}
	return !x && !y;
}

static const struct {
	enum http_method method;
	const char *key;
} method_keys[] = {
	{ METHOD_GET, "get" }, { METHOD_POST, "post" }, { METHOD_PUT, "put" }, { METHOD_DELETE, "delete" },
};

/* Routes that change something need a write token, unless who may call
 * them is decided elsewhere (signed URLs, git) or they only read. */
static int writes_need_write_token(const struct route *r)
{
	if (!(r->methods & (METHOD_POST | METHOD_PUT | METHOD_DELETE)))
		return 1;
	if (r->access == ACCESS_PUBLIC || r->access == ACCESS_REPO_READ || r->access == ACCESS_GIT ||
	    r->access == ACCESS_SIGNED_URL || r->access == ACCESS_WORKER)	/* workers: a scope of their own */
		return 1;
	return access_min_scope(r->access) >= ROLE_WRITE;
}

int main(void)
{
	ok(router_row_without_access() == NULL, "every route row has an access value");
	size_t rows = 0, admin = 0;
	for (size_t t = 0; router_tables[t]; t++) {
		for (const struct route *r = router_tables[t]; r->pattern; r++) {
			rows++;
			ok(access_name(r->access) != NULL, "%s has an access value (%s)", r->pattern,
			   access_name(r->access) ? access_name(r->access) : "none");
			if (strncmp(r->pattern, "/api/admin/", 11) == 0 && r->access == ACCESS_SITE_ADMIN)
				admin++;
			ok(writes_need_write_token(r), "%s: a %s route that writes needs a write token", r->pattern,
			   access_name(r->access));
			if (r->access >= ACCESS_REPO_READ && r->access <= ACCESS_REPO_MANAGE)
				ok(strstr(r->pattern, "{ns}") && strstr(r->pattern, "{name}"),
				   "%s: repo-level access on a pattern naming a repo", r->pattern);
			if (r->access == ACCESS_SIGNED_URL)
				ok(r->flags & ROUTE_NO_AUTH, "%s: signed URLs do not read Authorization", r->pattern);
		}
	}
	ok(rows >= 50, "%zu route rows", rows);
	ok(admin >= 4, "the mirror and trusted-publisher admin routes need a site admin (%zu)", admin);
	static const enum route_access writes[] = {
		ACCESS_SITE_ADMIN, ACCESS_REPO_WRITE, ACCESS_REPO_MANAGE, ACCESS_NAMESPACE_CREATE, ACCESS_NAMESPACE_WRITE,
		ACCESS_REPO_CONTRIBUTE,
	};
	for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++)
		ok(access_min_scope(writes[i]) == ROLE_WRITE, "%s access needs a write token", access_name(writes[i]));
	ok(access_min_scope(ACCESS_REPO_READ) == ROLE_READ, "repo-read access takes any token");
	ok(access_name(ACCESS_UNSET) == NULL && access_name(ACCESS_COUNT) == NULL, "no name for no value");

	json_error_t err;
	json_t *doc = json_loadb(embedded_openapi_json, embedded_openapi_json_len, 0, &err);
	json_t *paths = json_object_get(doc, "paths");
	ok(json_is_object(paths), "api/openapi.json parses and has paths");
	for (size_t t = 0; router_tables[t]; t++) {
		for (const struct route *r = router_tables[t]; r->pattern; r++) {
			const char *key;
			json_t *item, *found = NULL;
			json_object_foreach(paths, key, item)
				if (same_path(r->pattern, key))
					found = item;
			ok(found != NULL, "openapi.json documents %s", r->pattern);
			for (size_t m = 0; found && m < sizeof(method_keys) / sizeof(method_keys[0]); m++)
				if (r->methods & method_keys[m].method)
					ok(json_object_get(found, method_keys[m].key) != NULL, "openapi.json documents %s %s",
					   method_keys[m].key, r->pattern);
		}
	}
	json_decref(doc);
	return done_testing();
}
