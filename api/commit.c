/* commit.c -- POST /api/{type}s/{ns}/{name}/commit/{rev}: the NDJSON commit
 * body, parsed as it arrives (kernel-builder sends whole binaries inline as
 * base64), spooled to disk, applied all at once under the repo's lock with
 * compare-and-swap on the ref. Also create_pr=1 (refs/pr/N). */
#include "api/commit_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- the request ------------------------------------------------------------- */

/* Commit bodies each account is streaming now: a body holds memory and a
 * connection until it ends, so one account may not hold many. */
static struct hashmap in_flight;
static pthread_mutex_t in_flight_lock = PTHREAD_MUTEX_INITIALIZER;

static int in_flight_enter(int64_t user_id)
{
	char key[24];
	snprintf(key, sizeof(key), "%" PRId64, user_id);
	pthread_mutex_lock(&in_flight_lock);
	if (!in_flight.buckets)
		hashmap_init(&in_flight);
	intptr_t n = (intptr_t)hashmap_get(&in_flight, key);
	int ok = n < api_ctx.commits_in_flight_per_user;
	if (ok)
		hashmap_put(&in_flight, key, (void *)(n + 1));
	pthread_mutex_unlock(&in_flight_lock);
	return ok ? 0 : -1;
}

static void in_flight_leave(int64_t user_id)
{
	char key[24];
	snprintf(key, sizeof(key), "%" PRId64, user_id);
	pthread_mutex_lock(&in_flight_lock);
	intptr_t n = (intptr_t)hashmap_get(&in_flight, key);
	if (n <= 1)
		hashmap_remove(&in_flight, key);
	else
		hashmap_put(&in_flight, key, (void *)(n - 1));
	pthread_mutex_unlock(&in_flight_lock);
}

/* rev → full ref of an existing branch (or PR for direct commits). */
static int target_ref_of(struct request *req, struct commit_stream *cs, char sha[41])
{
	const char *rev = req->rev;
	if (strncmp(rev, "refs/pr/", 8) == 0 && !cs->create_pr)
		snprintf(cs->target_ref, sizeof(cs->target_ref), "%s", rev);
	else if (strncmp(rev, "refs/heads/", 11) == 0)
		snprintf(cs->target_ref, sizeof(cs->target_ref), "%s", rev);
	else if (ref_name_validate(rev, NULL) == 0 && strncmp(rev, "refs/", 5) != 0)
		snprintf(cs->target_ref, sizeof(cs->target_ref), "refs/heads/%s", rev);
	else
		return -1;
	return repo_resolve_revision(cs->repo.git, cs->target_ref, sha) == 0 ? 0 : -1;
}

/* Anyone who can read a repo may open a pull request and add to it
 * (kernel-builder --create-pr sends its later batches to refs/pr/N), with a
 * write token; a commit to a branch needs write access. */
static enum route_access commit_access(struct request *req)
{
	int to_pr = request_query_bool(req, "create_pr", 0) || strncmp(req->rev, "refs/pr/", 8) == 0;
	return to_pr ? ACCESS_REPO_CONTRIBUTE : ACCESS_REPO_WRITE;
}

static int commit_begin(struct request *req)
{
	struct commit_stream *cs = xcalloc(1, sizeof(*cs));
	req->stream_state = cs;
	strbuf_init(&cs->raw_text);
	strbuf_init(&cs->content_mem);
	cs->create_pr = request_query_bool(req, "create_pr", 0);
	/* The repo was opened by the server (commit_access). */
	cs->repo = *req->repo;
	if (cs->repo.record.mirrored) {
		respond_error(req, 403, NULL, "a mirrored repo is read-only: open pull requests upstream");
		return -1;
	}
	/* Accounts without write access (pull requests from anyone signed
	 * in) may stream only a few bodies at once. */
	if (cs->repo.role < ROLE_WRITE) {
		if (in_flight_enter(req->principal.user_id) < 0) {
			respond_error(req, 429, NULL, "your account already has %ld pull request commits in progress; wait"
				      " for one to end", api_ctx.commits_in_flight_per_user);
			return -1;
		}
		cs->in_flight_user = req->principal.user_id;
	}
	/* Pull requests are open to readers: bounded per account and hour. */
	if (cs->create_pr && cs->repo.role < ROLE_WRITE && api_ctx.pull_requests_per_hour > 0) {
		long opened = 0;
		if (db_audit_count_recent(req->principal.user_id, "commit.pull_request", 3600, &opened) < 0) {
			respond_db_unavailable(req);
			return -1;
		}
		if (opened >= api_ctx.pull_requests_per_hour) {
			respond_error(req, 429, NULL, "you opened %ld pull requests in the last hour (the limit is %ld)",
				      opened, api_ctx.pull_requests_per_hour);
			return -1;
		}
	}
	/* Every object this commit writes stays in memory, and LFS content
	 * in sealed temp files, until it is accepted: a refused or aborted
	 * commit leaves nothing on disk. */
	if (publish_begin(api_ctx.repo_root, api_ctx.lfs, &cs->repo.record, &cs->pub) < 0) {
		respond_error(req, 500, NULL, "repository storage is unavailable");
		return -1;
	}
	cs->repo.git = publish_git(cs->pub);
	char sha[41];
	if (target_ref_of(req, cs, sha) < 0) {
		respond_revision_not_found(req, req->rev);
		return -1;
	}
	cs->gitattributes = repo_read_text_file(cs->repo.git, sha, ".gitattributes", 1 << 20);
	struct json_stream_handler events = commit_events;
	events.ctx = cs;
	cs->parser = json_stream_new(&events, COLLECT_MAX);
	return 0;
}

