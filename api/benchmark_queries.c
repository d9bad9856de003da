/* benchmark_queries.c -- GET /api/kernels/{ns}/{name}/benchmarks lists
 * stored runs with filters, GET …/benchmarks/aggregate compares them per
 * workload and GPU, in JSON or CSV (uploads: benchmarks.c). Community and
 * farm runs are left out unless ?source=community, ?source=farm or
 * ?source=all: each source is compared only with itself. …/regressions
 * lists the farm runs slower than the version before them. */
#include "api/api.h"
#include "kernel/kernel.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_PAGE_DEFAULT 100
#define BENCH_PAGE_MAX 1000
/* The reference a workload is compared with when ?reference= is absent: a
 * `benchmark_reference` method of the same Benchmark class. */
#define BENCH_DEFAULT_REFERENCE "reference"

/* ---- filters -------------------------------------------------------------- */

/* Which machines a variant name is for (api.h). */
int benchmark_variant_filter(const char *variant, struct request *req, struct benchmark_filter *f)
{
	char *copy = request_own(req, xstrdup(variant)), *save = NULL;
	int understood = 0;
	for (char *tok = strtok_r(copy, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
		size_t n = strlen(tok);
		if (strcmp(tok, VARIANT_NOARCH_UNIVERSAL) == 0 || strcmp(tok, "torch") == 0) {
			understood = 1;
			continue;
		}
		if (n > 5 && strncmp(tok, "torch", 5) == 0 && strspn(tok + 5, "0123456789") == n - 5) {
			f->torch_key = tok;
			understood = 1;
			continue;
		}
		if (strcmp(tok, "linux") == 0 || strcmp(tok, "darwin") == 0 || strcmp(tok, "windows") == 0) {
			f->os_family = tok;
			understood = 1;
			continue;
		}
		for (const struct kernel_backend *b = kernel_backends; b->name; b++) {
			size_t p = b->variant_prefix ? strlen(b->variant_prefix) : 0;
			if (strcmp(tok, b->name) == 0) {
				f->backend_family = b->name;
				understood = 1;
			} else if (p && n > p && strncmp(tok, b->variant_prefix, p) == 0 &&
				   strspn(tok + p, "0123456789") == n - p) {
				f->backend_family = b->name;
				if (b->benchmark_keyed)
					f->backend_key = tok;
				understood = 1;
			}
		}
	}
	return understood ? 0 : -1;
}

/* Fill f from the query (revision, variant, backend, gpu, workload, id,
 * limit, cursor). On failure an answer has been queued. */
static int filter_from_query(struct request *req, struct repo_handle *h, struct benchmark_filter *f,
			     char sha[41], enum MHD_Result *result)
{
	memset(f, 0, sizeof(*f));
	const char *v;
	if ((v = request_query(req, "revision")) && *v) {
		if (repo_resolve_commitish(h->git, v, sha) < 0) {
			*result = respond_revision_not_found(req, v);
			return -1;
		}
		f->commit_sha = sha;
	}
	if ((v = request_query(req, "variant")) && *v && benchmark_variant_filter(v, req, f) < 0) {
		*result = respond_error(req, 400, NULL, "cannot read the variant name %s", v);
		return -1;
	}
	if ((v = request_query(req, "backend")) && *v) {
		char *lower = request_own(req, xstrdup(v));
		for (char *p = lower; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		f->backend = lower;
	}
	if ((v = request_query(req, "gpu")) && *v)
		f->gpu = v;
	f->source = "maintainer";
	if ((v = request_query(req, "source")) && *v) {
		if (strcmp(v, "all") == 0) {
			f->source = NULL;
		} else if (strcmp(v, "maintainer") == 0 || strcmp(v, "community") == 0 || strcmp(v, "farm") == 0) {
			f->source = v;
		} else {
			*result = respond_error(req, 400, NULL, "source must be maintainer, community, farm or all");
			return -1;
		}
	}
	if ((v = request_query(req, "workload")) && *v)
		f->workload = v;
	if ((v = request_query(req, "id"))) {
		char *end;
		f->run_id = strtoll(v, &end, 10);
		if (*end || f->run_id < 1) {
			*result = respond_error(req, 400, NULL, "invalid id");
			return -1;
		}
	}
	f->limit = BENCH_PAGE_DEFAULT;
	if ((v = request_query(req, "limit"))) {
		char *end;
		f->limit = strtol(v, &end, 10);
		if (*end || f->limit < 1 || f->limit > BENCH_PAGE_MAX) {
			*result = respond_error(req, 400, NULL, "limit must be between 1 and %d", BENCH_PAGE_MAX);
			return -1;
		}
	}
	if ((v = request_query(req, "cursor"))) {
		char *end;
		f->before_id = strtoll(v, &end, 10);
		if (*end || f->before_id < 1) {
			*result = respond_error(req, 400, NULL, "invalid cursor");
			return -1;
		}
	}
	return 0;
}

static int wants_csv(struct request *req, enum MHD_Result *result)
{
	const char *format = request_query(req, "format");
	if (!format || strcmp(format, "json") == 0)
		return 0;
	if (strcmp(format, "csv") == 0)
		return 1;
	*result = respond_error(req, 400, NULL, "format must be json or csv");
	return -1;
}

/* What both GETs read from the query: the filter (commit_sha points into
 * sha) and the format. */
struct bench_query {
	struct benchmark_filter f;
	char sha[41];
	int csv;
};

static int bench_query_read(struct request *req, struct bench_query *q, enum MHD_Result *result)
{
	if (filter_from_query(req, req->repo, &q->f, q->sha, result) < 0 ||
	    (q->csv = wants_csv(req, result)) < 0)
		return -1;
	return 0;
}

/* ---- answers ------------------------------------------------------------- */

/* The shortest text that reads back as v (v is finite). */
static void add_number(struct strbuf *sb, double v)
{
	char num[40];
	for (int precision = 1; precision <= 17; precision++) {
		snprintf(num, sizeof(num), "%.*g", precision, v);
		if (strtod(num, NULL) == v)
			break;
	}
	strbuf_adds(sb, num);
}

static enum MHD_Result respond_text(struct request *req, const char *type, struct strbuf *sb, const char *link)
{
	size_t len;
	char *body = strbuf_detach(sb, &len);
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", type);
	if (link)
		answer_header(&a, "Link", link);
	answer_body_take(&a, body, len);
	return answer_send(req, &a);
}

/* Absolute URL of the next page: the same query with cursor replaced. */
static char *next_page_link(struct request *req, const struct repo_handle *h, int64_t cursor)
{
	static const char *const keys[] = { "revision", "variant", "backend", "gpu", "workload", "id", "limit",
					     "format", "source" };
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "<%s/api/kernels/", request_base_url(req));
	strbuf_add_urlencoded(&sb, h->record.ns, 0);
	strbuf_adds(&sb, "/");
	strbuf_add_urlencoded(&sb, h->record.name, 0);
	strbuf_adds(&sb, "/benchmarks?");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = request_query(req, keys[i]);
		if (!v)
			continue;
		strbuf_addf(&sb, "%s=", keys[i]);
		strbuf_add_urlencoded(&sb, v, 0);
		strbuf_adds(&sb, "&");
	}
	strbuf_addf(&sb, "cursor=%" PRId64 ">; rel=\"next\"", cursor);
	return strbuf_detach(&sb, NULL);
}

