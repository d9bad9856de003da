/* orgs.c -- org and user overviews (with trustedKernelPublisher), org
 * members' roles (through accounts/), whoami, the agent-harness list, and
 * the health probes (readiness, liveness). */
#include "api/api.h"

#include <inttypes.h>
#include <string.h>

static enum MHD_Result handle_agent_harnesses(struct request *req)
{
	/* A 200 is cached by huggingface_hub for 24 h; a 404 would be asked
	 * again by every process. */
	static const char body[] = "{\"standardEnvVars\":[],\"harnesses\":{}}";
	return respond_json_text(req, 200, body, sizeof(body) - 1);
}

/* Readiness, for load balancers (docs/operations.md, "Health"): 200
 * {"status":"ok","database":"ok"} while this node can serve reads, which it
 * can with the database down (git and the caches answer; writes answer 503
 * with Retry-After), so that a database outage does not take every node
 * out at once: then 200 {"status":"degraded","database":"down: why"} (what
 * the embedded cluster's watchdog knows, else the connection's error). 503
 * {"status":"draining"} only while the node drains. */
static enum MHD_Result handle_health(struct request *req)
{
	if (__atomic_load_n(&http_ctx.draining, __ATOMIC_RELAXED)) {
		static const char body[] = "{\"status\":\"draining\",\"error\":\"this node is draining\"}";
		return respond_json_text(req, 503, body, sizeof(body) - 1);
	}
	if (db_ping() == 0) {
		static const char body[] = "{\"status\":\"ok\",\"database\":\"ok\"}";
		return respond_json_text(req, 200, body, sizeof(body) - 1);
	}
	char why[256], since_text[32] = "";
	if (!db_embedded_problem(why, sizeof(why)))
		snprintf(why, sizeof(why), "%s", db_last_error());
	time_t since = 0;
	int down = db_is_down(&since);
	if (down)
		format_iso8601(since, since_text);
	char *database = xasprintf("%s: %s", down ? "down" : "error", why);
	json_t *body = json_pack("{s:s, s:s, s:s, s:s}", "status", "degraded", "database", database, "database_down_since",
				 since_text, "serving", "reads; writes answer 503 until the database is back");
	free(database);
	log_debug("health: database %s", why);
	return respond_json(req, 200, body);
}

/* Liveness: the process answers requests (whatever the database does, and
 * while draining); restart the node when this fails, not when health does. */
static enum MHD_Result handle_health_live(struct request *req)
{
	static const char body[] = "{\"status\":\"alive\"}";
	return respond_json_text(req, 200, body, sizeof(body) - 1);
}

static json_int_t count_repos(int64_t owner_id, enum repo_type type, int include_private)
{
	int64_t n = 0;
	db_repo_count_owned(owner_id, type, include_private, &n);
	return (json_int_t)n;
}

static enum MHD_Result handle_overview(struct request *req)
{
	struct account acct;
	int rc = db_account_get(req->org, &acct);
	if (rc == KHUB_EDB)
		return respond_db_unavailable(req);
	int wants_org = strcmp(req->segv[1], "organizations") == 0;
	if (rc < 0 || (wants_org && acct.kind != ACCOUNT_ORG) || (!wants_org && acct.kind != ACCOUNT_USER))
		return respond_error(req, 404, NULL, "%s %s not found", wants_org ? "Organization" : "User",
				     req->org);
	enum role role = ROLE_NONE;
	if (req->principal.user_id && acct.kind == ACCOUNT_ORG &&
	    db_membership_role(acct.id, req->principal.user_id, &role) < 0)
		return respond_db_unavailable(req);
	int member = req->principal.user_id &&
		     (req->principal.user_id == acct.id || req->principal.is_site_admin || role >= ROLE_READ);
	char created[32];
	format_iso8601(acct.created_at, created);
	json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I, s:s}",
				 "_id", "", "name", acct.name, "fullname", acct.fullname[0] ? acct.fullname : acct.name,
				 "avatarUrl", "", "isVerified", 0, "isFollowing", 0,
				 "numModels", count_repos(acct.id, REPO_MODEL, member),
				 "numDatasets", count_repos(acct.id, REPO_DATASET, member),
				 "numSpaces", count_repos(acct.id, REPO_SPACE, member),
				 "numKernels", count_repos(acct.id, REPO_KERNEL, member),
				 "createdAt", created);
	char id[24];
	snprintf(id, sizeof(id), "%" PRId64, acct.id);
	json_object_set_new(body, "_id", json_string(id));
	json_object_set_new(body, "type", json_string(acct.kind == ACCOUNT_ORG ? "org" : "user"));
	json_object_set_new(body, "trustedKernelPublisher", json_boolean(acct.trusted_kernel_publisher));
	if (acct.kind == ACCOUNT_ORG) {
		int64_t members = 0;
		db_org_member_count(acct.id, &members);
		json_object_set_new(body, "numUsers", json_integer((json_int_t)members));
	}
	return respond_json(req, 200, body);
}

