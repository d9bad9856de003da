/* variant_index.c -- the kernel variant index: for each commit of a kernel
 * repo, every build/<variant>/ with its parsed name, its metadata.json
 * (judged by kernel/), file count and size; and the
 * repo's branch heads, which the listing filters read. A commit is indexed
 * once; callers may call again at will. */
#include "storage/db/variant_index.h"
#include "storage/db/db_internal.h"
#include "kernel/kernel.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct pending_variant {
	char *name;
	int64_t files, size;
	char metadata_oid[41];		/* "" when there is no build/<v>/metadata.json */
	int metadata_is_lfs;
	uint64_t metadata_size;
};

/* ---- building the records ------------------------------------------------- */

static json_t *json_version_part(long v)
{
	return v < 0 ? json_null() : json_integer(v);
}

static void set_string(json_t *rec, const char *key, const char *value)
{
	if (value)
		json_object_set_new(rec, key, json_string(value));
}

/* The row of kernel_variants for one variant, judged by kernel/ (name,
 * metadata.json); NULL when the name cannot be stored as text. */
static json_t *variant_record(git_repository *git, const struct pending_variant *pv)
{
	struct variant_check c;
	json_t *name = json_string(pv->name);
	if (!name)	/* not UTF-8: cannot be stored (or sent) as text */
		return NULL;
	variant_check_init(&c, pv->name);
	if (pv->metadata_oid[0]) {
		char *data = NULL;
		size_t len = 0;
		if (pv->metadata_is_lfs)
			variant_check_unreadable(&c, "metadata.json is stored as an LFS object");
		else if (pv->metadata_size > METADATA_MAX_BYTES)
			variant_check_unreadable(&c, "metadata.json is larger than 256 KiB");
		else if (repo_read_blob(git, pv->metadata_oid, METADATA_MAX_BYTES, &data, &len) < 0)
			variant_check_unreadable(&c, "metadata.json cannot be read");
		else
			variant_check_metadata(&c, data, len);
		free(data);
	}

	json_t *rec = json_object(), *warnings = json_array();
	json_object_set_new(rec, "variant", name);
	json_object_set_new(rec, "name_valid", json_boolean(c.name_valid));
	if (!c.name_valid) {
		json_object_set_new(rec, "name_error", json_string(c.name_error));
	} else {
		const struct variant_name *v = &c.parsed;
		json_object_set_new(rec, "framework", json_string(variant_framework_name(v->framework)));
		json_object_set_new(rec, "framework_major", json_version_part(v->framework_major));
		json_object_set_new(rec, "framework_minor", json_version_part(v->framework_minor));
		if (v->cxx11_abi >= 0)
			json_object_set_new(rec, "cxx_abi", json_string(v->cxx11_abi ? "cxx11" : "cxx98"));
		json_object_set_new(rec, "backend", json_string(v->backend));
		json_object_set_new(rec, "backend_tag", json_string(v->backend_tag));
		json_object_set_new(rec, "backend_major", json_version_part(v->backend_major));
		json_object_set_new(rec, "backend_minor", json_version_part(v->backend_minor));
		if (v->framework != VARIANT_TORCH_NOARCH) {
			json_object_set_new(rec, "arch", json_string(v->arch));
			json_object_set_new(rec, "os", json_string(v->os));
		}
	}
	json_object_set_new(rec, "file_count", json_integer(pv->files));
	json_object_set_new(rec, "total_size", json_integer(pv->size));
	json_object_set_new(rec, "metadata_status", json_string(variant_metadata_status_name(c.metadata_status)));
	if (c.metadata_status != VARIANT_METADATA_OK)
		json_object_set_new(rec, "metadata_error", json_string(c.metadata_error));
	if (c.metadata)
		json_object_set(rec, "metadata", c.metadata);
	set_string(rec, "kernel_id", c.kernel_id);
	set_string(rec, "kernel_name", c.kernel_name);
	if (c.has_kernel_version)
		json_object_set_new(rec, "kernel_version", json_integer(c.kernel_version));
	set_string(rec, "license", c.license);
	set_string(rec, "backend_type", c.backend_type);
	if (c.backend_archs)
		json_object_set(rec, "backend_archs", c.backend_archs);
	if (c.python_depends)
		json_object_set(rec, "python_depends", c.python_depends);
	for (size_t i = 0; i < c.warnings.count; i++)
		json_array_append_new(warnings, json_string(c.warnings.items[i]));
	json_object_set_new(rec, "warnings", warnings);
	variant_check_release(&c);
	return rec;
}

