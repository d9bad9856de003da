/* manifest.c -- the bundle manifest and the hub state (JSON): parse with
 * every name, sha, entry name and size validated, and format. */
#include "sync/sync.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/rand.h>

#define SIZE_LIMIT (1ULL << 50)

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return KHUB_EINVAL;
}

void sync_uuid(char out[37])
{
	unsigned char b[16];
	if (RAND_bytes(b, sizeof(b)) != 1)
		fatal("no random bytes");
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	char hex[33];
	hex_encode(b, 16, hex);
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

static int valid_uuid(const char *s)
{
	if (strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
			return 0;
		}
	}
	return 1;
}

char *sync_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if ((uint64_t)st.st_size > max) {
		snprintf(err, errlen, "%s is larger than %zu bytes", path, max);
		close(fd);
		return NULL;
	}
	char *buf = xmalloc((size_t)st.st_size + 1);
	size_t n = 0;
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

/* refs/heads/..., refs/tags/... or refs/khub-sync/...; git's own name rules. */
static int valid_ref_name(const char *s)
{
	int valid = 0;
	if (strncmp(s, "refs/heads/", 11) != 0 && strncmp(s, "refs/tags/", 10) != 0 &&
	    strncmp(s, "refs/khub-sync/", 15) != 0)
		return 0;
	if (strlen(s) > 255 || git_reference_name_is_valid(&valid, s) < 0)
		return 0;
	return valid;
}

/* A sha field: 40 lowercase hex, or null/absent when may_be_empty. */
static int get_sha(json_t *obj, const char *key, int may_be_empty, char out[41])
{
	json_t *v = json_object_get(obj, key);
	out[0] = '\0';
	if (!v || json_is_null(v))
		return may_be_empty ? 0 : -1;
	const char *s = json_string_value(v);
	if (!s || !is_lower_hex(s, 40))
		return -1;
	memcpy(out, s, 41);
	return 0;
}

static int get_size(json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > SIZE_LIMIT)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int valid_entry_name(const char *s)
{
	if (strncmp(s, "lfs/", 4) == 0)
		return is_lower_hex(s + 4, 64);
	if (strncmp(s, "git/", 4) != 0)
		return 0;
	const char *p = s + 4;
	size_t digits = strspn(p, "0123456789");
	return digits > 0 && digits < 10 && strcmp(p + digits, ".pack") == 0;
}

struct sync_repo *sync_manifest_add_repo(struct sync_manifest *m)
{
	m->repos = xrealloc(m->repos, (m->nrepos + 1) * sizeof(*m->repos));
	struct sync_repo *r = &m->repos[m->nrepos++];
	memset(r, 0, sizeof(*r));
	return r;
}

void sync_repo_add_ref(struct sync_repo *r, const char *name, const char *old, const char *new_)
{
	r->refs = xrealloc(r->refs, (r->nrefs + 1) * sizeof(*r->refs));
	struct sync_ref *ref = &r->refs[r->nrefs++];
	ref->name = xstrdup(name);
	snprintf(ref->old, sizeof(ref->old), "%s", old ? old : "");
	snprintf(ref->new_, sizeof(ref->new_), "%s", new_ ? new_ : "");
}

void sync_repo_add_current(struct sync_repo *r, const char *name, const char *sha)
{
	r->current = xrealloc(r->current, (r->ncurrent + 1) * sizeof(*r->current));
	struct sync_ref *ref = &r->current[r->ncurrent++];
	ref->name = xstrdup(name);
	ref->old[0] = '\0';
	snprintf(ref->new_, sizeof(ref->new_), "%s", sha);
	r->has_current = 1;
}

void sync_repo_add_have(struct sync_repo *r, const char *oid)
{
	r->have = xrealloc(r->have, (r->nhave + 1) * sizeof(*r->have));
	snprintf(r->have[r->nhave++], 65, "%s", oid);
	r->has_have = 1;
}

