/* cmd_sync.c -- khub sync keygen|export|verify|import|state: air-gap
 * bundles (sync/), with a progress bar on a terminal. */
#include "server/server.h"
#include "sync/sync.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <unistd.h>

const char cmd_sync_usage[] =
	"usage:\n"
	"  khub sync keygen --out PREFIX          PREFIX.key (private, 0600) and PREFIX.pub\n"
	"  khub sync export --key PRIV --out FILE [--repos GLOB]... [--refs GLOB]... [--variants GLOB]...\n"
	"                   [--lock kernels.lock]... [--since STATE] [--state-out FILE]\n"
	"                   [--volume-size BYTES] [--compression none|zstd[:LEVEL]] [--type kernel]\n"
	"  khub sync verify BUNDLE... [--key PUB]  check signature, hashes and sizes offline; print the changes\n"
	"  khub sync import BUNDLE... [--allow-rewind]   verify and import (keys from sync_trusted_keys)\n"
	"  khub sync import --dry-run [--json] BUNDLE...  verify and say what would change; change nothing\n"
	"  khub sync history [--json]              the bundles this hub applied\n"
	"  khub sync key-scope [PUB|KEYID --orgs LIST|--any]   which orgs a signing key may bring in\n"
	"  khub sync key-scope PUB|KEYID --exporter ID   the key that alone signs for an exporter id\n"
	"  khub sync state [--out FILE] [--type kernel]   this hub's refs, for export --since\n"
	"Options taking GLOB may repeat or hold a comma-separated list. See docs/sync.md.\n";

struct list {
	char **items;
	size_t n;
};

static void list_add(struct list *l, const char *value)
{
	char *copy = xstrdup(value), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		l->items = xrealloc(l->items, (l->n + 1) * sizeof(char *));
		l->items[l->n++] = xstrdup(t);
	}
	free(copy);
}

static void list_free(struct list *l)
{
	free_strings(l->items, l->n);
}

static char *hub_name(void)
{
	if (config.public_url && config.public_url[0])
		return xstrdup(config.public_url);
	char host[256] = "khub";
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	return xstrdup(host);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	uint64_t mult = 1;
	if (*end == 'K' || *end == 'k')
		mult = 1024, end++;
	else if (*end == 'M' || *end == 'm')
		mult = 1024 * 1024, end++;
	else if (*end == 'G' || *end == 'g')
		mult = 1024ull * 1024 * 1024, end++;
	if (errno || *end || v == 0 || s[0] == '-')
		return -1;
	*out = v * mult;
	return *out < 4096 ? -1 : 0;
}

static int cmd_keygen(int argc, char **argv)
{
	const char *out = NULL;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
			out = argv[++i];
		else
			goto usage;
	}
	if (!out)
		goto usage;
	char err[512], id[SYNC_KEY_ID_LEN + 1];
	if (ed25519_keygen(out, id, err, sizeof(err)) < 0) {
		fprintf(stderr, "khub sync keygen: %s\n", err);
		return 1;
	}
	printf("key id %s: private key %s.key (keep it on the exporting side), public key %s.pub "
	       "(list it in sync_trusted_keys where bundles are imported)\n", id, out, out);
	return 0;
usage:
	fputs(cmd_sync_usage, stderr);
	return 2;
}

/* The lists khub sync export collects (comma-separated, repeatable). */
struct export_lists {
	struct list repos, refs, variants, locks;
};

/* One option and its value: 0, KHUB_EINVAL after a message, 2 for the
 * usage. */
