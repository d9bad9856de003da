/* db_benchmarks.c -- benchmark runs and their per-workload results: storing
 * an upload in one statement, filtered listings and per-GPU aggregates. */
#include "storage/db/db_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static void add_double(struct strbuf *sb, double v)
{
	char num[40];
	snprintf(num, sizeof(num), "%.17g", v);	/* exact; PostgreSQL prints it back shortest */
	db_array_add(sb, num);
}

static void add_i64(struct strbuf *sb, int64_t v)
{
	char num[24];
	db_array_add(sb, db_param_int(num, v));
}

int db_benchmark_insert(const struct benchmark_run *run, int64_t *id)
{
	/* The results go as parallel arrays, unnested into rows. */
	enum { WORKLOAD, MEAN, STD, MIN, MAX, Q1, Q3, IQR, OUTLIERS, ITERATIONS, VERIFIED, NARRAYS };
	struct strbuf arrays[NARRAYS];
	db_columns_init(arrays, NARRAYS);
	for (size_t i = 0; i < run->nresults; i++) {
		const struct benchmark_result *r = &run->results[i];
		db_columns_row(arrays, NARRAYS, i);
		db_array_add(&arrays[WORKLOAD], r->workload);
		add_double(&arrays[MEAN], r->mean_ms);
		add_double(&arrays[STD], r->std_ms);
		add_double(&arrays[MIN], r->min_ms);
		add_double(&arrays[MAX], r->max_ms);
		add_double(&arrays[Q1], r->q1_ms);
		add_double(&arrays[Q3], r->q3_ms);
		add_double(&arrays[IQR], r->iqr_ms);
		add_i64(&arrays[OUTLIERS], r->outliers);
		add_i64(&arrays[ITERATIONS], r->iterations);
		db_array_add(&arrays[VERIFIED], r->verified < 0 ? NULL : r->verified ? "t" : "f");
	}
	db_columns_end(arrays, NARRAYS, NULL);

	char repo[24], cores[24], submitter[24], worker[24], build[24];
	const char *params[] = {
		db_param_int(repo, run->repo_id), run->commit_sha, run->kernel_commit_sha, run->benchmark_script_path,
		run->benchmark_script_sha, run->gpu, run->gpu_cores >= 0 ? db_param_int(cores, run->gpu_cores) : NULL,
		run->backend, run->backend_family, run->backend_key, run->pytorch_version, run->torch_key, run->os,
		run->os_family, run->cpu, run->submitter_id ? db_param_int(submitter, run->submitter_id) : NULL,
		run->submitter_name,
		run->payload, run->source,
		arrays[WORKLOAD].buf, arrays[MEAN].buf, arrays[STD].buf, arrays[MIN].buf, arrays[MAX].buf,
		arrays[Q1].buf, arrays[Q3].buf, arrays[IQR].buf, arrays[OUTLIERS].buf, arrays[ITERATIONS].buf,
		arrays[VERIFIED].buf, run->worker_id ? db_param_int(worker, run->worker_id) : NULL,
		run->build_id ? db_param_int(build, run->build_id) : NULL,
	};
	PGresult *res = db_exec(
		"WITH run AS (INSERT INTO benchmark_runs (repo_id, commit_sha, kernel_commit_sha,"
		"  benchmark_script_path, benchmark_script_sha, gpu, gpu_cores, backend, backend_family, backend_key,"
		"  pytorch_version, torch_key, os, os_family, cpu, submitter_id, submitter_name, payload, source,"
		"  worker_id, build_id)"
		"  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18::jsonb, $19,"
		"  $31::bigint, $32::bigint)"
		"  RETURNING id),"
		" res AS (INSERT INTO benchmark_results (run_id, workload, mean_ms, std_ms, min_ms, max_ms, q1_ms,"
		"  q3_ms, iqr_ms, outliers, iterations, verified)"
		"  SELECT run.id, t.* FROM run, unnest($20::text[], $21::float8[], $22::float8[], $23::float8[],"
		"  $24::float8[], $25::float8[], $26::float8[], $27::float8[], $28::int[], $29::int[],"
		"  $30::boolean[]) AS t RETURNING 1)"
		" SELECT id, (SELECT count(*) FROM res) FROM run",
		(int)(sizeof(params) / sizeof(params[0])), params, NULL);
	db_columns_release(arrays, NARRAYS);
	if (!res)
		return KHUB_EDB;
	*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 0;
}

