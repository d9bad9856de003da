/* db_kernels.c -- the kernel repo listing (GET /api/kernels): visibility,
 * author and search filters, the variant filters over the main and vN
 * heads of the variant index, sorting and one page; search over names
 * and the README cards (kernel_cards). */
#include "storage/db/db_internal.h"
#include "kernel/kernel.h"

#include <stdlib.h>
#include <string.h>

struct query {
	struct strbuf sql;
	const char *params[16];
	char *owned[16];
	int n;
};

/* Add a text parameter; returns its $N. */
static int query_param(struct query *q, const char *value)
{
	q->params[q->n] = value;
	return ++q->n;
}

static int query_param_owned(struct query *q, char *value)
{
	q->owned[q->n] = value;
	return query_param(q, value);
}

static void query_release(struct query *q)
{
	for (int i = 0; i < q->n; i++)
		free(q->owned[i]);
	strbuf_release(&q->sql);
}

static int given(const char *s)
{
	return s && s[0];
}

/* The variant filters, as one EXISTS over the main and vN heads: a repo
 * matches when one variant satisfies every filter given. The torch filter
 * follows the loader: torchXY of that version, a stable ABI not newer, or a
 * Python-only variant; backend=cuda also takes torch-universal (and
 * backend=cann the loader's torch-npu). */
static void add_variant_filters(const struct kernel_listing_filter *f, struct query *q)
{
	if (!given(f->backend) && !f->torch && !given(f->arch) && !given(f->os) && !f->backend_version)
		return;
	strbuf_adds(&q->sql, " AND EXISTS (SELECT 1 FROM kernel_heads h JOIN kernel_variants v"
			     " ON v.repo_id = h.repo_id AND v.commit_sha = h.commit_sha WHERE h.repo_id = r.id"
			     " AND (h.ref = 'refs/heads/main' OR h.ref ~ '^refs/heads/v[0-9]+$') AND v.name_valid");
	if (given(f->backend)) {
		const struct kernel_backend *b = kernel_backend_find(f->backend);
		int p = query_param(q, f->backend), noarch = query_param(q, b ? b->noarch : f->backend);
		strbuf_addf(&q->sql, " AND (v.backend = $%d OR v.backend_tag = $%d OR (v.framework = 'torch-noarch' AND"
				     " v.backend IN ($%d, '" VARIANT_NOARCH_UNIVERSAL "')))", p, p, noarch);
	}
	if (f->torch) {
		int maj = query_param_owned(q, xasprintf("%ld", f->torch_major));
		int min = query_param_owned(q, xasprintf("%ld", f->torch_minor));
		strbuf_addf(&q->sql, " AND ((v.framework = 'torch' AND v.framework_major = $%d::int"
				     " AND v.framework_minor = $%d::int) OR (v.framework = 'torch-stable-abi' AND"
				     " (v.framework_major, v.framework_minor) <= ($%d::int, $%d::int)) OR"
				     " v.framework = 'torch-noarch')", maj, min, maj, min);
	}
	if (given(f->arch)) {
		/* arch=x86_64 or arch=x86_64-linux */
		const char *dash = strchr(f->arch, '-');
		int p = query_param_owned(q, dash ? xstrndup(f->arch, (size_t)(dash - f->arch)) : xstrdup(f->arch));
		strbuf_addf(&q->sql, " AND (v.arch IS NULL OR v.arch = $%d)", p);
		if (dash)
			strbuf_addf(&q->sql, " AND (v.os IS NULL OR v.os = $%d)", query_param(q, dash + 1));
	}
	if (given(f->os))
		strbuf_addf(&q->sql, " AND (v.os IS NULL OR v.os = $%d)", query_param(q, f->os));
	if (f->backend_version) {
		int maj = query_param_owned(q, xasprintf("%ld", f->backend_major));
		int min = query_param_owned(q, xasprintf("%ld", f->backend_minor));
		strbuf_addf(&q->sql, " AND v.backend_major = $%d::int AND v.backend_minor = $%d::int", maj, min);
	}
	strbuf_adds(&q->sql, ")");
}

enum { COL_ID, COL_NS, COL_NAME, COL_PRIVATE, COL_MODIFIED, COL_CREATED, COL_DOWNLOADS, COL_OWNER, COL_TRENDING,
       COL_VERSIONS, COL_FAMILIES, COL_TRUSTED, COL_DESCRIPTION, COL_LICENSE, COL_TAGS, COL_TOTAL, COL_BENCH };

