/* db_downloads.c -- download counters: batched additions from the server's
 * in-memory counts, and the per-variant, per-day breakdown. */
#include "storage/db/db_internal.h"

#include <stdlib.h>
#include <string.h>

int db_downloads_add(const struct download_count *counts, size_t n)
{
	enum { REPO, DAY, VARIANT, KERNELS, TORCH, BACKEND, COUNT, NARRAYS };
	if (n == 0)
		return 0;
	struct strbuf arrays[NARRAYS];
	db_columns_init(arrays, NARRAYS);
	for (size_t i = 0; i < n; i++) {
		const struct download_count *c = &counts[i];
		char num[24];
		db_columns_row(arrays, NARRAYS, i);
		db_array_add(&arrays[REPO], db_param_int(num, c->repo_id));
		db_array_add(&arrays[DAY], c->day);
		db_array_add(&arrays[VARIANT], c->variant);
		db_array_add(&arrays[KERNELS], c->kernels_version);
		db_array_add(&arrays[TORCH], c->torch_version);
		db_array_add(&arrays[BACKEND], c->backend);
		db_array_add(&arrays[COUNT], db_param_int(num, c->count));
	}
	const char *params[NARRAYS];
	db_columns_end(arrays, NARRAYS, params);
	/* One statement, so the per-day rows and repos.downloads move
	 * together. The join drops counts of repos deleted since. */
	PGresult *res = db_exec(
		"WITH d AS (SELECT t.* FROM unnest($1::bigint[], $2::date[], $3::text[], $4::text[], $5::text[],"
		"  $6::text[], $7::bigint[]) AS t(repo_id, day, variant, kernels_version, torch_version, backend, n)"
		"  JOIN repos r ON r.id = t.repo_id),"
		" ins AS (INSERT INTO download_counts AS c (repo_id, day, variant, kernels_version, torch_version,"
		"  backend, count) SELECT * FROM d"
		"  ON CONFLICT (repo_id, day, variant, kernels_version, torch_version, backend)"
		"  DO UPDATE SET count = c.count + EXCLUDED.count RETURNING 1),"
		" upd AS (UPDATE repos r SET downloads = r.downloads + s.n"
		"  FROM (SELECT repo_id, sum(n)::bigint AS n FROM d GROUP BY repo_id) s WHERE r.id = s.repo_id"
		"  RETURNING 1)"
		" SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM upd)", NARRAYS, params, NULL);
	db_columns_release(arrays, NARRAYS);
	if (!res)
		return KHUB_EDB;
	PQclear(res);
	return 0;
}

static void download_row_fill(void *item, const struct db_rows *rows, size_t i)
{
	struct download_row *d = item;
	db_rows_read(rows, i, DB_FIELDS(DB_STR(0, &d->day), DB_STR(1, &d->variant), DB_STR(2, &d->kernels_version),
					DB_STR(3, &d->torch_version), DB_STR(4, &d->backend), DB_I64(5, &d->count)));
}

void download_rows_release(struct download_rows *rows)
{
	if (!rows)
		return;
	for (size_t i = 0; i < rows->count; i++) {
		struct download_row *d = &rows->items[i];
		char *text[] = { d->day, d->variant, d->kernels_version, d->torch_version, d->backend };
		for (size_t c = 0; c < sizeof(text) / sizeof(text[0]); c++)
			free(text[c]);
	}
	free(rows->items);
	rows->items = NULL;
	rows->count = 0;
}

int db_downloads_rows(int64_t repo_id, long days, struct download_rows *out)
{
	char repo[24], ndays[24];
	int rc = 0;
	const char *params[2] = { db_param_int(repo, repo_id), db_param_int(ndays, days) };
	out->items = db_query_items(sizeof(*out->items), download_row_fill, &out->count, &rc, "SELECT to_char(day, 'YYYY-MM-DD'), variant, kernels_version, torch_version, backend, count"
		       " FROM download_counts WHERE repo_id = $1"
		       " AND day > (now() AT TIME ZONE 'UTC')::date - $2::int"
		       " ORDER BY day DESC, variant, count DESC, kernels_version, torch_version, backend",
		       2, params);
	return rc;
}
