/* trusted_publishers.c -- the admin API for trusted kernel publishers: a
 * public list, and set/unset for site admins (through accounts/). The org and user
 * overviews read the same flag, so a change shows there at once. */
#include "api/api.h"

#include <stdlib.h>
#include <string.h>

static enum MHD_Result handle_list(struct request *req)
{
	struct trusted_publisher_list tp;
	if (db_trusted_publisher_list(&tp) < 0)
		return respond_db_unavailable(req);
	json_t *list = json_array();
	for (size_t i = 0; i < tp.count; i++) {
		const struct trusted_publisher *t = &tp.items[i];
		json_t *item = json_pack("{s:s, s:s}", "name", t->name, "type", t->kind == ACCOUNT_ORG ? "org" : "user");
		if (t->since) {
			char since[32];
			format_iso8601(t->since, since);
			json_object_set_new(item, "trustedSince", json_string(since));
			json_object_set_new(item, "changedBy", json_string(t->changed_by ? t->changed_by : ""));
		} else {
			json_object_set_new(item, "trustedSince", json_null());
			json_object_set_new(item, "changedBy", json_null());
		}
		json_array_append_new(list, item);
	}
	trusted_publisher_list_release(&tp);
	return respond_json(req, 200, list);
}

/* PUT sets the flag, DELETE clears it (accounts_trust_set: audited). */
static enum MHD_Result handle_change(struct request *req)
{
	/* A site admin (ACCESS_SITE_ADMIN), and more than the route's write
	 * scope: trust is granted with an admin-scoped token only. */
	int trusted = req->method == METHOD_PUT, changed = 0;
	struct account acct;
	struct accounts_actor who = api_actor(req);
	const char *why;
	int rc = accounts_trust_set(&who, req->org, trusted, &acct, &changed, &why);
	if (rc == KHUB_EPERM)
		return respond_error(req, 403, NULL, "%s", why);
	if (rc == KHUB_ENOTFOUND)
		return respond_error(req, 404, NULL, "no user or organization named %s", req->org);
	if (rc < 0)
		return respond_db_unavailable(req);
	return respond_json(req, 200, json_pack("{s:s, s:s, s:b, s:b}", "name", acct.name, "type",
						acct.kind == ACCOUNT_ORG ? "org" : "user",
						"trustedKernelPublisher", acct.trusted_kernel_publisher,
						"changed", changed));
}

/* The list is public; a change needs a site admin's admin-scoped token
 * (more than ACCESS_SITE_ADMIN's write scope, checked by the handler). */
const struct route trusted_publishers_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/admin/trusted-publishers", handle_list, 0, 0, NULL, ACCESS_PUBLIC },
	{ METHOD_PUT | METHOD_DELETE, "/api/admin/trusted-publishers/{org}", handle_change, ROUTE_HANDLER_ACCESS, 0,
	  NULL, ACCESS_SITE_ADMIN },
	{ 0, NULL, NULL, 0, 0 },
};