const char *sync_repo_current(const struct sync_repo *r, const char *name)
{
	for (size_t i = 0; i < r->ncurrent; i++)
		if (strcmp(r->current[i].name, name) == 0)
			return r->current[i].new_;
	return NULL;
}

const struct sync_ref *sync_repo_ref(const struct sync_repo *r, const char *name)
{
	for (size_t i = 0; i < r->nrefs; i++)
		if (strcmp(r->refs[i].name, name) == 0)
			return &r->refs[i];
	return NULL;
}

void sync_repo_clear(struct sync_repo *r)
{
	for (size_t i = 0; i < r->nrefs; i++)
		free(r->refs[i].name);
	free(r->refs);
	for (size_t i = 0; i < r->ncurrent; i++)
		free(r->current[i].name);
	free(r->current);
	free(r->have);
	free(r->base);
	free(r->pack);
	free(r->lfs);
	memset(r, 0, sizeof(*r));
}

/* {"refs/heads/x": sha, ...} into r's current refs (or, for a state, refs' new_) */
static int parse_ref_map(json_t *refs, int as_current, struct sync_repo *r, const char *id, char *err, size_t errlen)
{
	const char *name;
	json_t *v;
	if (!json_is_object(refs))
		return fail(err, errlen, "repo %s: refs must be an object", id);
	json_object_foreach(refs, name, v) {
		const char *sha = json_string_value(v);
		if (!valid_ref_name(name) || !sha || !is_lower_hex(sha, 40))
			return fail(err, errlen, "repo %s: bad ref %.80s", id, name);
		if (as_current)
			sync_repo_add_current(r, name, sha);
		else
			sync_repo_add_ref(r, name, NULL, sha);
	}
	if (as_current)
		r->has_current = 1;
	return 0;
}

/* A state's "lfs": the oids the hub has for the repo (absent: an older state). */
static int parse_have(json_t *lfs, struct sync_repo *r, const char *id, char *err, size_t errlen)
{
	size_t i;
	json_t *v;
	if (!lfs || json_is_null(lfs))
		return 0;
	if (!json_is_array(lfs))
		return fail(err, errlen, "repo %s: lfs must be an array", id);
	r->has_have = 1;
	json_array_foreach(lfs, i, v) {
		const char *oid = json_string_value(v);
		if (!oid || !is_lower_hex(oid, 64))
			return fail(err, errlen, "repo %s: bad LFS object %zu", id, i);
		sync_repo_add_have(r, oid);
	}
	return 0;
}

static int parse_id(json_t *jr, struct sync_repo *r, char *err, size_t errlen)
{
	const char *type = json_string_value(json_object_get(jr, "type"));
	const char *id = json_string_value(json_object_get(jr, "id"));
	const char *why = "missing";
	if (!type || repo_type_parse(type, &r->type) < 0)
		return fail(err, errlen, "repo with a bad type");
	const char *slash = id ? strchr(id, '/') : NULL;
	if (!slash || (size_t)(slash - id) > REPO_NAME_MAX || strlen(slash + 1) > REPO_NAME_MAX)
		return fail(err, errlen, "repo with a bad id");
	memcpy(r->ns, id, (size_t)(slash - id));
	r->ns[slash - id] = '\0';
	snprintf(r->name, sizeof(r->name), "%s", slash + 1);
	if (repo_name_validate(r->ns, &why) < 0 || repo_name_validate(r->name, &why) < 0)
		return fail(err, errlen, "repo %s: %s", id, why);
	return 0;
}

