/* routes.c -- the web UI's page table, with who may open each page (the
 * API's access values, checked by the API's access_check), and the
 * dispatch of a page request: session, CSRF on every POST, access, handler.
 * The routing rule (docs/web-ui.md): the API, git and resolve tables are
 * matched first, paths under /api/ are never pages, and only then this
 * table; no row here may match a path an API row matches (test_router). */
#include "web/web_internal.h"

#include <string.h>

/* Pages of one kernel repo open it as the API does (ACCESS_REPO_READ): a
 * private repo is a 404 page to whoever may not read it. The JSON paths
 * under /-/ answer the API's own handlers for the session's caller (the
 * API itself never reads the cookie). */
const struct route web_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/", page_home, ROUTE_PAGE, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/-/static/{path*}", page_static, ROUTE_PAGE, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	/* browsers ask for it on a first visit, whatever the page links */
	{ METHOD_GET | METHOD_HEAD, "/favicon.ico", page_favicon, ROUTE_PAGE, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/login", page_login, ROUTE_PAGE, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ METHOD_POST, "/login", page_login_post, ROUTE_PAGE | ROUTE_BODY, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ METHOD_POST, "/logout", page_logout, ROUTE_PAGE | ROUTE_BODY, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/kernels", page_kernels, ROUTE_PAGE, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}", page_kernel, ROUTE_PAGE, REPO_KERNEL, NULL,
	  ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/tree/{rev}/{path*}", page_tree, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	/* {path*}: a branch or tag name with '/' (release/v1.2) written plainly */
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/commits/{rev}/{path*}", page_commits, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/blob/{rev}/{path*}", page_blob, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/commit/{rev}", page_commit, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/-/variants", page_json_alias, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/-/benchmarks", page_json_alias, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/-/benchmarks/aggregate", page_json_alias, ROUTE_PAGE,
	  REPO_KERNEL, NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/-/downloads", page_json_alias, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	/* a file for the visitor's session (README images, the file browser's
	 * links): GET only, never a download count (api/resolve.c) */
	{ METHOD_GET, "/kernels/{ns}/{name}/-/resolve/{rev}/{path*}", page_file, ROUTE_PAGE, REPO_KERNEL, NULL,
	  ACCESS_REPO_READ },
	/* a kernel's build matrices and logs (readers); its writers' forms call
	 * the API's own operations (api.h) */
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/builds", page_builds, ROUTE_PAGE, REPO_KERNEL, NULL,
	  ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/builds/{arg}/log", page_build_log, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET, "/kernels/{ns}/{name}/builds/{arg}/log/events", page_build_log_events, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_POST, "/kernels/{ns}/{name}/builds", page_builds_enqueue, ROUTE_PAGE | ROUTE_BODY, REPO_KERNEL, NULL,
	  ACCESS_REPO_WRITE },
	{ METHOD_POST, "/kernels/{ns}/{name}/builds/{arg}/cancel", page_build_cancel, ROUTE_PAGE | ROUTE_BODY,
	  REPO_KERNEL, NULL, ACCESS_REPO_WRITE },
	{ METHOD_POST, "/kernels/{ns}/{name}/builds/{arg}/retry", page_build_retry, ROUTE_PAGE | ROUTE_BODY,
	  REPO_KERNEL, NULL, ACCESS_REPO_WRITE },
	{ METHOD_POST, "/kernels/{ns}/{name}/campaigns/{arg}/merge", page_campaign_merge, ROUTE_PAGE | ROUTE_BODY,
	  REPO_KERNEL, NULL, ACCESS_REPO_WRITE },
	/* a writer's form of the repo's settings (the API's PUT …/settings owner) */
	{ METHOD_GET | METHOD_HEAD, "/kernels/{ns}/{name}/settings", page_repo_settings, ROUTE_PAGE, REPO_KERNEL, NULL,
	  ACCESS_REPO_MANAGE },
	{ METHOD_POST, "/kernels/{ns}/{name}/settings", page_repo_settings_post, ROUTE_PAGE | ROUTE_BODY, REPO_KERNEL,
	  NULL, ACCESS_REPO_MANAGE },
	{ METHOD_GET | METHOD_HEAD, "/settings/tokens", page_tokens, ROUTE_PAGE, REPO_KERNEL, NULL, ACCESS_SIGNED_IN },
	{ METHOD_POST, "/settings/tokens", page_tokens_create, ROUTE_PAGE | ROUTE_BODY, REPO_KERNEL, NULL,
	  ACCESS_SIGNED_IN },
	{ METHOD_GET | METHOD_HEAD, "/settings/tokens/revoke", page_tokens_revoke_confirm, ROUTE_PAGE, REPO_KERNEL,
	  NULL, ACCESS_SIGNED_IN },
	{ METHOD_POST, "/settings/tokens/revoke", page_tokens_revoke, ROUTE_PAGE | ROUTE_BODY, REPO_KERNEL, NULL,
	  ACCESS_SIGNED_IN },
	{ METHOD_GET | METHOD_HEAD, "/admin", page_admin, ROUTE_PAGE, REPO_KERNEL, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_GET | METHOD_HEAD, "/admin/airgap", page_admin_airgap, ROUTE_PAGE, REPO_KERNEL, NULL,
	  ACCESS_SITE_ADMIN },
	{ METHOD_POST, "/admin/mirror/sync", page_admin_sync, ROUTE_PAGE | ROUTE_BODY, REPO_KERNEL, NULL,
	  ACCESS_SITE_ADMIN },
	{ METHOD_POST, "/admin/trusted", page_admin_trust, ROUTE_PAGE | ROUTE_BODY, REPO_KERNEL, NULL,
	  ACCESS_SITE_ADMIN },
	/* an org's admins add, remove and change members (accounts_member_set
	 * checks the org role) */
	{ METHOD_POST, "/{org}/-/members", page_member_role, ROUTE_PAGE | ROUTE_BODY | ROUTE_HANDLER_ACCESS,
	  REPO_KERNEL, NULL, ACCESS_SIGNED_IN },
	{ METHOD_GET | METHOD_HEAD, "/{org}", page_namespace, ROUTE_PAGE, REPO_KERNEL, NULL, ACCESS_PUBLIC },
	{ 0, NULL, NULL, 0, 0 },
};

