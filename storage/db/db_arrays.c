/* db_arrays.c -- PostgreSQL array literals, built a row at a time, for the
 * statements that insert many rows at once through unnest(). */
#include "storage/db/db_internal.h"

void db_array_add(struct strbuf *sb, const char *s)
{
	if (!s) {
		strbuf_adds(sb, "NULL");
		return;
	}
	strbuf_adds(sb, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			strbuf_add(sb, "\\", 1);
		strbuf_add(sb, s, 1);
	}
	strbuf_adds(sb, "\"");
}

void db_columns_init(struct strbuf *cols, int n)
{
	for (int a = 0; a < n; a++) {
		strbuf_init(&cols[a]);
		strbuf_adds(&cols[a], "{");
	}
}

void db_columns_row(struct strbuf *cols, int n, size_t row)
{
	for (int a = 0; row && a < n; a++)
		strbuf_adds(&cols[a], ",");
}

void db_columns_end(struct strbuf *cols, int n, const char **params)
{
	for (int a = 0; a < n; a++) {
		strbuf_adds(&cols[a], "}");
		if (params)
			params[a] = cols[a].buf;
	}
}

void db_columns_release(struct strbuf *cols, int n)
{
	for (int a = 0; a < n; a++)
		strbuf_release(&cols[a]);
}
