/* pages_account.c -- /settings/tokens (list with when each was last used,
 * create: post, redirect, then the token shown once from the session's
 * one-time message; revoke own tokens after a confirmation page) and /{ns},
 * the page of an org or user: its kernels (the listing query with author=),
 * its members and their roles, which the org's admins change, add and
 * remove (accounts_member_set, which keeps an admin). */
#include "web/web_internal.h"

#include <stdlib.h>
#include <string.h>

/* "2026-11-23 14:05 UTC", or "never" for 0 */
static void format_minute(time_t t, char out[32])
{
	struct tm tm;
	if (!t || !gmtime_r(&t, &tm))
		snprintf(out, 32, "never");
	else
		strftime(out, 32, "%Y-%m-%d %H:%M UTC", &tm);
}

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
			      "now):</p><p><code id=\"new-token\" data-copy=\"new token\">");
		page_text(pg, new_token);
		page_html(pg, "</code></p></div>");
		page_script(pg, "copy.js");
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
	page_html(pg, SCROLL_REGION("Your tokens table") "<table id=\"tokens\"><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Starts with</th>"
		      "<th scope=\"col\">Scope</th><th scope=\"col\">Created</th><th scope=\"col\">Expires</th>"
		      "<th scope=\"col\">Last used</th><th scope=\"col\">State</th><th scope=\"col\"><span class=\"muted\">Action</span></th></tr></thead><tbody>");
	for (size_t i = list.count; i-- > 0;) {
		const struct token_info *t = &list.items[i];
		char created[32], expires[32], used[32];
		format_day(t->created_at, created);
		format_day(t->expires_at, expires);
		format_minute(t->last_used_at, used);
		page_htmlf(pg, "<tr data-token-id=\"%lld\"><td>", (long long)t->id);
		page_text(pg, t->name);
		page_html(pg, "</td><td class=\"mono\">");
		page_text(pg, t->prefix);
		page_htmlf(pg, "…</td><td>%s</td><td>%s</td><td>%s</td><td class=\"last-used\">%s</td><td>",
			   role_name(t->scope), created, expires, used);
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
			/* a GET: the confirmation page, whose form revokes */
			page_htmlf(pg, "<a class=\"button danger\" href=\"/settings/tokens/revoke?id=%lld\" "
				       "aria-label=\"Revoke token ", (long long)t->id);
			page_text(pg, t->name);
			page_html(pg, "\">Revoke…</a>");
		}
		page_html(pg, "</td></tr>");
	}
	page_html(pg, "</tbody></table></div>");
	token_list_release(&list);
}

enum MHD_Result page_tokens(struct request *req)
{
	char *new_token = NULL;
	/* the token a POST just made, once: a reload finds none */
	if (web_flash_take(req, &new_token) < 0)
		return web_db_unavailable(req);
	struct page pg;
	page_init(&pg, req, "Access tokens");
	tokens_page(&pg, req, new_token, NULL);
	free(new_token);
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
	page_release(&pg);
	/* post, redirect, get: the token waits in the session, never in a URL */
	if (rc == 0)
		rc = web_flash_set(req, token);
	free(token);
	if (rc < 0)
		return web_db_unavailable(req);
	return web_redirect(req, "/settings/tokens", NULL);
}

/* GET /settings/tokens/revoke?id=N: "Revoke token X?" with the form that
 * does it and a way back; someone else's token or none is a 404. */
