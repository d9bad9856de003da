/* pages_admin.c -- /admin for site admins: trusted publishers (grant and
 * withdraw), mirror status with "sync now" (the same trigger as POST
 * /api/admin/mirror/sync), the build farm's workers and newest builds,
 * recent activity (who published what: the audit log), users and orgs. */
#include "web/web_internal.h"
#include "storage/db_builds.h"

#include <stdlib.h>
#include <string.h>

#define ADMIN_ACCOUNTS_SHOWN 500
#define ADMIN_ACTIVITY_SHOWN 50

static void trusted_section(struct page *pg)
{
	struct trusted_publisher_list list;
	page_html(pg, "<section aria-labelledby=\"trust-h\"><h2 id=\"trust-h\">Trusted publishers</h2>");
	if (db_trusted_publisher_list(&list) < 0) {
		page_html(pg, "<p class=\"problem\">The database is unavailable.</p></section>");
		return;
	}
	page_html(pg, "<table id=\"trusted\"><thead><tr><th scope=\"col\">Account</th><th scope=\"col\">Since</th>"
		      "<th scope=\"col\">By</th><th scope=\"col\"><span class=\"muted\">Action</span></th></tr></thead><tbody>");
	for (size_t i = 0; i < list.count; i++) {
		char since[32];
		format_day(list.items[i].since, since);
		page_html(pg, "<tr><th scope=\"row\"><a href=\"/");
		page_text(pg, list.items[i].name);
		page_html(pg, "\">");
		page_text(pg, list.items[i].name);
		page_htmlf(pg, "</a></th><td>%s</td><td>", since);
		page_text(pg, list.items[i].changed_by ? list.items[i].changed_by : "");
		page_html(pg, "</td><td><form method=\"post\" action=\"/admin/trusted\" class=\"inline\">");
		page_csrf_field(pg);
		page_html(pg, "<input type=\"hidden\" name=\"trusted\" value=\"false\"><input type=\"hidden\" name=\"name\" "
			      "value=\"");
		page_text(pg, list.items[i].name);
		page_html(pg, "\"><button class=\"danger\" type=\"submit\" aria-label=\"Withdraw trust from ");
		page_text(pg, list.items[i].name);
		page_html(pg, "\">Withdraw</button></form></td></tr>");
	}
	page_html(pg, "</tbody></table><form method=\"post\" action=\"/admin/trusted\" class=\"env\">");
	page_csrf_field(pg);
	page_html(pg, "<input type=\"hidden\" name=\"trusted\" value=\"true\"><div><label for=\"trust-name\">Trust an "
		      "account</label><input id=\"trust-name\" name=\"name\" required></div><div><button type=\"submit\">"
		      "Trust</button></div></form></section>");
	trusted_publisher_list_release(&list);
}

/* Who did what lately: publishes, pushes, settings, trust, tokens. */
static void activity_section(struct page *pg)
{
	struct db_rows rows;
	page_html(pg, "<section aria-labelledby=\"activity-h\"><h2 id=\"activity-h\">Recent activity</h2>");
	if (db_audit_recent(ADMIN_ACTIVITY_SHOWN, &rows) < 0) {
		page_html(pg, "<p class=\"problem\">The database is unavailable.</p></section>");
		return;
	}
	page_html(pg, "<div class=\"table-wrap\"><table id=\"activity\"><thead><tr><th scope=\"col\">When (UTC)</th>"
		      "<th scope=\"col\">Who</th><th scope=\"col\">What</th><th scope=\"col\">On</th></tr></thead><tbody>");
	for (size_t i = 0; i < rows.count; i++) {
		page_html(pg, "<tr>");
		for (size_t c = 0; c < 4; c++) {
			page_html(pg, c == 2 ? "<td class=\"mono\">" : "<td>");
			page_text(pg, db_rows_get(&rows, i, c));
			page_html(pg, "</td>");
		}
		page_html(pg, "</tr>");
	}
	page_html(pg, "</tbody></table></div></section>");
	db_rows_release(&rows);
}

static void accounts_section(struct page *pg)
{
	struct db_rows rows;
	page_html(pg, "<section aria-labelledby=\"acct-h\"><h2 id=\"acct-h\">Organizations and users</h2>");
	if (db_account_rows(ADMIN_ACCOUNTS_SHOWN, &rows) < 0) {
		page_html(pg, "<p class=\"problem\">The database is unavailable.</p></section>");
		return;
	}
	page_html(pg, "<div class=\"table-wrap\"><table id=\"accounts\"><thead><tr><th scope=\"col\">Name</th>"
		      "<th scope=\"col\">Kind</th><th scope=\"col\">Flags</th><th scope=\"col\">Created</th></tr></thead><tbody>");
	for (size_t i = 0; i < rows.count; i++) {
		page_html(pg, "<tr><th scope=\"row\"><a href=\"/");
		page_text(pg, db_rows_get(&rows, i, 1));
		page_html(pg, "\">");
		page_text(pg, db_rows_get(&rows, i, 1));
		page_html(pg, "</a></th><td>");
		page_text(pg, db_rows_get(&rows, i, 0));
		page_html(pg, "</td><td>");
		if (db_rows_get(&rows, i, 2)[0] == 't')
			page_html(pg, "<span class=\"badge\">site admin</span> ");
		if (db_rows_get(&rows, i, 3)[0] == 't')
			page_html(pg, "<span class=\"badge trusted\">trusted</span>");
		page_html(pg, "</td><td>");
		page_text(pg, db_rows_get(&rows, i, 4));
		page_html(pg, "</td></tr>");
	}
	page_html(pg, "</tbody></table></div></section>");
	db_rows_release(&rows);
}