static const char *const list_csv_header =
	"run_id,submitted_at,submitter,commit,kernel_commit_sha,benchmark_script_path,benchmark_script_sha,"
	"gpu,gpu_cores,backend,pytorch_version,os,cpu,workload,mean_ms,std_ms,min_ms,max_ms,q1_ms,q3_ms,"
	"iqr_ms,outliers,iterations,verified,source\r\n";

static void add_run_json(struct strbuf *sb, const struct benchmark_row *b)
{
	strbuf_addf(sb, "{\"id\":%" PRId64 ",\"submittedAt\":\"%s\",\"submitter\":", b->run_id, b->submitted_at);
	strbuf_add_json_quoted(sb, b->submitter);
	strbuf_addf(sb, ",\"source\":\"%s\"", b->source);
	if (b->build_id)	/* a farm run: the job that measured it */
		strbuf_addf(sb, ",\"build\":%" PRId64, b->build_id);
	strbuf_addf(sb, ",\"commit\":\"%s\",\"kernelCommitSha\":", b->commit);
	strbuf_add_json_quoted(sb, b->kernel_commit);
	strbuf_adds(sb, ",\"benchmarkScriptPath\":");
	strbuf_add_json_quoted(sb, b->script_path);
	if (b->script_sha) {
		strbuf_adds(sb, ",\"benchmarkScriptSha\":");
		strbuf_add_json_quoted(sb, b->script_sha);
	}
	const struct { const char *key, *value; } machine[] = {
		{ "gpu", b->gpu }, { "backend", b->backend }, { "pytorchVersion", b->pytorch },
		{ "os", b->os }, { "cpu", b->cpu },
	};
	strbuf_adds(sb, ",\"machineInfo\":{");
	for (size_t i = 0; i < sizeof(machine) / sizeof(machine[0]); i++) {
		strbuf_addf(sb, "%s\"%s\":", i ? "," : "", machine[i].key);
		strbuf_add_json_quoted(sb, machine[i].value);
	}
	if (b->gpu_cores)
		strbuf_addf(sb, ",\"gpuCores\":%s", b->gpu_cores);
	strbuf_adds(sb, "},\"results\":[");
}

