/* test_config_bind.c -- every binding of the configuration table (server/
 * config.c) delivers its key's value where the module reads it, through
 * config_apply_all; a reload (SIGHUP) moves only the [reload] keys. The
 * table is iterated, so a row added with a binding is tested here. */
#include "server/server.h"
#include "farm/farm.h"
#include "tap.h"

#include <ctype.h>
#include <stdlib.h>
#include <unistd.h>

static const struct config_row *rows;
static size_t nrows;
static char conf_path[64];

static long *long_field(const struct config_row *row)
{
	return (long *)(void *)((char *)&config + row->offset);
}

static char **string_field(const struct config_row *row)
{
	return (char **)(void *)((char *)&config + row->offset);
}

static int has_copy(const struct config_row *row)
{
	for (size_t b = 0; b < CONFIG_BINDS_MAX; b++)
		if (row->to[b].kind != CONFIG_BIND_NONE && row->to[b].kind != CONFIG_BIND_CALL)
			return 1;
	return 0;
}

/* A valid value of row other than avoid (salt spreads rows apart). */
static long pick(const struct config_row *row, long avoid, long salt)
{
	long v = row->min + 1 + salt;
	if (v > row->max)
		v = row->min;
	if (v == avoid)
		v = avoid == row->max ? row->min : avoid + 1;
	return v;
}

/* What binding b of row holds now, as text ("%lld" or the string). */
static void bind_value(const struct config_bind *b, char *out, size_t len)
{
	if (b->kind == CONFIG_BIND_LONG)
		snprintf(out, len, "%ld", *(const long *)b->to);
	else if (b->kind == CONFIG_BIND_LLONG)
		snprintf(out, len, "%lld", *(const long long *)b->to);
	else
		snprintf(out, len, "%s", *(const char *const *)b->to);
}

/* What binding b of row should hold for config's value. */
static void bind_want(const struct config_row *row, const struct config_bind *b, char *out, size_t len)
{
	if (row->type == CONFIG_STRING)
		snprintf(out, len, "%s", *string_field(row));
	else
		snprintf(out, len, "%lld", (long long)*long_field(row) * b->scale);
}

/* Every copy binding of every row holds config's value. */
static void check_all_hold(const char *when)
{
	for (size_t i = 0; i < nrows; i++)
		for (size_t b = 0; b < CONFIG_BINDS_MAX && rows[i].to[b].kind != CONFIG_BIND_NONE; b++) {
			if (rows[i].to[b].kind == CONFIG_BIND_CALL)
				continue;
			char got[256], want[256];
			bind_value(&rows[i].to[b], got, sizeof(got));
			bind_want(&rows[i], &rows[i].to[b], want, sizeof(want));
			is_str(got, want, "%s: %s binding %zu holds the key's value", when, rows[i].name, b);
		}
}

/* Each row's kinds match its type, and no two bindings share a field. */
static void check_table_shape(void)
{
	int bound = 0;
	for (size_t i = 0; i < nrows; i++)
		for (size_t b = 0; b < CONFIG_BINDS_MAX && rows[i].to[b].kind != CONFIG_BIND_NONE; b++) {
			const struct config_bind *x = &rows[i].to[b];
			bound++;
			if (x->kind == CONFIG_BIND_CALL) {
				ok(x->apply != NULL, "%s: CALL binding has a function", rows[i].name);
				continue;
			}
			ok((x->kind == CONFIG_BIND_STRING) == (rows[i].type == CONFIG_STRING) && x->to &&
				   (x->kind == CONFIG_BIND_STRING || x->scale >= 1),
			   "%s: binding %zu's kind fits the key's type", rows[i].name, b);
			int shared = 0;
			for (size_t j = 0; j < nrows; j++)
				for (size_t c = 0; c < CONFIG_BINDS_MAX; c++)
					shared += (j != i || c != b) && rows[j].to[c].to == x->to;
			ok(!shared, "%s: binding %zu's field is no other binding's", rows[i].name, b);
		}
	ok(bound >= 30, "the table binds its keys (%d bindings)", bound);
}

/* Set every bound key in config to a new value, apply, check. */
static void check_apply_moves_every_key(void)
{
	for (size_t i = 0; i < nrows; i++) {
		if (!has_copy(&rows[i]))
			continue;
		if (rows[i].type == CONFIG_STRING) {
			free(*string_field(&rows[i]));
			*string_field(&rows[i]) = xasprintf("set-%s", rows[i].name);
		} else {
			*long_field(&rows[i]) = pick(&rows[i], *long_field(&rows[i]), (long)i);
		}
	}
	config_apply_all();
	check_all_hold("set and applied");
}