static void mirror_section(struct page *pg)
{
	struct mirror_status_list list;
	page_html(pg, "<section aria-labelledby=\"mirror-h\"><h2 id=\"mirror-h\">Mirror</h2>"
		      "<form method=\"post\" action=\"/admin/mirror/sync\" class=\"env\">");
	page_csrf_field(pg);
	page_html(pg, "<div><label for=\"sync-sel\">Selection (empty = all)</label><input id=\"sync-sel\" name=\"selection\">"
		      "</div><div><button type=\"submit\">Sync now</button></div></form>");
	if (db_mirror_status_list(&list) < 0) {
		page_html(pg, "<p class=\"problem\">The database is unavailable.</p></section>");
		return;
	}
	if (!list.count)
		page_html(pg, "<p class=\"muted\">No mirrored repos.</p>");
	else
		page_html(pg, "<div class=\"table-wrap\"><table id=\"mirror\"><thead><tr><th scope=\"col\">Repo</th>"
			      "<th scope=\"col\">Upstream</th><th scope=\"col\">Selection</th><th scope=\"col\">Last sync</th>"
			      "<th scope=\"col\" class=\"num\">Lag (s)</th><th scope=\"col\" class=\"num\">Bytes</th>"
			      "<th scope=\"col\">Error</th></tr></thead><tbody>");
	for (size_t i = 0; i < list.count; i++) {
		const struct mirror_status *m = &list.items[i];
		char last[32], bytes[32];
		format_day(m->last_sync_finished, last);
		format_size((uint64_t)m->bytes, bytes);
		page_html(pg, "<tr><th scope=\"row\">");
		page_text(pg, m->repo);
		page_html(pg, "</th><td>");
		page_text(pg, m->upstream_name);
		page_html(pg, "</td><td>");
		page_text(pg, m->selection);
		page_htmlf(pg, "</td><td>%s</td><td class=\"num\">%lld</td><td class=\"num\">%s</td><td>", last,
			   (long long)m->lag_seconds, bytes);
		page_text(pg, m->last_error ? m->last_error : "");
		page_html(pg, "</td></tr>");
	}
	if (list.count)
		page_html(pg, "</tbody></table></div>");
	page_html(pg, "</section>");
	mirror_status_list_release(&list);
}

/* The build farm: its workers (as GET /api/admin/workers) and the newest
 * builds of every repo (a site admin sees private repos' too). */
