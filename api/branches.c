/* branches.c -- create and delete branches and tags:
 * POST|DELETE /api/{type}s/{ns}/{name}/branch/{branch} and
 * POST /api/{type}s/{ns}/{name}/tag/{rev}, DELETE …/tag/{tag}.
 * Every change happens under the repo's write lock and moves the ref by
 * compare-and-swap. */
#include "api/api.h"

#include <stdlib.h>
#include <string.h>

/* A name the Hub accepts for a new branch or tag: a valid short ref name
 * that is not itself a full ref or a commit sha. */
static int short_ref_name_ok(const char *name)
{
	return strncmp(name, "refs/", 5) != 0 && ref_name_validate(name, NULL) == 0 &&
	       !(strlen(name) == 40 && is_lower_hex(name, 40));
}

/* A ref that could not be written: a bad name is the client's (400), a
 * full disk 507, anything else ours (500). */
static enum MHD_Result respond_ref_write_error(struct request *req, int rc, const char *what, const char *ref)
{
	return respond_err(req, rc == KHUB_EINVAL || rc == KHUB_ENOSPC ? rc : KHUB_EIO, "cannot %s %s", what, ref);
}

static enum MHD_Result respond_ref(struct request *req, const char *name, const char *ref, const char *sha)
{
	return respond_json(req, 200, json_pack("{s:s, s:s, s:s}", "name", name, "ref", ref, "targetCommit", sha));
}

static void audit_ref(struct request *req, const struct repo_record *rec, const char *action, const char *ref,
		      const char *sha)
{
	const char *target = repo_audit_target(req, rec->type, rec->ns, rec->name);
	struct strbuf details = STRBUF_INIT;
	strbuf_adds(&details, "{\"ref\":");
	strbuf_add_json_quoted(&details, ref);
	if (sha)
		strbuf_addf(&details, ",\"sha\":\"%s\"", sha);
	strbuf_adds(&details, "}");
	api_audit(req, action, target, details.buf);
	strbuf_release(&details);
}

/* After a ref changed: the repo's lastModified moves, the kernel listing's
 * branch heads follow, and cached records go. */
static void ref_changed(const struct repo_handle *h)
{
	publish_refs_moved(h->record.id, h->git, NULL, PUBLISH_REFS_CHANGED, NULL, NULL, NULL, NULL);
}

/* The end of a create (branch or tag), as rc says it went: 409 when the name
 * is taken or the ref moved meanwhile, else the new ref, audited. */
static enum MHD_Result respond_ref_created(struct request *req, const struct repo_handle *h, int rc,
					   const char *action, const char *name, const char *ref, const char *sha)
{
	if (rc == KHUB_EEXIST || rc == KHUB_ECONFLICT)
		return respond_error(req, 409, NULL, rc == KHUB_EEXIST ? "Reference %s already exists"
						: "Reference %s was updated concurrently", ref);
	if (rc < 0)
		return respond_ref_write_error(req, rc, "create", ref);
	ref_changed(h);
	audit_ref(req, &h->record, action, ref, sha);
	return respond_ref(req, name, ref, sha);
}

/* DELETE of a branch or tag: under the repo's lock, audited. */
static enum MHD_Result delete_ref(struct request *req, const char *kind, const char *name)
{
	struct repo_handle *h = req->repo;
	char ref[REF_NAME_MAX + 16], old[41], action[32];
	int rc;
	if (ref_name_validate(name, NULL) < 0)
		return respond_revision_not_found(req, name);
	snprintf(ref, sizeof(ref), "refs/%s/%s", strcmp(kind, "branch") == 0 ? "heads" : "tags", name);
	snprintf(action, sizeof(action), "%s.delete", kind);
	enum MHD_Result result;
	if (repo_write_lock_request(req, h->record.id, &result) != 0)
		return result;
	if (repo_ref_read(h->git, ref, old) < 0)
		rc = KHUB_ENOTFOUND;
	else
		rc = repo_delete_ref(h->git, ref);
	if (rc == 0) {
		ref_changed(h);
		audit_ref(req, &h->record, action, ref, old);
	}
	repo_write_unlock(h->record.id);
	if (rc == KHUB_ENOTFOUND)
		return respond_revision_not_found(req, name);
	if (rc == KHUB_ECONFLICT)
		return respond_error(req, 409, NULL, "Reference %s was updated concurrently", ref);
	if (rc < 0)
		return respond_ref_write_error(req, rc, "delete", ref);
	return respond_json(req, 200, json_object());
}

/* ---- branches ------------------------------------------------------------------ */

static enum MHD_Result handle_branch_create(struct request *req)
{
	enum MHD_Result result;
	struct repo_handle h;
	json_t *doc = NULL;
	const char *branch = req->rev, *starting_point;
	char ref[REF_NAME_MAX + 16], current[41], sha[41], email[REPO_NAME_MAX + 32];
	int empty, overwrite, locked = 0, exists, rc;