static int parse_repo(json_t *jr, int is_state, struct sync_repo *r, char *err, size_t errlen)
{
	int rc = parse_id(jr, r, err, errlen);
	if (rc < 0)
		return rc;
	const char *id = json_string_value(json_object_get(jr, "id"));
	json_t *refs = json_object_get(jr, "refs");
	if (is_state) {
		if ((rc = parse_ref_map(refs, 0, r, id, err, errlen)) < 0)
			return rc;
		return parse_have(json_object_get(jr, "lfs"), r, id, err, errlen);
	}
	json_t *cur = json_object_get(jr, "current");
	if (cur && !json_is_null(cur) && (rc = parse_ref_map(cur, 1, r, id, err, errlen)) < 0)
		return rc;
	r->private_ = json_is_true(json_object_get(jr, "private"));
	r->org_trusted = json_is_true(json_object_get(jr, "org_trusted"));
	size_t i;
	json_t *v;
	if (!json_is_array(refs))
		return fail(err, errlen, "repo %s: refs must be an array", id);
	json_array_foreach(refs, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		char old[41], new_[41];
		if (!name || !valid_ref_name(name) || get_sha(v, "old", 1, old) < 0 || get_sha(v, "new", 1, new_) < 0 ||
		    (!old[0] && !new_[0]) || sync_repo_ref(r, name))
			return fail(err, errlen, "repo %s: bad ref entry %zu", id, i);
		sync_repo_add_ref(r, name, old, new_);
	}
	json_t *base = json_object_get(jr, "base");
	if (base && !json_is_array(base))
		return fail(err, errlen, "repo %s: base must be an array", id);
	r->base = xcalloc(json_array_size(base) + 1, sizeof(*r->base));
	json_array_foreach(base, i, v) {
		const char *s = json_string_value(v);
		if (!s || !is_lower_hex(s, 40))
			return fail(err, errlen, "repo %s: bad base commit", id);
		memcpy(r->base[r->nbase++], s, 41);
	}
	json_t *pack = json_object_get(jr, "pack");
	if (pack && !json_is_null(pack)) {
		const char *s = json_string_value(pack);
		if (!s || strncmp(s, "git/", 4) != 0 || !valid_entry_name(s))
			return fail(err, errlen, "repo %s: bad pack name", id);
		r->pack = xstrdup(s);
	}
	json_t *lfs = json_object_get(jr, "lfs");
	if (lfs && !json_is_array(lfs))
		return fail(err, errlen, "repo %s: lfs must be an array", id);
	r->lfs = xcalloc(json_array_size(lfs) + 1, sizeof(*r->lfs));
	json_array_foreach(lfs, i, v) {
		const char *oid = json_string_value(json_object_get(v, "oid"));
		if (!oid || !is_lower_hex(oid, 64) || get_size(json_object_get(v, "size"), &r->lfs[r->nlfs].size) < 0)
			return fail(err, errlen, "repo %s: bad LFS object %zu", id, i);
		memcpy(r->lfs[r->nlfs++].oid, oid, 65);
	}
	return 0;
}

/* The exporter's id, the bundle's sequence and the repos deleted at the source. */
static int parse_origin(json_t *doc, struct sync_manifest *out, char *err, size_t errlen)
{
	const char *exporter = json_string_value(json_object_get(doc, "exporter"));
	json_t *seq = json_object_get(doc, "sequence");
	if (!exporter || !valid_uuid(exporter))
		return fail(err, errlen, "no exporter id");
	if (!json_is_integer(seq) || json_integer_value(seq) < 1)
		return fail(err, errlen, "no sequence");
	snprintf(out->exporter, sizeof(out->exporter), "%s", exporter);
	out->sequence = (int64_t)json_integer_value(seq);
	json_t *deleted = json_object_get(doc, "deleted");
	size_t i;
	json_t *v;
	if (deleted && !json_is_array(deleted))
		return fail(err, errlen, "deleted must be an array");
	out->deleted = xcalloc(json_array_size(deleted) + 1, sizeof(*out->deleted));
	json_array_foreach(deleted, i, v) {
		int rc = json_is_object(v) ? parse_id(v, &out->deleted[out->ndeleted], err, errlen)
					   : fail(err, errlen, "deleted repo %zu is not an object", i);
		if (rc < 0)
			return rc;
		out->ndeleted++;
	}
	return 0;
}

/* The format, the bundle's ids, its origin (bundles) and what it says
 * about itself. */