static void add_result_json(struct strbuf *sb, const struct benchmark_row *b)
{
	const struct { const char *key, *value; } timing[] = {
		{ "mean_ms", b->mean }, { "std_ms", b->std }, { "min_ms", b->min },
		{ "max_ms", b->max }, { "q1_ms", b->q1 }, { "q3_ms", b->q3 },
		{ "iqr_ms", b->iqr }, { "outliers", b->outliers }, { "iterations", b->iterations },
	};
	strbuf_adds(sb, "{\"workload\":");
	strbuf_add_json_quoted(sb, b->workload);
	strbuf_adds(sb, ",\"timingResults\":{");
	for (size_t i = 0; i < sizeof(timing) / sizeof(timing[0]); i++)
		strbuf_addf(sb, "%s\"%s\":%s", i ? "," : "", timing[i].key, timing[i].value);
	strbuf_adds(sb, "}");
	if (b->verified >= 0)
		strbuf_addf(sb, ",\"verified\":%s", b->verified ? "true" : "false");
	strbuf_adds(sb, "}");
}

/* One line of list_csv_header's columns. */
static void add_result_csv(struct strbuf *sb, const struct benchmark_row *b)
{
	char run_id[24];
	snprintf(run_id, sizeof(run_id), "%" PRId64, b->run_id);
	const char *fields[] = {
		run_id, b->submitted_at, b->submitter, b->commit, b->kernel_commit, b->script_path,
		b->script_sha ? b->script_sha : "", b->gpu, b->gpu_cores ? b->gpu_cores : "", b->backend, b->pytorch,
		b->os, b->cpu, b->workload, b->mean, b->std, b->min, b->max, b->q1, b->q3, b->iqr, b->outliers,
		b->iterations, b->verified < 0 ? "" : b->verified ? "true" : "false", b->source,
	};
	size_t n = sizeof(fields) / sizeof(fields[0]);
	for (size_t c = 0; c < n; c++)
		strbuf_add_csv_field(sb, fields[c], c + 1 == n);
}

static enum MHD_Result handle_list(struct request *req)
{
	enum MHD_Result result;
	struct bench_query q;
	struct benchmark_rows table;
	if (bench_query_read(req, &q, &result) < 0)
		return result;
	if (db_benchmark_rows(req->repo->record.id, &q.f, &table) < 0)
		return respond_db_unavailable(req);
	const struct benchmark_row *res = table.items;
	int csv = q.csv;

	/* Rows come grouped by run; the query returns one run more than a page. */
	int rows = (int)table.count, runs = 0, next = 0;
	const struct benchmark_row *prev = NULL;
	for (int i = 0; i < rows; i++) {
		if (prev && prev->run_id == res[i].run_id)
			continue;
		if (++runs > q.f.limit) {
			rows = i;
			next = 1;
			break;
		}
		prev = &res[i];
	}
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, csv ? list_csv_header : "[");
	prev = NULL;
	for (int i = 0; i < rows; i++) {
		if (csv) {
			add_result_csv(&sb, &res[i]);
			continue;
		}
		int same = prev && prev->run_id == res[i].run_id;
		if (prev && !same)
			strbuf_adds(&sb, "]},");
		if (!same)
			add_run_json(&sb, &res[i]);
		else
			strbuf_adds(&sb, ",");
		add_result_json(&sb, &res[i]);
		prev = &res[i];
	}
	if (!csv)
		strbuf_adds(&sb, prev ? "]}]" : "]");
	int64_t last_id = rows > 0 ? res[rows - 1].run_id : 0;
	char *link = next && rows > 0 ? next_page_link(req, req->repo, last_id) : NULL;
	benchmark_rows_release(&table);
	enum MHD_Result r = respond_text(req, csv ? "text/csv; charset=utf-8" : "application/json; charset=utf-8",
					 &sb, link);
	free(link);
	return r;
}

/* The reference of workload W ("Class.method"): ref itself when it names a
 * class ("Class.ref"), else the method ref of W's class. */
static void reference_of(const char *workload, const char *ref, struct strbuf *out)
{
	const char *dot = strrchr(workload, '.');
	strbuf_reset(out);
	if (!strchr(ref, '.') && dot)
		strbuf_add(out, workload, (size_t)(dot - workload + 1));
	strbuf_adds(out, ref);
}

