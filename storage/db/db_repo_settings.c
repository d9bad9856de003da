/* db_repo_settings.c -- a repo's settings: the one table of them (JSON key,
 * column, type, who may change them, audit action, default), the getter
 * that reads them all and the setter that writes a set of changes in one
 * statement (storage/db/db.h). Nothing else writes these columns (t0345). */
#include "storage/db/db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const campaign_publish_values[] = { "pr", "direct", NULL };

/* Adding a setting is adding a row here (its enum value in db.h, and a
 * migration for its column). The order is the order of the checks, the
 * audit entries and the PUT …/settings answer. */
const struct repo_setting repo_settings_table[REPO_SETTING_COUNT] = {
	[REPO_SETTING_PRIVATE] = {
		.key = "private", .column = "private", .type = REPO_SETTING_BOOL, .who = ROLE_WRITE,
		.audit_action = "repo.settings", .default_value = "false", .answered = 1,
		.why = "invalid settings: \"private\" must be a boolean, \"visibility\" public, private or"
		       " protected, \"gated\" false, \"auto\" or \"manual\", \"buildOnPush\" a boolean" },
	/* the build farm's trigger on commits and pushes (docs/build-farm.md);
	 * answered false for repos that are not kernels */
	[REPO_SETTING_BUILD_ON_PUSH] = {
		.key = "buildOnPush", .column = "build_on_push", .type = REPO_SETTING_BOOL, .who = ROLE_WRITE,
		.audit_action = "repo.settings", .default_value = "true", .answered = 1, .kernels_only = 1,
		.why = "invalid settings: \"private\" must be a boolean, \"visibility\" public, private or"
		       " protected, \"gated\" false, \"auto\" or \"manual\", \"buildOnPush\" a boolean" },
	/* docs/build-farm.md, "Fleet rebuilds" */
	[REPO_SETTING_CAMPAIGN_PUBLISH] = {
		.key = "campaignPublish", .column = "campaign_publish", .type = REPO_SETTING_ENUM,
		.values = campaign_publish_values, .who = ROLE_WRITE, .audit_action = "repo.settings",
		.default_value = "pr", .why = "\"campaignPublish\" must be \"pr\" or \"direct\"" },
	/* docs/build-farm.md, "Benchmark jobs" */
	[REPO_SETTING_BENCHMARK_AFTER_PUBLISH] = {
		.key = "benchmarkAfterPublish", .column = "benchmark_after_publish", .type = REPO_SETTING_BOOL,
		.who = ROLE_WRITE, .audit_action = "repo.settings", .default_value = "false", .answered = 1,
		.why = "\"benchmarkAfterPublish\" must be a boolean" },
};

int repo_setting_find(const char *key)
{
	for (int i = 0; i < REPO_SETTING_COUNT; i++)
		if (strcmp(repo_settings_table[i].key, key) == 0)
			return i;
	return -1;
}

int repo_setting_enum_index(const struct repo_setting *row, const char *text)
{
	for (int i = 0; row->values && row->values[i]; i++)
		if (strcmp(row->values[i], text) == 0)
			return i;
	return -1;
}

int repo_setting_check(enum repo_setting_id id, const struct repo_settings *s)
{
	const struct repo_setting *row = &repo_settings_table[id];
	long v = s->value[id];
	switch (row->type) {
	case REPO_SETTING_BOOL:
		return v == 0 || v == 1 ? 0 : KHUB_EINVAL;
	case REPO_SETTING_INT:
		return v >= row->min && v <= row->max ? 0 : KHUB_EINVAL;
	case REPO_SETTING_ENUM:
		for (long i = 0; row->values[i]; i++)
			if (i == v)
				return 0;
		return KHUB_EINVAL;
	case REPO_SETTING_TEXT:
		return (long)strnlen(s->text[id], sizeof(s->text[id])) <= row->max ? 0 : KHUB_EINVAL;
	}
	return KHUB_EINVAL;
}

/* Setting id of s as its column's text (a query parameter); the bool, int
 * and enum ones in buf. */
static const char *setting_text(enum repo_setting_id id, const struct repo_settings *s, char buf[24])
{
	const struct repo_setting *row = &repo_settings_table[id];
	switch (row->type) {
	case REPO_SETTING_BOOL:
		return s->value[id] ? "true" : "false";
	case REPO_SETTING_ENUM:
		return row->values[s->value[id]];
	case REPO_SETTING_TEXT:
		return s->text[id];
	default:
		return db_param_int(buf, s->value[id]);
	}
}

/* The typed read of the settings' columns (settings_columns) from column
 * col on: the fields and the cells they are read into. */
struct settings_read {
	struct db_field fields[REPO_SETTING_COUNT + 2];
	int flag[REPO_SETTING_COUNT];			/* BOOL */
	char word[REPO_SETTING_COUNT][32];		/* ENUM: its text */
	long value[REPO_SETTING_COUNT];			/* INT */
	char text[REPO_SETTING_COUNT][REPO_SETTING_TEXT_MAX + 1];	/* TEXT */
	char type[16];
	int mirrored;
};