static int export_option(const char *a, const char *v, struct sync_export_opts *o, struct export_lists *l,
			 const char **type)
{
	struct { const char *name; struct list *list; } lists[] = {
		{ "--repos", &l->repos }, { "--refs", &l->refs }, { "--variants", &l->variants }, { "--lock", &l->locks },
	};
	for (size_t k = 0; k < sizeof(lists) / sizeof(lists[0]); k++)
		if (strcmp(a, lists[k].name) == 0) {
			list_add(lists[k].list, v);
			return 0;
		}
	if (strcmp(a, "--key") == 0)
		o->key_path = v;
	else if (strcmp(a, "--out") == 0)
		o->out = v;
	else if (strcmp(a, "--since") == 0)
		o->since = v;
	else if (strcmp(a, "--state-out") == 0)
		o->state_out = v;
	else if (strcmp(a, "--type") == 0)
		*type = v;
	else if (strcmp(a, "--volume-size") == 0) {
		if (parse_size(v, &o->volume_size) < 0) {
			fprintf(stderr, "khub sync export: --volume-size wants bytes (at least 4096; K, M, G suffixes)\n");
			return KHUB_EINVAL;
		}
	} else if (strcmp(a, "--compression") == 0) {
		o->compression = v;
		if (sync_compression_check(v) < 0) {
			fprintf(stderr, "khub sync export: --compression wants none, zstd or zstd:LEVEL (1 to 19)\n");
			return KHUB_EINVAL;
		}
	} else
		return 2;
	return 0;
}

/* The options into o (its lists borrowed from l): 0, KHUB_EINVAL after a
 * message, 2 for the usage. */
static int export_args(int argc, char **argv, struct sync_export_opts *o, struct export_lists *l)
{
	const char *type = "kernel";
	o->type = REPO_KERNEL;
	for (int i = 2; i < argc; i += 2) {
		if (i + 1 >= argc)
			return 2;
		int rc = export_option(argv[i], argv[i + 1], o, l, &type);
		if (rc)
			return rc;
	}
	if (!o->key_path || !o->out || repo_type_parse(type, &o->type) < 0)
		return 2;
	if (l->locks.n && (l->repos.n || l->refs.n || l->variants.n)) {
		fprintf(stderr, "khub sync export: --lock selects repos, commits and variants itself: "
				"not with --repos, --refs or --variants\n");
		return KHUB_EINVAL;
	}
	o->repos = l->repos.items, o->nrepos = l->repos.n;
	o->refs = l->refs.items, o->nrefs = l->refs.n;
	o->variants = l->variants.items, o->nvariants = l->variants.n;
	o->locks = l->locks.items, o->nlocks = l->locks.n;
	return 0;
}

static int cmd_export(int argc, char **argv)
{
	struct sync_export_opts o = { 0 };
	struct export_lists l = { 0 };
	int rc = export_args(argc, argv, &o, &l);
	if (rc == 2)
		fputs(cmd_sync_usage, stderr);
	if (rc) {
		rc = 2;
		goto done;
	}
	runtime_open_database();
	o.repo_root = runtime_repo_root();
	o.lfs = lfs_store_open(runtime_lfs_root());
	if (!o.lfs)
		fatal("cannot open the LFS store");
	char *hub = hub_name();
	o.hub = hub;
	o.progress = isatty(2) ? SYNC_PROGRESS_BAR : SYNC_PROGRESS_OFF;
	o.report = stdout;
	char err[1024];
	if (sync_export(&o, err, sizeof(err)) < 0) {
		fprintf(stderr, "khub sync export: %s\n", err);
		rc = 1;
	}
	free(hub);
	lfs_store_close(o.lfs);
	runtime_close_database();
done:
	list_free(&l.repos);
	list_free(&l.refs);
	list_free(&l.variants);
	list_free(&l.locks);
	return rc;
}

/* Who runs the import, for the audit log and the history: the user sudo
 * was run by, else the login name of the effective user. */
static char *operator_name(void)
{
	const char *sudo = getenv("SUDO_USER");
	if (sudo && *sudo)
		return xstrdup(sudo);
	struct passwd *pw = getpwuid(geteuid());
	if (pw && pw->pw_name)
		return xstrdup(pw->pw_name);
	return xasprintf("uid %u", (unsigned)geteuid());
}