static int parse_header(json_t *doc, int is_state, struct sync_manifest *out, char *err, size_t errlen)
{
	json_t *fmt = json_object_get(doc, "format");
	json_int_t f = json_is_integer(fmt) ? json_integer_value(fmt) : 0;
	if (is_state ? f < 1 || f > SYNC_STATE_FORMAT : f != SYNC_FORMAT)
		return fail(err, errlen, "unknown format (this khub reads %s format %d%s)", is_state ? "state" : "bundle",
			    is_state ? SYNC_STATE_FORMAT : SYNC_FORMAT, is_state ? " and older" : "");
	out->format = (int)f;
	const char *bundle = json_string_value(json_object_get(doc, "bundle"));
	if (bundle && !valid_uuid(bundle))
		return fail(err, errlen, "bad bundle id");
	if (!bundle && !is_state)
		return fail(err, errlen, "no bundle id");
	snprintf(out->bundle, sizeof(out->bundle), "%s", bundle ? bundle : "");
	const char *since = json_string_value(json_object_get(doc, "since_bundle"));
	if (since && !valid_uuid(since))
		return fail(err, errlen, "bad since_bundle id");
	out->since_bundle = since ? xstrdup(since) : NULL;
	int rc;
	if (!is_state && (rc = parse_origin(doc, out, err, errlen)) < 0)
		return rc;
	const char *hub = json_string_value(json_object_get(doc, "hub"));
	const char *created = json_string_value(json_object_get(doc, "created"));
	out->hub = xstrndup(hub ? hub : "", strnlen(hub ? hub : "", 256));
	out->created = xstrndup(created ? created : "", strnlen(created ? created : "", 64));
	json_t *sel = json_object_get(doc, "selection");
	out->selection = sel ? json_incref(sel) : NULL;
	return 0;
}

static int parse_repos(json_t *doc, int is_state, struct sync_manifest *out, char *err, size_t errlen)
{
	json_t *repos = json_object_get(doc, "repos");
	if (!json_is_array(repos))
		return fail(err, errlen, "repos must be an array");
	size_t i;
	json_t *v;
	json_array_foreach(repos, i, v) {
		struct sync_repo *r = sync_manifest_add_repo(out);
		if (!json_is_object(v))
			return fail(err, errlen, "repo %zu is not an object", i);
		int rc = parse_repo(v, is_state, r, err, errlen);
		if (rc < 0)
			return rc;
		for (size_t k = 0; k + 1 < out->nrepos; k++)
			if (out->repos[k].type == r->type && strcasecmp(out->repos[k].ns, r->ns) == 0 &&
			    strcasecmp(out->repos[k].name, r->name) == 0)
				return fail(err, errlen, "repo %s/%s listed twice", r->ns, r->name);
	}
	return 0;
}

static int parse_entries(json_t *doc, struct sync_manifest *out, char *err, size_t errlen)
{
	json_t *entries = json_object_get(doc, "entries");
	if (!json_is_array(entries))
		return fail(err, errlen, "entries must be an array");
	out->entries = xcalloc(json_array_size(entries) + 1, sizeof(*out->entries));
	size_t i;
	json_t *v;
	json_array_foreach(entries, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *sha = json_string_value(json_object_get(v, "sha256"));
		struct sync_entry *e = &out->entries[out->nentries];
		if (!name || !valid_entry_name(name) || !sha || !is_lower_hex(sha, 64) ||
		    get_size(json_object_get(v, "size"), &e->size) < 0 || sync_manifest_entry(out, name))
			return fail(err, errlen, "bad entry %zu", i);
		if (strncmp(name, "lfs/", 4) == 0 && strcmp(name + 4, sha) != 0)
			return fail(err, errlen, "entry %s: an LFS object is named by its sha256", name);
		e->name = xstrdup(name);
		memcpy(e->sha256, sha, 65);
		out->nentries++;
	}
	return 0;
}