/* The WHERE clause both queries share, on benchmark_runs r and
 * benchmark_results b; parameters $1..$11. */
#define FILTER_SQL \
	" r.repo_id = $1" \
	" AND ($2::text IS NULL OR r.commit_sha = $2)" \
	" AND ($3::text IS NULL OR r.backend_family = $3 OR r.backend_key = $3 OR lower(r.backend) = $3)" \
	" AND ($4::text IS NULL OR r.torch_key = $4)" \
	" AND ($5::text IS NULL OR r.backend_family = $5)" \
	" AND ($6::text IS NULL OR r.backend_key = $6)" \
	" AND ($7::text IS NULL OR r.os_family = $7)" \
	" AND ($8::text IS NULL OR strpos(lower(r.gpu), lower($8)) > 0)" \
	" AND ($9::text IS NULL OR b.workload = $9)" \
	" AND ($10::bigint IS NULL OR r.id = $10)" \
	" AND ($11::text IS NULL OR r.source = $11)"

static void filter_params(int64_t repo_id, const struct benchmark_filter *f, char repo[24], char run[24],
			  const char *params[11])
{
	params[0] = db_param_int(repo, repo_id);
	params[1] = f->commit_sha;
	params[2] = f->backend;
	params[3] = f->torch_key;
	params[4] = f->backend_family;
	params[5] = f->backend_key;
	params[6] = f->os_family;
	params[7] = f->gpu;
	params[8] = f->workload;
	params[9] = f->run_id > 0 ? db_param_int(run, f->run_id) : NULL;
	params[10] = f->source;
}

#define TEXT_AT(type, field) offsetof(struct type, field)

/* db_benchmark_rows' text columns (in the query's order, from column 1; -1
 * for the columns read otherwise) and whether NULL stays NULL. */
static const struct { long at; int keep_null; } result_text[] = {
	{ -1, 0 }, { TEXT_AT(benchmark_row, submitted_at), 0 }, { TEXT_AT(benchmark_row, submitter), 0 },
	{ TEXT_AT(benchmark_row, commit), 0 }, { TEXT_AT(benchmark_row, kernel_commit), 0 },
	{ TEXT_AT(benchmark_row, script_path), 0 }, { TEXT_AT(benchmark_row, script_sha), 1 },
	{ TEXT_AT(benchmark_row, gpu), 0 }, { TEXT_AT(benchmark_row, gpu_cores), 1 },
	{ TEXT_AT(benchmark_row, backend), 0 }, { TEXT_AT(benchmark_row, pytorch), 0 },
	{ TEXT_AT(benchmark_row, os), 0 }, { TEXT_AT(benchmark_row, cpu), 0 },
	{ TEXT_AT(benchmark_row, workload), 0 }, { TEXT_AT(benchmark_row, mean), 0 },
	{ TEXT_AT(benchmark_row, std), 0 }, { TEXT_AT(benchmark_row, min), 0 }, { TEXT_AT(benchmark_row, max), 0 },
	{ TEXT_AT(benchmark_row, q1), 0 }, { TEXT_AT(benchmark_row, q3), 0 }, { TEXT_AT(benchmark_row, iqr), 0 },
	{ TEXT_AT(benchmark_row, outliers), 0 }, { TEXT_AT(benchmark_row, iterations), 0 }, { -1, 0 },
	{ TEXT_AT(benchmark_row, source), 0 },
};
#define RESULT_COL_VERIFIED 23
#define RESULT_COL_BUILD_ID 25