static int commit_data(struct request *req, const char *data, size_t len)
{
	struct commit_stream *cs = req->stream_state;
	cs->bytes_in += len;
	if (json_stream_feed(cs->parser, data, len) < 0) {
		if (!cs->err_status)
			commit_stream_fail(cs, 400, NULL, "malformed NDJSON: %s", json_stream_error(cs->parser));
		return -1;
	}
	return 0;
}

static void commit_cleanup(struct request *req)
{
	struct commit_stream *cs = req->stream_state;
	if (!cs)
		return;
	commit_line_reset(cs);
	json_stream_free(cs->parser);
	strbuf_release(&cs->raw_text);
	for (size_t i = 0; i < cs->nops; i++)
		free(cs->ops[i].path);
	free(cs->ops);
	free(cs->gitattributes);
	free(cs->commit_summary);
	free(cs->commit_description);
	free(cs->commit_parent);
	strbuf_release(&cs->content_mem);
	publish_end(cs->pub, NULL, NULL, NULL);
	if (cs->in_flight_user)
		in_flight_leave(cs->in_flight_user);
	free(cs);
	req->stream_state = NULL;
}

/* The .gitattributes this commit itself writes (the last one), or NULL.
 * The caller frees. */
static char *committed_gitattributes(const struct commit_stream *cs)
{
	const struct commit_op *last = NULL;
	for (size_t i = 0; i < cs->nops; i++)
		if (cs->ops[i].kind == OP_PUT && !cs->ops[i].stored_as_lfs && strcmp(cs->ops[i].path, ".gitattributes") == 0)
			last = &cs->ops[i];
	char *text = NULL;
	size_t len;
	if (last)
		repo_read_blob(cs->repo.git, last->blob, 1 << 20, &text, &len);
	return text;
}

/* Add .gitattributes rules for LFS-stored paths no rule covers yet, as the
 * Hub does, so git clients check out content rather than pointers.
 * committed: the commit's own .gitattributes (NULL: the base's applies). */
static int cover_lfs_paths(struct commit_stream *cs, struct commit_builder *cb, const char *base_sha,
			   const char *committed)
{
	char *attrs = committed ? xstrdup(committed) : NULL;
	if (!attrs && commit_builder_has_file(cb, ".gitattributes"))
		attrs = repo_read_text_file(cs->repo.git, base_sha, ".gitattributes", 1 << 20);
	struct strbuf add = STRBUF_INIT;
	for (size_t i = 0; i < cs->nops; i++) {
		const struct commit_op *op = &cs->ops[i];
		if (op->kind != OP_PUT || !op->stored_as_lfs || (attrs && gitattributes_match_lfs(attrs, op->path)) ||
		    gitattributes_match_lfs(add.buf ? add.buf : "", op->path))
			continue;
		for (const char *p = op->path; *p; p++) {
			if (*p == ' ')
				strbuf_adds(&add, "[[:space:]]");
			else if (strchr("*?[\\#!", *p))
				strbuf_addf(&add, "\\%c", *p);
			else
				strbuf_add(&add, p, 1);
		}
		strbuf_adds(&add, " filter=lfs diff=lfs merge=lfs -text\n");
	}
	int rc = 0;
	if (add.len) {
		struct strbuf text = STRBUF_INIT;
		if (attrs) {
			strbuf_adds(&text, attrs);
			if (text.len && text.buf[text.len - 1] != '\n')
				strbuf_adds(&text, "\n");
		}
		strbuf_add(&text, add.buf, add.len);
		rc = commit_builder_put_bytes(cb, ".gitattributes", text.buf, text.len, 0100644);
		strbuf_release(&text);
	}
	strbuf_release(&add);
	free(attrs);
	return rc;
}

