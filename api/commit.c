/* commit.c -- POST /api/{type}s/{ns}/{name}/commit/{rev}: the NDJSON commit
 * body, parsed as it arrives (kernel-builder sends whole binaries inline as
 * base64) into a list of operations with their content spooled to disk,
 * handed to publish_apply once under the repo's lock (the tree, LFS and
 * .gitattributes rules, compare-and-swap on the ref), its answer mapped to
 * the Hub's. Also create_pr=1 (refs/pr/N). */
#include "api/commit_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	/* The repo was opened by the server (commit_access); read only. */
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
	char sha[41];
	if (target_ref_of(req, cs, sha) < 0) {
		respond_revision_not_found(req, req->rev);
		return -1;
	}
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
	for (size_t i = 0; i < cs->nops; i++) {
		free(cs->ops[i].path);
		lfs_writer_abort(cs->ops[i].spool);
	}
	free(cs->ops);
	if (cs->content_fd > 0)
		close(cs->content_fd);
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
		if (cs->ops[i].kind == OP_PUT || cs->ops[i].kind == OP_PUT_LFS)
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

/* The operations as publish_apply takes them: the spools handed over,
 * the other contents ranges of the content file. The caller frees. */
static struct publish_op *publish_ops_of(struct commit_stream *cs)
{
	static const enum publish_op_kind kinds[] = {
		[OP_PUT] = PUBLISH_PUT, [OP_PUT_LFS] = PUBLISH_PUT_LFS,
		[OP_DELETE_FILE] = PUBLISH_DELETE_FILE, [OP_DELETE_FOLDER] = PUBLISH_DELETE_FOLDER,
	};
	struct publish_op *ops = xcalloc(cs->nops + 1, sizeof(*ops));
	for (size_t i = 0; i < cs->nops; i++) {
		struct commit_op *op = &cs->ops[i];
		ops[i] = (struct publish_op){ .kind = kinds[op->kind], .path = op->path, .mode = 0100644,
					      .spool = op->spool, .lfs = op->lfs };
		if (op->kind == OP_PUT && !op->spool) {
			ops[i].fd = cs->content_fd;
			ops[i].offset = op->offset;
			ops[i].len = (size_t)op->len;
		}
		op->spool = NULL;
	}
	cs->nspools = 0;
	return ops;
}

/* Why publish_apply refused (rc), as the Hub says it; left in cs. */
static void refuse_commit(struct commit_stream *cs, int rc)
{
	const struct publish_result *res = &cs->res;
	const struct commit_op *op = res->failed_op < cs->nops ? &cs->ops[res->failed_op] : NULL;
	int deleting = op && (op->kind == OP_DELETE_FILE || op->kind == OP_DELETE_FOLDER);
	if (rc == KHUB_ENOTFOUND && deleting)
		commit_stream_fail(cs, 404, "EntryNotFound", "A %s with this name doesn't exist: %s. Make sure to "
				   "differentiate file and folder paths.", op->kind == OP_DELETE_FILE ? "file" : "folder",
				   op->path);
	else if (rc == KHUB_ENOTFOUND && !op)
		commit_stream_fail(cs, 404, "RevisionNotFound", "Invalid rev id: %s",
				   res->missing_base ? cs->commit_parent : cs->rev);
	else if (rc == KHUB_ECONFLICT)
		commit_stream_fail(cs, 412, NULL, "The branch was updated since you opened this page. Please refresh and "
				   "try again.%s%s%s%s%s", res->stale_parent ? " (parentCommit " : "",
				   res->stale_parent ? cs->commit_parent : "", res->stale_parent ? ", head " : "",
				   res->stale_parent ? res->head : "", res->stale_parent ? ")" : "");
	else if (rc == KHUB_ETOOBIG)
		commit_stream_fail(cs, 413, NULL, "the commit's regular (non-LFS) files exceed the quarantine limit; split "
				   "it into several commits");
	else if (rc == KHUB_EPERM && op)
		commit_stream_fail(cs, 422, NULL, "LFS object for %s is not stored on this server; upload it through "
				   "the LFS batch API first", op->path);
	else if (rc == KHUB_ENOSPC)
		commit_stream_fail(cs, 507, NULL, "insufficient storage: the disk holding the repository is full");
	else if (rc == KHUB_EBUSY)	/* respond_error adds Retry-After to a 503 */
		commit_stream_fail(cs, 503, NULL, "another writer is updating %s; retry", res->ref);
	else if (op && rc != KHUB_EIO && rc != KHUB_EDB)
		commit_stream_fail(cs, 400, NULL, "cannot apply the operation on %s", op->path);
	else if (op)
		commit_stream_fail(cs, 500, NULL, "cannot apply the operation on %s: %s", op->path, khub_strerror(rc));
	else
		commit_stream_fail(cs, 500, NULL, "cannot write the commit to %s", res->ref);
	if (rc == KHUB_ETOOBIG || (!op && (rc == KHUB_EIO || rc == KHUB_EDB || rc == KHUB_ENOSPC)))
		cs->result_rc = rc;
}

