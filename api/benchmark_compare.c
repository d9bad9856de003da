/* benchmark_compare.c -- GET /api/kernels/{ns}/{name}/benchmarks/compare:
 * two versions (or two variants) of a kernel per device and workload from
 * the farm's runs, with medians, spread and the change in %, regressions
 * marked by the regressions' own rule; the kernel page's comparison table
 * calls the same benchmark_compare(). */
#include "api/api.h"

#include <string.h>

static int given(const char *s)
{
	return s && *s;
}

/* One side's filter: the commit and what the variant says (source, gpu
 * and workload are set on the base side only, as db_benchmark_compare
 * reads them). */
static int side_filter(struct request *req, const char *variant, const char *sha, struct benchmark_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->commit_sha = sha;
	return given(variant) ? benchmark_variant_filter(variant, req, f) : 0;
}

int benchmark_compare(struct request *req, struct repo_handle *h, const struct benchmark_compare_ask *ask,
		      char base_sha[41], char head_sha[41], struct benchmark_compare_rows *out, const char **bad)
{
	static const char *const sources[] = { "farm", "maintainer", "community" };
	const char *head = given(ask->head) ? ask->head : ask->base;
	const char *bv = given(ask->base_variant) ? ask->base_variant : ask->variant;
	const char *hv = given(ask->head_variant) ? ask->head_variant : ask->variant;
	struct benchmark_filter base_f, head_f;
	memset(out, 0, sizeof(*out));
	*bad = NULL;
	const char *source = given(ask->source) ? ask->source : "farm";
	size_t i = 0;
	while (i < sizeof(sources) / sizeof(sources[0]) && strcmp(source, sources[i]) != 0)
		i++;
	if (i == sizeof(sources) / sizeof(sources[0])) {
		*bad = source;
		return KHUB_EINVAL;
	}
	if (!given(ask->base) || repo_resolve_commitish(h->git, ask->base, base_sha) < 0) {
		*bad = given(ask->base) ? ask->base : "";
		return KHUB_ENOTFOUND;
	}
	if (repo_resolve_commitish(h->git, head, head_sha) < 0) {
		*bad = head;
		return KHUB_ENOTFOUND;
	}
	if (side_filter(req, bv, base_sha, &base_f) < 0) {
		*bad = bv;
		return KHUB_EINVAL;
	}
	if (side_filter(req, hv, head_sha, &head_f) < 0) {
		*bad = hv;
		return KHUB_EINVAL;
	}
	base_f.source = sources[i];
	base_f.gpu = given(ask->gpu) ? ask->gpu : NULL;
	base_f.workload = given(ask->workload) ? ask->workload : NULL;
	if (db_benchmark_compare(h->record.id, &base_f, &head_f, api_ctx.benchmark_regression_pct, out) < 0)
		return KHUB_EDB;
	return 0;
}

/* {"runs", "medianMs", "minMs", "maxMs", "q1Ms", "q3Ms", "spreadMs"} or
 * null when the side has no result. */
static json_t *stats_json(const struct benchmark_stats *s)
{
	if (!s->runs)
		return json_null();
	return json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "runs", s->runs, "medianMs", s->median, "minMs",
			 s->min, "maxMs", s->max, "q1Ms", s->p25, "q3Ms", s->p75, "spreadMs", s->spread);
}

const char *benchmark_change_word(const struct benchmark_compare_row *c)
{
	if (!c->has_change)
		return NULL;
	return c->change_pct > 0 ? "slower" : c->change_pct < 0 ? "faster" : "same";
}

static json_t *side_json(const char *revision, const char *sha, const char *variant)
{
	return json_pack("{s:s, s:s, s:s?}", "revision", revision, "commit", sha, "variant", variant);
}

static json_t *row_json(const struct benchmark_compare_row *c)
{
	const char *word = benchmark_change_word(c);
	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:s?, s:b}", "device", c->gpu, "workload", c->workload,
			 "base", stats_json(&c->base), "head", stats_json(&c->head),
			 "changePct", c->has_change ? json_real(c->change_pct) : json_null(), "change", word,
			 "regression", c->regression);
}

/* GET …/benchmarks/compare?base=&head=[&variant=][&baseVariant=]
 * [&headVariant=][&source=][&gpu=][&workload=] */
static enum MHD_Result handle_compare(struct request *req)
{
	struct benchmark_compare_ask ask = {
		request_query(req, "base"), request_query(req, "head"), request_query(req, "variant"),
		request_query(req, "baseVariant"), request_query(req, "headVariant"), request_query(req, "source"),
		request_query(req, "gpu"), request_query(req, "workload"),
	};
	char base_sha[41], head_sha[41];
	struct benchmark_compare_rows rows;
	const char *bad;
	if (!given(ask.base))
		return respond_error(req, 400, NULL, "base is required: a version (v1), branch, tag or commit");
	int rc = benchmark_compare(req, req->repo, &ask, base_sha, head_sha, &rows, &bad);
	if (rc == KHUB_ENOTFOUND)
		return respond_revision_not_found(req, bad);
	if (rc == KHUB_EINVAL)
		return respond_error(req, 400, NULL, "%s is no variant name nor source (farm, maintainer, community)", bad);
	if (rc < 0)
		return respond_db_unavailable(req);
	const char *head = given(ask.head) ? ask.head : ask.base;
	const char *bv = given(ask.base_variant) ? ask.base_variant : given(ask.variant) ? ask.variant : NULL;
	const char *hv = given(ask.head_variant) ? ask.head_variant : given(ask.variant) ? ask.variant : NULL;
	json_t *results = json_array();
	for (size_t i = 0; i < rows.count; i++)
		json_array_append_new(results, row_json(&rows.items[i]));
	benchmark_compare_rows_release(&rows);
	return respond_json(req, 200, json_pack("{s:o, s:o, s:s, s:I, s:o}", "base", side_json(ask.base, base_sha, bv),
						"head", side_json(head, head_sha, hv), "source",
						given(ask.source) ? ask.source : "farm", "thresholdPct",
						(json_int_t)api_ctx.benchmark_regression_pct, "results", results));
}

const struct route benchmark_compare_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/benchmarks/compare", handle_compare, 0, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ 0, NULL, NULL, 0, 0 },
};