/* What an aggregate row is compared with: the reference workload's row on
 * the same GPU (and revision) (refname, in the caller's buffer). */
struct agg_reference {
	int row;			/* -1: none (or the row itself) */
	int has_speedup;		/* a reference and a positive median */
	double speedup;			/* reference median / this median */
};

/* "workload \x1f gpu \x1f revision" of each row -> row + 1 (the revision
 * is "" unless grouped by revision). */
static void aggregate_index(const struct benchmark_agg_rows *res, struct hashmap *by_key)
{
	hashmap_init(by_key);
	for (size_t i = 0; i < res->count; i++) {
		const struct benchmark_agg_row *a = &res->items[i];
		char *key = xasprintf("%s\x1f%s\x1f%s", a->workload, a->gpu, a->revision);
		hashmap_put(by_key, key, (void *)(intptr_t)(i + 1));
		free(key);
	}
}

static void aggregate_reference(const struct benchmark_agg_rows *res, struct hashmap *by_key, int i, const char *ref,
				struct strbuf *refname, struct agg_reference *r)
{
	const struct benchmark_agg_row *a = &res->items[i];
	reference_of(a->workload, ref, refname);
	char *key = xasprintf("%s\x1f%s\x1f%s", refname->buf, a->gpu, a->revision);
	r->row = (int)(intptr_t)hashmap_get(by_key, key) - 1;
	free(key);
	if (r->row == i)
		r->row = -1;
	double median = strtod(a->median, NULL);
	r->has_speedup = r->row >= 0 && median > 0;
	r->speedup = r->has_speedup ? strtod(res->items[r->row].median, NULL) / median : 0;
}

static void aggregate_csv_row(struct strbuf *sb, const struct benchmark_agg_rows *res, int i, const char *refname,
			      const struct agg_reference *r)
{
	const struct benchmark_agg_row *a = &res->items[i];
	const char *head[] = { a->workload, a->gpu, a->count, a->median, a->best, a->latest_mean, a->latest_std,
			       a->latest_run, a->latest_commit, a->latest_at };
	for (size_t c = 0; c < sizeof(head) / sizeof(head[0]); c++)
		strbuf_add_csv_field(sb, head[c], 0);
	strbuf_add_csv_field(sb, r->row >= 0 ? refname : "", 0);
	strbuf_add_csv_field(sb, r->row >= 0 ? res->items[r->row].median : "", 0);
	if (r->has_speedup)
		add_number(sb, r->speedup);
	const char *spread[] = { a->best, a->p25, a->p75, a->max, a->revision };
	strbuf_adds(sb, ",");
	for (size_t k = 0; k < sizeof(spread) / sizeof(spread[0]); k++)
		strbuf_add_csv_field(sb, spread[k], k + 1 == sizeof(spread) / sizeof(spread[0]));
}

static void aggregate_json_row(struct strbuf *sb, const struct benchmark_agg_rows *res, int i, const char *refname,
			       const struct agg_reference *r, int first)
{
	const struct benchmark_agg_row *a = &res->items[i];
	strbuf_adds(sb, first ? "{\"workload\":" : ",{\"workload\":");
	strbuf_add_json_quoted(sb, a->workload);
	strbuf_adds(sb, ",\"gpu\":");
	strbuf_add_json_quoted(sb, a->gpu);
	strbuf_addf(sb, ",\"count\":%s,\"medianMeanMs\":%s,\"bestMeanMs\":%s,"
		    "\"latest\":{\"runId\":%s,\"commit\":\"%s\",\"submittedAt\":\"%s\",\"mean_ms\":%s,\"std_ms\":%s}",
		    a->count, a->median, a->best, a->latest_run, a->latest_commit, a->latest_at, a->latest_mean,
		    a->latest_std);
	strbuf_addf(sb, ",\"minMeanMs\":%s,\"p25MeanMs\":%s,\"p75MeanMs\":%s,\"maxMeanMs\":%s", a->best, a->p25,
		    a->p75, a->max);
	if (*a->revision)
		strbuf_addf(sb, ",\"revision\":\"%s\"", a->revision);
	if (r->row >= 0) {
		strbuf_adds(sb, ",\"referenceWorkload\":");
		strbuf_add_json_quoted(sb, refname);
		strbuf_addf(sb, ",\"referenceMedianMeanMs\":%s", res->items[r->row].median);
	} else {
		strbuf_adds(sb, ",\"referenceWorkload\":null,\"referenceMedianMeanMs\":null");
	}
	strbuf_adds(sb, ",\"speedup\":");
	if (r->has_speedup)
		add_number(sb, r->speedup);
	else
		strbuf_adds(sb, "null");
	strbuf_adds(sb, "}");
}