static void fill_result(void *item, const struct db_rows *rows, size_t i)
{
	struct benchmark_row *b = item;
	b->run_id = db_rows_int(rows, i, 0, 0);
	for (size_t c = 0; c < sizeof(result_text) / sizeof(result_text[0]); c++)
		if (result_text[c].at >= 0)
			*(char **)((char *)b + result_text[c].at) = result_text[c].keep_null ? db_rows_strdup(rows, i, c)
								    : xstrdup(db_rows_get(rows, i, c));
	b->build_id = db_rows_int(rows, i, RESULT_COL_BUILD_ID, 0);	/* a farm run's job, 0 none */
	b->verified = db_rows_isnull(rows, i, RESULT_COL_VERIFIED) ? -1
		      : db_rows_get(rows, i, RESULT_COL_VERIFIED)[0] == 't';
}

void benchmark_rows_release(struct benchmark_rows *rows)
{
	if (!rows)
		return;
	for (size_t i = 0; i < rows->count; i++)
		for (size_t c = 0; c < sizeof(result_text) / sizeof(result_text[0]); c++)
			if (result_text[c].at >= 0)
				free(*(char **)((char *)&rows->items[i] + result_text[c].at));
	free(rows->items);
	rows->items = NULL;
	rows->count = 0;
}

/* db_benchmark_aggregate's columns, in the query's order. */
static const size_t agg_text[] = {
	TEXT_AT(benchmark_agg_row, workload), TEXT_AT(benchmark_agg_row, gpu), TEXT_AT(benchmark_agg_row, count),
	TEXT_AT(benchmark_agg_row, median), TEXT_AT(benchmark_agg_row, best), TEXT_AT(benchmark_agg_row, latest_mean),
	TEXT_AT(benchmark_agg_row, latest_std), TEXT_AT(benchmark_agg_row, latest_run),
	TEXT_AT(benchmark_agg_row, latest_commit), TEXT_AT(benchmark_agg_row, latest_at),
	TEXT_AT(benchmark_agg_row, p25), TEXT_AT(benchmark_agg_row, p75), TEXT_AT(benchmark_agg_row, max),
	TEXT_AT(benchmark_agg_row, revision),
};

static void fill_aggregate(void *item, const struct db_rows *rows, size_t i)
{
	for (size_t c = 0; c < sizeof(agg_text) / sizeof(agg_text[0]); c++)
		*(char **)((char *)item + agg_text[c]) = xstrdup(db_rows_get(rows, i, c));
}

void benchmark_agg_rows_release(struct benchmark_agg_rows *rows)
{
	if (!rows)
		return;
	for (size_t i = 0; i < rows->count; i++)
		for (size_t c = 0; c < sizeof(agg_text) / sizeof(agg_text[0]); c++)
			free(*(char **)((char *)&rows->items[i] + agg_text[c]));
	free(rows->items);
	rows->items = NULL;
	rows->count = 0;
}

int db_benchmark_rows(int64_t repo_id, const struct benchmark_filter *f, struct benchmark_rows *out)
{
	int rc = 0;
	char repo[24], run[24], before[24], limit[24];
	const char *params[13];
	filter_params(repo_id, f, repo, run, params);
	params[11] = f->before_id > 0 ? db_param_int(before, f->before_id) : NULL;
	params[12] = f->limit > 0 ? db_param_int(limit, f->limit + 1) : NULL;
	out->items = db_query_items(sizeof(*out->items), fill_result, &out->count, &rc, "WITH page AS (SELECT DISTINCT r.id FROM benchmark_runs r"
		       "  JOIN benchmark_results b ON b.run_id = r.id WHERE" FILTER_SQL
		       "  AND ($12::bigint IS NULL OR r.id < $12) ORDER BY r.id DESC LIMIT $13::bigint)"
		       " SELECT r.id, to_char(r.submitted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
		       "  r.submitter_name, r.commit_sha, r.kernel_commit_sha, r.benchmark_script_path,"
		       "  r.benchmark_script_sha, r.gpu, r.gpu_cores, r.backend, r.pytorch_version, r.os, r.cpu,"
		       "  b.workload, b.mean_ms, b.std_ms, b.min_ms, b.max_ms, b.q1_ms, b.q3_ms, b.iqr_ms,"
		       "  b.outliers, b.iterations, b.verified, r.source, r.build_id"
		       " FROM page JOIN benchmark_runs r ON r.id = page.id"
		       " JOIN benchmark_results b ON b.run_id = r.id WHERE" FILTER_SQL
		       " ORDER BY r.id DESC, b.workload", 13, params);
	return rc;
}

