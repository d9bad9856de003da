/* pages_account.c -- /settings/tokens (list, create shown once, revoke own
 * tokens) and /{ns}, the page of an org or user: its kernels (the listing
 * query with author=), its members and their roles, which the org's admins
 * change. */
#include "web/web_internal.h"

#include <stdlib.h>
#include <string.h>

static void tokens_page(struct page *pg, struct request *req, const char *new_token, const char *problem)
{
	struct token_list list;
	page_html(pg, "<h1>Access tokens</h1>");
	if (problem) {
		page_html(pg, "<p class=\"problem\" role=\"alert\">");
		page_text(pg, problem);
		page_html(pg, "</p>");
	}
	if (new_token) {
		page_html(pg, "<div class=\"secret\" role=\"status\"><p><strong>Your new token</strong> (shown once: copy it "
			      "now):</p><p><code id=\"new-token\">");
		page_text(pg, new_token);
		page_html(pg, "</code></p></div>");
	}
	page_html(pg, "<h2>Create a token</h2><form method=\"post\" action=\"/settings/tokens\" class=\"stack\">");
	page_csrf_field(pg);
	page_html(pg, "<label for=\"t-name\">Name</label><input id=\"t-name\" name=\"name\" maxlength=\"60\" required>"
		      "<label for=\"t-scope\">Scope</label><select id=\"t-scope\" name=\"scope\"><option value=\"read\">"
		      "read</option><option value=\"write\">write</option></select>"
		      "<label for=\"t-days\">Expires after (days, 0 = never)</label><input id=\"t-days\" name=\"days\" "
		      "type=\"number\" min=\"0\" max=\"3650\" value=\"90\">"
		      "<button type=\"submit\">Create token</button></form><h2>Your tokens</h2>");
	if (db_token_list(req->principal.name, &list) < 0) {
		page_db_problem(pg);
		token_list_release(&list);
		return;
	}
	page_html(pg, "<table id=\"tokens\"><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Starts with</th>"
		      "<th scope=\"col\">Scope</th><th scope=\"col\">Created</th><th scope=\"col\">Expires</th>"
		      "<th scope=\"col\">State</th><th scope=\"col\"><span class=\"muted\">Action</span></th></tr></thead><tbody>");
	for (size_t i = list.count; i-- > 0;) {
		const struct token_info *t = &list.items[i];
		char created[32], expires[32];
		format_day(t->created_at, created);
		format_day(t->expires_at, expires);
		page_htmlf(pg, "<tr data-token-id=\"%lld\"><td>", (long long)t->id);
		page_text(pg, t->name);
		page_html(pg, "</td><td class=\"mono\">");
		page_text(pg, t->prefix);
		page_htmlf(pg, "…</td><td>%s</td><td>%s</td><td>%s</td><td>", role_name(t->scope), created, expires);
		if (t->revoked)
			page_html(pg, "<span class=\"badge bad\">revoked</span>");
		else if (t->expired)
			page_html(pg, "<span class=\"badge bad\">expired</span>");
		else if (t->id == req->principal.token_id)
			page_html(pg, "<span class=\"badge ok\">this session</span>");
		else
			page_html(pg, "<span class=\"badge ok\">active</span>");
		page_html(pg, "</td><td>");
		if (!t->revoked && !t->expired) {
			page_html(pg, "<form method=\"post\" action=\"/settings/tokens/revoke\" class=\"inline\">");
			page_csrf_field(pg);
			page_htmlf(pg, "<input type=\"hidden\" name=\"id\" value=\"%lld\"><button type=\"submit\" "
				       "class=\"danger\" aria-label=\"Revoke token ", (long long)t->id);
			page_text(pg, t->name);
			page_html(pg, "\">Revoke</button></form>");
		}
		page_html(pg, "</td></tr>");
	}
	page_html(pg, "</tbody></table>");
	token_list_release(&list);
}