static void settings_fields(struct settings_read *r, size_t col)
{
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < REPO_SETTING_COUNT; i++) {
		size_t c = col + (size_t)i;
		switch (repo_settings_table[i].type) {
		case REPO_SETTING_BOOL:
			r->fields[i] = (struct db_field)DB_BOOL(c, &r->flag[i]);
			break;
		case REPO_SETTING_ENUM:
			r->fields[i] = (struct db_field)DB_TEXT(c, r->word[i], sizeof(r->word[i]));
			break;
		case REPO_SETTING_INT:
			r->fields[i] = (struct db_field)DB_LONG(c, &r->value[i]);
			break;
		case REPO_SETTING_TEXT:
			r->fields[i] = (struct db_field)DB_TEXT(c, r->text[i], sizeof(r->text[i]));
			break;
		}
	}
	r->fields[REPO_SETTING_COUNT] = (struct db_field)DB_TEXT(col + REPO_SETTING_COUNT, r->type, sizeof(r->type));
	r->fields[REPO_SETTING_COUNT + 1] = (struct db_field)DB_BOOL(col + REPO_SETTING_COUNT + 1, &r->mirrored);
}

/* The cells r read into out. */
static void settings_from_read(const struct settings_read *r, struct repo_settings *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < REPO_SETTING_COUNT; i++) {
		const struct repo_setting *row = &repo_settings_table[i];
		if (row->type == REPO_SETTING_BOOL)
			out->value[i] = r->flag[i];
		else if (row->type == REPO_SETTING_ENUM)
			out->value[i] = repo_setting_enum_index(row, r->word[i]);
		else if (row->type == REPO_SETTING_INT)
			out->value[i] = r->value[i];
		else
			memcpy(out->text[i], r->text[i], sizeof(out->text[i]));
	}
	out->is_kernel = strcmp(r->type, "kernel") == 0;
	out->mirrored = r->mirrored;
}

/* The columns of the table as text, each prefixed by alias, then the
 * repo's type and mirror flag. */
static void settings_columns(struct strbuf *sql, const char *alias)
{
	for (int i = 0; i < REPO_SETTING_COUNT; i++)
		strbuf_addf(sql, "%s%s.%s::text", i ? ", " : "", alias, repo_settings_table[i].column);
	strbuf_addf(sql, ", %s.type, %s.mirrored", alias, alias);
}

int db_repo_settings_get(int64_t repo_id, struct repo_settings *out)
{
	char rid[24];
	const char *params[1] = { db_param_int(rid, repo_id) };
	struct strbuf sql = STRBUF_INIT;
	struct settings_read r;
	settings_fields(&r, 0);
	strbuf_adds(&sql, "SELECT ");
	settings_columns(&sql, "r");
	strbuf_adds(&sql, " FROM repos r WHERE r.id = $1");
	int rc = db_query_row(sql.buf, 1, params, r.fields, REPO_SETTING_COUNT + 2);
	strbuf_release(&sql);
	if (rc < 0)
		return rc;
	settings_from_read(&r, out);
	return 0;
}

/* UPDATE repos AS r SET col = $k … FROM (the row locked) AS o WHERE … RETURNING
 * the old and the new values: one statement, so all or nothing. */
static int settings_write(int64_t repo_id, unsigned set, const struct repo_settings *want, struct db_rows *rows)
{
	char rid[24], bufs[REPO_SETTING_COUNT][24];
	const char *params[REPO_SETTING_COUNT + 1];
	struct strbuf sql = STRBUF_INIT;
	int n = 1;
	params[0] = db_param_int(rid, repo_id);
	strbuf_adds(&sql, "UPDATE repos AS r SET ");
	for (int i = 0; i < REPO_SETTING_COUNT; i++) {
		if (!(set & REPO_SETTING_BIT(i)))
			continue;
		params[n] = setting_text(i, want, bufs[i]);
		strbuf_addf(&sql, "%s%s = $%d", n > 1 ? ", " : "", repo_settings_table[i].column, n + 1);
		n++;
	}
	strbuf_adds(&sql, " FROM (SELECT ");
	settings_columns(&sql, "x");
	strbuf_adds(&sql, ", x.id FROM repos x WHERE x.id = $1 FOR UPDATE) AS o WHERE r.id = o.id RETURNING ");
	/* o's columns are named after the table's: select them by position */
	for (int i = 0; i < REPO_SETTING_COUNT + 2; i++)
		strbuf_addf(&sql, "o.%s, ", i < REPO_SETTING_COUNT ? repo_settings_table[i].column
								     : i == REPO_SETTING_COUNT ? "type" : "mirrored");
	settings_columns(&sql, "r");
	int rc = db_query_one(rows, sql.buf, n, params);
	strbuf_release(&sql);
	return rc;
}

int db_repo_settings_set(int64_t repo_id, unsigned set, const struct repo_settings *want,
			 struct repo_settings *before, struct repo_settings *after)
{
	struct db_rows rows;
	for (int i = 0; i < REPO_SETTING_COUNT; i++)
		if ((set & REPO_SETTING_BIT(i)) && repo_setting_check(i, want) < 0)
			return KHUB_EINVAL;
	int rc = set ? settings_write(repo_id, set, want, &rows) : db_repo_settings_get(repo_id, before);
	if (rc < 0 || !set) {
		if (rc == 0)
			*after = *before;
		return rc;
	}
	struct settings_read r;
	settings_fields(&r, 0);
	db_rows_read(&rows, 0, r.fields, REPO_SETTING_COUNT + 2);
	settings_from_read(&r, before);
	settings_fields(&r, REPO_SETTING_COUNT + 2);
	db_rows_read(&rows, 0, r.fields, REPO_SETTING_COUNT + 2);
	settings_from_read(&r, after);
	db_rows_release(&rows);
	return 0;
}
