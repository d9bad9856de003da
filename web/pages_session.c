/* pages_session.c -- the sign-in and sign-out pages: a token pasted into
 * a form (never kept by the browser) starts a session (web/session.c). */
#include "web/web_internal.h"

#include <stdlib.h>
#include <string.h>

/* The sign-in form; a fresh sign-in cookie binds its CSRF token. */
static enum MHD_Result login_form(struct request *req, int status, const char *problem)
{
	struct page pg;
	char csrf[65];
	char *cookie = web_login_cookie(req, csrf);
	const char *next = request_query(req, "next");
	if (!next)
		next = form_value(req, "next");
	page_init(&pg, req, "Sign in");
	page_html(&pg, "<section class=\"narrow\"><h1>Sign in</h1>");
	if (problem) {
		page_html(&pg, "<p class=\"problem\" role=\"alert\">");
		page_text(&pg, problem);
		page_html(&pg, "</p>");
	}
	page_html(&pg, "<p>Paste an access token (<code>khub admin token create</code> makes one, or "
		       "<a href=\"/settings/tokens\">your tokens page</a> once signed in). The token is sent once, "
		       "in this form's body; the browser keeps only a session cookie.</p>"
		       "<form method=\"post\" action=\"/login\" class=\"stack\">");
	page_htmlf(&pg, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", csrf);
	page_html(&pg, "<input type=\"hidden\" name=\"next\" value=\"");
	page_text(&pg, web_local_path_ok(next) ? next : "/kernels");
	page_html(&pg, "\"><label for=\"token\">Access token</label>"
		       "<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" "
		       "required spellcheck=\"false\">"
		       "<button type=\"submit\">Sign in</button></form></section>");
	enum MHD_Result r = page_send_cookie(&pg, status, cookie);
	free(cookie);
	return r;
}

enum MHD_Result page_login(struct request *req)
{
	if (req->principal.user_id) {
		const char *next = request_query(req, "next");
		return web_redirect(req, next ? next : "/kernels", NULL);
	}
	return login_form(req, 200, NULL);
}

enum MHD_Result page_login_post(struct request *req)
{
	const char *token = form_value(req, "token");
	const char *next = form_value(req, "next");
	struct principal p;
	if (!token || !token[0] || strlen(token) > 512)
		return login_form(req, 400, "Give a token.");
	int rc = db_token_lookup(token, &p);
	if (rc == KHUB_EDB)
		return web_db_unavailable(req);
	if (rc < 0) {
		log_info("web sign-in refused: unknown, expired or revoked token");
		return login_form(req, 401, "That token is unknown, expired or revoked.");
	}
	if (p.worker_id || !p.user_id || !p.token_id) {	/* a session is bound to a user's token */
		log_info("web sign-in refused: a build worker's token (%s)", p.name);
		return login_form(req, 403, "That is a build worker's token: it cannot sign in. Sign in with a user "
					    "token (khub admin token create USER).");
	}
	char *cookie;
	if (web_session_start(&p, &cookie) < 0)
		return web_db_unavailable(req);
	req->principal = p;
	api_audit(req, "web.sign_in", p.name, NULL);
	enum MHD_Result r = web_redirect(req, next && next[0] ? next : "/kernels", cookie);
	free(cookie);
	return r;
}

enum MHD_Result page_logout(struct request *req)
{
	char *cookie;
	if (web_session_end(req, &cookie) < 0)
		return web_db_unavailable(req);
	enum MHD_Result r = web_redirect(req, "/kernels", cookie);
	free(cookie);
	return r;
}