enum MHD_Result page_tokens(struct request *req)
{
	struct page pg;
	page_init(&pg, req, "Access tokens");
	tokens_page(&pg, req, NULL, NULL);
	return page_send(&pg, 200);
}

enum MHD_Result page_tokens_create(struct request *req)
{
	const char *name = form_value(req, "name"), *scope_text = form_value(req, "scope");
	const char *days_text = form_value(req, "days");
	enum role scope;
	long days = days_text && days_text[0] ? strtol(days_text, NULL, 10) : 0;
	struct page pg;
	page_init(&pg, req, "Access tokens");
	if (!name || !name[0] || strlen(name) > 60 || !scope_text || role_parse(scope_text, &scope) < 0 ||
	    scope == ROLE_ADMIN || days < 0 || days > 3650) {
		tokens_page(&pg, req, NULL, "Give a name (60 characters at most), a scope (read or write) and 0 to "
					    "3650 days.");
		return page_send(&pg, 400);
	}
	char *token = NULL;
	time_t expires = days ? time(NULL) + days * 86400 : 0;
	struct accounts_actor who = api_actor(req);
	const char *why;
	int rc = accounts_token_create(&who, req->principal.name, name, scope, expires, &token, NULL, &why);
	if (rc == KHUB_EPERM) {
		tokens_page(&pg, req, NULL, why);
		return page_send(&pg, 403);
	}
	if (rc < 0) {
		page_release(&pg);
		return web_db_unavailable(req);
	}
	tokens_page(&pg, req, token, NULL);
	free(token);
	return page_send(&pg, 201);
}

enum MHD_Result page_tokens_revoke(struct request *req)
{
	const char *id_text = form_value(req, "id");
	long long id = id_text ? strtoll(id_text, NULL, 10) : 0;
	struct accounts_actor who = api_actor(req);
	const char *why;
	int rc = accounts_token_revoke(&who, id, NULL, &why);
	if (rc == KHUB_ENOTFOUND)
		return web_error_page(req, 404, why);
	if (rc < 0 && rc != KHUB_EEXIST)	/* revoked before: the page as after a revocation */
		return web_db_unavailable(req);
	/* revoking the session's own token ends the session too */
	return web_redirect(req, id == req->principal.token_id ? "/login" : "/settings/tokens", NULL);
}

static void members_section(struct page *pg, struct request *req, const struct account *org, enum role caller)
{
	struct db_rows rows;
	if (db_org_members(org->id, &rows) < 0) {
		page_db_problem(pg);
		return;
	}
	page_html(pg, "<h2>Members</h2><table id=\"members\"><thead><tr><th scope=\"col\">Member</th><th scope=\"col\">"
		      "Role</th></tr></thead><tbody>");
	for (size_t i = 0; i < rows.count; i++) {
		const char *name = db_rows_get(&rows, i, 0), *role = db_rows_get(&rows, i, 1);
		page_html(pg, "<tr><th scope=\"row\"><a href=\"/");
		page_text(pg, name);
		page_html(pg, "\">");
		page_text(pg, name);
		page_html(pg, "</a></th><td>");
		if (caller == ROLE_ADMIN) {
			page_html(pg, "<form method=\"post\" class=\"inline\" action=\"/");
			page_text(pg, org->name);
			page_html(pg, "/-/members\">");
			page_csrf_field(pg);
			page_html(pg, "<input type=\"hidden\" name=\"user\" value=\"");
			page_text(pg, name);
			page_htmlf(pg, "\"><label class=\"muted\" for=\"role-%zu\">Role of ", i);
			page_text(pg, name);
			page_htmlf(pg, "</label> <select id=\"role-%zu\" name=\"role\">", i);
			static const char *const roles[] = { "read", "write", "admin" };
			for (size_t k = 0; k < 3; k++)
				page_htmlf(pg, "<option%s>%s</option>", strcmp(role, roles[k]) == 0 ? " selected" : "",
					   roles[k]);
			page_html(pg, "</select> <button type=\"submit\">Change</button></form>");
		} else {
			page_text(pg, role);
		}
		page_html(pg, "</td></tr>");
	}
	page_html(pg, "</tbody></table>");
	db_rows_release(&rows);
}