static void pending_release(struct pending_variant *pv, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(pv[i].name);
	free(pv);
}

/* Collect build/<variant>/ directories with their files from the tree. */
static int collect_variants(git_repository *git, const char *sha, struct pending_variant **out, size_t *count)
{
	struct tree_listing listing;
	struct pending_variant *pv = NULL;
	size_t n = 0, alloc = 0;
	*out = NULL;
	*count = 0;
	int rc = repo_list_tree(git, sha, BUILD_DIR, 1, &listing);
	if (rc == KHUB_ENOTFOUND || rc == KHUB_ENOTDIR)
		return 0;	/* no build/ directory: a commit without variants */
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < listing.count; i++) {
		const struct tree_entry *e = &listing.entries[i];
		struct build_path bp;
		if (build_path_parse(e->path, &bp) < 0)
			continue;
		if (!bp.file) {
			if (!e->is_dir)
				continue;	/* files directly in build/ are no variant */
			if (n == alloc) {
				alloc = alloc ? 2 * alloc : 16;
				pv = xrealloc(pv, alloc * sizeof(*pv));
			}
			memset(&pv[n], 0, sizeof(pv[n]));
			pv[n++].name = xstrndup(bp.variant, bp.variant_len);
			continue;
		}
		/* git order: a directory's entries follow it, so this file is the
		 * last variant's (checked anyway). */
		if (n == 0 || strlen(pv[n - 1].name) != bp.variant_len ||
		    strncmp(pv[n - 1].name, bp.variant, bp.variant_len) != 0 || e->is_dir)
			continue;
		struct pending_variant *cur = &pv[n - 1];
		cur->files++;
		cur->size += (int64_t)e->size;
		if (strcmp(bp.file, BUILD_METADATA_FILE) == 0) {
			snprintf(cur->metadata_oid, sizeof(cur->metadata_oid), "%s", e->oid);
			cur->metadata_is_lfs = e->is_lfs;
			cur->metadata_size = e->size;
		}
	}
	tree_listing_release(&listing);
	*out = pv;
	*count = n;
	return 0;
}

/* ---- the database --------------------------------------------------------- */

/* 1 when repo_id is a kernel repo, 0 when another type or absent; *indexed
 * says whether commit_sha (may be NULL) is indexed at the current version. */
static int kernel_repo_state(int64_t repo_id, const char *commit_sha, int *indexed)
{
	char id[24], version[24];
	const char *params[3] = { db_param_int(id, repo_id), commit_sha ? commit_sha : "",
				  db_param_int(version, VARIANT_INDEX_VERSION) };
	PGresult *res = db_exec("SELECT r.type, EXISTS (SELECT 1 FROM kernel_commits c WHERE c.repo_id = r.id"
				" AND c.commit_sha = $2 AND c.index_version >= $3::int) FROM repos r WHERE r.id = $1",
				3, params, NULL);
	if (!res)
		return KHUB_EDB;
	int kernel = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "kernel") == 0;
	*indexed = kernel && PQgetvalue(res, 0, 1)[0] == 't';
	PQclear(res);
	return kernel;
}