/* Every pack and LFS object a repo names is an entry (of that size). */
static int check_repo_entries(const struct sync_manifest *out, char *err, size_t errlen)
{
	for (size_t r = 0; r < out->nrepos; r++) {
		const struct sync_repo *repo = &out->repos[r];
		if (repo->pack && !sync_manifest_entry(out, repo->pack))
			return fail(err, errlen, "repo %s/%s: pack %s is not an entry", repo->ns, repo->name, repo->pack);
		for (size_t k = 0; k < repo->nlfs; k++) {
			char name[70];
			snprintf(name, sizeof(name), "lfs/%s", repo->lfs[k].oid);
			const struct sync_entry *e = sync_manifest_entry(out, name);
			if (!e || e->size != repo->lfs[k].size)
				return fail(err, errlen, "repo %s/%s: LFS object %s is not an entry of that size", repo->ns,
					    repo->name, repo->lfs[k].oid);
		}
	}
	return 0;
}

int sync_manifest_parse(const char *text, size_t len, int is_state, struct sync_manifest *out, char *err,
			size_t errlen)
{
	memset(out, 0, sizeof(*out));
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	int rc;
	if (!json_is_object(doc))
		rc = fail(err, errlen, "not a JSON object (%s)", doc ? "wrong type" : jerr.text);
	else if ((rc = parse_header(doc, is_state, out, err, errlen)) == 0 &&
		 (rc = parse_repos(doc, is_state, out, err, errlen)) == 0 && !is_state &&
		 (rc = parse_entries(doc, out, err, errlen)) == 0)
		rc = check_repo_entries(out, err, errlen);
	json_decref(doc);
	return rc;
}

static json_t *ref_map(const struct sync_ref *refs, size_t n);

/* A bundle's repo: flags, refs, current refs, base, pack, LFS objects. */
static void format_repo(json_t *jr, const struct sync_repo *r)
{
	json_object_set_new(jr, "private", json_boolean(r->private_));
	json_object_set_new(jr, "org_trusted", json_boolean(r->org_trusted));
	json_t *refs = json_array();
	for (size_t k = 0; k < r->nrefs; k++) {
		const struct sync_ref *ref = &r->refs[k];
		json_array_append_new(refs, json_pack("{s:s, s:o, s:o}", "name", ref->name, "old",
						      ref->old[0] ? json_string(ref->old) : json_null(), "new",
						      ref->new_[0] ? json_string(ref->new_) : json_null()));
	}
	json_object_set_new(jr, "refs", refs);
	json_object_set_new(jr, "current", r->has_current ? ref_map(r->current, r->ncurrent) : json_null());
	json_t *base = json_array();
	for (size_t k = 0; k < r->nbase; k++)
		json_array_append_new(base, json_string(r->base[k]));
	json_object_set_new(jr, "base", base);
	json_object_set_new(jr, "pack", r->pack ? json_string(r->pack) : json_null());
	json_t *lfs = json_array();
	for (size_t k = 0; k < r->nlfs; k++)
		json_array_append_new(lfs, json_pack("{s:s, s:I}", "oid", r->lfs[k].oid, "size",
						     (json_int_t)r->lfs[k].size));
	json_object_set_new(jr, "lfs", lfs);
}

static json_t *ref_map(const struct sync_ref *refs, size_t n)
{
	json_t *map = json_object();
	for (size_t k = 0; k < n; k++)
		if (refs[k].new_[0])
			json_object_set_new(map, refs[k].name, json_string(refs[k].new_));
	return map;
}