enum MHD_Result page_namespace(struct request *req)
{
	struct account acct;
	const char *why;
	if (!req->org || repo_name_validate(req->org, &why) < 0)
		return web_error_page(req, 404, "no such page");
	int rc = db_account_get(req->org, &acct);
	if (rc == KHUB_EDB)
		return web_db_unavailable(req);
	if (rc < 0)
		return web_error_page(req, 404, "no such user or organization");
	struct kernel_listing_page lp;
	const char *error;
	/* the listing's own query, author= this namespace: what the caller may see */
	rc = kernel_listing_query(req, acct.name, 0, &lp, &error);
	if (rc == 1)
		return MHD_YES;
	if (rc == KHUB_EINVAL)
		return web_error_page(req, 400, error);
	if (rc < 0)
		return web_db_unavailable(req);
	enum role caller = ROLE_NONE;
	if (namespace_role(&req->principal, &acct, &caller) < 0) {
		json_decref(lp.items);
		return web_db_unavailable(req);
	}
	struct page pg;
	page_init(&pg, req, acct.name);
	page_html(&pg, "<div class=\"repo-title\"><h1>");
	page_text(&pg, acct.name);
	page_html(&pg, "</h1>");
	page_html(&pg, acct.kind == ACCOUNT_ORG ? "<span class=\"badge\">organization</span>" :
						  "<span class=\"badge\">user</span>");
	if (acct.trusted_kernel_publisher)
		page_html(&pg, "<span class=\"badge trusted\">trusted publisher</span>");
	page_html(&pg, "</div>");
	if (acct.fullname[0]) {
		page_html(&pg, "<p>");
		page_text(&pg, acct.fullname);
		page_html(&pg, "</p>");
	}
	page_htmlf(&pg, "<h2>Kernels <span class=\"muted\">(%ld)</span></h2><ul id=\"ns-kernels\">", lp.total);
	size_t i;
	json_t *item;
	json_array_foreach(lp.items, i, item) {
		page_html(&pg, "<li><a href=\"/kernels/");
		page_text(&pg, json_string_value(json_object_get(item, "id")));
		page_html(&pg, "\">");
		page_text(&pg, json_string_value(json_object_get(item, "id")));
		page_html(&pg, "</a>");
		if (json_is_true(json_object_get(item, "private")))
			page_html(&pg, " <span class=\"badge private\">private</span>");
		page_html(&pg, "</li>");
	}
	page_html(&pg, "</ul>");
	json_decref(lp.items);
	if (acct.kind == ACCOUNT_ORG)
		members_section(&pg, req, &acct, caller);
	return page_send(&pg, 200);
}

enum MHD_Result page_member_role(struct request *req)
{
	enum role role;
	const char *name = form_value(req, "user"), *role_text = form_value(req, "role"), *why;
	struct accounts_actor who = api_actor(req);
	/* no member or role: "no such user", after the org and the caller */
	if (!name || !role_text || role_parse(role_text, &role) < 0) {
		name = "";
		role = ROLE_NONE;
	}
	int rc = accounts_member_set(&who, req->org, name, role, &why);
	if (rc == 0 || rc == KHUB_EDB || rc == KHUB_EIO) {
		if (rc < 0)
			return web_db_unavailable(req);
		char *back = xasprintf("/%s", req->org);
		enum MHD_Result r = web_redirect(req, back, NULL);
		free(back);
		return r;
	}
	if (rc == KHUB_EINVAL)
		why = "Give a member and a role (read, write or admin).";
	return web_error_page(req, rc == KHUB_ENOTFOUND ? 404 : rc == KHUB_EPERM ? 403 : rc == KHUB_ECONFLICT ? 409 : 400,
			      why);
}
