/* db_internal.h -- what storage/db/db_*.c share and nothing outside storage/
 * sees: libpq, raw queries, and turning a PGresult into struct db_rows. */
#ifndef KHUB_STORAGE_DB_INTERNAL_H
#define KHUB_STORAGE_DB_INTERNAL_H

#include <libpq-fe.h>
#include <stdint.h>
#include <time.h>

#include "storage/db/db.h"

/* Rows of a query as text, turned into the typed rows storage/'s headers
 * declare (nothing outside storage/ reads a column by position: t0294). */
struct db_rows {
	size_t count, columns;
	char **cells;		/* count * columns, NULL for SQL NULL; owned */
};
/* The text of a cell, "" for NULL. */
const char *db_rows_get(const struct db_rows *rows, size_t row, size_t column);
int db_rows_isnull(const struct db_rows *rows, size_t row, size_t column);
void db_rows_release(struct db_rows *rows);	/* accepts NULL; leaves it empty */

/* Run a query with text parameters on this thread's connection (borrowed
 * from the pool for the call unless pinned). The caller PQclear()s. NULL on
 * failure (logged); *sqlstate (static) set when given. */
PGresult *db_exec(const char *sql, int nparams, const char *const *params, const char **sqlstate);
/* db_exec for statements whose rows are not wanted: 0 or KHUB_EDB. */
int db_run(const char *sql, int nparams, const char *const *params);
/* PostgreSQL's notices and warnings on conn go to khub's log (libpq's
 * default prints them to stderr, bypassing log_format). */
void db_notices_to_log(PGconn *conn);
/* db_run that counts: the number of rows the statement changed, or KHUB_EDB. */
int db_run_count(const char *sql, int nparams, const char *const *params);
/* db_run of a statement meant to change one row: 0, KHUB_ENOTFOUND when it
 * changed none, or KHUB_EDB. */
int db_run_one(const char *sql, int nparams, const char *const *params);
/* db_run_count of a statement whose one parameter $1 is an id. */
int db_run_id(const char *sql, int64_t id);
/* n parallel array literals (storage/db/db_arrays.c), one per column, for unnest():
 * db_columns_init, then per row db_columns_row and a db_array_add to each
 * column, then db_columns_end (closes them; params[a] = cols[a].buf when
 * params is not NULL) and db_columns_release. */
void db_columns_init(struct strbuf *cols, int n);
void db_columns_row(struct strbuf *cols, int n, size_t row);
void db_columns_end(struct strbuf *cols, int n, const char **params);
void db_columns_release(struct strbuf *cols, int n);
/* A cell of db_query's rows as an owned copy, or NULL for SQL NULL. */
char *db_rows_strdup(const struct db_rows *rows, size_t row, size_t column);
/* A cell of db_query's rows as an integer, or null_value for SQL NULL. */
int64_t db_rows_int(const struct db_rows *rows, size_t row, size_t column, int64_t null_value);
/* Typed reads of a row (storage/db/db_row_read.c): a table of fields, each
 * a column and where its value goes, filled by one call. A cell is read as
 * its text, SQL NULL as "" (so 0, false, "" or a copy of "") except where a
 * field says otherwise: DB_I64_OR's null value, DB_STR_OR_NULL's NULL. */
enum db_field_type {
	DB_FIELD_I64, DB_FIELD_LONG, DB_FIELD_INT, DB_FIELD_TIME, DB_FIELD_BOOL, DB_FIELD_DOUBLE,
	DB_FIELD_TEXT, DB_FIELD_STR, DB_FIELD_STR_OR_NULL,
};
struct db_field {
	size_t column;
	enum db_field_type type;
	union {
		int64_t *i64;
		long *l;
		int *i;		/* DB_FIELD_INT, DB_FIELD_BOOL */
		time_t *t;
		double *d;
		char *text;	/* DB_FIELD_TEXT: size bytes */
		char **str;	/* an owned copy (the caller frees it) */
	} to;
	size_t size;
	int64_t null_value;	/* DB_FIELD_I64 */
};
/* Integers in base 10 (strtoll), NULL 0; DB_I64_OR: null for NULL. */
#define DB_I64(col, p) { .column = (col), .type = DB_FIELD_I64, .to.i64 = (p) }
#define DB_I64_OR(col, p, null) { .column = (col), .type = DB_FIELD_I64, .to.i64 = (p), .null_value = (null) }
#define DB_LONG(col, p) { .column = (col), .type = DB_FIELD_LONG, .to.l = (p) }
#define DB_INT(col, p) { .column = (col), .type = DB_FIELD_INT, .to.i = (p) }
/* Seconds since the epoch (an extract(epoch ...)::bigint column). */
#define DB_TIME(col, p) { .column = (col), .type = DB_FIELD_TIME, .to.t = (p) }
/* 1 when the text starts with 't' (PostgreSQL's true), else 0 (NULL too). */
#define DB_BOOL(col, p) { .column = (col), .type = DB_FIELD_BOOL, .to.i = (p) }
/* strtod of the text, NULL 0. */
#define DB_DOUBLE(col, p) { .column = (col), .type = DB_FIELD_DOUBLE, .to.d = (p) }
/* The text into buf of size bytes, cut to size - 1 bytes, NULL "". */
#define DB_TEXT(col, buf, n) { .column = (col), .type = DB_FIELD_TEXT, .to.text = (buf), .size = (n) }
/* An owned copy of the text: NULL read as "" (DB_STR) or as NULL. */
#define DB_STR(col, p) { .column = (col), .type = DB_FIELD_STR, .to.str = (p) }
#define DB_STR_OR_NULL(col, p) { .column = (col), .type = DB_FIELD_STR_OR_NULL, .to.str = (p) }
/* A table of fields as the two arguments (fields, n) of the calls below. */
#define DB_FIELDS(...) (const struct db_field[]){ __VA_ARGS__ }, \
	(sizeof((const struct db_field[]){ __VA_ARGS__ }) / sizeof(struct db_field))