int db_benchmark_aggregate(int64_t repo_id, const struct benchmark_filter *f, struct benchmark_agg_rows *out)
{
	int rc = 0;
	char repo[24], run[24];
	const char *params[12];
	filter_params(repo_id, f, repo, run, params);
	params[11] = f->by_revision ? "t" : "f";
	/* The spread is over the runs' means: percentile_cont interpolates, as
	 * the median does. Farm runs are compared only among themselves
	 * (source "farm"): "all" means the users' runs. */
	out->items = db_query_items(sizeof(*out->items), fill_aggregate, &out->count, &rc,
				    "SELECT b.workload, r.gpu, count(*),"
		       "  percentile_cont(0.5) WITHIN GROUP (ORDER BY b.mean_ms), min(b.mean_ms),"
		       "  (array_agg(b.mean_ms ORDER BY r.id DESC))[1], (array_agg(b.std_ms ORDER BY r.id DESC))[1],"
		       "  max(r.id), (array_agg(r.commit_sha ORDER BY r.id DESC))[1],"
		       "  to_char(max(r.submitted_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
		       "  percentile_cont(0.25) WITHIN GROUP (ORDER BY b.mean_ms),"
		       "  percentile_cont(0.75) WITHIN GROUP (ORDER BY b.mean_ms), max(b.mean_ms),"
		       "  CASE WHEN $12::boolean THEN r.commit_sha ELSE '' END AS revision"
		       " FROM benchmark_runs r JOIN benchmark_results b ON b.run_id = r.id WHERE" FILTER_SQL
		       "  AND ($11::text IS NOT NULL OR r.source <> 'farm')"
		       " GROUP BY b.workload, r.gpu, revision ORDER BY b.workload, r.gpu, max(r.id)", 12, params);
	return rc;
}

static double cell_double(const struct db_rows *rows, size_t i, size_t c)
{
	return strtod(db_rows_get(rows, i, c), NULL);
}

/* The columns of db_benchmark_regressions' query, in order. */
static void fill_regression(void *item, const struct db_rows *rows, size_t i)
{
	struct benchmark_regression *g = item;
	db_rows_read(rows, i, DB_FIELDS(DB_STR(0, &g->commit), DB_STR(1, &g->gpu), DB_STR(2, &g->workload),
					DB_DOUBLE(3, &g->median), DB_DOUBLE(4, &g->spread), DB_STR(5, &g->prev_commit),
					DB_DOUBLE(6, &g->prev_median), DB_DOUBLE(7, &g->prev_spread),
					DB_DOUBLE(8, &g->slower_pct)));
}

void benchmark_regressions_release(struct benchmark_regressions *rows)
{
	if (!rows)
		return;
	for (size_t i = 0; i < rows->count; i++) {
		struct benchmark_regression *g = &rows->items[i];
		free(g->commit);
		free(g->gpu);
		free(g->workload);
		free(g->prev_commit);
	}
	free(rows->items);
	rows->items = NULL;
	rows->count = 0;
}

/* The one regression rule (db_benchmark_regressions and
 * db_benchmark_compare): per device and workload, a side's median of the
 * runs' means, its spread (the largest std_ms or range of means), and
 * "slower" when the head's median is more than pct percent over the base's
 * and the difference exceeds both spreads added. */
#define MEDIAN_SQL "percentile_cont(0.5) WITHIN GROUP (ORDER BY b.mean_ms)"
#define SPREAD_SQL "greatest(max(b.std_ms), max(b.mean_ms) - min(b.mean_ms))"
#define SLOWER_SQL(median, spread, base_median, base_spread, pct) \
	"(" base_median " > 0 AND " median " > " base_median " * (1 + " pct "::int / 100.0)" \
	" AND " median " - " base_median " > " spread " + " base_spread ")"
#define CHANGE_PCT_SQL(median, base_median) \
	"round(((" median " - " base_median ") / " base_median " * 100)::numeric, 1)"