static const char insert_variants_sql[] =
	"INSERT INTO kernel_variants (repo_id, commit_sha, variant, name_valid, name_error, framework,"
	" framework_major, framework_minor, cxx_abi, backend, backend_tag, backend_major, backend_minor, arch, os,"
	" file_count, total_size, metadata_status, metadata_error, kernel_id, kernel_name, kernel_version, license,"
	" backend_type, backend_archs, python_depends, metadata, warnings)"
	" SELECT $1, $2, x.variant, x.name_valid, x.name_error, x.framework, x.framework_major, x.framework_minor,"
	" x.cxx_abi, x.backend, x.backend_tag, x.backend_major, x.backend_minor, x.arch, x.os, x.file_count,"
	" x.total_size, x.metadata_status, x.metadata_error, x.kernel_id, x.kernel_name, x.kernel_version,"
	" x.license, x.backend_type, x.backend_archs, x.python_depends, x.metadata, coalesce(x.warnings, '[]')"
	" FROM jsonb_to_recordset($3::jsonb) AS x(variant text, name_valid boolean, name_error text,"
	" framework text, framework_major int, framework_minor int, cxx_abi text, backend text, backend_tag text,"
	" backend_major int, backend_minor int, arch text, os text, file_count int, total_size bigint,"
	" metadata_status text, metadata_error text, kernel_id text, kernel_name text, kernel_version bigint,"
	" license text, backend_type text, backend_archs jsonb, python_depends jsonb, metadata jsonb,"
	" warnings jsonb)"
	" ON CONFLICT (repo_id, commit_sha, variant) DO NOTHING";

static int store_commit(int64_t repo_id, const char *sha, json_t *records)
{
	char id[24], version[24], count[24];
	snprintf(count, sizeof(count), "%zu", json_array_size(records));
	char *doc = json_dumps(records, JSON_COMPACT);
	const char *params[4] = { db_param_int(id, repo_id), sha, doc, NULL };
	int rc = db_tx_begin();
	if (rc < 0)
		goto cleanup;
	/* Two indexers of one repo (a push and a lazy read) take turns. */
	if ((rc = db_lock_xact(DB_LOCK_VARIANT_INDEX, repo_id)) < 0) {
		db_tx_rollback();
		goto cleanup;
	}
	PGresult *res = db_exec("DELETE FROM kernel_variants WHERE repo_id = $1 AND commit_sha = $2", 2, params,
				NULL);
	if (res) {
		PQclear(res);
		res = db_exec(insert_variants_sql, 3, params, NULL);
	}
	if (res) {
		PQclear(res);
		params[2] = db_param_int(version, VARIANT_INDEX_VERSION);
		params[3] = count;
		res = db_exec("INSERT INTO kernel_commits (repo_id, commit_sha, index_version, variant_count)"
			      " VALUES ($1, $2, $3::int, $4::int) ON CONFLICT (repo_id, commit_sha) DO UPDATE"
			      " SET index_version = EXCLUDED.index_version, variant_count = EXCLUDED.variant_count,"
			      " indexed_at = now()", 4, params, NULL);
	}
	if (!res) {
		db_tx_rollback();
		rc = KHUB_EDB;
		goto cleanup;
	}
	PQclear(res);
	rc = db_tx_commit();
cleanup:
	free(doc);
	return rc;
}

static int index_commit(int64_t repo_id, git_repository *git, const char *sha)
{
	struct pending_variant *pv = NULL;
	size_t n = 0;
	int rc = collect_variants(git, sha, &pv, &n);
	if (rc < 0) {
		log_warn("variant index: cannot read build/ of %s: %s", sha, khub_strerror(rc));
		return rc;
	}
	json_t *records = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *rec = variant_record(git, &pv[i]);
		if (rec)
			json_array_append_new(records, rec);
	}
	rc = store_commit(repo_id, sha, records);
	if (rc == 0)
		log_debug("variant index: repo %" PRId64 " commit %s: %zu variants", repo_id, sha,
			  json_array_size(records));
	json_decref(records);
	pending_release(pv, n);
	return rc;
}

/* The commit a sha names (tags are peeled); KHUB_ENOTFOUND otherwise. */
static int peel_commit(git_repository *git, const char *sha, char out[41])
{
	git_oid oid;
	git_object *obj = NULL, *commit = NULL;
	int rc = KHUB_ENOTFOUND;
	if (!is_lower_hex(sha, 40) || git_oid_fromstr(&oid, sha) < 0 ||
	    git_object_lookup(&obj, git, &oid, GIT_OBJECT_ANY) < 0)
		goto cleanup;
	if (git_object_peel(&commit, obj, GIT_OBJECT_COMMIT) < 0)
		goto cleanup;
	git_oid_tostr(out, 41, git_object_id(commit));
	rc = 0;
cleanup:
	git_object_free(commit);
	git_object_free(obj);
	return rc;
}