/* Row `row` of rows into the n fields (each column < rows->columns). */
void db_rows_read(const struct db_rows *rows, size_t row, const struct db_field *fields, size_t n);
/* db_query_one read into fields: 0, KHUB_ENOTFOUND when it answered no row
 * (the fields untouched), or KHUB_EDB. */
int db_query_row(const char *sql, int nparams, const char *const *params, const struct db_field *fields, size_t n);
/* Whether a query answered any row: 1, 0, or KHUB_EDB. */
int db_query_exists(const char *sql, int nparams, const char *const *params);
/* The first column of every row of a query as owned copies ("" for NULL):
 * 0 with *texts (NULL-terminated; the caller frees each and the array) and
 * *n, or KHUB_EDB with *texts NULL and *n 0. */
int db_query_texts(char ***texts, size_t *n, const char *sql, int nparams, const char *const *params);
/* v in base 10 into buf, for a query's text parameter: buf. */
const char *db_param_int(char buf[24], int64_t v);

/* db_exec into out (released by the caller with db_rows_release): 0 or
 * KHUB_EDB (then out is empty). */
int db_query(struct db_rows *out, const char *sql, int nparams, const char *const *params);
/* db_query of a statement answering one row: 0 with it in out (released by
 * the caller), KHUB_ENOTFOUND when it answered none, or KHUB_EDB (then out
 * is empty). */
int db_query_one(struct db_rows *out, const char *sql, int nparams, const char *const *params);
/* db_query turned into an array of items of size bytes, one per row, each
 * filled from zeroes by fill(item, rows, row): the items (owned; one more
 * than *count, zeroed) with *rc 0, or NULL with *count 0 and *rc KHUB_EDB. */
void *db_query_items(size_t size, void (*fill)(void *item, const struct db_rows *rows, size_t row),
		     size_t *count, int *rc, const char *sql, int nparams, const char *const *params);

/* A new token: prefix and then len (at most 64) characters drawn at random
 * from alphabet into secret (strlen(prefix) + len + 1 bytes), and the
 * SHA-256 it is stored as (hex): 0 or KHUB_EIO (storage/db/db.c: users' and
 * workers' tokens alike). */
int db_token_secret(const char *prefix, const char *alphabet, size_t len, char *secret, char hash[65]);

/* A signed-in user's token: the columns db_principal_from_row reads, from
 * tokens t JOIN accounts a, and the condition that it may still be used. */
#define PRINCIPAL_COLUMNS "t.id, a.id, a.name, a.is_site_admin, t.scope, t.name, extract(epoch FROM t.created_at)::bigint, " \
	"coalesce(extract(epoch FROM t.expires_at)::bigint, 0)"
#define TOKEN_USABLE "t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())"
/* Record that token id was just used (tokens.last_used_at, shown on the
 * tokens page), at most once a minute per token; a failure only logs. */
void db_token_touch(int64_t token_id);
/* The principal of the first row of PRINCIPAL_COLUMNS (storage/db/db_accounts.c). */
void db_principal_from_row(const struct db_rows *rows, struct principal *out);
/* A kernel's farm result on a workload, as SQL of the listing's repos r
 * (storage/db/db_benchmarks.c): the median of the farm runs' means on
 * workload $p_workload of the newest commit the farm measured it on, per
 * device (those containing $p_device, case-insensitive, unless NULL), the
 * fastest device's; NULL when the farm has none. */
void db_benchmark_farm_result_sql(struct strbuf *sql, int p_workload, int p_device);

#endif
