/* db_internal.h -- what storage/db_*.c share and nothing outside storage/
 * sees: libpq, raw queries, and turning a PGresult into struct db_rows. */
#ifndef KHUB_STORAGE_DB_INTERNAL_H
#define KHUB_STORAGE_DB_INTERNAL_H

#include <libpq-fe.h>

#include "storage/db.h"

/* Run a query with text parameters on this thread's connection (borrowed
 * from the pool for the call unless pinned). The caller PQclear()s. NULL on
 * failure (logged); *sqlstate (static) set when given. */
PGresult *db_exec(const char *sql, int nparams, const char *const *params, const char **sqlstate);
/* db_exec for statements whose rows are not wanted: 0 or KHUB_EDB. */
int db_run(const char *sql, int nparams, const char *const *params);
/* db_run of a statement whose one parameter $1 is an id: the number of rows
 * it changed, or KHUB_EDB. */
int db_run_id(const char *sql, int64_t id);
/* db_exec into out (released by the caller with db_rows_release): 0 or
 * KHUB_EDB (then out is empty). */
int db_query(struct db_rows *out, const char *sql, int nparams, const char *const *params);

#endif