static int cmd_verify_import(int argc, char **argv, int import)
{
	struct sync_import_opts o = { 0 };
	struct list bundles = { 0 };
	const char *key = NULL;
	for (int i = 2; i < argc; i++) {
		if (!import && strcmp(argv[i], "--key") == 0 && i + 1 < argc)
			key = argv[++i];
		else if (import && strcmp(argv[i], "--allow-rewind") == 0)
			o.allow_rewind = 1;
		else if (import && strcmp(argv[i], "--dry-run") == 0)
			o.dry_run = 1;
		else if (import && strcmp(argv[i], "--json") == 0)
			o.json = 1;
		else if (argv[i][0] != '-')
			list_add(&bundles, argv[i]);
		else {
			fputs(cmd_sync_usage, stderr);
			list_free(&bundles);
			return 2;
		}
	}
	if (bundles.n == 0 || (o.json && !o.dry_run)) {
		fputs(cmd_sync_usage, stderr);
		list_free(&bundles);
		return 2;
	}
	o.trusted = key ? key : config.sync_trusted_keys;
	/* an import run by cron or a pipeline logs a line per tenth of the bundle */
	o.progress = isatty(2) ? SYNC_PROGRESS_BAR : import && !o.dry_run ? SYNC_PROGRESS_LINES : SYNC_PROGRESS_OFF;
	o.report = stdout;
	if (import) {
		runtime_open_database();
		o.repo_root = runtime_repo_root();
		o.lfs = lfs_store_open(runtime_lfs_root());
		if (!o.lfs)
			fatal("cannot open the LFS store");
	}
	char *op = import ? operator_name() : NULL;
	o.operator_ = op;
	int rc = 0;
	/* an older or replayed bundle (exit 4) moves nothing and does not stop the ones after it */
	for (size_t i = 0; i < bundles.n && (rc == 0 || rc == 4); i++) {
		char err[1024];
		int r = import ? sync_import(&o, bundles.items[i], err, sizeof(err))
			       : sync_verify(&o, bundles.items[i], err, sizeof(err));
		if (r < 0 && import && r == KHUB_EEXIST) {
			fprintf(stderr, "khub sync import: %s: nothing moved: %s\n", bundles.items[i], err);
			rc = 4;
		} else if (r < 0) {
			fprintf(stderr, "khub sync %s: %s: refused: %s\n", import ? "import" : "verify", bundles.items[i], err);
			rc = r == KHUB_ECONFLICT ? 3 : r == SYNC_EEXPORTER_KEY ? 5 : 1;
		}
	}
	free(op);
	if (import) {
		lfs_store_close(o.lfs);
		runtime_close_database();
	}
	list_free(&bundles);
	return rc;
}

static int cmd_state(int argc, char **argv)
{
	const char *out = NULL, *type = "kernel";
	enum repo_type t;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc)
			type = argv[++i];
		else {
			fputs(cmd_sync_usage, stderr);
			return 2;
		}
	}
	if (repo_type_parse(type, &t) < 0) {
		fputs(cmd_sync_usage, stderr);
		return 2;
	}
	runtime_open_database();
	struct lfs_store *lfs = lfs_store_open(runtime_lfs_root());
	if (!lfs)
		fatal("cannot open the LFS store");
	char err[256], *hub = hub_name();
	char *text = sync_state_collect(runtime_repo_root(), lfs, t, hub, err, sizeof(err));
	free(hub);
	lfs_store_close(lfs);
	runtime_close_database();
	if (!text) {
		fprintf(stderr, "khub sync state: %s\n", err);
		return 1;
	}
	FILE *fp = out ? fopen(out, "w") : stdout;
	int rc = fp && fputs(text, fp) >= 0 && fputc('\n', fp) >= 0 ? 0 : 1;
	if (out && fp && fclose(fp) != 0)
		rc = 1;
	if (rc)
		fprintf(stderr, "khub sync state: cannot write %s\n", out ? out : "stdout");
	free(text);
	return rc;
}