static void builds_section(struct page *pg)
{
	struct db_rows workers = { 0 }, builds = { 0 };
	page_html(pg, "<section aria-labelledby=\"builds-h\" id=\"builds\"><h2 id=\"builds-h\">Builds</h2>");
	if (db_worker_list(&workers) < 0 || db_build_list(0, NULL, 30, 0, &builds) < 0) {
		page_html(pg, "<p>The database is unavailable; try again shortly.</p></section>");
		goto cleanup;
	}
	if (workers.count == 0)
		page_html(pg, "<p>No worker is registered: <code>khub admin worker add NAME</code> makes a worker token "
			      "for <code>khub-worker</code> (docs/build-farm.md).</p>");
	else
		page_html(pg, "<div class=\"table-wrap\"><table><caption>Workers</caption><thead><tr>"
			      "<th scope=\"col\">Worker</th><th scope=\"col\">Version</th>"
			      "<th scope=\"col\" class=\"num\">Concurrency</th><th scope=\"col\">Variants</th>"
			      "<th scope=\"col\">Last heartbeat</th></tr></thead><tbody>");
	for (size_t i = 0; i < workers.count; i++) {
		const char *cell;
		page_html(pg, "<tr><th scope=\"row\">");
		page_text(pg, db_rows_get(&workers, i, WORKER_COL_NAME));
		page_html(pg, "</th><td>");
		page_text(pg, (cell = db_rows_get(&workers, i, WORKER_COL_VERSION)) ? cell : "");
		page_html(pg, "</td><td class=\"num\">");
		page_text(pg, (cell = db_rows_get(&workers, i, WORKER_COL_CONCURRENCY)) ? cell : "");
		page_html(pg, "</td><td>");
		page_text(pg, (cell = db_rows_get(&workers, i, WORKER_COL_VARIANTS)) ? cell : "");
		page_html(pg, "</td><td>");
		page_text(pg, (cell = db_rows_get(&workers, i, WORKER_COL_HEARTBEAT)) ? cell : "never");
		page_html(pg, "</td></tr>");
	}
	if (workers.count)
		page_html(pg, "</tbody></table></div>");
	if (builds.count == 0) {
		page_html(pg, "<p>No build yet.</p></section>");
		goto cleanup;
	}
	page_html(pg, "<div class=\"table-wrap\"><table><caption>Newest builds</caption><thead><tr>"
		      "<th scope=\"col\" class=\"num\">Build</th><th scope=\"col\">Repo</th><th scope=\"col\">Commit</th>"
		      "<th scope=\"col\">Variant</th><th scope=\"col\">State</th><th scope=\"col\">Worker</th>"
		      "<th scope=\"col\">Created</th><th scope=\"col\">Error</th></tr></thead><tbody>");
	for (size_t i = 0; i < builds.count; i++) {
		const char *commit = db_rows_get(&builds, i, BUILD_COL_COMMIT), *cell;
		page_html(pg, "<tr><th scope=\"row\" class=\"num\">");
		page_text(pg, db_rows_get(&builds, i, BUILD_COL_ID));
		page_html(pg, "</th><td>");
		page_text(pg, db_rows_get(&builds, i, BUILD_COL_NS));
		page_html(pg, "/");
		page_text(pg, db_rows_get(&builds, i, BUILD_COL_NAME));
		page_htmlf(pg, "</td><td><code>%.12s</code></td><td>", commit ? commit : "");
		page_text(pg, db_rows_get(&builds, i, BUILD_COL_VARIANT));
		page_html(pg, "</td><td>");
		page_text(pg, db_rows_get(&builds, i, BUILD_COL_STATE));
		page_html(pg, "</td><td>");
		page_text(pg, (cell = db_rows_get(&builds, i, BUILD_COL_WORKER)) ? cell : "");
		page_html(pg, "</td><td>");
		page_text(pg, (cell = db_rows_get(&builds, i, BUILD_COL_CREATED)) ? cell : "");
		page_html(pg, "</td><td>");
		page_text(pg, (cell = db_rows_get(&builds, i, BUILD_COL_ERROR)) ? cell : "");
		page_html(pg, "</td></tr>");
	}
	page_html(pg, "</tbody></table></div></section>");
cleanup:
	db_rows_release(&workers);
	db_rows_release(&builds);
}

enum MHD_Result page_admin(struct request *req)
{
	struct page pg;
	page_init(&pg, req, "Administration");
	page_html(&pg, "<h1>Administration</h1>");
	if (request_query(req, "synced"))
		page_html(&pg, "<p class=\"notice\" role=\"status\">Sync queued: <code>khub mirror run</code> picks it up.</p>");
	trusted_section(&pg);
	mirror_section(&pg);
	builds_section(&pg);
	activity_section(&pg);
	accounts_section(&pg);
	return page_send(&pg, 200);
}

enum MHD_Result page_admin_sync(struct request *req)
{
	const char *selection = form_value(req, "selection");
	int64_t trigger = 0;
	if (selection && !selection[0])
		selection = NULL;
	if (selection && strlen(selection) > 200)
		return web_error_page(req, 400, "selection too long");
	if (db_mirror_trigger_add(selection, req->principal.name, &trigger) < 0)
		return web_error_page(req, 503, "The database is unavailable; try again shortly.");
	api_audit(req, "mirror.trigger", selection ? selection : "*", NULL);
	return web_redirect(req, "/admin?synced=1", NULL);
}

enum MHD_Result page_admin_trust(struct request *req)
{
	const char *name = form_value(req, "name"), *trusted = form_value(req, "trusted");
	struct account acct;
	int changed = 0;
	if (req->principal.scope < ROLE_ADMIN)	/* as PUT /api/admin/trusted-publishers/{org} */
		return web_error_page(req, 403, "Changing trusted publishers needs a session opened with an admin-scoped "
					   "token.");
	if (!name || !trusted)
		return web_error_page(req, 400, "Give an account name.");
	int rc = db_trusted_publisher_set(name, strcmp(trusted, "true") == 0, req->principal.name, &acct, &changed);
	if (rc == KHUB_EDB)
		return web_error_page(req, 503, "The database is unavailable; try again shortly.");
	if (rc < 0)
		return web_error_page(req, 404, "no such account");
	if (changed)
		api_audit(req, strcmp(trusted, "true") == 0 ? "trusted_publisher.grant" : "trusted_publisher.revoke",
			  acct.name, NULL);
	return web_redirect(req, "/admin", NULL);
}