static json_t *branch_heads(git_repository *git)
{
	struct ref_list refs;
	json_t *heads = json_array();
	if (repo_list_refs(git, &refs) < 0)
		return heads;
	for (size_t i = 0; i < refs.count; i++)
		if (refs.items[i].kind == REF_BRANCH)
			json_array_append_new(heads, json_pack("{s:s, s:s}", "ref", refs.items[i].ref, "sha",
							       refs.items[i].sha));
	ref_list_release(&refs);
	return heads;
}

static int sync_heads(int64_t repo_id, json_t *heads)
{
	char id[24];
	char *doc = json_dumps(heads, JSON_COMPACT);
	const char *params[2] = { db_param_int(id, repo_id), doc };
	int rc = db_run("WITH x AS (SELECT * FROM jsonb_to_recordset($2::jsonb) AS x(ref text, sha text)),"
			" gone AS (DELETE FROM kernel_heads h WHERE h.repo_id = $1"
			" AND h.ref NOT IN (SELECT ref FROM x))"
			" INSERT INTO kernel_heads (repo_id, ref, commit_sha) SELECT $1, ref, sha FROM x"
			" ON CONFLICT (repo_id, ref) DO UPDATE SET commit_sha = EXCLUDED.commit_sha"
			" WHERE kernel_heads.commit_sha <> EXCLUDED.commit_sha", 2, params);
	free(doc);
	return rc;
}

/* variant_index_current, with the peeled sha for a caller that goes on to
 * index it. */
static int index_state(int64_t repo_id, git_repository *git, const char *commit_sha, char sha[41])
{
	int indexed;
	if (peel_commit(git, commit_sha, sha) < 0)
		return KHUB_ENOTFOUND;
	int kernel = kernel_repo_state(repo_id, sha, &indexed);
	return kernel < 0 ? kernel : !kernel || indexed;
}

int variant_index_ensure(int64_t repo_id, git_repository *git, const char *commit_sha)
{
	char sha[41];
	int current = index_state(repo_id, git, commit_sha, sha);
	if (current != 0)
		return current < 0 ? current : 0;
	return index_commit(repo_id, git, sha);
}

int variant_index_current(int64_t repo_id, git_repository *git, const char *commit_sha)
{
	char sha[41];
	return index_state(repo_id, git, commit_sha, sha);
}

int variant_index_update(int64_t repo_id, git_repository *git, const char *commit_sha)
{
	int indexed, rc = 0;
	int kernel = kernel_repo_state(repo_id, NULL, &indexed);
	if (kernel <= 0)
		return kernel;
	if (commit_sha)
		rc = variant_index_ensure(repo_id, git, commit_sha);
	json_t *heads = branch_heads(git);
	int hrc = sync_heads(repo_id, heads);
	json_decref(heads);
	if (hrc == 0)
		hrc = kernel_card_index(repo_id, git);
	return rc < 0 ? rc : hrc;
}

int variant_index_catch_up_repo(int64_t repo_id, git_repository *git)
{
	json_t *heads = branch_heads(git);
	size_t k;
	json_t *head;
	json_array_foreach(heads, k, head)
		variant_index_ensure(repo_id, git, json_string_value(json_object_get(head, "sha")));
	int rc = sync_heads(repo_id, heads);
	json_decref(heads);
	return rc < 0 ? rc : kernel_card_index(repo_id, git);
}