/* The CALL bindings: values worked out from the key. */
static void check_calls(void)
{
	free(config.abi_policy);
	config.abi_policy = xstrdup("warn");
	config_apply_all();
	ok(farm_settings.abi_enforce == 0, "abi_policy = warn: farm_settings.abi_enforce 0");
	free(config.abi_policy);
	config.abi_policy = xstrdup("enforce");
	config_apply_all();
	ok(farm_settings.abi_enforce == 1, "abi_policy = enforce: farm_settings.abi_enforce 1");
	free(config.public_url);
	config.public_url = xstrdup("https://hub.example");
	config_apply_all();
	ok(web_settings.secure_cookies == 1, "public_url https: secure cookies");
	is_str(http_ctx.public_url, "https://hub.example", "public_url reaches http_ctx too");
	free(config.public_url);
	config.public_url = xstrdup("http://hub.example");
	config_apply_all();
	ok(web_settings.secure_cookies == 0, "public_url http: no secure cookies");
	config.lfs_s3_redirect = 1;
	config_apply_all();
	ok(api_ctx.lfs_redirect == config_lfs_backend()->presigns, "lfs_s3_redirect = 1: redirect when %s presigns",
	   config.lfs_backend);
}

static void write_conf(const char *text)
{
	FILE *fp = fopen(conf_path, "w");
	if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0)
		abort();
}

/* A file giving every bound key a new value; SIGHUP's config_reload. */
static void check_reload_moves_only_live_keys(void)
{
	struct strbuf file = STRBUF_INIT;
	char (*before)[CONFIG_BINDS_MAX][256] = xcalloc(nrows, sizeof(*before));
	for (size_t i = 0; i < nrows; i++) {
		if (!has_copy(&rows[i]))
			continue;
		for (size_t b = 0; b < CONFIG_BINDS_MAX && rows[i].to[b].kind != CONFIG_BIND_NONE; b++)
			if (rows[i].to[b].kind != CONFIG_BIND_CALL)
				bind_value(&rows[i].to[b], before[i][b], sizeof(before[i][b]));
		if (rows[i].type == CONFIG_STRING)
			strbuf_addf(&file, "%s = reloaded-%s\n", rows[i].name, rows[i].name);
		else
			strbuf_addf(&file, "%s = %ld\n", rows[i].name,
				    pick(&rows[i], *long_field(&rows[i]), (long)i + 3));
	}
	write_conf(file.buf);
	ok(config_reload() > 0, "reload took the file's [reload] keys");
	for (size_t i = 0; i < nrows; i++)
		for (size_t b = 0; b < CONFIG_BINDS_MAX && rows[i].to[b].kind != CONFIG_BIND_NONE; b++) {
			if (rows[i].to[b].kind == CONFIG_BIND_CALL)
				continue;
			char got[256], want[256];
			bind_value(&rows[i].to[b], got, sizeof(got));
			bind_want(&rows[i], &rows[i].to[b], want, sizeof(want));
			if (rows[i].reloadable) {
				ok(strcmp(got, before[i][b]) != 0 && strcmp(got, want) == 0,
				   "reload: [reload] %s reaches its binding (%s, was %s)", rows[i].name, got, before[i][b]);
			} else {
				is_str(got, before[i][b], "reload: start-up-only %s keeps its binding's value", rows[i].name);
			}
		}
	free(before);
	strbuf_release(&file);
}

int main(void)
{
	char dir[] = "/tmp/khub-config-bind-XXXXXX";
	if (!mkdtemp(dir))
		abort();
	snprintf(conf_path, sizeof(conf_path), "%s/khub.conf", dir);
	write_conf("# defaults\n");
	setenv("KHUB_CONFIG", conf_path, 1);
	rows = config_table(&nrows);
	for (size_t i = 0; i < nrows; i++) {	/* the file alone decides */
		char *env = xasprintf("KHUB_%s", rows[i].name);
		for (char *p = env; *p; p++)
			*p = (char)toupper((unsigned char)*p);
		unsetenv(env);
		free(env);
	}
	char arg0[] = "serve", *argv[] = { arg0, NULL };
	config_load(1, argv);
	config_apply_all();
	check_all_hold("defaults");
	check_table_shape();
	check_apply_moves_every_key();
	check_calls();
	check_reload_moves_only_live_keys();
	unlink(conf_path);
	rmdir(dir);
	return done_testing();
}
