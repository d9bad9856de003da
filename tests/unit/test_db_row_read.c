/* test_db_row_read.c -- the typed row reader of storage/db (db_rows_read,
 * db_param_int) on rows built by hand, no database: every field type on
 * every kind of cell (NULL, "", booleans, integers past their range, long
 * text) reads exactly as the positional reads it replaced did. */
#include "storage/db/db_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static const char *const cells[] = {
	NULL, "", "t", "f", "true", "0", "42", "-7", "2147483648", "9223372036854775807",
	"99999999999999999999", "-99999999999999999999", "3.25", "1e3", "abc", "12abc",
	"0123456789abcdef0123456789abcdef0123456789", "1700000000",
};
#define NCELLS (sizeof(cells) / sizeof(cells[0]))

/* One row of every cell (cells[k] in column k), owned like db_query's. */
static void make_row(struct db_rows *rows)
{
	rows->count = 1;
	rows->columns = NCELLS;
	rows->cells = xcalloc(NCELLS + 1, sizeof(char *));
	for (size_t k = 0; k < NCELLS; k++)
		rows->cells[k] = cells[k] ? xstrdup(cells[k]) : NULL;
}

/* Each type against the expression the call sites used before. */
static void test_each_cell(const struct db_rows *rows)
{
	for (size_t k = 0; k < NCELLS; k++) {
		int64_t i64 = 1, i64_or = 1;
		long l = 1;
		int i = 1, b = 1;
		time_t t = 1;
		double d = 1;
		char small[8] = "x", commit[41] = "x";
		char *str = NULL, *str_or_null = NULL;
		db_rows_read(rows, 0, DB_FIELDS(DB_I64(k, &i64), DB_I64_OR(k, &i64_or, -1), DB_LONG(k, &l),
						DB_INT(k, &i), DB_TIME(k, &t), DB_BOOL(k, &b), DB_DOUBLE(k, &d),
						DB_TEXT(k, small, sizeof(small)), DB_TEXT(k, commit, 41),
						DB_STR(k, &str), DB_STR_OR_NULL(k, &str_or_null)));
		const char *text = db_rows_get(rows, 0, k), *name = cells[k] ? cells[k] : "NULL";
		char want_small[8], want_commit[41];
		snprintf(want_small, sizeof(want_small), "%s", text);
		snprintf(want_commit, sizeof(want_commit), "%s", text);
		ok(i64 == strtoll(text, NULL, 10) && i64 == db_rows_int(rows, 0, k, 0), "%s: int64 as strtoll", name);
		ok(i64_or == db_rows_int(rows, 0, k, -1), "%s: int64 with -1 for NULL", name);
		ok(l == strtol(text, NULL, 10) && l == (long)db_rows_int(rows, 0, k, 0), "%s: long", name);
		ok(i == (int)db_rows_int(rows, 0, k, 0), "%s: int", name);
		ok(t == (time_t)strtoll(text, NULL, 10), "%s: time", name);
		ok(b == (text[0] == 't'), "%s: bool as [0] == 't'", name);
		ok(d == strtod(text, NULL), "%s: double as strtod", name);
		is_str(small, want_small, "%s: text cut to a char[8]", name);
		is_str(commit, want_commit, "%s: text into a char[41]", name);
		is_str(str, text, "%s: an owned copy, \"\" for NULL", name);
		is_str(str_or_null, cells[k], "%s: an owned copy or NULL", name);
		free(str);
		free(str_or_null);
	}
}

/* The cases the call sites depend on, spelled out. */
static void test_stated(const struct db_rows *rows)
{
	int64_t n = 5, nul = 5;
	int yes = 0, no = 1, null_bool = 1;
	char buf[8] = "old";
	char *s = (char *)"unset", *s_null = (char *)"unset";
	db_rows_read(rows, 0, DB_FIELDS(DB_I64(6, &n), DB_I64_OR(0, &nul, -1), DB_BOOL(2, &yes), DB_BOOL(3, &no),
					DB_BOOL(0, &null_bool), DB_TEXT(16, buf, sizeof(buf)), DB_STR(0, &s),
					DB_STR_OR_NULL(0, &s_null)));
	ok(n == 42 && nul == -1, "42 reads 42; NULL reads the null value");
	ok(yes == 1 && no == 0 && null_bool == 0, "'t' true, 'f' false, NULL false");
	is_str(buf, "0123456", "a text longer than the buffer is cut to its size - 1");
	is_str(s, "", "DB_STR of NULL is an owned \"\"");
	ok(s_null == NULL, "DB_STR_OR_NULL of NULL is NULL");
	free(s);
	char empty[4] = "old";
	db_rows_read(rows, 0, DB_FIELDS(DB_TEXT(1, empty, sizeof(empty))));
	is_str(empty, "", "an empty text empties the buffer");
}

static void test_param_int(void)
{
	char buf[24];
	is_str(db_param_int(buf, 0), "0", "0");
	is_str(db_param_int(buf, -42), "-42", "-42");
	is_str(db_param_int(buf, INT64_MAX), "9223372036854775807", "INT64_MAX");
	is_str(db_param_int(buf, INT64_MIN), "-9223372036854775808", "INT64_MIN fits in 24 bytes");
	ok(db_param_int(buf, 7) == buf, "returns its buffer");
}

int main(void)
{
	struct db_rows rows;
	make_row(&rows);
	test_each_cell(&rows);
	test_stated(&rows);
	test_param_int();
	db_rows_release(&rows);
	return done_testing();
}
