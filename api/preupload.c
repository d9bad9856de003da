/* preupload.c -- POST /api/{type}s/{ns}/{name}/preupload/{rev}: tell each
 * client, per file, whether to send it inline ("regular") or through LFS,
 * whether it is ignored, and the oid already stored at that path. */
#include "api/api.h"

#include <fnmatch.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PREUPLOAD_FILES 10000

/* A .gitignore rule (basename patterns, or path patterns with '/'). */
static int gitignore_matches(const char *gitignore, const char *path)
{
	if (!gitignore)
		return 0;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	int ignored = 0;
	char *copy = xstrdup(gitignore), *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t n = strlen(line);
		while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
			line[--n] = '\0';
		if (!n || line[0] == '#')
			continue;
		int negate = line[0] == '!';
		const char *pat = line + negate;
		if (pat[0] == '/')
			pat++;
		int match = strchr(pat, '/') ? fnmatch(pat, path, FNM_PATHNAME) == 0 : fnmatch(pat, base, 0) == 0;
		/* a directory rule "build/" ignores everything below it */
		if (!match && pat[0] && pat[strlen(pat) - 1] == '/') {
			size_t pl = strlen(pat);
			match = strncmp(path, pat, pl) == 0 || strstr(path, pat) != NULL;
		}
		if (match)
			ignored = !negate;
	}
	free(copy);
	return ignored;
}

/* As for commits: read access and a write token for a pull request, write
 * access for a branch. */
static enum route_access preupload_access(struct request *req)
{
	int to_pr = request_query_bool(req, "create_pr", 0) || strncmp(req->rev, "refs/pr/", 8) == 0;
	return to_pr ? ACCESS_REPO_CONTRIBUTE : ACCESS_REPO_WRITE;
}

/* What the answers follow: the revision's (or the body's) rules. */
struct preupload_rules {
	git_repository *git;
	const char *sha;		/* "" when the revision does not exist yet */
	char *attrs, *ignore;
	int inline_only;		/* never "lfs" (clients that would go to Xet) */
};

/* A file's sample (base64 of its first bytes, at most 600) decoded into
 * sample; its length. */
static size_t decode_sample(json_t *f, unsigned char sample[600])
{
	size_t sample_len = 0;
	const char *sample_b64 = json_string_value(json_object_get(f, "sample"));
	if (sample_b64) {
		size_t n = strlen(sample_b64);
		if (n <= 800) {
			int d = EVP_DecodeBlock(sample, (const unsigned char *)sample_b64, (int)n);
			if (d > 0) {
				sample_len = (size_t)d;
				while (n > 0 && sample_b64[n - 1] == '=' && sample_len > 0)
					n--, sample_len--;
			}
		}
	}
	return sample_len;
}

/* One file's answer: how to send it, whether it is ignored, and the oid
 * already stored at its path. */
static json_t *file_answer(const struct preupload_rules *r, const char *path, uint64_t size, json_t *f)
{
	unsigned char sample[600];
	size_t sample_len = decode_sample(f, sample);
	int lfs = !r->inline_only && lfs_should_store(r->attrs, path, sample, sample_len, size);
	json_t *item = json_pack("{s:s, s:s, s:b}", "path", path, "uploadMode", lfs ? "lfs" : "regular",
				 "shouldIgnore", gitignore_matches(r->ignore, path));
	struct tree_entry e;
	if (r->sha[0] && repo_stat_path(r->git, r->sha, path, &e) == 0) {
		/* The oid a client compares with its own hash of the file. */
		if (!e.is_dir && e.is_lfs && lfs)
			json_object_set_new(item, "oid", json_string(e.lfs_oid));
		else if (!e.is_dir && !e.is_lfs && !lfs)
			json_object_set_new(item, "oid", json_string(e.oid));
		tree_entry_release(&e);
	}
	return item;
}