enum MHD_Result page_tokens_revoke_confirm(struct request *req)
{
	const char *id_text = request_query(req, "id");
	long long id = id_text ? strtoll(id_text, NULL, 10) : 0;
	struct token_list list;
	const struct token_info *t = NULL;
	if (db_token_list(req->principal.name, &list) < 0) {
		token_list_release(&list);
		return web_db_unavailable(req);
	}
	for (size_t i = 0; i < list.count; i++)
		if (list.items[i].id == id && !list.items[i].revoked)
			t = &list.items[i];
	if (!t) {
		token_list_release(&list);
		return web_error_page(req, 404, "You have no such token, or it is already revoked.");
	}
	struct page pg;
	page_init(&pg, req, "Revoke a token");
	page_html(&pg, "<h1>Revoke token <q>");
	page_text(&pg, t->name);
	page_html(&pg, "</q>?</h1><p>Starting with <code>");
	page_text(&pg, t->prefix);
	page_html(&pg, "…</code>. Everything that uses it, and every session signed in with it, stops at once.</p>"
		       "<form method=\"post\" action=\"/settings/tokens/revoke\" class=\"inline\">");
	page_csrf_field(&pg);
	page_htmlf(&pg, "<input type=\"hidden\" name=\"id\" value=\"%lld\"><button type=\"submit\" class=\"danger\" "
			"id=\"revoke-confirm\">Revoke</button></form> <a href=\"/settings/tokens\">Cancel</a>", id);
	token_list_release(&list);
	return page_send(&pg, 200);
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

/* The form of one member's row (role select, or role=none: Remove), posting
 * to /{org}/-/members with the session's CSRF token. */
static void member_form_open(struct page *pg, const char *org, const char *user)
{
	page_html(pg, "<form method=\"post\" class=\"inline\" action=\"/");
	page_text(pg, org);
	page_html(pg, "/-/members\">");
	page_csrf_field(pg);
	page_html(pg, "<input type=\"hidden\" name=\"user\" value=\"");
	page_text(pg, user);
	page_html(pg, "\">");
}

static void role_options(struct page *pg, const char *selected)
{
	static const char *const roles[] = { "read", "write", "admin" };
	for (size_t k = 0; k < 3; k++)
		page_htmlf(pg, "<option%s>%s</option>", strcmp(selected, roles[k]) == 0 ? " selected" : "", roles[k]);
}

/* An org admin's controls of one member: change the role, remove. */
static void member_controls(struct page *pg, const char *org, const char *name, const char *role, size_t i)
{
	member_form_open(pg, org, name);
	page_htmlf(pg, "<label class=\"muted\" for=\"role-%zu\">Role of ", i);
	page_text(pg, name);
	page_htmlf(pg, "</label> <select id=\"role-%zu\" name=\"role\">", i);
	role_options(pg, role);
	page_html(pg, "</select> <button type=\"submit\">Change</button></form> ");
	member_form_open(pg, org, name);
	page_html(pg, "<input type=\"hidden\" name=\"role\" value=\"none\"><button type=\"submit\" class=\"danger\" "
		      "aria-label=\"Remove ");
	page_text(pg, name);
	page_html(pg, "\">Remove</button></form>");
}

static void members_section(struct page *pg, const struct account *org, enum role caller)
{
	struct org_member_row *rows;
	size_t n;
	if (db_org_members(org->id, &rows, &n) < 0) {
		page_db_problem(pg);
		return;
	}
	page_html(pg, "<h2>Members</h2>" SCROLL_REGION("Members table") "<table id=\"members\"><thead><tr><th scope=\"col\">Member</th><th scope=\"col\">"
		      "Role</th></tr></thead><tbody>");
	for (size_t i = 0; i < n; i++) {
		const char *name = rows[i].name, *role = rows[i].role;
		page_html(pg, "<tr><th scope=\"row\">");
		page_account_link(pg, name);
		page_html(pg, "</th><td>");
		if (caller == ROLE_ADMIN)
			member_controls(pg, org->name, name, role, i);
		else
			page_text(pg, role);
		page_html(pg, "</td></tr>");
	}
	page_html(pg, "</tbody></table></div>");
	org_member_rows_free(rows, n);
	if (caller != ROLE_ADMIN)
		return;
	page_html(pg, "<h3>Add a member</h3><form method=\"post\" class=\"stack\" id=\"add-member\" action=\"/");
	page_text(pg, org->name);
	page_html(pg, "/-/members\">");
	page_csrf_field(pg);
	page_html(pg, "<label for=\"m-user\">Username</label><input id=\"m-user\" name=\"user\" maxlength=\"96\" required>"
		      "<label for=\"m-role\">Role</label><select id=\"m-role\" name=\"role\">");
	role_options(pg, "read");
	page_html(pg, "</select><button type=\"submit\">Add member</button></form>");
}

/* The page of an org or user, with a problem (NULL: none) in a banner,
 * answered with status. */
static enum MHD_Result namespace_page(struct request *req, const char *problem, int status)
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
	if (problem) {
		page_html(&pg, "<p class=\"problem\" role=\"alert\">");
		page_text(&pg, problem);
		page_html(&pg, "</p>");
	}
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
		members_section(&pg, &acct, caller);
	return page_send(&pg, status);
}

enum MHD_Result page_namespace(struct request *req)
{
	return namespace_page(req, NULL, 200);
}

/* POST /{org}/-/members user= role= (read, write, admin, or none: remove),
 * through accounts_member_set, which decides who may; a refusal is the
 * org's page with the reason in a banner (403, 404, 409, 400). */
enum MHD_Result page_member_role(struct request *req)
{
	enum role role;
	const char *name = form_value(req, "user"), *role_text = form_value(req, "role"), *why;
	struct accounts_actor who = api_actor(req);
	/* no member or role: "no such user", after the org and the caller */
	if (!name || accounts_member_role_parse(role_text, &role) < 0) {
		name = "";
		role = ROLE_NONE;
	}
	int rc = accounts_member_set(&who, req->org, name, role, &why);
	if (rc == KHUB_EDB || rc == KHUB_EIO)
		return web_db_unavailable(req);
	if (rc == 0) {
		char *back = xasprintf("/%s", req->org);
		enum MHD_Result r = web_redirect(req, back, NULL);
		free(back);
		return r;
	}
	if (rc == KHUB_ENOTFOUND)
		return web_error_page(req, 404, why);
	if (rc == KHUB_EINVAL)
		why = "Give the username of an existing user and a role (read, write, admin, or none to remove).";
	return namespace_page(req, why, rc == KHUB_EPERM ? 403 : rc == KHUB_ECONFLICT ? 409 : 400);
}