/* A .gitattributes in this very commit also decides which of its regular
 * files become LFS (they were judged by the parent's rules while the body
 * streamed in; regular files are at most 10 MiB). */
static int relfs_by_new_attributes(struct commit_stream *cs, struct commit_builder *cb, const char *attrs)
{
	if (!attrs)
		return 0;
	int rc = 0;
	for (size_t i = 0; i < cs->nops && rc == 0; i++) {
		struct commit_op *op = &cs->ops[i];
		if (op->kind != OP_PUT || op->stored_as_lfs || strcmp(op->path, ".gitattributes") == 0 ||
		    !gitattributes_match_lfs(attrs, op->path))
			continue;
		char *data = NULL;
		size_t size;
		if (repo_read_blob(cs->repo.git, op->blob, 16u << 20, &data, &size) < 0 || size == 0) {
			free(data);
			continue;
		}
		struct lfs_writer *w = lfs_writer_begin(api_ctx.lfs);
		struct lfs_pointer ptr;
		char blob[41];
		if (!w || lfs_writer_write(w, data, size) < 0) {
			lfs_writer_abort(w);
			rc = -1;
		} else if (commit_lfs_hold(cs, w, &ptr) < 0 || commit_write_pointer(cs, &ptr, blob) < 0) {
			rc = -1;
		} else {
			memcpy(op->blob, blob, sizeof(blob));
			op->stored_as_lfs = 1;
			rc = commit_builder_put_blob(cb, op->path, op->blob, 0100644);
		}
		free(data);
	}
	return rc;
}