static void fill_item(const struct db_rows *rows, size_t i, struct kernel_listing_item *it)
{
	struct repo_record *rec = &it->record;
	rec->type = REPO_KERNEL;
	db_rows_read(rows, i, DB_FIELDS(
		DB_I64(COL_ID, &rec->id), DB_I64(COL_OWNER, &rec->owner_id), DB_TEXT(COL_NS, rec->ns, sizeof(rec->ns)),
		DB_TEXT(COL_NAME, rec->name, sizeof(rec->name)), DB_BOOL(COL_PRIVATE, &rec->private),
		DB_TIME(COL_MODIFIED, &rec->last_modified), DB_I64(COL_DOWNLOADS, &rec->downloads),
		DB_TIME(COL_CREATED, &it->created_at), DB_I64(COL_TRENDING, &it->trending),
		DB_STR(COL_VERSIONS, &it->versions), DB_STR(COL_FAMILIES, &it->backends),
		DB_BOOL(COL_TRUSTED, &it->trusted_publisher), DB_STR(COL_DESCRIPTION, &it->description),
		DB_STR(COL_LICENSE, &it->license), DB_STR(COL_TAGS, &it->tags),
		DB_DOUBLE(COL_BENCH, &it->bench_ms)));	/* 0 for NULL */
	it->has_bench = !db_rows_isnull(rows, i, COL_BENCH);
}

/* The page's bench column (NULL unless sorting by a farm result) and the
 * ORDER BY both selects share; kernels without a farm result come last
 * either way. */
static void listing_order_sql(const struct kernel_listing_filter *f, struct query *q, struct strbuf *bench,
			      struct strbuf *order)
{
	static const char *const orders[] = {
		[KERNEL_SORT_LAST_MODIFIED] = "r.last_modified", [KERNEL_SORT_DOWNLOADS] = "r.downloads",
		[KERNEL_SORT_TRENDING] = "trending", [KERNEL_SORT_CREATED] = "r.created_at",
		[KERNEL_SORT_BENCH] = "bench",
	};
	const char *dir = f->descending ? "DESC" : "ASC";
	if (f->sort == KERNEL_SORT_BENCH) {
		int w = query_param(q, f->bench_workload);
		int d = query_param(q, given(f->bench_device) ? f->bench_device : NULL);
		strbuf_adds(bench, ", ");
		db_benchmark_farm_result_sql(bench, w, d);
		strbuf_adds(bench, " AS bench");
	} else {
		strbuf_adds(bench, ", NULL::float8 AS bench");
	}
	if (f->sort == KERNEL_SORT_ID)
		strbuf_addf(order, " ORDER BY lower(r.namespace) %s, lower(r.name) %s, r.id %s", dir, dir, dir);
	else
		strbuf_addf(order, " ORDER BY %s %s%s, r.id %s", orders[f->sort], dir,
			    f->sort == KERNEL_SORT_BENCH ? " NULLS LAST" : "", dir);
}

/* What search= matches, the one rule of the listing (API and page): the
 * text in org/name, or its words (english stems, every word) in org and
 * name or in main's README card: description, tags, license, body
 * (kernel_cards, read when main moves). Only among repos the caller may
 * see: the visibility filter comes first. */
static void add_search(const char *search, struct query *q)
{
	int p = query_param(q, search);
	strbuf_addf(&q->sql, " AND (strpos(lower(r.namespace || '/' || r.name), lower($%d)) > 0"
			     " OR to_tsvector('english', r.namespace || ' ' || r.name) @@ plainto_tsquery('english', $%d)"
			     " OR EXISTS (SELECT 1 FROM kernel_cards k WHERE k.repo_id = r.id"
			     " AND k.document @@ plainto_tsquery('english', $%d)))", p, p, p);
}