static enum MHD_Result handle_whoami(struct request *req)
{
	/* signed in (ACCESS_SIGNED_IN) */
	char uid[24], created[32];
	snprintf(uid, sizeof(uid), "%" PRId64, req->principal.user_id);
	format_iso8601(req->principal.token_created_at, created);
	json_t *orgs = json_array();
	struct org_membership_list mine;
	if (db_user_orgs(req->principal.user_id, &mine) < 0) {
		json_decref(orgs);
		return respond_db_unavailable(req);
	}
	for (size_t i = 0; i < mine.count; i++) {
		char oid[24];
		snprintf(oid, sizeof(oid), "%" PRId64, mine.items[i].org_id);
		json_array_append_new(orgs, json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:n}",
						      "type", "org", "id", oid, "name", mine.items[i].name,
						      "fullname", mine.items[i].fullname,
						      "roleInOrg", role_name(mine.items[i].role), "canPay", 0,
						      "avatarUrl", "", "periodEnd"));
	}
	org_membership_list_release(&mine);
	json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:n, s:s, s:o, s:{s:s, s:{s:s, s:s, s:s}}}",
				 "type", "user", "id", uid, "name", req->principal.name,
				 "fullname", req->principal.name, "emailVerified", 0, "canPay", 0, "isPro", 0,
				 "periodEnd", "avatarUrl", "", "orgs", orgs,
				 "auth", "type", "access_token", "accessToken",
				 "displayName", req->principal.token_name, "role", role_name(req->principal.scope),
				 "createdAt", created);
	json_object_set_new(body, "isSiteAdmin", json_boolean(req->principal.is_site_admin));
	return respond_json(req, 200, body);
}

/* PUT {"role": "read"|"write"|"admin"|"none"}: an org admin (or a site
 * admin) sets a member's role through accounts_member_set (audited
 * org.member.set); "none" takes the user out. The org keeps an admin: 409. */
static enum MHD_Result handle_member_set(struct request *req)
{
	/* a write token (ACCESS_NAMESPACE_CREATE); accounts/ decides who may */
	const char *role_text = json_string_value(json_object_get(req->json, "role")), *why;
	enum role role = ROLE_NONE;
	if (accounts_member_role_parse(role_text, &role) < 0)
		return respond_error(req, 400, NULL, "role must be read, write, admin or none");
	struct accounts_actor who = api_actor(req);
	int rc = accounts_member_set(&who, req->org, req->args[0], role, &why);
	switch (rc) {
	case 0:
		return respond_json(req, 200, json_pack("{s:s, s:s, s:s}", "org", req->org, "user", req->args[0],
							"role", role_name(role)));
	case KHUB_EINVAL:
		return respond_error(req, 400, NULL, "%s", why);
	case KHUB_EPERM:
		return respond_error(req, 403, NULL, "%s", why);
	case KHUB_ENOTFOUND:
		return respond_error(req, 404, NULL, "%s", why);
	case KHUB_ECONFLICT:
		return respond_error(req, 409, NULL, "%s", why);
	default:
		return respond_db_unavailable(req);
	}
}

const struct route orgs_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/agent-harnesses", handle_agent_harnesses, 0, 0, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/api/health", handle_health, ROUTE_NO_AUTH, 0, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/api/health/live", handle_health_live, ROUTE_NO_AUTH, 0, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/api/organizations/{org}/overview", handle_overview, 0, 0, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/api/users/{org}/overview", handle_overview, 0, 0, NULL, ACCESS_PUBLIC },
	{ METHOD_PUT, "/api/organizations/{org}/members/{arg}", handle_member_set, ROUTE_JSON, 0, NULL,
	  ACCESS_NAMESPACE_CREATE },
	{ METHOD_GET | METHOD_HEAD, "/api/whoami-v2", handle_whoami, 0, 0, NULL, ACCESS_SIGNED_IN },
	{ 0, NULL, NULL, 0, 0 },
};