static int cmd_history(int argc, char **argv)
{
	int as_json = argc == 3 && strcmp(argv[2], "--json") == 0;
	if (argc > 3 || (argc == 3 && !as_json)) {
		fputs(cmd_sync_usage, stderr);
		return 2;
	}
	runtime_open_database();
	size_t n = 0;
	int rc = 0;
	struct sync_import_record *h = db_sync_history(&n, &rc);
	runtime_close_database();
	if (rc < 0) {
		fprintf(stderr, "khub sync history: the database is unavailable\n");
		return 1;
	}
	json_t *all = json_array();
	for (size_t i = 0; i < n; i++) {
		if (as_json)
			json_array_append_new(all, json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:I, s:s}", "bundle",
							     h[i].bundle, "exporter", h[i].exporter, "sequence",
							     (json_int_t)h[i].sequence, "key_id", h[i].key_id, "hub",
							     h[i].hub ? h[i].hub : "", "operator",
							     h[i].operator_ ? h[i].operator_ : "", "state",
							     h[i].done ? "applied" : "interrupted", "refs_moved",
							     (json_int_t)h[i].refs_moved, "started", h[i].started ? h[i].started : ""));
		else
			printf("%s  %s  exporter %s #%" PRId64 "  key %s  by %s  %s, %" PRId64 " refs moved\n",
			       h[i].started ? h[i].started : "", h[i].bundle, h[i].exporter, h[i].sequence, h[i].key_id,
			       h[i].operator_ ? h[i].operator_ : "", h[i].done ? "applied" : "interrupted (run it again)",
			       h[i].refs_moved);
	}
	if (as_json) {
		char *text = json_dumps(all, JSON_INDENT(1));
		puts(text ? text : "[]");
		free(text);
	}
	json_decref(all);
	db_sync_history_free(h, n);
	return 0;
}

static int print_scope(const char *key_id, const char *orgs, const char *set_by, const char *set_at, void *arg)
{
	(*(int *)arg)++;
	printf("%s  %s  (set by %s, %s)\n", key_id, orgs, set_by, set_at);
	return 0;
}