int db_kernel_listing(const struct kernel_listing_filter *f, struct kernel_listing *out)
{
	/* trending: downloads of the last 7 UTC days */
	static const char trending_sql[] = "(SELECT coalesce(sum(d.count), 0)::bigint FROM download_counts d"
					   " WHERE d.repo_id = r.id AND d.day > (now() AT TIME ZONE 'UTC')::date - 7)";
	struct query q = { STRBUF_INIT, { 0 }, { 0 }, 0 };
	struct strbuf order = STRBUF_INIT, bench = STRBUF_INIT;
	memset(out, 0, sizeof(*out));
	char uid[24];
	int p_uid = query_param(&q, db_param_int(uid, f->user_id));
	int p_admin = query_param(&q, f->is_site_admin ? "true" : "false");
	int by_trending = f->sort == KERNEL_SORT_TRENDING;
	listing_order_sql(f, &q, &bench, &order);
	/* The matching page is chosen first (with the count of every match);
	 * what each listed repo shows is worked out for that page's rows only. */
	strbuf_addf(&q.sql,
		    "SELECT r.id, r.namespace, r.name, r.private, extract(epoch FROM r.last_modified)::bigint,"
		    " extract(epoch FROM r.created_at)::bigint, r.downloads, r.owner_id, %s AS trending,"
		    " (SELECT coalesce(json_agg(substr(h.ref, 12) ORDER BY substr(h.ref, 13)::bigint), '[]')::text"
		    "  FROM kernel_heads h WHERE h.repo_id = r.id AND h.ref ~ '^refs/heads/v[0-9]{1,9}$'),"
		    " (SELECT coalesce(json_agg(DISTINCT v.backend ORDER BY v.backend), '[]')::text"
		    "  FROM kernel_heads h JOIN kernel_variants v ON v.repo_id = h.repo_id AND v.commit_sha = h.commit_sha"
		    "  WHERE h.repo_id = r.id AND (h.ref = 'refs/heads/main' OR h.ref ~ '^refs/heads/v[0-9]+$')"
		    "  AND v.name_valid AND v.backend <> '" VARIANT_NOARCH_UNIVERSAL "'),"
		    " (SELECT a.trusted_kernel_publisher FROM accounts a WHERE a.id = r.owner_id),"
		    " coalesce(k.description, ''), coalesce(k.license, ''), coalesce(k.tags, '[]')::text,"
		    " page.total, page.bench"
		    " FROM (SELECT r.id AS rid, count(*) OVER () AS total%s%s%s%s FROM repos r"
		    " WHERE r.type = 'kernel' AND (NOT r.private OR $%d::boolean OR r.owner_id = $%d::bigint"
		    " OR r.owner_id IN (SELECT org_id FROM memberships WHERE user_id = $%d::bigint))",
		    by_trending ? "page.trending" : trending_sql, by_trending ? ", " : "", by_trending ? trending_sql : "",
		    by_trending ? " AS trending" : "", bench.buf, p_admin, p_uid, p_uid);
	if (given(f->author))
		strbuf_addf(&q.sql, " AND lower(r.namespace) = lower($%d)", query_param(&q, f->author));
	if (given(f->search))
		add_search(f->search, &q);
	if (f->trusted_only)
		strbuf_adds(&q.sql, " AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = r.owner_id"
				    " AND a.trusted_kernel_publisher)");
	add_variant_filters(f, &q);
	strbuf_adds(&q.sql, order.buf);
	strbuf_addf(&q.sql, " LIMIT %ld OFFSET %ld) page JOIN repos r ON r.id = page.rid"
			    " LEFT JOIN kernel_cards k ON k.repo_id = r.id", f->limit, f->offset);
	strbuf_adds(&q.sql, order.buf);
	strbuf_release(&order);
	strbuf_release(&bench);

	struct db_rows rows;
	int rc = db_query(&rows, q.sql.buf, q.n, q.params);
	query_release(&q);
	if (rc < 0)
		return rc;
	out->items = xcalloc(rows.count + 1, sizeof(*out->items));
	out->total = rows.count ? (long)db_rows_int(&rows, 0, COL_TOTAL, 0) : 0;
	for (size_t i = 0; i < rows.count; i++)
		fill_item(&rows, i, &out->items[i]);
	out->count = rows.count;
	db_rows_release(&rows);
	return 0;
}

void kernel_listing_release(struct kernel_listing *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++) {
		free(list->items[i].versions);
		free(list->items[i].backends);
		free(list->items[i].description);
		free(list->items[i].license);
		free(list->items[i].tags);
	}
	free(list->items);
	memset(list, 0, sizeof(*list));
}
