/* campaigns.c -- fleet rebuilds through the API (docs/build-farm.md, "Fleet
 * rebuilds"): site admins start a campaign of a variant or of a
 * toolchain's variants and list them; a writer of a kernel merges the
 * pull request a campaign staged on it into v<N> (campaigns_merge, which
 * the web's Merge button calls too). The farm decides
 * (farm/build_campaign.c). */
#include "api/builds.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The campaign named by the route's {arg}; 404 queued when no number. */
static int campaign_id_from_request(struct request *req, int64_t *id, enum MHD_Result *result)
{
	const char *arg = req->nargs ? req->args[req->nargs - 1] : "";
	char *end;
	long long v = strtoll(arg, &end, 10);
	if (!arg[0] || *end || v <= 0) {
		*result = respond_error(req, 404, NULL, "no campaign %s", arg);
		return -1;
	}
	*id = v;
	return 0;
}

/* The variants a start names: {"variant"} or {"toolchain"} (owned). */
static int start_variants(struct request *req, char ***names, size_t *n, enum MHD_Result *result)
{
	const char *variant = NULL, *toolchain = NULL;
	*names = NULL;
	*n = 0;
	if (json_optional_string(req->json, "variant", &variant) < 0 ||
	    json_optional_string(req->json, "toolchain", &toolchain) < 0 || !variant == !toolchain) {
		*result = respond_error(req, 400, NULL, "expected {\"variant\": a build variant name} or {\"toolchain\":"
					" the name of a toolchain workers registered}");
		return -1;
	}
	if (variant) {
		*names = xcalloc(2, sizeof(char *));
		(*names)[(*n)++] = xstrdup(variant);
		return 0;
	}
	if (build_toolchain_variants(toolchain, names, n) < 0) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	if (*n == 0) {
		*result = respond_error(req, 404, NULL, "no worker registered a toolchain named %s", toolchain);
		return -1;
	}
	return 0;
}

static enum MHD_Result handle_start(struct request *req)
{
	enum MHD_Result result;
	char **names = NULL, why[300];
	size_t n = 0;
	if (start_variants(req, &names, &n, &result) < 0)
		return result;
	json_t *started = json_array();
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		int64_t id = 0;
		struct db_campaign *c = NULL;
		size_t nc = 0;
		if ((rc = build_campaign_start(names[i], "admin", req->principal.name, &id, why, sizeof(why))) < 0)
			break;
		char *details = xasprintf("{\"campaign\":%" PRId64 "}", id);
		api_audit(req, "campaign.start", names[i], details);
		free(details);
		if (db_campaign_list(id, 1, &c, &nc) == 0 && nc)
			json_array_append_new(started, build_campaign_json(&c[0]));
		db_campaigns_free(c, nc);
	}
	build_names_free(names, n);
	if (rc == KHUB_EINVAL)
		result = respond_error(req, 400, NULL, "%s", why);
	else if (rc < 0)
		result = respond_db_unavailable(req);
	else
		result = respond_json(req, 201, json_pack("{s:O}", "campaigns", started));
	json_decref(started);
	return result;
}

static enum MHD_Result handle_list(struct request *req)
{
	struct db_campaign *c = NULL;
	size_t n = 0;
	if (db_campaign_list(0, 100, &c, &n) < 0)
		return respond_db_unavailable(req);
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, build_campaign_json(&c[i]));
	db_campaigns_free(c, n);
	return respond_json(req, 200, json_pack("{s:o}", "campaigns", list));
}

static enum MHD_Result handle_get(struct request *req)
{
	enum MHD_Result result;
	struct db_campaign *c = NULL;
	size_t n = 0;
	int64_t id;
	if (campaign_id_from_request(req, &id, &result) < 0)
		return result;
	if (db_campaign_list(id, 1, &c, &n) < 0)
		return respond_db_unavailable(req);
	if (n == 0) {
		db_campaigns_free(c, n);
		return respond_error(req, 404, NULL, "no campaign %" PRId64, id);
	}
	json_t *answer = build_campaign_json(&c[0]), *kernels = build_campaign_kernels_json(id);
	db_campaigns_free(c, n);
	if (!kernels) {
		json_decref(answer);
		return respond_db_unavailable(req);
	}
	json_object_set_new(answer, "kernels", kernels);
	return respond_json(req, 200, answer);
}

/* The answer to a merge that rc refused. */
static enum MHD_Result respond_merge_refused(struct request *req, int rc, const char *why)
{
	if (rc == KHUB_ENOTFOUND)
		return respond_error(req, 404, NULL, "%s", why);
	if (rc == KHUB_EEXIST || rc == KHUB_ECONFLICT)
		return respond_error(req, 409, NULL, "%s", why);
	return respond_err(req, rc, "the merge failed");
}

int campaigns_merge(struct request *req, int64_t id, json_t **answer, enum MHD_Result *result)
{
	struct repo_handle *h = req->repo;
	struct db_campaign_kernel k;
	char branch[32] = "", sha[41] = "", why[400] = "";
	int rc = db_campaign_kernel_get(id, h->record.id, &k);
	if (rc == KHUB_ENOTFOUND)
		*result = respond_error(req, 404, NULL, "campaign #%" PRId64 " did not build %s/%s", id, h->record.ns,
					h->record.name);
	else if (rc < 0)
		*result = respond_db_unavailable(req);
	if (rc < 0)
		return -1;
	if (repo_write_lock_request(req, h->record.id, result) != 0) {
		db_campaign_kernel_release(&k);
		return -1;	/* parked or answered */
	}
	rc = build_campaign_merge(h->git, &k, branch, sha, why, sizeof(why));
	repo_write_unlock(h->record.id);
	if (rc < 0) {
		*result = respond_merge_refused(req, rc, why);
	} else {
		char *details = xasprintf("{\"campaign\":%" PRId64 ",\"pr\":\"%s\",\"branch\":\"%s\",\"sha\":\"%s\"}", id,
					  k.pr_ref, branch, sha);
		publish_refs_moved(h->record.id, h->git, sha, PUBLISH_REFS_CHANGED, NULL, NULL, NULL, NULL);
		api_audit(req, "campaign.merge", repo_audit_target(req, h->record.type, h->record.ns, h->record.name),
			  details);
		free(details);
		*answer = json_pack("{s:s, s:s, s:s}", "pr", k.pr_ref, "branch", branch, "targetCommit", sha);
	}
	db_campaign_kernel_release(&k);
	return rc < 0 ? -1 : 0;
}

static enum MHD_Result handle_merge(struct request *req)
{
	enum MHD_Result result;
	json_t *answer;
	int64_t id;
	if (campaign_id_from_request(req, &id, &result) < 0 || campaigns_merge(req, id, &answer, &result) < 0)
		return result;
	return respond_json(req, 200, answer);
}

const struct route campaigns_routes[] = {
	{ METHOD_POST, "/api/admin/campaigns", handle_start, ROUTE_JSON, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_GET | METHOD_HEAD, "/api/admin/campaigns", handle_list, 0, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_GET | METHOD_HEAD, "/api/admin/campaigns/{arg}", handle_get, 0, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_POST, "/api/kernels/{ns}/{name}/campaigns/{arg}/merge", handle_merge, ROUTE_BODY, REPO_KERNEL, NULL,
	  ACCESS_REPO_WRITE },
	{ 0, NULL, NULL, 0, 0 },
};