	h = *req->repo;
	doc = req->json;
	if (!short_ref_name_ok(branch)) {
		result = respond_error(req, 400, NULL, "Invalid reference for a branch: %s", branch);
		goto cleanup;
	}
	if (json_optional_string(doc, "startingPoint", &starting_point) < 0 ||
	    json_optional_bool(doc, "emptyBranch", &empty) < 0 || json_optional_bool(doc, "overwrite", &overwrite) < 0) {
		result = respond_error(req, 400, NULL, "\"startingPoint\" must be a string, \"emptyBranch\" and"
				       " \"overwrite\" booleans");
		goto cleanup;
	}
	if (starting_point && empty) {
		result = respond_error(req, 400, NULL, "\"startingPoint\" and \"emptyBranch\" cannot be combined");
		goto cleanup;
	}
	snprintf(ref, sizeof(ref), "refs/heads/%s", branch);
	if (repo_write_lock_request(req, h.record.id, &result) != 0)
		goto cleanup;	/* parked or answered */
	locked = 1;
	rc = repo_ref_read(h.git, ref, current);
	if (rc < 0 && rc != KHUB_ENOTFOUND) {
		result = respond_error(req, 500, NULL, "cannot read %s", ref);
		goto cleanup;
	}
	exists = rc == 0;
	if (exists && !overwrite) {
		result = respond_error(req, 409, NULL, "Reference %s already exists", ref);
		goto cleanup;
	}
	if (exists && !starting_point && !empty) {
		/* overwrite alone: the branch stays where it is (JS doc). */
		result = respond_ref(req, branch, ref, current);
		goto cleanup;
	}
	if (empty) {
		snprintf(email, sizeof(email), "%s@users.khub", req->principal.name);
		if ((rc = repo_commit_empty_root(h.git, req->principal.name, email, "Empty branch", sha)) < 0) {
			result = respond_ref_write_error(req, rc, "write the empty branch's commit for", ref);
			goto cleanup;
		}
	} else if (repo_resolve_commitish(h.git, starting_point ? starting_point : "main", sha) < 0) {
		result = respond_revision_not_found(req, starting_point ? starting_point : "main");
		goto cleanup;
	}
	rc = repo_branch_set(h.git, branch, sha, overwrite, "branch created through the API");
	result = respond_ref_created(req, &h, rc, "branch.create", branch, ref, sha);
cleanup:
	if (locked)
		repo_write_unlock(h.record.id);
	return result;
}

static enum MHD_Result handle_branch_delete(struct request *req)
{
	if (strcmp(req->rev, "main") == 0)
		return respond_error(req, 403, NULL, "Cannot delete refs/heads/main");
	return delete_ref(req, "branch", req->rev);
}

/* ---- tags -------------------------------------------------------------------------- */

/* Under the repo's write lock: the tag, on the commit req->rev names. */
static enum MHD_Result tag_create_locked(struct request *req, struct repo_handle *h, const char *tag,
					 const char *message, const char *ref)
{
	char sha[41], email[REPO_NAME_MAX + 32];
	if (repo_resolve_commitish(h->git, req->rev, sha) < 0)
		return respond_revision_not_found(req, req->rev);
	snprintf(email, sizeof(email), "%s@users.khub", req->principal.name);
	int rc = repo_tag_create(h->git, tag, sha, message, req->principal.name, email);
	return respond_ref_created(req, h, rc, "tag.create", tag, ref, sha);
}

static enum MHD_Result handle_tag_create(struct request *req)
{
	enum MHD_Result result;
	struct repo_handle h = *req->repo;
	const char *tag, *message;
	char ref[REF_NAME_MAX + 16];
	json_t *doc = req->json;
	if (json_optional_string(doc, "tag", &tag) < 0 || !tag || json_optional_string(doc, "message", &message) < 0) {
		result = respond_error(req, 400, NULL, "\"tag\" (string) is required; \"message\" must be a string");
	} else if (!short_ref_name_ok(tag)) {
		result = respond_error(req, 400, NULL, "Invalid reference for a tag: %s", tag);
	} else {
		snprintf(ref, sizeof(ref), "refs/tags/%s", tag);
		/* else parked or answered */
		if (repo_write_lock_request(req, h.record.id, &result) == 0) {
			result = tag_create_locked(req, &h, tag, message, ref);
			repo_write_unlock(h.record.id);
		}
	}
	return result;
}

static enum MHD_Result handle_tag_delete(struct request *req)
{
	return delete_ref(req, "tag", req->rev);
}

const struct route branches_routes[] = {
	{ METHOD_POST, "/api/{type}/{ns}/{name}/branch/{rev}", handle_branch_create, ROUTE_JSON, 0,
	  NULL, ACCESS_REPO_WRITE },
	{ METHOD_DELETE, "/api/{type}/{ns}/{name}/branch/{rev}", handle_branch_delete, ROUTE_BODY, 0,
	  NULL, ACCESS_REPO_WRITE },
	{ METHOD_POST, "/api/{type}/{ns}/{name}/tag/{rev}", handle_tag_create, ROUTE_JSON, 0, NULL, ACCESS_REPO_WRITE },
	{ METHOD_DELETE, "/api/{type}/{ns}/{name}/tag/{rev}", handle_tag_delete, ROUTE_BODY, 0,
	  NULL, ACCESS_REPO_WRITE },
	{ 0, NULL, NULL, 0, 0 },
};
