/* db_row_read.c -- typed reads of a query's row into fields (struct
 * db_field in db_internal.h), and integers as a query's text parameters. */
#include "storage/db/db_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* One cell into one field (db_rows_get's "" for NULL unless it says). */
static void read_field(const struct db_rows *rows, size_t row, const struct db_field *f)
{
	const char *text = db_rows_get(rows, row, f->column);
	int isnull = db_rows_isnull(rows, row, f->column);
	switch (f->type) {
	case DB_FIELD_I64:
		*f->to.i64 = isnull ? f->null_value : strtoll(text, NULL, 10);
		break;
	case DB_FIELD_LONG:
		*f->to.l = strtol(text, NULL, 10);
		break;
	case DB_FIELD_INT:
		*f->to.i = (int)strtoll(text, NULL, 10);
		break;
	case DB_FIELD_TIME:
		*f->to.t = (time_t)strtoll(text, NULL, 10);
		break;
	case DB_FIELD_BOOL:
		*f->to.i = text[0] == 't';
		break;
	case DB_FIELD_DOUBLE:
		*f->to.d = strtod(text, NULL);
		break;
	case DB_FIELD_TEXT:
		assert(f->size > 0);
		snprintf(f->to.text, f->size, "%s", text);
		break;
	case DB_FIELD_STR:
		*f->to.str = xstrdup(text);
		break;
	case DB_FIELD_STR_OR_NULL:
		*f->to.str = isnull ? NULL : xstrdup(text);
		break;
	}
}

void db_rows_read(const struct db_rows *rows, size_t row, const struct db_field *fields, size_t n)
{
	for (size_t k = 0; k < n; k++)
		read_field(rows, row, &fields[k]);
}

int db_query_row(const char *sql, int nparams, const char *const *params, const struct db_field *fields, size_t n)
{
	struct db_rows rows;
	int rc = db_query_one(&rows, sql, nparams, params);
	if (rc < 0)
		return rc;
	db_rows_read(&rows, 0, fields, n);
	db_rows_release(&rows);
	return 0;
}

int db_query_exists(const char *sql, int nparams, const char *const *params)
{
	struct db_rows rows;
	int rc = db_query(&rows, sql, nparams, params);
	if (rc < 0)
		return rc;
	rc = rows.count > 0;
	db_rows_release(&rows);
	return rc;
}

int db_query_texts(char ***texts, size_t *n, const char *sql, int nparams, const char *const *params)
{
	struct db_rows rows;
	*texts = NULL;
	*n = 0;
	int rc = db_query(&rows, sql, nparams, params);
	if (rc < 0)
		return rc;
	*texts = xcalloc(rows.count + 1, sizeof(char *));
	for (size_t i = 0; i < rows.count; i++)
		(*texts)[i] = xstrdup(db_rows_get(&rows, i, 0));
	*n = rows.count;
	db_rows_release(&rows);
	return 0;
}

const char *db_param_int(char buf[24], int64_t v)
{
	snprintf(buf, 24, "%" PRId64, v);
	return buf;
}