int db_benchmark_regressions(int64_t repo_id, long pct, const char *commit_sha, struct benchmark_regressions *out)
{
	int rc = 0;
	char repo[24], threshold[24];
	const char *params[3] = { db_param_int(repo, repo_id), db_param_int(threshold, pct), commit_sha };
	out->items = db_query_items(sizeof(*out->items), fill_regression, &out->count, &rc,
				    "WITH m AS (SELECT r.commit_sha, r.gpu, b.workload, min(r.id) AS first_id,"
		       "  " MEDIAN_SQL " AS median, " SPREAD_SQL " AS spread"
		       "  FROM benchmark_runs r JOIN benchmark_results b ON b.run_id = r.id"
		       "  WHERE r.repo_id = $1 AND r.source = 'farm' GROUP BY r.commit_sha, r.gpu, b.workload),"
		       " p AS (SELECT m.*, lag(commit_sha) OVER w AS prev_commit, lag(median) OVER w AS prev_median,"
		       "  lag(spread) OVER w AS prev_spread FROM m"
		       "  WINDOW w AS (PARTITION BY gpu, workload ORDER BY first_id))"
		       " SELECT commit_sha, gpu, workload, median, spread, prev_commit, prev_median, prev_spread,"
		       "  " CHANGE_PCT_SQL("median", "prev_median")
		       " FROM p WHERE " SLOWER_SQL("median", "spread", "prev_median", "prev_spread", "$2")
		       "  AND ($3::text IS NULL OR commit_sha = $3)"
		       " ORDER BY first_id DESC, gpu, workload", 3, params);
	return rc;
}

/* ---- comparing two sides (versions or variants) ----------------------------- */

/* One side's variant filter on benchmark_runs r, parameters $c..$c+4:
 * commit, torch key, backend family, backend key, os family. */
#define SIDE_SQL(c, t, bf, bk, os) \
	"($" c "::text IS NULL OR r.commit_sha = $" c ")" \
	" AND ($" t "::text IS NULL OR r.torch_key = $" t ")" \
	" AND ($" bf "::text IS NULL OR r.backend_family = $" bf ")" \
	" AND ($" bk "::text IS NULL OR r.backend_key = $" bk ")" \
	" AND ($" os "::text IS NULL OR r.os_family = $" os ")"

/* Columns of one side from `runs` on: runs, median, min, max, p25, p75,
 * spread; runs 0 and the rest unset when the side has no result. */
static void fill_side(struct benchmark_stats *s, const struct db_rows *rows, size_t i, size_t c)
{
	memset(s, 0, sizeof(*s));
	if (db_rows_isnull(rows, i, c))
		return;
	s->runs = db_rows_int(rows, i, c, 0);
	double *v[] = { &s->median, &s->min, &s->max, &s->p25, &s->p75, &s->spread };
	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
		*v[k] = cell_double(rows, i, c + 1 + k);
}

static void fill_compare(void *item, const struct db_rows *rows, size_t i)
{
	struct benchmark_compare_row *row = item;
	fill_side(&row->base, rows, i, 2);
	fill_side(&row->head, rows, i, 9);
	row->has_change = !db_rows_isnull(rows, i, 16);
	db_rows_read(rows, i, DB_FIELDS(DB_STR(0, &row->gpu), DB_STR(1, &row->workload),
					DB_DOUBLE(16, &row->change_pct), DB_BOOL(17, &row->regression)));	/* 0 for NULL */
}

void benchmark_compare_rows_release(struct benchmark_compare_rows *rows)
{
	if (!rows)
		return;
	for (size_t i = 0; i < rows->count; i++) {
		free(rows->items[i].gpu);
		free(rows->items[i].workload);
	}
	free(rows->items);
	rows->items = NULL;
	rows->count = 0;
}

#define SIDE_COLUMNS(s) \
	s ".runs, " s ".median, " s ".lo, " s ".hi, " s ".p25, " s ".p75, " s ".spread"