size_t web_page_headers(struct request *req, struct answer_header out[PAGE_HEADERS_MAX])
{
	static const char csp[] =
		"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
		"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
	int is_static = req->route && (req->route->handler == page_static || req->route->handler == page_favicon);
	size_t n = 0;
	out[n++] = (struct answer_header){ "Content-Security-Policy", csp };
	out[n++] = (struct answer_header){ "X-Frame-Options", "DENY" };
	out[n++] = (struct answer_header){ "Referrer-Policy", "same-origin" };
	/* pages depend on who is signed in; static files on nothing (their
	 * Cache-Control and ETag come with them: web/assets.c) */
	if (req->route && !is_static) {
		out[n++] = (struct answer_header){ "Cache-Control", "no-store" };
		out[n++] = (struct answer_header){ "Vary", "Cookie" };
	}
	return n;
}

int web_page_error(struct request *req, int status, const char *message, enum MHD_Result *result)
{
	if (req->route && req->route->handler == page_json_alias)
		return -1;	/* the UI's JSON paths answer errors in JSON */
	/* the API tells anonymous callers 401 for a repo it will not show (as
	 * the Hub does); a page says it is not there, to everyone */
	if (status == 401 && req->route && req->route->access == ACCESS_REPO_READ)
		status = 404;
	*result = web_error_page(req, status, message);
	return 0;
}

enum MHD_Result web_dispatch(struct request *req)
{
	enum MHD_Result r;
	if (req->auth_unavailable)
		return web_db_unavailable(req);
	/* every state-changing form carries the token bound to the session
	 * (the sign-in form: to its sign-in cookie) */
	if (req->method == METHOD_POST && !web_csrf_valid(req))
		return web_error_page(req, 403, "This form has expired or did not come from this site (missing "
					   "or wrong CSRF token). Reload the page and try again.");
	if (access_check(req, &r) < 0)
		return r;
	req->parked = 0;
	r = req->route->handler(req);
	if (req->parked && !req->responded)
		return MHD_YES;
	if (!req->responded)
		r = web_error_page(req, 500, "the page gave no answer");
	return r;
}
