/* state.c -- what an export starts from: this hub's state (`khub sync
 * state`, for --since) and kernels.lock files (--lock). */
#include "sync/sync.h"
#include "storage/db/db.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int lfail(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int lfail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- kernels.lock ------------------------------------------------------------ */

int sync_lock_load(const char *path, struct sync_lock_pin **pins, size_t *npins, char *err, size_t errlen)
{
	size_t len;
	char *text = sync_read_file(path, 16u << 20, &len, err, errlen);
	if (!text)
		return KHUB_EINVAL;
	json_t *doc = json_loadb(text, len, 0, NULL);
	free(text);
	int rc = 0;
	if (!json_is_array(doc))
		rc = lfail(err, errlen, KHUB_EINVAL, "%s: a kernels.lock is a JSON array of {repo_id, sha, variants}", path);
	size_t i;
	json_t *v;
	json_array_foreach(doc, i, v) {
		if (rc < 0)
			break;
		const char *id = json_string_value(json_object_get(v, "repo_id"));
		const char *sha = json_string_value(json_object_get(v, "sha"));
		json_t *vars = json_object_get(v, "variants");
		const char *slash = id ? strchr(id, '/') : NULL, *why;
		if (!slash || !sha || !is_lower_hex(sha, 40) || !json_is_object(vars) ||
		    (size_t)(slash - id) > REPO_NAME_MAX || strlen(slash + 1) > REPO_NAME_MAX) {
			rc = lfail(err, errlen, KHUB_EINVAL, "%s: entry %zu is not {repo_id, sha, variants}", path, i);
			break;
		}
		*pins = xrealloc(*pins, (*npins + 1) * sizeof(**pins));
		struct sync_lock_pin *p = &(*pins)[(*npins)++];
		memset(p, 0, sizeof(*p));
		memcpy(p->ns, id, (size_t)(slash - id));
		snprintf(p->name, sizeof(p->name), "%s", slash + 1);
		memcpy(p->sha, sha, 41);
		if (repo_name_validate(p->ns, &why) < 0 || repo_name_validate(p->name, &why) < 0) {
			rc = lfail(err, errlen, KHUB_EINVAL, "%s: %s: %s", path, id, why);
			break;
		}
		const char *vname;
		json_t *vv;
		p->variants = xcalloc(json_object_size(vars) + 1, sizeof(char *));
		json_object_foreach(vars, vname, vv) {
			(void)vv;
			if (strpbrk(vname, "*?[/") || !*vname) {
				rc = lfail(err, errlen, KHUB_EINVAL, "%s: %s: bad variant name", path, id);
				break;
			}
			p->variants[p->nvariants++] = xstrdup(vname);
		}
	}
	json_decref(doc);
	return rc;
}

void sync_lock_release(struct sync_lock_pin *pins, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < pins[i].nvariants; k++)
			free(pins[i].variants[k]);
		free(pins[i].variants);
	}
	free(pins);
}

/* ---- state --------------------------------------------------------------------- */

struct state_walk {
	const char *repo_root;
	struct lfs_store *lfs;
	enum repo_type type;
	struct sync_manifest *st;
	int rc;
};

/* The LFS objects this hub has for the repo: linked and in the store. */
static int state_have(struct state_walk *w, const struct repo_record *rec, struct sync_repo *r)
{
	char **oids = NULL;
	size_t n = 0;
	int rc = db_lfs_links(rec->id, &oids, &n);
	r->has_have = 1;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (is_lower_hex(oids[i], 64) && lfs_store_stat(w->lfs, oids[i], NULL) == 0)
			sync_repo_add_have(r, oids[i]);
	free_strings(oids, n);
	return rc;
}

static int state_repo(const struct repo_record *rec, void *arg)
{
	struct state_walk *w = arg;
	git_repository *git = NULL;
	git_reference_iterator *it = NULL;
	git_reference *ref;
	if (rec->type != w->type || repo_store_open(w->repo_root, rec->type, rec->ns, rec->name, &git) < 0)
		return 0;
	struct sync_repo *r = sync_manifest_add_repo(w->st);
	r->type = rec->type;
	snprintf(r->ns, sizeof(r->ns), "%s", rec->ns);
	snprintf(r->name, sizeof(r->name), "%s", rec->name);
	if (git_reference_iterator_new(&it, git) == 0) {
		while (git_reference_next(&ref, it) == 0) {
			const char *name = git_reference_name(ref);
			const git_oid *oid = git_reference_target(ref);
			if (oid && (strncmp(name, "refs/heads/", 11) == 0 || strncmp(name, "refs/tags/", 10) == 0 ||
				    strncmp(name, "refs/khub-sync/", 15) == 0)) {
				char hex[41];
				git_oid_tostr(hex, sizeof(hex), oid);
				sync_repo_add_ref(r, name, NULL, hex);
			}
			git_reference_free(ref);
		}
		git_reference_iterator_free(it);
	}
	git_repository_free(git);
	if (state_have(w, rec, r) < 0)
		w->rc = KHUB_EDB;
	return w->rc;
}

char *sync_state_collect(const char *repo_root, struct lfs_store *lfs, enum repo_type type, const char *hub, char *err,
			 size_t errlen)
{
	struct sync_manifest st = { 0 };
	struct state_walk w = { repo_root, lfs, type, &st, 0 };
	st.format = SYNC_STATE_FORMAT;
	st.hub = xstrdup(hub);
	char now[32];
	format_iso8601(time(NULL), now);
	st.created = xstrdup(now);
	char *text = NULL;
	if (db_repo_each(state_repo, &w) < 0)
		snprintf(err, errlen, "cannot list repos (database)");
	else
		text = sync_manifest_format(&st, 1);
	sync_manifest_release(&st);
	return text;
}
