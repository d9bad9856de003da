/* test_backup.c -- what khub backup and restore hand to pg_dump/pg_restore
 * (the connection without its password) and the manifests restore refuses. */
#include "server/server.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct khub_config config;

static void split(const char *conninfo, const char *want, const char *want_password, const char *what)
{
	char *without = NULL, *password = NULL;
	ok(db_conninfo_split_password(conninfo, &without, &password) == 0, "%s: parsed", what);
	is_str(without ? without : "(null)", want, "%s: without the password", what);
	is_str(password ? password : "(none)", want_password, "%s: the password apart", what);
	free(without);
	free(password);
}

static void manifest_case(const char *dir, const char *text, int accepted, const char *what)
{
	char *path = xasprintf("%s/manifest.json", dir), why[600] = "";
	FILE *fp = fopen(path, "w");
	if (text)
		fputs(text, fp);
	fclose(fp);
	json_t *m = backup_manifest_read(dir, why, sizeof(why));
	ok((m != NULL) == accepted, "%s%s%s", what, m ? "" : ": ", why);
	json_decref(m);
	free(path);
}

int main(void)
{
	split("postgresql://khub:s3cr%27t@db.example:5433/hub?sslmode=require",
	      "user='khub' dbname='hub' host='db.example' port='5433' sslmode='require'", "s3cr't", "a URL");
	split("host=/run/pg dbname=khub user=khub", "user='khub' dbname='khub' host='/run/pg'", "(none)",
	      "key=value without a password");
	split("host=h dbname='a b\\'c' password=pw", "dbname='a b\\'c' host='h'", "pw", "quotes kept quoted");
	char *without = NULL, *password = NULL;
	ok(db_conninfo_split_password("host=h nonsense", &without, &password) == KHUB_EINVAL, "a broken string is refused");

	char dir[] = "/tmp/khub-test-backup.XXXXXX";
	ok(mkdtemp(dir) != NULL, "a temp dir");
	manifest_case(dir, "{\"format\": 1, \"complete\": true}", 1, "format 1, complete: accepted");
	manifest_case(dir, "{\"format\": 1, \"complete\": false}", 0, "an incomplete backup is refused");
	manifest_case(dir, "{\"format\": 2, \"complete\": true}", 0, "a newer format is refused");
	manifest_case(dir, "{\"format\": 1, \"complete\": tr", 0, "a truncated manifest is refused");
	manifest_case(dir, "[1]", 0, "a manifest that is no object is refused");
	char *path = xasprintf("%s/manifest.json", dir);
	unlink(path);
	free(path);
	rmdir(dir);
	return done_testing();
}
