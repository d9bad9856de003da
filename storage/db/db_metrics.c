/* db_metrics.c -- the figures /metrics reads from the database: the build
 * queue (depth and ages), air-gap imports, and how far behind each mirrored
 * repo is. Each is one indexed or small query per scrape. */
#include "storage/db/db_internal.h"

#include <stdlib.h>

/* The oldest queued job is the first of the builds_queue index. */
static int read_builds(struct db_metrics *out)
{
	return db_query_row("SELECT (SELECT count(*) FROM builds WHERE state = 'queued'),"
			    " (SELECT extract(epoch FROM now() - min(created_at)) FROM builds WHERE state = 'queued'),"
			    " (SELECT count(*) FROM builds WHERE state = 'running'),"
			    " (SELECT extract(epoch FROM now() - min(started_at)) FROM builds WHERE state = 'running')",
			    0, NULL, DB_FIELDS(DB_I64(0, &out->builds_queued), DB_DOUBLE(1, &out->build_queued_oldest_s),
					       DB_I64(2, &out->builds_running), DB_DOUBLE(3, &out->build_running_oldest_s)));
}

static int read_sync_imports(struct db_metrics *out)
{
	return db_query_row("SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'applying'),"
			    " extract(epoch FROM max(finished_at)) FROM sync_imports", 0, NULL,
			    DB_FIELDS(DB_I64(0, &out->sync_imports_done), DB_I64(1, &out->sync_imports_applying),
				      DB_DOUBLE(2, &out->sync_import_last)));
}

static void fill_mirror_lag(void *item, const struct db_rows *rows, size_t i)
{
	struct db_mirror_lag *m = item;
	db_rows_read(rows, i, DB_FIELDS(DB_STR_OR_NULL(0, &m->repo), DB_STR_OR_NULL(1, &m->selection),
					DB_DOUBLE(2, &m->lag_s)));
}

int db_metrics_read(struct db_metrics *out)
{
	*out = (struct db_metrics){ 0 };
	int rc = read_builds(out);
	if (rc == 0)
		rc = read_sync_imports(out);
	if (rc == 0)
		out->mirrors = db_query_items(sizeof(*out->mirrors), fill_mirror_lag, &out->nmirrors, &rc,
					      "SELECT r.namespace || '/' || r.name, m.selection,"
					      " extract(epoch FROM now() - m.last_success)"
					      " FROM mirror_repos m JOIN repos r ON r.id = m.repo_id"
					      " WHERE m.last_success IS NOT NULL ORDER BY 1",
					      0, NULL);
	if (rc < 0)
		db_metrics_release(out);
	return rc;
}

void db_metrics_release(struct db_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nmirrors; i++) {
		free(m->mirrors[i].repo);
		free(m->mirrors[i].selection);
	}
	free(m->mirrors);
	m->mirrors = NULL;
	m->nmirrors = 0;
}
