/* db_campaigns.c -- the fleet rebuilds' tables (sql/0039_build_campaigns.sql):
 * campaigns, what each did per kernel, and the pull requests they staged. */
#include "storage/db/db_builds.h"
#include "storage/db/db_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define ISO(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"


void db_campaigns_free(struct db_campaign *c, size_t n)
{
	for (size_t i = 0; c && i < n; i++) {
		free(c[i].reason);
		free(c[i].requested_by);
	}
	free(c);
}

static void fill_campaign(void *item, const struct db_rows *rows, size_t row)
{
	struct db_campaign *c = item;
	long *counts[] = { &c->kernels, &c->built, &c->failed, &c->waiting, &c->skipped, &c->merged };
	db_rows_read(rows, row, DB_FIELDS(DB_I64(0, &c->id), DB_TEXT(1, c->variant, sizeof(c->variant)),
					  DB_STR_OR_NULL(2, &c->reason), DB_STR_OR_NULL(3, &c->requested_by),
					  DB_TEXT(4, c->created, sizeof(c->created))));
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		*counts[i] = (long)db_rows_int(rows, row, 5 + i, 0);
}

int db_campaign_list(int64_t id, long limit, struct db_campaign **out, size_t *n)
{
	char cid[24], lim[24];
	int rc;
	snprintf(lim, sizeof(lim), "%ld", limit);
	const char *params[2] = { db_param_int(cid, id), lim };
	/* waiting: queued, or running (a worker holds it) */
	*out = db_query_items(sizeof(**out), fill_campaign, n, &rc,
			      "SELECT c.id, c.variant, c.reason, c.requested_by, " ISO("c.created_at") ","
			      " count(k.repo_id), count(*) FILTER (WHERE b.state IN ('succeeded', 'staged', 'superseded')),"
			      " count(*) FILTER (WHERE b.state IN ('failed', 'canceled')),"
			      " count(*) FILTER (WHERE b.state IN ('queued', 'running')),"
			      " count(*) FILTER (WHERE k.skipped IS NOT NULL),"
			      " count(*) FILTER (WHERE k.merged_at IS NOT NULL)"
			      " FROM build_campaigns c LEFT JOIN build_campaign_kernels k ON k.campaign_id = c.id"
			      " LEFT JOIN builds b ON b.id = k.build_id WHERE $1::bigint = 0 OR c.id = $1"
			      " GROUP BY c.id ORDER BY c.id DESC LIMIT $2", 2, params);
	return rc;
}

int db_campaign_create(const char *variant, const char *reason, const char *requested_by, int64_t *id)
{
	const char *params[3] = { variant, reason, requested_by };
	int rc = db_query_row("INSERT INTO build_campaigns (variant, reason, requested_by) VALUES ($1, $2, $3)"
			      " RETURNING id", 3, params, DB_FIELDS(DB_I64(0, id)));
	return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
}

void db_campaign_kernel_release(struct db_campaign_kernel *k)
{
	if (!k)
		return;
	free(k->skipped);
	free(k->pr_ref);
	free(k->pr_base);
	free(k->description);
	k->skipped = k->pr_ref = k->pr_base = k->description = NULL;
}

void db_campaign_kernels_free(struct db_campaign_kernel *k, size_t n)
{
	for (size_t i = 0; k && i < n; i++)
		db_campaign_kernel_release(&k[i]);
	free(k);
}

#define KERNEL_COLUMNS "k.campaign_id, k.repo_id, coalesce(k.build_id, 0), coalesce(k.version, -1), r.namespace," \
	" r.name, k.source_commit, c.variant, coalesce(b.state, ''), k.skipped, k.pr_ref, k.pr_base, k.description," \
	" (k.merged_at IS NOT NULL)::int, (r.campaign_publish = 'direct')::int, coalesce(b.superseded_by, 0)" \
	" FROM build_campaign_kernels k JOIN build_campaigns c ON c.id = k.campaign_id" \
	" JOIN repos r ON r.id = k.repo_id LEFT JOIN builds b ON b.id = k.build_id"

static void fill_kernel(void *item, const struct db_rows *rows, size_t row)
{
	struct db_campaign_kernel *k = item;
	db_rows_read(rows, row, DB_FIELDS(DB_I64(0, &k->campaign_id), DB_I64(1, &k->repo_id), DB_I64(2, &k->build_id),
					  DB_I64_OR(3, &k->version, -1), DB_TEXT(4, k->ns, sizeof(k->ns)),
					  DB_TEXT(5, k->name, sizeof(k->name)), DB_TEXT(6, k->commit, sizeof(k->commit)),
					  DB_TEXT(7, k->variant, sizeof(k->variant)), DB_TEXT(8, k->state, sizeof(k->state)),
					  DB_STR_OR_NULL(9, &k->skipped), DB_STR_OR_NULL(10, &k->pr_ref),
					  DB_STR_OR_NULL(11, &k->pr_base), DB_STR_OR_NULL(12, &k->description)));
	k->merged = db_rows_int(rows, row, 13, 0) != 0;
	k->publish_direct = db_rows_int(rows, row, 14, 0) != 0;
	k->superseded_by = db_rows_int(rows, row, 15, 0);
}