static enum MHD_Result handle_aggregate(struct request *req)
{
	enum MHD_Result result;
	struct bench_query q;
	if (bench_query_read(req, &q, &result) < 0)
		return result;
	const char *ref = request_query(req, "reference");
	if (!ref || !*ref)
		ref = BENCH_DEFAULT_REFERENCE;
	/* The workload filter applies to the answer, not to the query, so the
	 * reference rows stay available. */
	const char *only = q.f.workload, *by = request_query(req, "by");
	q.f.workload = NULL;
	if (by && *by && strcmp(by, "revision") != 0)
		return respond_error(req, 400, NULL, "by must be revision");
	q.f.by_revision = by && *by;
	struct benchmark_agg_rows res;
	if (db_benchmark_aggregate(req->repo->record.id, &q.f, &res) < 0)
		return respond_db_unavailable(req);

	struct hashmap by_key;
	aggregate_index(&res, &by_key);
	struct strbuf sb = STRBUF_INIT, refname = STRBUF_INIT;
	if (q.csv) {
		strbuf_adds(&sb, "workload,gpu,count,median_mean_ms,best_mean_ms,latest_mean_ms,latest_std_ms,"
				 "latest_run_id,latest_commit,latest_submitted_at,reference,reference_median_mean_ms,"
				 "speedup,min_mean_ms,p25_mean_ms,p75_mean_ms,max_mean_ms,revision\r\n");
	} else {
		strbuf_adds(&sb, "{\"reference\":");
		strbuf_add_json_quoted(&sb, ref);
		strbuf_adds(&sb, ",\"results\":[");
	}
	int shown = 0;
	for (int i = 0; i < (int)res.count; i++) {
		struct agg_reference r;
		if (only && strcmp(only, res.items[i].workload) != 0)
			continue;
		aggregate_reference(&res, &by_key, i, ref, &refname, &r);
		if (q.csv)
			aggregate_csv_row(&sb, &res, i, refname.buf, &r);
		else
			aggregate_json_row(&sb, &res, i, refname.buf, &r, !shown++);
	}
	if (!q.csv)
		strbuf_adds(&sb, "]}");
	hashmap_release(&by_key, NULL);
	strbuf_release(&refname);
	benchmark_agg_rows_release(&res);
	return respond_text(req, q.csv ? "text/csv; charset=utf-8" : "application/json; charset=utf-8", &sb, NULL);
}

/* ---- regressions --------------------------------------------------------- */

int benchmark_regressions_json(int64_t repo_id, const char *commit_sha, json_t **out)
{
	struct benchmark_regressions res;
	*out = NULL;
	if (db_benchmark_regressions(repo_id, api_ctx.benchmark_regression_pct, commit_sha, &res) < 0)
		return KHUB_EDB;
	json_t *list = json_array();
	for (size_t i = 0; i < res.count; i++) {
		const struct benchmark_regression *g = &res.items[i];
		json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:f}",
			"commit", g->commit, "previousCommit", g->prev_commit, "device", g->gpu,
			"workload", g->workload, "medianMs", g->median, "previousMedianMs", g->prev_median,
			"spreadMs", g->spread, "previousSpreadMs", g->prev_spread, "slowerPct", g->slower_pct));
	}
	benchmark_regressions_release(&res);
	*out = list;
	return 0;
}

/* GET …/benchmarks/regressions[?revision=]: the farm runs' regressions. */
static enum MHD_Result handle_regressions(struct request *req)
{
	char sha[41];
	const char *v = request_query(req, "revision");
	if (v && *v && repo_resolve_commitish(req->repo->git, v, sha) < 0)
		return respond_revision_not_found(req, v);
	json_t *list;
	if (benchmark_regressions_json(req->repo->record.id, v && *v ? sha : NULL, &list) < 0)
		return respond_db_unavailable(req);
	return respond_json(req, 200, json_pack("{s:I, s:o}", "thresholdPct", (json_int_t)api_ctx.benchmark_regression_pct,
						"regressions", list));
}

const struct route benchmark_queries_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/benchmarks", handle_list, 0, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/benchmarks/aggregate", handle_aggregate, 0, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/benchmarks/regressions", handle_regressions, 0,
	  REPO_KERNEL, NULL, ACCESS_REPO_READ },
	{ 0, NULL, NULL, 0, 0 },
};