int variant_index_catch_up(const char *repo_root, long limit)
{
	char version[24], lim[24], card_version[24];
	const char *params[3] = { db_param_int(version, VARIANT_INDEX_VERSION), db_param_int(lim, limit),
				  db_param_int(card_version, KERNEL_CARD_INDEX_VERSION) };
	/* also repos whose README card is not of main's recorded head (those
	 * from before cards were read, at start-up) */
	PGresult *res = db_exec("SELECT r.id, r.namespace, r.name FROM repos r WHERE r.type = 'kernel' AND ("
				" NOT EXISTS (SELECT 1 FROM kernel_heads h WHERE h.repo_id = r.id) OR"
				" EXISTS (SELECT 1 FROM kernel_heads h LEFT JOIN kernel_commits c"
				" ON c.repo_id = h.repo_id AND c.commit_sha = h.commit_sha AND c.index_version >= $1::int"
				" WHERE h.repo_id = r.id AND c.repo_id IS NULL) OR"
				" NOT EXISTS (SELECT 1 FROM kernel_cards k WHERE k.repo_id = r.id AND k.card_version >= $3::int"
				" AND k.commit_sha = coalesce((SELECT h.commit_sha FROM kernel_heads h WHERE h.repo_id = r.id"
				" AND h.ref = 'refs/heads/main'), ''))) ORDER BY r.id LIMIT $2::bigint",
				3, params, NULL);
	if (!res)
		return KHUB_EDB;
	int done = 0;
	for (int i = 0; i < PQntuples(res); i++) {
		int64_t repo_id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		git_repository *git = NULL;
		if (repo_store_open(repo_root, REPO_KERNEL, PQgetvalue(res, i, 1), PQgetvalue(res, i, 2), &git) < 0)
			continue;
		if (variant_index_catch_up_repo(repo_id, git) == 0)
			done++;
		git_repository_free(git);
	}
	PQclear(res);
	return done;
}

/* ---- reading ------------------------------------------------------------- */

int variant_index_load(int64_t repo_id, const char *commit_sha, struct variant_rows *out)
{
	char id[24], version[24];
	struct db_rows rows;
	memset(out, 0, sizeof(*out));
	const char *params[3] = { db_param_int(id, repo_id), commit_sha, db_param_int(version, VARIANT_INDEX_VERSION) };
	int rc = db_query_one(&rows, "SELECT v.variant, v.name_valid, v.name_error, v.file_count, v.total_size,"
			      " v.metadata_status, v.metadata_error, v.metadata::text, v.warnings::text"
			      " FROM kernel_commits c LEFT JOIN kernel_variants v"
			      " ON v.repo_id = c.repo_id AND v.commit_sha = c.commit_sha"
			      " WHERE c.repo_id = $1 AND c.commit_sha = $2 AND c.index_version >= $3::int"
			      " ORDER BY v.variant COLLATE \"C\"", 3, params);
	if (rc < 0)
		return rc;
	out->items = xcalloc(rows.count, sizeof(*out->items));
	for (size_t i = 0; i < rows.count; i++) {
		if (db_rows_isnull(&rows, i, 0))
			continue;	/* the commit has no variant */
		struct variant_row *r = &out->items[out->count++];
		db_rows_read(&rows, i, DB_FIELDS(DB_STR(0, &r->name), DB_BOOL(1, &r->name_valid),
						 DB_STR_OR_NULL(2, &r->name_error), DB_I64(3, &r->file_count),
						 DB_I64(4, &r->total_size), DB_STR_OR_NULL(6, &r->metadata_error),
						 DB_STR_OR_NULL(7, &r->metadata), DB_STR_OR_NULL(8, &r->warnings)));
		const char *status = db_rows_get(&rows, i, 5);
		r->metadata_status = strcmp(status, "ok") == 0 ? VARIANT_METADATA_OK
				   : strcmp(status, "missing") == 0 ? VARIANT_METADATA_MISSING : VARIANT_METADATA_INVALID;
	}
	db_rows_release(&rows);
	return 0;
}

void variant_rows_release(struct variant_rows *rows)
{
	if (!rows)
		return;
	for (size_t i = 0; i < rows->count; i++) {
		struct variant_row *r = &rows->items[i];
		free(r->name);
		free(r->name_error);
		free(r->metadata_error);
		free(r->metadata);
		free(r->warnings);
	}
	free(rows->items);
	rows->items = NULL;
	rows->count = 0;
}