int db_benchmark_compare(int64_t repo_id, const struct benchmark_filter *base, const struct benchmark_filter *head,
			 long pct, struct benchmark_compare_rows *out)
{
	int rc = 0;
	char repo[24], threshold[24];
	const char *params[] = {
		db_param_int(repo, repo_id), base->source, base->gpu, base->workload, db_param_int(threshold, pct),
		base->commit_sha, base->torch_key, base->backend_family, base->backend_key, base->os_family,
		head->commit_sha, head->torch_key, head->backend_family, head->backend_key, head->os_family,
	};
	/* A run may be on both sides (one commit, variants that overlap). */
	out->items = db_query_items(sizeof(*out->items), fill_compare, &out->count, &rc,
				    "WITH s AS (SELECT sd.side, r.gpu, b.workload, count(*) AS runs,"
		       "  " MEDIAN_SQL " AS median, min(b.mean_ms) AS lo, max(b.mean_ms) AS hi,"
		       "  percentile_cont(0.25) WITHIN GROUP (ORDER BY b.mean_ms) AS p25,"
		       "  percentile_cont(0.75) WITHIN GROUP (ORDER BY b.mean_ms) AS p75, " SPREAD_SQL " AS spread"
		       "  FROM benchmark_runs r JOIN benchmark_results b ON b.run_id = r.id, (VALUES (1), (2)) AS sd(side)"
		       "  WHERE r.repo_id = $1 AND ($2::text IS NULL OR r.source = $2)"
		       "  AND ($3::text IS NULL OR strpos(lower(r.gpu), lower($3)) > 0)"
		       "  AND ($4::text IS NULL OR b.workload = $4)"
		       "  AND CASE WHEN sd.side = 1 THEN " SIDE_SQL("6", "7", "8", "9", "10")
		       "  ELSE " SIDE_SQL("11", "12", "13", "14", "15") " END"
		       "  GROUP BY sd.side, r.gpu, b.workload)"
		       " SELECT coalesce(x.gpu, y.gpu) AS gpu, coalesce(x.workload, y.workload) AS workload, "
		       SIDE_COLUMNS("x") ", " SIDE_COLUMNS("y") ","
		       "  CASE WHEN x.median > 0 THEN " CHANGE_PCT_SQL("y.median", "x.median") " END,"
		       "  coalesce(" SLOWER_SQL("y.median", "y.spread", "x.median", "x.spread", "$5") ", false)"
		       " FROM (SELECT * FROM s WHERE side = 1) x"
		       " FULL JOIN (SELECT * FROM s WHERE side = 2) y ON y.gpu = x.gpu AND y.workload = x.workload"
		       " ORDER BY 1, 2", (int)(sizeof(params) / sizeof(params[0])), params);
	return rc;
}

/* ---- a kernel's farm result, for the listing's sort --------------------------- */

/* The farm runs of repos r's row on workload $w (and a device containing
 * $d, unless NULL), as a WHERE clause of alias a. */
static void farm_result_where(struct strbuf *sql, const char *a, const char *res, int p_workload, int p_device)
{
	strbuf_addf(sql, " WHERE %s.repo_id = r.id AND %s.source = 'farm' AND %s.workload = $%d"
			 " AND ($%d::text IS NULL OR strpos(lower(%s.gpu), lower($%d)) > 0)",
		    a, a, res, p_workload, p_device, a, p_device);
}

void db_benchmark_farm_result_sql(struct strbuf *sql, int p_workload, int p_device)
{
	strbuf_adds(sql, "(SELECT min(m.median) FROM (SELECT " MEDIAN_SQL " AS median"
			 " FROM benchmark_runs fr JOIN benchmark_results b ON b.run_id = fr.id");
	farm_result_where(sql, "fr", "b", p_workload, p_device);
	strbuf_adds(sql, " AND fr.commit_sha = (SELECT lr.commit_sha FROM benchmark_runs lr"
			 " JOIN benchmark_results lb ON lb.run_id = lr.id");
	farm_result_where(sql, "lr", "lb", p_workload, p_device);
	strbuf_adds(sql, " ORDER BY lr.id DESC LIMIT 1) GROUP BY fr.gpu) m)");
}