int db_campaign_kernels(int64_t id, struct db_campaign_kernel **out, size_t *n)
{
	char cid[24];
	int rc;
	const char *params[1] = { db_param_int(cid, id) };
	*out = db_query_items(sizeof(**out), fill_kernel, n, &rc,
			      "SELECT " KERNEL_COLUMNS " WHERE k.campaign_id = $1 ORDER BY k.position", 1, params);
	return rc;
}

int db_campaign_prs_of_repo(int64_t repo_id, struct db_campaign_kernel **out, size_t *n)
{
	char rid[24];
	int rc;
	const char *params[1] = { db_param_int(rid, repo_id) };
	*out = db_query_items(sizeof(**out), fill_kernel, n, &rc,
			      "SELECT " KERNEL_COLUMNS " WHERE k.repo_id = $1 AND k.pr_ref IS NOT NULL ORDER BY k.campaign_id DESC",
			      1, params);
	return rc;
}

/* The one kernel row the query answers (KHUB_ENOTFOUND: none). */
static int kernel_one(struct db_campaign_kernel *out, const char *sql, int nparams, const char *const *params)
{
	size_t n = 0;
	int rc;
	struct db_campaign_kernel *k = db_query_items(sizeof(*k), fill_kernel, &n, &rc, sql, nparams, params);
	memset(out, 0, sizeof(*out));
	if (rc == 0 && n == 0)
		rc = KHUB_ENOTFOUND;
	if (rc == 0) {
		*out = k[0];
		memset(&k[0], 0, sizeof(k[0]));
	}
	db_campaign_kernels_free(k, n);
	return rc;
}

int db_campaign_of_build(int64_t build_id, struct db_campaign_kernel *out)
{
	char bid[24];
	const char *params[1] = { db_param_int(bid, build_id) };
	return kernel_one(out, "SELECT " KERNEL_COLUMNS " WHERE k.build_id = $1 ORDER BY k.campaign_id DESC LIMIT 1",
			  1, params);
}

int db_campaign_kernel_get(int64_t campaign_id, int64_t repo_id, struct db_campaign_kernel *out)
{
	char cid[24], rid[24];
	const char *params[2] = { db_param_int(cid, campaign_id), db_param_int(rid, repo_id) };
	return kernel_one(out, "SELECT " KERNEL_COLUMNS " WHERE k.campaign_id = $1 AND k.repo_id = $2", 2, params);
}

int db_campaign_kernel_add(int64_t campaign_id, int64_t repo_id, int position, const char *commit, long version,
			   int64_t build_id, const char *skipped)
{
	char cid[24], rid[24], pos[24], ver[24], bid[24];
	const char *params[7] = { db_param_int(cid, campaign_id), db_param_int(rid, repo_id), db_param_int(pos, position),
				  commit, version >= 0 ? db_param_int(ver, version) : NULL,
				  build_id > 0 ? db_param_int(bid, build_id) : NULL, skipped };
	return db_run("INSERT INTO build_campaign_kernels (campaign_id, repo_id, position, source_commit, version,"
		      " build_id, skipped) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (campaign_id, repo_id) DO UPDATE"
		      " SET build_id = EXCLUDED.build_id, skipped = EXCLUDED.skipped", 7, params);
}

int db_campaign_set_pr(int64_t campaign_id, int64_t repo_id, const char *pr_ref, const char *pr_base,
		       long version, const char *description)
{
	char cid[24], rid[24], ver[24];
	snprintf(ver, sizeof(ver), "%ld", version);
	const char *params[6] = { db_param_int(cid, campaign_id), db_param_int(rid, repo_id), pr_ref, pr_base, description, ver };
	return db_run_one("UPDATE build_campaign_kernels SET pr_ref = $3, pr_base = $4, description = $5, version = $6"
			  " WHERE campaign_id = $1 AND repo_id = $2", 6, params);
}

int db_campaign_set_merged(int64_t campaign_id, int64_t repo_id)
{
	char cid[24], rid[24];
	const char *params[2] = { db_param_int(cid, campaign_id), db_param_int(rid, repo_id) };
	return db_run_one("UPDATE build_campaign_kernels SET merged_at = now() WHERE campaign_id = $1 AND repo_id = $2"
			  " AND merged_at IS NULL", 2, params);
}

static void fill_candidate(void *item, const struct db_rows *rows, size_t row)
{
	struct db_campaign_candidate *c = item;
	db_rows_read(rows, row, DB_FIELDS(DB_I64(0, &c->id), DB_I64(1, &c->owner_id),
					  DB_TEXT(2, c->ns, sizeof(c->ns)), DB_TEXT(3, c->name, sizeof(c->name))));
}

int db_campaign_candidates(struct db_campaign_candidate **out, size_t *n)
{
	int rc;
	*out = db_query_items(sizeof(**out), fill_candidate, n, &rc, "SELECT id, owner_id, namespace, name FROM repos"
			      " WHERE type = 'kernel' AND NOT mirrored ORDER BY id", 0, NULL);
	return rc;
}