static int compare_paths(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A file of this commit whose path is a folder of another of its files
 * ("conf" and "conf/x"): one would silently replace the other. Returns the
 * file path (owned by cs) or NULL. */
static const char *file_folder_conflict(struct commit_stream *cs, const char **inside)
{
	const char *found = NULL;
	char **paths = xcalloc(cs->nops ? cs->nops : 1, sizeof(*paths));
	size_t n = 0;
	for (size_t i = 0; i < cs->nops; i++)
		if (cs->ops[i].kind == OP_PUT)
			paths[n++] = cs->ops[i].path;
	qsort(paths, n, sizeof(*paths), compare_paths);
	for (size_t i = 0; i < n && !found; i++) {
		for (char *slash = strchr(paths[i], '/'); slash && !found; slash = strchr(slash + 1, '/')) {
			char *prefix = xstrndup(paths[i], (size_t)(slash - paths[i]));
			char **hit = bsearch(&prefix, paths, n, sizeof(*paths), compare_paths);
			if (hit)
				found = *hit, *inside = paths[i];
			free(prefix);
		}
	}
	free(paths);
	return found;
}

/* The work queue's job (api/work_queue.c), while the request waits parked
 * with the repo's lock held on its thread's connection: build the tree
 * from the operations, write the commit and its objects durably and move
 * the ref by compare-and-swap. Uses only the publication's own git handle.
 * Why it was refused is left in cs (commit_stream_fail). */
static int build_and_write_commit(void *arg)
{
	struct commit_stream *cs = arg;
	struct commit_builder *cb = NULL;
	char base[41];
	if (repo_resolve_revision(cs->repo.git, cs->target_ref, cs->ref_head) < 0) {
		commit_stream_fail(cs, 404, "RevisionNotFound", "Invalid rev id: %s", cs->rev);
		return 0;
	}
	memcpy(base, cs->ref_head, sizeof(base));
	if (cs->commit_parent) {
		if (cs->create_pr) {
			git_object *obj = NULL;
			if (git_revparse_single(&obj, cs->repo.git, cs->commit_parent) < 0 ||
			    git_object_type(obj) != GIT_OBJECT_COMMIT) {
				git_object_free(obj);
				commit_stream_fail(cs, 404, "RevisionNotFound", "Invalid rev id: %s", cs->commit_parent);
				return 0;
			}
			git_oid_tostr(base, sizeof(base), git_object_id(obj));
			git_object_free(obj);
		} else if (strncmp(cs->ref_head, cs->commit_parent, strlen(cs->commit_parent)) != 0) {
			commit_stream_fail(cs, 412, NULL, "The branch was updated since you opened this page. Please refresh and "
				      "try again. (parentCommit %s, head %s)", cs->commit_parent, cs->ref_head);
			return 0;
		}
	}
	if (publish_tree(cs->pub, base, 0) < 0) {
		commit_stream_fail(cs, 500, NULL, "cannot start the commit");
		return 0;
	}
	cb = publish_builder(cs->pub);
	for (size_t i = 0; i < cs->nops && !cs->err_status; i++) {
		const struct commit_op *op = &cs->ops[i];
		int rc = 0;
		if (op->kind == OP_PUT)
			rc = commit_builder_put_blob(cb, op->path, op->blob, 0100644);
		else if (op->kind == OP_DELETE_FILE)
			rc = commit_builder_delete_file(cb, op->path);
		else
			rc = commit_builder_delete_folder(cb, op->path);
		if (rc == KHUB_ENOTFOUND)
			commit_stream_fail(cs, 404, "EntryNotFound", "A %s with this name doesn't exist: %s. Make sure to "
				      "differentiate file and folder paths.", op->kind == OP_DELETE_FILE ? "file" : "folder",
				      op->path);
		else if (rc == KHUB_ENOSPC)
			commit_stream_fail(cs, 507, NULL, "insufficient storage: the disk holding the repository is full");
		else if (rc == KHUB_EIO || rc == KHUB_EDB)
			commit_stream_fail(cs, 500, NULL, "cannot apply the operation on %s: %s", op->path, khub_strerror(rc));
		else if (rc < 0)
			commit_stream_fail(cs, 400, NULL, "cannot apply the operation on %s", op->path);
	}
	if (cs->err_status)
		return 0;
	char *committed_attrs = committed_gitattributes(cs);
	if (relfs_by_new_attributes(cs, cb, committed_attrs) < 0)
		commit_stream_fail(cs, 500, NULL, "cannot store a file as LFS");
	else if (cover_lfs_paths(cs, cb, base, committed_attrs) < 0)
		commit_stream_fail(cs, 500, NULL, "cannot update .gitattributes");
	free(committed_attrs);
	if (cs->err_status)
		return 0;
	if (cs->create_pr) {
		cs->pr_number = repo_next_pr_number(cs->repo.git);
		snprintf(cs->pr_ref, sizeof(cs->pr_ref), "refs/pr/%d", cs->pr_number);
	}
	const char *ref = cs->create_pr ? cs->pr_ref : cs->target_ref;
	/* writes the commit, stores its objects and LFS content durably, then
	 * moves the ref by compare-and-swap */
	int rc = publish_commit(cs->pub, &cs->who, cs->commit_summary, cs->commit_description, ref,
				cs->create_pr ? NULL : cs->ref_head, cs->sha);
	if (rc == KHUB_ECONFLICT)
		commit_stream_fail(cs, 412, NULL, "The branch was updated since you opened this page. Please refresh and "
			      "try again.");
	else if (rc == KHUB_ETOOBIG) {
		commit_stream_fail(cs, 413, NULL, "the commit's regular (non-LFS) files exceed the quarantine limit; split "
			      "it into several commits");
		cs->result_rc = rc;
	} else if (rc < 0) {
		commit_stream_fail(cs, 500, NULL, "cannot write the commit to %s", ref);
		cs->result_rc = rc == KHUB_ENOSPC || rc == KHUB_EDB ? rc : KHUB_EIO;
	}
	return 0;
}

static enum MHD_Result apply_commit(struct request *req, struct commit_stream *cs)
{
	enum MHD_Result result;
	const char *inside = NULL, *clash = file_folder_conflict(cs, &inside);
	if (clash)
		return respond_error(req, 400, NULL, "'%s' cannot be both a file and the folder of '%s' in one commit",
				     clash, inside);
	if (publication_lock_request(req, cs->pub, cs->repo.record.id, &result) != 0)
		return result;	/* parked (called again later) or answered */
	cs->rev = req->rev;
	snprintf(cs->who_email, sizeof(cs->who_email), "%s@users.khub", req->principal.name);
	cs->who = (struct publish_actor){ req->principal.user_id, req->principal.name, cs->who_email, req->remote_addr };
	/* The slow part (tree, objects, fsync, ref) on the work queue: this
	 * thread goes on serving other connections. The request waits for it
	 * to end, however long (a commit answered 503 might still land, and
	 * clients retry 5xx). */
	char key[64];
	snprintf(key, sizeof(key), "commit/%s", req->request_id);
	int job_rc = 0;
	/* no free_arg: the commit stream is the request's */
	int rc = work_queue_run_to_end(req, key, build_and_write_commit, cs, NULL, &job_rc, &result);
	if (rc == 1)
		return result;	/* parked: called again when the job ends */
	if (rc < 0)
		goto refused;	/* queue full: 503 queued, nothing was written */
	if (cs->err_status) {
		result = cs->result_rc ? respond_err(req, cs->result_rc, "%s", cs->err)
			 : respond_error(req, cs->err_status, cs->err_code, "%s", cs->err);
		goto refused;
	}
	/* The commit is visible: from here on nothing may answer 5xx (clients
	 * retry 5xx and would commit twice). Unlock (on this thread, whose
	 * connection holds the lock), then touch, audit and index it (kernel
	 * repos), once, in the publish module. */
	const char *ref = cs->create_pr ? cs->pr_ref : cs->target_ref;
	char *details = xasprintf("{\"ref\":\"%s\",\"commit\":\"%s\",\"operations\":%zu,\"bytes\":%" PRIu64 "}",
				  ref, cs->sha, cs->nops, cs->bytes_in);
	publish_end(cs->pub, &cs->who, cs->create_pr ? "commit.pull_request" : "commit", details);
	cs->pub = NULL;
	free(details);

	const char *base_url = request_base_url(req);
	const char *prefix = repo_type_url_prefix(cs->repo.record.type);
	json_t *body = json_object();
	json_object_set_new(body, "success", json_true());
	json_object_set_new(body, "commitOid", json_string(cs->sha));
	char *url = xasprintf("%s/%s%s/%s/commit/%s", base_url, prefix, cs->repo.record.ns, cs->repo.record.name,
			      cs->sha);
	json_object_set_new(body, "commitUrl", json_string(url));
	free(url);
	json_object_set_new(body, "hookOutput", json_string(""));
	if (cs->create_pr) {
		url = xasprintf("%s/%s%s/%s/discussions/%d", base_url, prefix, cs->repo.record.ns, cs->repo.record.name,
				cs->pr_number);
		json_object_set_new(body, "pullRequestUrl", json_string(url));
		json_object_set_new(body, "prNum", json_integer(cs->pr_number));
		free(url);
	}
	log_info("commit %s to %s/%s %s: %zu operations, %" PRIu64 " bytes of body", cs->sha, cs->repo.record.ns,
		 cs->repo.record.name, ref, cs->nops, cs->bytes_in);
	return respond_json(req, 200, body);
refused:
	/* nothing was published: unlock, drop the quarantine */
	publish_end(cs->pub, NULL, NULL, NULL);
	cs->pub = NULL;
	return result;
}

static enum MHD_Result handle_commit(struct request *req)
{
	struct commit_stream *cs = req->stream_state;
	if (cs->body_checked)	/* called again after waiting for the lock */
		return apply_commit(req, cs);
	cs->body_checked = 1;
	if (!cs->err_status && json_stream_finish(cs->parser) < 0)
		commit_stream_fail(cs, 400, NULL, "malformed NDJSON: %s", json_stream_error(cs->parser));
	if (!cs->err_status && !cs->have_header)
		commit_stream_fail(cs, 400, NULL, "the body needs a header line: {\"key\":\"header\",\"value\":{\"summary\":...}}");
	if (!cs->err_status && cs->nops == 0)
		commit_stream_fail(cs, 400, NULL, "no operation: add a line with the key `lfsFile`, `file` or `deletedFile`");
	if (cs->err_status == 503)
		return respond_unavailable(req, "%s", cs->err);
	if (cs->err_status)
		return respond_error(req, cs->err_status, cs->err_code, "%s", cs->err);
	return apply_commit(req, cs);
}

static const struct stream_ops commit_stream_ops = { commit_begin, commit_data, commit_cleanup };

/* A commit to a pull request (create_pr=1 or refs/pr/N) needs read access
 * and a write token, one to a branch write access (commit_access); checked
 * before the body is read. */
const struct route commit_routes[] = {
	{ METHOD_POST, "/api/{type}/{ns}/{name}/commit/{rev}", handle_commit, 0, 0,
	  &commit_stream_ops, ACCESS_REPO_CONTRIBUTE, commit_access },
	{ 0, NULL, NULL, 0, 0, NULL },
};
