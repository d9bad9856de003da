/* db_store_check.c -- what khub fsck and khub gc ask the database: LFS
 * writes in flight, links, the removal of an unused LFS object under its
 * lock, the variant index rows and published build outputs of a repo. */
#include "storage/db/db_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Rows older than this name a write that died with its process. */
#define INFLIGHT_STALE "1 day"

int64_t db_lfs_object_key(const char *oid)
{
	char head[8] = { 0 };
	memcpy(head, oid, strnlen(oid, 7));
	return (int64_t)strtoll(head, NULL, 16);
}

int db_lfs_inflight_begin_many(const char *const *oids, size_t n, int64_t *ids)
{
	struct db_rows rows = { 0 };
	struct strbuf cols[2];
	const char *params[3];
	char kind[24];
	params[0] = db_param_int(kind, DB_LOCK_LFS_OBJECT);
	db_columns_init(cols, 2);
	for (size_t i = 0; i < n; i++) {
		char key[24];
		db_columns_row(cols, 2, i);
		db_array_add(&cols[0], oids[i]);
		db_array_add(&cols[1], db_param_int(key, db_lfs_object_key(oids[i])));
	}
	db_columns_end(cols, 2, params + 1);
	memset(ids, 0, n * sizeof(*ids));
	int rc = db_tx_begin();
	if (rc < 0)
		goto cleanup;
	/* waits while gc removes one of these objects (keys in one order: two
	 * batches never wait for each other); gc then sees the rows */
	if ((rc = db_run("SELECT pg_advisory_xact_lock_shared($1::int, k) FROM "
			 "(SELECT DISTINCT unnest($2::int[]) AS k ORDER BY 1) keys",
			 2, (const char *[]){ kind, params[2] })) < 0 ||
	    (rc = db_query(&rows, "INSERT INTO lfs_inflight (oid) SELECT o FROM unnest($1::text[]) "
			   "WITH ORDINALITY AS t(o, i) ORDER BY i RETURNING id", 1, params + 1)) < 0) {
		db_tx_rollback();
		goto cleanup;
	}
	if ((rc = db_tx_commit()) == 0 && rows.count == n)
		for (size_t i = 0; i < n; i++)
			ids[i] = db_rows_int(&rows, i, 0, 0);
cleanup:
	db_rows_release(&rows);
	db_columns_release(cols, 2);
	return rc;
}

int db_lfs_inflight_begin(const char *oid, int64_t *id)
{
	return db_lfs_inflight_begin_many(&oid, 1, id);
}

void db_lfs_inflight_end_many(const int64_t *ids, size_t n)
{
	struct strbuf list = STRBUF_INIT;
	strbuf_adds(&list, "{");
	size_t count = 0;
	for (size_t i = 0; i < n; i++)
		if (ids[i] > 0)
			strbuf_addf(&list, "%s%" PRId64, count++ ? "," : "", ids[i]);
	strbuf_adds(&list, "}");
	const char *params[1] = { list.buf };
	if (count && db_run("DELETE FROM lfs_inflight WHERE id = ANY($1::bigint[])", 1, params) < 0)
		log_warn("cannot end %zu in-flight LFS writes (khub gc expires them after a day)", count);
	strbuf_release(&list);
}

void db_lfs_inflight_end(int64_t id)
{
	db_lfs_inflight_end_many(&id, 1);
}

int db_lfs_linked_oids(char ***oids, size_t *n)
{
	return db_query_texts(oids, n, "SELECT DISTINCT oid FROM lfs_repo_objects ORDER BY oid", 0, NULL);
}