char *sync_manifest_format(const struct sync_manifest *m, int is_state)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "format", json_integer(is_state ? SYNC_STATE_FORMAT : SYNC_FORMAT));
	json_object_set_new(doc, "bundle", m->bundle[0] ? json_string(m->bundle) : json_null());
	if (!is_state) {
		json_object_set_new(doc, "since_bundle", m->since_bundle ? json_string(m->since_bundle) : json_null());
		json_object_set_new(doc, "exporter", json_string(m->exporter));
		json_object_set_new(doc, "sequence", json_integer((json_int_t)m->sequence));
	}
	json_object_set_new(doc, "hub", json_string(m->hub ? m->hub : ""));
	json_object_set_new(doc, "created", json_string(m->created ? m->created : ""));
	if (!is_state && m->selection)
		json_object_set(doc, "selection", m->selection);
	json_t *repos = json_array();
	for (size_t i = 0; i < m->nrepos; i++) {
		const struct sync_repo *r = &m->repos[i];
		json_t *jr = json_object();
		char *id = xasprintf("%s/%s", r->ns, r->name);
		json_object_set_new(jr, "type", json_string(repo_type_name(r->type)));
		json_object_set_new(jr, "id", json_string(id));
		free(id);
		if (is_state) {
			json_object_set_new(jr, "refs", ref_map(r->refs, r->nrefs));
			if (r->has_have) {
				json_t *have = json_array();
				for (size_t k = 0; k < r->nhave; k++)
					json_array_append_new(have, json_string(r->have[k]));
				json_object_set_new(jr, "lfs", have);
			}
			json_array_append_new(repos, jr);
			continue;
		}
		format_repo(jr, r);
		json_array_append_new(repos, jr);
	}
	json_object_set_new(doc, "repos", repos);
	if (!is_state) {
		json_t *deleted = json_array();
		for (size_t i = 0; i < m->ndeleted; i++) {
			char *id = xasprintf("%s/%s", m->deleted[i].ns, m->deleted[i].name);
			json_array_append_new(deleted, json_pack("{s:s, s:s}", "type", repo_type_name(m->deleted[i].type),
								 "id", id));
			free(id);
		}
		json_object_set_new(doc, "deleted", deleted);
		json_t *entries = json_array();
		for (size_t i = 0; i < m->nentries; i++)
			json_array_append_new(entries, json_pack("{s:s, s:s, s:I}", "name", m->entries[i].name, "sha256",
								 m->entries[i].sha256, "size",
								 (json_int_t)m->entries[i].size));
		json_object_set_new(doc, "entries", entries);
	}
	char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	return text;
}

void sync_manifest_release(struct sync_manifest *m)
{
	for (size_t i = 0; i < m->nrepos; i++)
		sync_repo_clear(&m->repos[i]);
	free(m->repos);
	for (size_t i = 0; i < m->nentries; i++)
		free(m->entries[i].name);
	free(m->entries);
	for (size_t i = 0; i < m->ndeleted; i++)
		sync_repo_clear(&m->deleted[i]);
	free(m->deleted);
	if (m->index) {
		hashmap_release(m->index, NULL);
		free(m->index);
	}
	free(m->hub);
	free(m->created);
	free(m->since_bundle);
	json_decref(m->selection);
	memset(m, 0, sizeof(*m));
}

const struct sync_entry *sync_manifest_entry(const struct sync_manifest *m, const char *name)
{
	struct sync_manifest *mm = (struct sync_manifest *)m;	/* the index is a cache */
	if (!mm->index) {
		mm->index = xcalloc(1, sizeof(*mm->index));
		hashmap_init(mm->index);
	}
	/* entries are only ever appended: index the new ones */
	for (size_t i = mm->index->count; i < m->nentries && m->entries[i].name; i++)
		hashmap_put(mm->index, m->entries[i].name, (void *)(uintptr_t)(i + 1));
	uintptr_t pos = (uintptr_t)hashmap_get(mm->index, name);
	return pos ? &m->entries[pos - 1] : NULL;
}

struct sync_repo *sync_manifest_repo(const struct sync_manifest *m, enum repo_type type, const char *ns,
				     const char *name)
{
	for (size_t i = 0; i < m->nrepos; i++)
		if (m->repos[i].type == type && strcasecmp(m->repos[i].ns, ns) == 0 &&
		    strcasecmp(m->repos[i].name, name) == 0)
			return &m->repos[i];
	return NULL;
}