/* The answers for every file; NULL once a bad one was answered 400. */
static json_t *file_answers(struct request *req, const struct preupload_rules *r, json_t *files,
			    enum MHD_Result *result)
{
	json_t *out = json_array();
	size_t i;
	json_t *f;
	const char *why;
	json_array_foreach(files, i, f) {
		const char *path = json_string_value(json_object_get(f, "path"));
		json_t *size_v = json_object_get(f, "size");
		if (!path || repo_path_validate(path, &why) < 0) {
			*result = respond_error(req, 400, NULL, "files[%zu]: invalid path '%s': %s", i, path ? path : "",
						path ? why : "missing");
			json_decref(out);
			return NULL;
		}
		if (size_v && (!json_is_integer(size_v) || json_integer_value(size_v) < 0)) {
			*result = respond_error(req, 400, NULL, "files[%zu]: size must be a non-negative integer", i);
			json_decref(out);
			return NULL;
		}
		uint64_t size = size_v ? (uint64_t)json_integer_value(size_v) : 0;
		json_array_append_new(out, file_answer(r, path, size, f));
	}
	return out;
}

static enum MHD_Result handle_preupload(struct request *req)
{
	int create_pr = request_query_bool(req, "create_pr", 0);
	struct repo_handle h;
	enum MHD_Result result;
	h = *req->repo;	/* opened by the server (preupload_access) */
	if (h.record.mirrored)
		return respond_error(req, 403, NULL, "a mirrored repo is read-only: open pull requests upstream");
	json_t *doc = request_json_body(req, &result);
	if (!doc)
		return result;
	json_t *files = json_object_get(doc, "files");
	if (!json_is_array(files)) {
		json_decref(doc);
		return respond_error(req, 400, NULL, "body must be {\"files\": [{\"path\", \"size\", \"sample\"}, ...]}");
	}
	if (json_array_size(files) > MAX_PREUPLOAD_FILES) {
		json_decref(doc);
		return respond_error(req, 400, NULL, "at most %d files per preupload", MAX_PREUPLOAD_FILES);
	}
	char sha[41] = "";
	if (repo_resolve_revision(h.git, req->rev, sha) < 0 && !create_pr) {
		/* A commit to a branch that does not exist yet will be refused;
		 * say so now. */
		json_decref(doc);
		return respond_revision_not_found(req, req->rev);
	}
	const char *attrs_arg = json_string_value(json_object_get(doc, "gitAttributes"));
	const char *ignore_arg = json_string_value(json_object_get(doc, "gitIgnore"));
	/* huggingface_hub >= 1.20 with hf_xet goes to Xet for any "lfs"
	 * answer, which khub does not speak: keep it on inline uploads and
	 * store big or binary content as LFS on our side. */
	const char *ua = request_header(req, "User-Agent");
	struct preupload_rules r = {
		h.git, sha, attrs_arg ? xstrdup(attrs_arg) : repo_read_text_file(h.git, sha, ".gitattributes", 1 << 20),
		ignore_arg ? xstrdup(ignore_arg) : repo_read_text_file(h.git, sha, ".gitignore", 1 << 20),
		ua && strstr(ua, "hf_hub/") != NULL,
	};
	json_t *out = file_answers(req, &r, files, &result);
	free(r.attrs);
	free(r.ignore);
	json_decref(doc);
	if (!out)
		return result;
	json_t *body = json_pack("{s:o}", "files", out);
	if (sha[0])
		json_object_set_new(body, "commitOid", json_string(sha));
	return respond_json(req, 200, body);
}

/* As commits: read access and a write token for a pull request, write
 * access for a branch (preupload_access). */
const struct route preupload_routes[] = {
	{ METHOD_POST, "/api/{type}/{ns}/{name}/preupload/{rev}", handle_preupload, ROUTE_BODY, 0,
	  NULL, ACCESS_REPO_CONTRIBUTE, preupload_access },
	{ 0, NULL, NULL, 0, 0, NULL },
};
