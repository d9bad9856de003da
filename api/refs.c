/* refs.c -- GET /api/{type}s/{ns}/{name}/refs: branches, tags, converts and
 * (with include_prs=1) pull requests. */
#include "api/api.h"
#include "farm/farm.h"

#include <stdlib.h>
#include <string.h>

static int compare_refs(const void *a, const void *b)
{
	return strcmp(((const struct ref_item *)a)->ref, ((const struct ref_item *)b)->ref);
}

/* A fleet rebuild's pull request says what it reads as (docs/build-farm.md,
 * "Fleet rebuilds"): "status" open, merged or closed (superseded, with
 * "supersededBy": the newer build). Other pull requests are left as they are. */
static int mark_campaign_prs(const struct repo_record *r, json_t *prs)
{
	struct db_campaign_kernel *k = NULL;
	size_t n = 0, i, j;
	json_t *item;
	if (!json_array_size(prs) || db_campaign_prs_of_repo(r->id, &k, &n) < 0)
		return json_array_size(prs) ? KHUB_EDB : 0;
	json_array_foreach(prs, i, item) {
		const char *ref = json_string_value(json_object_get(item, "ref"));
		for (j = 0; j < n && strcmp(k[j].pr_ref, ref) != 0; j++)
			;
		if (j == n)
			continue;
		json_object_set_new(item, "status", json_string(build_campaign_pr_status(&k[j])));
		if (k[j].superseded_by)
			json_object_set_new(item, "supersededBy", json_integer(k[j].superseded_by));
	}
	db_campaign_kernels_free(k, n);
	return 0;
}

static enum MHD_Result handle_refs(struct request *req)
{
	struct repo_handle h;
	h = *req->repo;
	struct ref_list refs;
	if (repo_list_refs(h.git, &refs) < 0)
		return respond_error(req, 500, NULL, "cannot read refs");
	qsort(refs.items, refs.count, sizeof(*refs.items), compare_refs);
	int include_prs = request_query_bool(req, "include_prs", 0);
	json_t *branches = json_array(), *tags = json_array(), *converts = json_array(), *prs = json_array();
	for (size_t i = 0; i < refs.count; i++) {
		const struct ref_item *r = &refs.items[i];
		json_t *item = json_pack("{s:s, s:s, s:s}", "name", r->name, "ref", r->ref, "targetCommit", r->sha);
		json_t *list = r->kind == REF_BRANCH ? branches : r->kind == REF_TAG ? tags
			     : r->kind == REF_CONVERT ? converts : prs;
		json_array_append_new(list, item);
	}
	ref_list_release(&refs);
	json_t *body = json_pack("{s:o, s:o, s:o}", "branches", branches, "converts", converts, "tags", tags);
	if (include_prs && mark_campaign_prs(&h.record, prs) < 0) {
		json_decref(prs);
		json_decref(body);
		return respond_db_unavailable(req);
	}
	if (include_prs)
		json_object_set_new(body, "pullRequests", prs);
	else
		json_decref(prs);
	return respond_json(req, 200, body);
}

const struct route refs_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/{type}/{ns}/{name}/refs", handle_refs, 0, 0, NULL, ACCESS_REPO_READ },
	{ 0, NULL, NULL, 0, 0 },
};