int db_lfs_collect(const char *oid, int (*remove)(const char *oid, void *arg), void *arg)
{
	struct db_rows rows = { 0 };
	const char *params[1] = { oid };
	int rc = db_tx_begin();
	if (rc < 0)
		return rc;
	if ((rc = db_lock_xact(DB_LOCK_LFS_OBJECT, db_lfs_object_key(oid))) < 0 ||
	    (rc = db_query(&rows, "SELECT EXISTS (SELECT 1 FROM lfs_repo_objects WHERE oid = $1) OR "
			   "EXISTS (SELECT 1 FROM lfs_inflight WHERE oid = $1 AND started_at > now() - interval '"
			   INFLIGHT_STALE "')", 1, params)) < 0) {
		db_tx_rollback();
		return rc;
	}
	int used = rows.count == 1 && db_rows_get(&rows, 0, 0)[0] == 't';
	db_rows_release(&rows);
	/* removed while the lock is held: a write starting now waits for it */
	rc = used ? 0 : remove(oid, arg);
	db_tx_rollback();	/* nothing was written; ends the lock */
	return rc;
}

int db_lfs_inflight_expire(void)
{
	return db_run_count("DELETE FROM lfs_inflight WHERE started_at < now() - interval '" INFLIGHT_STALE "'", 0,
			    NULL);
}

int db_lfs_unlink(int64_t repo_id, const char *oid)
{
	char id[24];
	const char *params[2] = { db_param_int(id, repo_id), oid };
	return db_run("DELETE FROM lfs_repo_objects WHERE repo_id = $1 AND oid = $2", 2, params);
}

int db_kernel_commits_of(int64_t repo_id, struct strvec *out)
{
	struct db_rows rows;
	char id[24];
	const char *params[1] = { db_param_int(id, repo_id) };
	int rc = db_query(&rows, "SELECT commit_sha FROM kernel_commits WHERE repo_id = $1 ORDER BY commit_sha", 1, params);
	for (size_t i = 0; rc == 0 && i < rows.count; i++)
		strvec_pushf(out, "%s", db_rows_get(&rows, i, 0));
	db_rows_release(&rows);
	return rc;
}

static void fill_head(void *item, const struct db_rows *rows, size_t i)
{
	struct kernel_head *h = item;
	db_rows_read(rows, i, DB_FIELDS(DB_STR(0, &h->ref), DB_TEXT(1, h->commit, sizeof(h->commit))));
}

int db_kernel_heads_of(int64_t repo_id, struct kernel_head **heads, size_t *n)
{
	char id[24];
	int rc = 0;
	const char *params[1] = { db_param_int(id, repo_id) };
	*heads = db_query_items(sizeof(**heads), fill_head, n, &rc,
				"SELECT ref, commit_sha FROM kernel_heads WHERE repo_id = $1 ORDER BY ref", 1, params);
	return rc;
}

void kernel_heads_free(struct kernel_head *heads, size_t n)
{
	for (size_t i = 0; heads && i < n; i++)
		free(heads[i].ref);
	free(heads);
}

static void fill_published(void *item, const struct db_rows *rows, size_t i)
{
	struct published_build *b = item;
	db_rows_read(rows, i, DB_FIELDS(DB_I64(0, &b->id), DB_STR(1, &b->variant),
					DB_TEXT(2, b->commit, sizeof(b->commit))));
}

int db_build_outputs_of(int64_t repo_id, struct published_build **builds, size_t *n)
{
	char id[24];
	int rc = 0;
	const char *params[1] = { db_param_int(id, repo_id) };
	*builds = db_query_items(sizeof(**builds), fill_published, n, &rc,
				 "SELECT id, variant, published_commit FROM builds WHERE repo_id = $1"
				 " AND state = 'succeeded' AND published_commit IS NOT NULL ORDER BY id", 1, params);
	return rc;
}

void published_builds_free(struct published_build *builds, size_t n)
{
	for (size_t i = 0; builds && i < n; i++)
		free(builds[i].variant);
	free(builds);
}

int db_kernel_commit_forget(int64_t repo_id, const char *commit_sha)
{
	char id[24];
	const char *params[2] = { db_param_int(id, repo_id), commit_sha };
	int rc = db_tx_begin();
	if (rc < 0)
		return rc;
	if ((rc = db_run("DELETE FROM kernel_variants WHERE repo_id = $1 AND commit_sha = $2", 2, params)) < 0 ||
	    (rc = db_run("DELETE FROM kernel_commits WHERE repo_id = $1 AND commit_sha = $2", 2, params)) < 0) {
		db_tx_rollback();
		return rc;
	}
	return db_tx_commit();
}