/* Org names or globs: the characters of names plus * ? [ ]. */
static int valid_scope(const char *orgs)
{
	if (!orgs[0] || orgs[0] == ',' || orgs[strlen(orgs) - 1] == ',' || strstr(orgs, ",,"))
		return 0;
	return strspn(orgs, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-*?[],") == strlen(orgs);
}

static int print_exporter_key(const char *exporter, const char *key_id, const char *bound_by, const char *bound_at,
			      void *arg)
{
	(void)arg;
	printf("exporter %s  signed by key %s only  (bound by %s, %s)\n", exporter, key_id, bound_by, bound_at);
	return 0;
}

static int valid_uuid(const char *s)
{
	if (strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++)
		if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' : !strchr("0123456789abcdef", s[i]))
			return 0;
	return 1;
}

/* KEY --exporter ID: the key becomes the only one that signs for the id
 * (replacing the key bound before, e.g. a rotation); audited. */
static int bind_exporter(const char *id, const char *exporter)
{
	char before[SYNC_KEY_ID_LEN + 1] = "";
	int had = db_sync_exporter_key_get(exporter, before);
	char *op = operator_name(), *actor = xasprintf("sync:%s", op);
	json_t *d = json_pack("{s:s, s:s, s:s?, s:s}", "exporter", exporter, "key_id", id, "previous_key_id",
			      had == 0 ? before : NULL, "operator", op);
	char *details = json_dumps(d, JSON_COMPACT);
	int rc = had < 0 && had != KHUB_ENOTFOUND ? had : db_sync_exporter_key_set(exporter, id, op, 1);
	if (rc >= 0)
		rc = db_audit(0, actor, "sync.exporter_key", exporter, details, "local");
	if (rc == 0)
		printf("exporter %s: only key %s signs for it\n", exporter, id);
	json_decref(d);
	free(details);
	free(actor);
	free(op);
	return rc;
}

/* khub sync key-scope: list; KEY --orgs LIST: set; KEY --any: remove;
 * KEY --exporter ID: bind. */
static int cmd_key_scope(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[3], "--exporter") == 0 && !valid_uuid(argv[4])) {
		fprintf(stderr, "khub sync key-scope: --exporter takes an exporter id (a lowercase uuid)\n");
		return 2;
	}
	if (argc != 2 && !(argc == 5 && strcmp(argv[3], "--orgs") == 0) && !(argc == 4 && strcmp(argv[3], "--any") == 0) &&
	    !(argc == 5 && strcmp(argv[3], "--exporter") == 0)) {
		fputs(cmd_sync_usage, stderr);
		return 2;
	}
	const char *exporter = argc == 5 && strcmp(argv[3], "--exporter") == 0 ? argv[4] : NULL;
	const char *orgs = argc == 5 && !exporter ? argv[4] : NULL;
	char id[SYNC_KEY_ID_LEN + 1], err[256];
	if (argc > 2 && strlen(argv[2]) == SYNC_KEY_ID_LEN && strspn(argv[2], "0123456789abcdef") == SYNC_KEY_ID_LEN)
		memcpy(id, argv[2], sizeof(id));
	else if (argc > 2 && sync_key_id_file(argv[2], id, err, sizeof(err)) < 0) {
		fprintf(stderr, "khub sync key-scope: %s\n", err);
		return 1;
	}
	if (orgs && !valid_scope(orgs)) {
		fprintf(stderr, "khub sync key-scope: --orgs takes org names or globs, comma-separated\n");
		return 2;
	}
	runtime_open_database();
	int rc = 0, n = 0;
	if (argc == 2) {
		rc = db_sync_key_scope_list(print_scope, &n);
		if (rc == 0 && n == 0)
			printf("no key has a scope: every trusted key may bring in any org\n");
		if (rc == 0)
			rc = db_sync_exporter_key_list(print_exporter_key, NULL);
	} else if (exporter) {
		rc = bind_exporter(id, exporter);
	} else {
		char *op = operator_name(), *actor = xasprintf("sync:%s", op);
		json_t *d = json_pack("{s:s, s:s?, s:s}", "key_id", id, "orgs", orgs, "operator", op);
		char *details = json_dumps(d, JSON_COMPACT);
		rc = db_sync_key_scope_set(id, orgs, op);
		if (rc == 0)
			rc = db_audit(0, actor, "sync.key_scope", id, details, "local");
		if (rc == 0)
			printf("key %s may bring in %s\n", id, orgs ? orgs : "any org");
		json_decref(d);
		free(details);
		free(actor);
		free(op);
	}
	runtime_close_database();
	if (rc < 0)
		fprintf(stderr, "khub sync key-scope: the database is unavailable\n");
	return rc < 0 ? 1 : 0;
}

int cmd_sync(int argc, char **argv)
{
	if (argc < 2) {
		fputs(cmd_sync_usage, stderr);
		return 2;
	}
	const char *verb = argv[1];
	if (strcmp(verb, "keygen") == 0)
		return cmd_keygen(argc, argv);
	if (strcmp(verb, "export") == 0)
		return cmd_export(argc, argv);
	if (strcmp(verb, "verify") == 0)
		return cmd_verify_import(argc, argv, 0);
	if (strcmp(verb, "import") == 0)
		return cmd_verify_import(argc, argv, 1);
	if (strcmp(verb, "state") == 0)
		return cmd_state(argc, argv);
	if (strcmp(verb, "history") == 0)
		return cmd_history(argc, argv);
	if (strcmp(verb, "key-scope") == 0)
		return cmd_key_scope(argc, argv);
	if (strcmp(verb, "help") == 0) {
		fputs(cmd_sync_usage, stdout);
		return 0;
	}
	fputs(cmd_sync_usage, stderr);
	return 2;
}
