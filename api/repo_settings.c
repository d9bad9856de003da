/* repo_settings.c -- a repo's settings: PUT /api/{type}s/{ns}/{name}/settings
 * (visibility is kept; the Hub's other settings are checked and ignored). */
#include "api/api.h"
#include "storage/db/db_builds.h"

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

/* The farm's settings this server keeps, checked before any is written (a
 * request with one bad value changes nothing): 0, or -1 with why. */
static int farm_settings_valid(json_t *doc, const char **why)
{
	json_t *cp = json_object_get(doc, "campaignPublish"), *bench = json_object_get(doc, "benchmarkAfterPublish");
	const char *s = json_string_value(cp);
	if (cp && !json_is_null(cp) && (!s || (strcmp(s, "pr") != 0 && strcmp(s, "direct") != 0))) {
		*why = "\"campaignPublish\" must be \"pr\" or \"direct\"";
		return -1;
	}
	if (bench && !json_is_null(bench) && !json_is_boolean(bench)) {
		*why = "\"benchmarkAfterPublish\" must be a boolean";
		return -1;
	}
	return 0;
}

/* "campaignPublish": "pr" or "direct" (docs/build-farm.md, "Fleet
 * rebuilds"), already checked: 0 (absent, or set and audited), -1 with the
 * answer queued. */
static int apply_campaign_publish(struct request *req, const struct repo_handle *h, enum MHD_Result *result)
{
	const char *s = json_string_value(json_object_get(req->json, "campaignPublish"));
	if (!s)		/* absent or null: farm_settings_valid checked the rest */
		return 0;
	if (db_repo_set_campaign_publish(h->record.id, strcmp(s, "direct") == 0) < 0) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	api_audit(req, "repo.settings", repo_audit_target(req, h->record.type, h->record.ns, h->record.name),
		  strcmp(s, "direct") == 0 ? "{\"campaignPublish\":\"direct\"}" : "{\"campaignPublish\":\"pr\"}");
	return 0;
}

/* "benchmarkAfterPublish": a boolean (docs/build-farm.md, "Benchmark
 * jobs"), already checked: 0 (absent, or set and audited), -1 with the
 * answer queued. */
static int apply_benchmark_after_publish(struct request *req, const struct repo_handle *h, enum MHD_Result *result)
{
	json_t *v = json_object_get(req->json, "benchmarkAfterPublish");
	if (!json_is_boolean(v))	/* absent or null: farm_settings_valid checked the rest */
		return 0;
	if (db_repo_set_benchmark_after_publish(h->record.id, json_is_true(v)) < 0) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	api_audit(req, "repo.settings", repo_audit_target(req, h->record.type, h->record.ns, h->record.name),
		  json_is_true(v) ? "{\"benchmarkAfterPublish\":true}" : "{\"benchmarkAfterPublish\":false}");
	return 0;
}

static enum MHD_Result handle_settings(struct request *req)
{
	enum MHD_Result result;
	struct repo_handle h;
	json_t *doc = NULL;
	char *details = NULL;
	int private = 0, private_set, build_on_push = 1, mirrored = 0, bench = 0;
	json_t *bop;

	h = *req->repo;
	doc = req->json;
	bop = json_object_get(doc, "buildOnPush");
	if (repo_visibility_from_body(doc, &private, &private_set) < 0 || settings_valid(doc) < 0 ||
	    (bop && !json_is_boolean(bop) && !json_is_null(bop))) {
		result = respond_error(req, 400, NULL,
				       "invalid settings: \"private\" must be a boolean, \"visibility\" public, private or"
				       " protected, \"gated\" false, \"auto\" or \"manual\", \"buildOnPush\" a boolean");
		goto cleanup;
	}
	const char *why = NULL;
	if (farm_settings_valid(doc, &why) < 0) {
		result = respond_error(req, 400, NULL, "%s", why);
		goto cleanup;
	}
	if (apply_campaign_publish(req, &h, &result) < 0 || apply_benchmark_after_publish(req, &h, &result) < 0)
		goto cleanup;
	/* the build farm's trigger on commits and pushes (docs/build-farm.md) */
	if (json_is_boolean(bop) && db_repo_set_build_on_push(h.record.id, json_is_true(bop)) < 0) {
		result = respond_db_unavailable(req);
		goto cleanup;
	}
	if (json_is_boolean(bop))
		api_audit(req, "repo.settings", repo_audit_target(req, h.record.type, h.record.ns, h.record.name),
			  json_is_true(bop) ? "{\"buildOnPush\":true}" : "{\"buildOnPush\":false}");
	if (private_set && private != h.record.private) {
		if (db_repo_set_private(h.record.id, private) < 0) {
			result = respond_db_unavailable(req);
			goto cleanup;
		}
		repo_cache_invalidate();
		h.record.private = private;
		const char *target = repo_audit_target(req, h.record.type, h.record.ns, h.record.name);
		details = xasprintf("{\"private\":%s}", private ? "true" : "false");
		api_audit(req, "repo.settings", target, details);
	}
	if (db_repo_build_settings(h.record.id, &build_on_push, &mirrored) < 0 ||
	    db_repo_benchmark_after_publish(h.record.id, &bench) < 0) {
		result = respond_db_unavailable(req);
		goto cleanup;
	}
	result = respond_json(req, 200, json_pack("{s:b, s:b, s:b}", "private", h.record.private, "buildOnPush",
						  build_on_push, "benchmarkAfterPublish", bench));
cleanup:
	free(details);
	return result;
}

const struct route repo_settings_routes[] = {
	{ METHOD_PUT, "/api/{type}/{ns}/{name}/settings", handle_settings, ROUTE_JSON, 0, NULL, ACCESS_REPO_MANAGE },
	{ 0, NULL, NULL, 0, 0 },
};