/* The work queue's job (http/work_queue.c), while the request waits parked
 * with the repo's lock held on its thread's connection: the operations
 * handed to publish_apply (the tree, the commit and its objects stored
 * durably, the ref moved by compare-and-swap). Why it was refused is left
 * in cs (commit_stream_fail). */
static int build_and_write_commit(void *arg)
{
	struct commit_stream *cs = arg;
	struct publish_op *ops = publish_ops_of(cs);
	/* parentCommit: what the branch must be at; for a new pull request,
	 * where it starts */
	struct publish_changeset change = {
		.ops = ops, .nops = cs->nops, .ref = cs->target_ref,
		.parent = cs->create_pr ? NULL : cs->commit_parent, .base = cs->create_pr ? cs->commit_parent : NULL,
		.summary = cs->commit_summary, .description = cs->commit_description,
		.flags = PUBLISH_HUB_LFS_RULES | (cs->create_pr ? PUBLISH_NEW_PULL_REQUEST : 0),
	};
	int rc = publish_apply(cs->pub, &cs->who, &change, &cs->res);
	free(ops);
	if (rc < 0)
		refuse_commit(cs, rc);
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
	const char *ref = cs->res.ref, *sha = cs->res.sha;
	char *details = xasprintf("{\"ref\":\"%s\",\"commit\":\"%s\",\"operations\":%zu,\"bytes\":%" PRIu64 "}",
				  ref, sha, cs->nops, cs->bytes_in);
	publish_end(cs->pub, &cs->who, cs->create_pr ? "commit.pull_request" : "commit", details);
	cs->pub = NULL;
	free(details);

	const char *base_url = request_base_url(req);
	const char *prefix = repo_type_url_prefix(cs->repo.record.type);
	json_t *body = json_object();
	json_object_set_new(body, "success", json_true());
	json_object_set_new(body, "commitOid", json_string(sha));
	char *url = xasprintf("%s/%s%s/%s/commit/%s", base_url, prefix, cs->repo.record.ns, cs->repo.record.name,
			      sha);
	json_object_set_new(body, "commitUrl", json_string(url));
	free(url);
	json_object_set_new(body, "hookOutput", json_string(""));
	if (cs->create_pr) {
		url = xasprintf("%s/%s%s/%s/discussions/%d", base_url, prefix, cs->repo.record.ns, cs->repo.record.name,
				cs->res.pr_number);
		json_object_set_new(body, "pullRequestUrl", json_string(url));
		json_object_set_new(body, "prNum", json_integer(cs->res.pr_number));
		free(url);
	}
	log_info("commit %s to %s/%s %s: %zu operations, %" PRIu64 " bytes of body", sha, cs->repo.record.ns,
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
