/* repo_settings.c -- a repo's settings: PUT /api/{type}s/{ns}/{name}/settings
 * (visibility is kept; the Hub's other settings are checked and ignored). */
#include "api/api.h"

#include <stdlib.h>
#include <string.h>

/* "protected" hides the files, so it is private here; visibility wins when
 * both are given. */
int repo_visibility_from_body(json_t *doc, int *private_out, int *set)
{
	json_t *p = json_object_get(doc, "private");
	const char *vis;
	*set = 0;
	if (p && !json_is_null(p)) {
		if (!json_is_boolean(p))
			return -1;
		*private_out = json_is_true(p);
		*set = 1;
	}
	if (json_optional_string(doc, "visibility", &vis) < 0)
		return -1;
	if (vis) {
		if (strcmp(vis, "public") == 0)
			*private_out = 0;
		else if (strcmp(vis, "private") == 0 || strcmp(vis, "protected") == 0)
			*private_out = 1;
		else
			return -1;
		*set = 1;
	}
	return 0;
}

/* ---- PUT /api/{type}s/{ns}/{name}/settings ---------------------------------- */

/* Settings this server does not keep are checked for their type and then
 * ignored (gating, description, discussions, notification settings). */
static int settings_valid(json_t *doc)
{
	json_t *gated = json_object_get(doc, "gated");
	if (gated && !json_is_null(gated) && !json_is_false(gated) &&
	    !(json_is_string(gated) && (strcmp(json_string_value(gated), "auto") == 0 ||
					strcmp(json_string_value(gated), "manual") == 0)))
		return -1;
	json_t *dd = json_object_get(doc, "discussionsDisabled");
	if (dd && !json_is_null(dd) && !json_is_boolean(dd))
		return -1;
	const char *s;
	if (json_optional_string(doc, "description", &s) < 0 || json_optional_string(doc, "gatedNotificationsEmail", &s) < 0 ||
	    json_optional_string(doc, "gatedNotificationsMode", &s) < 0)
		return -1;
	return 0;
}

/* The settings this server keeps are storage's table of them, changed
 * through their one owner (accounts/: accounts_repo_settings_set), which
 * the web UI's settings form calls too. "visibility" is the Hub's other
 * name for "private": given, it becomes "private" before the table reads
 * the body. */
static enum MHD_Result handle_settings(struct request *req)
{
	struct repo_handle h = *req->repo;
	struct accounts_actor who = api_actor(req);
	struct repo_settings_change change;
	struct repo_settings after;
	json_t *doc = req->json;
	int private = 0, private_set;
	const char *why = NULL;

	if (repo_visibility_from_body(doc, &private, &private_set) < 0 || settings_valid(doc) < 0)
		return respond_error(req, 400, NULL, "%s", repo_settings_table[REPO_SETTING_PRIVATE].why);
	if (private_set)
		json_object_set_new(doc, repo_settings_table[REPO_SETTING_PRIVATE].key, json_boolean(private));
	if (accounts_repo_settings_from_json(doc, &change, &why) < 0)
		return respond_error(req, 400, NULL, "%s", why);
	int rc = accounts_repo_settings_set(&who, &h.record, h.role, &change, &after, &why);
	if (rc == KHUB_EDB)
		return respond_db_unavailable(req);
	if (rc == KHUB_ENOTFOUND)
		return respond_repo_not_found(req);
	if (rc < 0)
		return respond_error(req, rc == KHUB_EPERM ? 403 : 400, NULL, "%s", why);
	if (after.value[REPO_SETTING_PRIVATE] != h.record.private)
		repo_cache_invalidate();
	return respond_json(req, 200, accounts_repo_settings_json(&after, 1));
}

const struct route repo_settings_routes[] = {
	{ METHOD_PUT, "/api/{type}/{ns}/{name}/settings", handle_settings, ROUTE_JSON, 0, NULL, ACCESS_REPO_MANAGE },
	{ 0, NULL, NULL, 0, 0 },
};
