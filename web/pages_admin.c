/* pages_admin.c -- /admin for site admins: trusted publishers (grant and
 * withdraw), mirror status with "sync now" (the same trigger as POST
 * /api/admin/mirror/sync), the build farm's workers and newest builds,
 * recent activity (who published what: the audit log), users and orgs;
 * fleet rebuild campaigns (built, failed, waiting per campaign, each
 * kernel linked); /admin/airgap: the air-gap bundles this hub applied (khub sync history)
 * and the signing keys' scopes. */
#include "web/web_internal.h"
#include "storage/db/db_builds.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define ADMIN_ACCOUNTS_SHOWN 500
#define ADMIN_ACTIVITY_SHOWN 50

/* Open the section id headed title: 0, or -1 (the section said so and
 * closed) when loaded, the return of the section's database read, failed. */
static int section_open(struct page *pg, const char *id, const char *title, int loaded)
{
	page_htmlf(pg, "<section aria-labelledby=\"%s-h\"><h2 id=\"%s-h\">%s</h2>", id, id, title);
	if (loaded >= 0)
		return 0;
	page_db_problem(pg);
	page_html(pg, "</section>");
	return -1;
}

static void trusted_section(struct page *pg)
{
	struct trusted_publisher_list list;
	if (section_open(pg, "trust", "Trusted publishers", db_trusted_publisher_list(&list)) < 0)
		return;
	page_html(pg, SCROLL_REGION("Trusted publishers table") "<table id=\"trusted\"><thead><tr><th scope=\"col\">Account</th><th scope=\"col\">Since</th>"
		      "<th scope=\"col\">By</th><th scope=\"col\"><span class=\"muted\">Action</span></th></tr></thead><tbody>");
	for (size_t i = 0; i < list.count; i++) {
		const struct trusted_publisher *t = &list.items[i];
		char since[32];
		format_day(t->since, since);
		page_html(pg, "<tr><th scope=\"row\">");
		page_account_link(pg, t->name);
		page_html(pg, "</th>");
		page_cell(pg, "<td>", since);
		page_cell(pg, "<td>", t->changed_by);
		page_html(pg, "<td><form method=\"post\" action=\"/admin/trusted\" class=\"inline\">");
		page_csrf_field(pg);
		page_html(pg, "<input type=\"hidden\" name=\"trusted\" value=\"false\"><input type=\"hidden\" name=\"name\" "
			      "value=\"");
		page_text(pg, t->name);
		page_html(pg, "\"><button class=\"danger\" type=\"submit\" aria-label=\"Withdraw trust from ");
		page_text(pg, t->name);
		page_html(pg, "\">Withdraw</button></form></td></tr>");
	}
	page_html(pg, "</tbody></table></div><form method=\"post\" action=\"/admin/trusted\" class=\"env\">");
	page_csrf_field(pg);
	page_html(pg, "<input type=\"hidden\" name=\"trusted\" value=\"true\"><div><label for=\"trust-name\">Trust an "
		      "account</label><input id=\"trust-name\" name=\"name\" required></div><div><button type=\"submit\">"
		      "Trust</button></div></form></section>");
	trusted_publisher_list_release(&list);
}

/* Who did what lately: publishes, pushes, settings, trust, tokens. */
static void activity_section(struct page *pg)
{
	struct audit_row *rows = NULL;
	size_t n = 0;
	if (section_open(pg, "activity", "Recent activity", db_audit_recent(ADMIN_ACTIVITY_SHOWN, &rows, &n)) < 0)
		return;
	page_html(pg, SCROLL_REGION("Activity table") "<table id=\"activity\"><thead><tr><th scope=\"col\">When (UTC)</th>"
		      "<th scope=\"col\">Who</th><th scope=\"col\">What</th><th scope=\"col\">On</th></tr></thead><tbody>");
	for (size_t i = 0; i < n; i++) {
		page_html(pg, "<tr>");
		page_cell(pg, "<td>", rows[i].at);
		page_cell(pg, "<td>", rows[i].actor);
		page_cell(pg, "<td class=\"mono\">", rows[i].action);
		page_cell(pg, "<td>", rows[i].target);
		page_html(pg, "</tr>");
	}
	page_html(pg, "</tbody></table></div></section>");
	audit_rows_free(rows, n);
}

static void account_row(struct page *pg, const struct account_row *a)
{
	page_html(pg, "<tr><th scope=\"row\">");
	page_account_link(pg, a->name);
	page_html(pg, "</th>");
	page_cell(pg, "<td>", a->kind);
	page_html(pg, "<td>");
	if (a->site_admin)
		page_html(pg, "<span class=\"badge\">site admin</span> ");
	if (a->trusted)
		page_html(pg, "<span class=\"badge trusted\">trusted</span>");
	page_html(pg, "</td>");
	page_cell(pg, "<td>", a->created);
	page_html(pg, "</tr>");
}

static void accounts_section(struct page *pg)
{
	struct account_row *rows = NULL;
	size_t n = 0;
	if (section_open(pg, "acct", "Organizations and users", db_account_rows(ADMIN_ACCOUNTS_SHOWN, &rows, &n)) < 0)
		return;
	page_html(pg, SCROLL_REGION("Accounts table") "<table id=\"accounts\"><thead><tr><th scope=\"col\">Name</th>"
		      "<th scope=\"col\">Kind</th><th scope=\"col\">Flags</th><th scope=\"col\">Created</th></tr></thead>"
		      "<tbody>");
	for (size_t i = 0; i < n; i++)
		account_row(pg, &rows[i]);
	page_html(pg, "</tbody></table></div></section>");
	account_rows_free(rows, n);
}

static void mirror_section(struct page *pg)
{
	struct mirror_status_list list;
	section_open(pg, "mirror", "Mirror", 0);
	page_html(pg, "<form method=\"post\" action=\"/admin/mirror/sync\" class=\"env\">");
	page_csrf_field(pg);
	page_html(pg, "<div><label for=\"sync-sel\">Selection (empty = all)</label><input id=\"sync-sel\" name=\"selection\">"
		      "</div><div><button type=\"submit\">Sync now</button></div></form>");
	if (db_mirror_status_list(&list) < 0) {
		page_db_problem(pg);
		page_html(pg, "</section>");
		return;
	}
	if (!list.count)
		page_html(pg, "<p class=\"muted\">No mirrored repos.</p>");
	else
		page_html(pg, SCROLL_REGION("Mirrored repos table") "<table id=\"mirror\"><thead><tr><th scope=\"col\">Repo</th>"
			      "<th scope=\"col\">Upstream</th><th scope=\"col\">Selection</th><th scope=\"col\">Last sync</th>"
			      "<th scope=\"col\" class=\"num\">Lag (s)</th><th scope=\"col\" class=\"num\">Bytes</th>"
			      "<th scope=\"col\">Error</th></tr></thead><tbody>");
	for (size_t i = 0; i < list.count; i++) {
		const struct mirror_status *m = &list.items[i];
		char last[32], lag[24], bytes[32];
		format_day(m->last_sync_finished, last);
		snprintf(lag, sizeof(lag), "%lld", (long long)m->lag_seconds);
		format_size((uint64_t)m->bytes, bytes);
		page_html(pg, "<tr>");
		page_cell(pg, "<th scope=\"row\">", m->repo);
		page_cell(pg, "<td>", m->upstream_name);
		page_cell(pg, "<td>", m->selection);
		page_cell(pg, "<td>", last);
		page_cell(pg, "<td class=\"num\">", lag);
		page_cell(pg, "<td class=\"num\">", bytes);
		page_cell(pg, "<td>", m->last_error);
		page_html(pg, "</tr>");
	}
	if (list.count)
		page_html(pg, "</tbody></table></div>");
	page_html(pg, "</section>");
	mirror_status_list_release(&list);
}

/* A worker's variants (a JSON array of names) as text. */
static void worker_variants_cell(struct page *pg, const char *variants)
{
	json_t *list = json_loads(variants, 0, NULL), *v;
	size_t i;
	page_html(pg, "<td class=\"worker-variants\">");
	json_array_foreach(list, i, v) {
		page_html(pg, i ? ", " : "");
		page_text(pg, json_string_value(v));
	}
	page_html(pg, "</td>");
	json_decref(list);
}

/* A build row's opening cells: the build (its log page), its repo, its
 * commit (the repo's builds page of that commit) and its variant. */
static void build_links_cells(struct page *pg, const struct build_row *b)
{
	const char *commit = b->commit;
	char id[24];
	snprintf(id, sizeof(id), "%" PRId64, b->id);
	struct strbuf repo = STRBUF_INIT;
	strbuf_addf(&repo, "/kernels/%s/%s", b->ns, b->name);
	page_htmlf(pg, "<tr data-kind=\"%s\"><th scope=\"row\" class=\"num\"><a class=\"build-log\" href=\"",
		   b->benchmark ? "benchmark" : "build");
	page_text(pg, repo.buf);
	page_html(pg, "/builds/");
	page_text(pg, id);
	page_html(pg, "/log\">");
	page_text(pg, id);
	page_html(pg, "</a></th><td><a class=\"build-repo\" href=\"");
	page_text(pg, repo.buf);
	page_html(pg, "\">");
	page_text(pg, repo.buf + strlen("/kernels/"));
	page_html(pg, "</a></td><td><a class=\"build-commit mono\" href=\"");
	page_text(pg, repo.buf);
	page_html(pg, "/builds?commit=");
	page_text(pg, commit);
	page_htmlf(pg, "\">%.12s</a></td><td>", commit);
	page_text(pg, b->variant);
	if (b->benchmark)
		page_html(pg, " ");
	build_kind_html(pg, b->benchmark, b->device);
	page_html(pg, "</td>");
	strbuf_release(&repo);
}

/* The build farm: its workers (as GET /api/admin/workers) and the newest
 * builds of every repo (a site admin sees private repos' too). */
static void builds_section(struct page *pg)
{
	struct worker_row *workers = NULL;
	size_t nworkers = 0;
	struct build_rows builds = { 0 };
	page_html(pg, "<section aria-labelledby=\"builds-h\" id=\"builds\"><h2 id=\"builds-h\">Builds</h2>");
	if (db_worker_list(&workers, &nworkers) < 0 || db_build_list(0, NULL, 30, 0, &builds) < 0) {
		page_db_problem(pg);
		page_html(pg, "</section>");
		goto cleanup;
	}
	if (nworkers == 0)
		page_html(pg, "<p>No worker is registered: <code>khub admin worker add NAME</code> makes a worker token "
			      "for <code>khub-worker</code> (docs/build-farm.md).</p>");
	else
		page_html(pg, SCROLL_REGION("Workers table") "<table><caption>Workers</caption><thead><tr>"
			      "<th scope=\"col\">Worker</th><th scope=\"col\">Version</th>"
			      "<th scope=\"col\" class=\"num\">Concurrency</th><th scope=\"col\">Variants</th>"
			      "<th scope=\"col\">Last heartbeat</th></tr></thead><tbody>");
	for (size_t i = 0; i < nworkers; i++) {
		char concurrency[24];
		snprintf(concurrency, sizeof(concurrency), "%ld", workers[i].concurrency);
		page_html(pg, "<tr>");
		page_cell(pg, "<th scope=\"row\">", workers[i].name);
		page_cell(pg, "<td>", workers[i].version);
		page_cell(pg, "<td class=\"num\">", concurrency);
		worker_variants_cell(pg, workers[i].variants);
		page_cell(pg, "<td>", workers[i].heartbeat ? workers[i].heartbeat : "never");
		page_html(pg, "</tr>");
	}
	if (nworkers)
		page_html(pg, "</tbody></table></div>");
	if (builds.count == 0) {
		page_html(pg, "<p>No build yet.</p></section>");
		goto cleanup;
	}
	page_html(pg, SCROLL_REGION("Newest builds table") "<table><caption>Newest builds</caption><thead><tr>"
		      "<th scope=\"col\" class=\"num\">Build</th><th scope=\"col\">Repo</th><th scope=\"col\">Commit</th>"
		      "<th scope=\"col\">Variant</th><th scope=\"col\">State</th><th scope=\"col\">Worker</th>"
		      "<th scope=\"col\">Created</th><th scope=\"col\">Error</th></tr></thead><tbody>");
	for (size_t i = 0; i < builds.count; i++) {
		const struct build_row *b = &builds.items[i];
		const char *text[] = { b->state, b->worker, b->created, b->error };
		build_links_cells(pg, b);
		for (size_t c = 0; c < sizeof(text) / sizeof(text[0]); c++)
			page_cell(pg, "<td>", text[c] ? text[c] : "");
		page_html(pg, "</tr>");
	}
	page_html(pg, "</tbody></table></div></section>");
cleanup:
	worker_rows_release(workers, nworkers);
	build_rows_release(&builds);
}

/* A campaign's kernels: each linked, with its state and build's log. */
static void campaign_kernels_cell(struct page *pg, int64_t id)
{
	struct db_campaign_kernel *k = NULL;
	size_t n = 0;
	page_html(pg, "<td class=\"campaign-kernels\">");
	if (db_campaign_kernels(id, &k, &n) < 0)
		page_html(pg, "(the database is unavailable)");
	for (size_t i = 0; i < n; i++) {
		char repo[2 * REPO_NAME_MAX + 16];
		snprintf(repo, sizeof(repo), "/kernels/%s/%s", k[i].ns, k[i].name);
		page_html(pg, i ? "<br>" : "");
		page_html(pg, "<a class=\"campaign-kernel\" href=\"");
		page_text(pg, repo);
		page_html(pg, "\">");
		page_text(pg, repo + strlen("/kernels/"));
		page_html(pg, "</a> ");
		if (k[i].build_id) {
			page_html(pg, "<a href=\"");
			page_text(pg, repo);
			page_htmlf(pg, "/builds/%" PRId64 "/log\">", k[i].build_id);
			page_text(pg, k[i].merged ? "merged" : k[i].state);
			page_html(pg, "</a>");
		} else {
			page_text(pg, k[i].skipped ? "skipped: " : "planning");
			page_text(pg, k[i].skipped ? k[i].skipped : "");
		}
		if (!k[i].merged)
			campaign_pr_html(pg, &k[i]);
		if (k[i].pr_ref && !k[i].merged && strcmp(k[i].state, "staged") == 0)
			campaign_merge_form(pg, k[i].ns, k[i].name, k[i].campaign_id, "/admin#campaigns");
	}
	db_campaign_kernels_free(k, n);
	page_html(pg, "</td>");
}

/* Fleet rebuilds (GET /api/admin/campaigns): the newest campaigns. */
static void campaigns_section(struct page *pg)
{
	struct db_campaign *c = NULL;
	size_t n = 0;
	if (section_open(pg, "campaigns", "Fleet rebuilds", db_campaign_list(0, 10, &c, &n)) < 0)
		return;
	if (n == 0)
		page_html(pg, "<p>No campaign yet: <code>khub builds campaign start --variant VARIANT</code> or POST "
			      "/api/admin/campaigns.</p>");
	else
		page_html(pg, "<div class=\"table-wrap\"><table><caption>Campaigns</caption><thead><tr>"
			      "<th scope=\"col\" class=\"num\">Campaign</th><th scope=\"col\">Variant</th>"
			      "<th scope=\"col\">Started by</th><th scope=\"col\" class=\"num\">Built</th>"
			      "<th scope=\"col\" class=\"num\">Failed</th><th scope=\"col\" class=\"num\">Waiting</th>"
			      "<th scope=\"col\" class=\"num\">Skipped</th><th scope=\"col\">Kernels</th></tr></thead><tbody>");
	for (size_t i = 0; i < n; i++) {
		page_htmlf(pg, "<tr class=\"campaign\" data-campaign=\"%" PRId64 "\"><th scope=\"row\" class=\"num\">%"
			   PRId64 "</th>", c[i].id, c[i].id);
		page_cell(pg, "<td>", c[i].variant);
		page_cell(pg, "<td>", c[i].reason);
		page_htmlf(pg, "<td class=\"num campaign-built\">%ld</td><td class=\"num campaign-failed\">%ld</td>"
			   "<td class=\"num campaign-waiting\">%ld</td><td class=\"num campaign-skipped\">%ld</td>",
			   c[i].built, c[i].failed, c[i].waiting, c[i].skipped);
		campaign_kernels_cell(pg, c[i].id);
		page_html(pg, "</tr>");
	}
	if (n)
		page_html(pg, "</tbody></table></div>");
	page_html(pg, "</section>");
	db_campaigns_free(c, n);
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
	campaigns_section(&pg);
	activity_section(&pg);
	accounts_section(&pg);
	page_html(&pg, "<p><a href=\"/admin/airgap\">Air-gap imports</a>: the bundles <code>khub sync import</code> "
		       "applied here.</p>");
	return page_send(&pg, 200);
}

static void import_row(struct page *pg, const struct sync_import_record *h)
{
	char seq[64], moved[24];
	page_cell(pg, "<tr><td>", h->started ? h->started : "");
	page_cell(pg, "<td class=\"mono\">", h->bundle);
	snprintf(seq, sizeof(seq), "%s #%" PRId64, h->exporter, h->sequence);
	page_cell(pg, "<td class=\"mono\">", seq);
	page_cell(pg, "<td class=\"mono\">", h->key_id);
	page_cell(pg, "<td>", h->hub ? h->hub : "");
	page_cell(pg, "<td>", h->operator_ ? h->operator_ : "");
	page_cell(pg, "<td>", h->done ? "applied" : "interrupted (run it again)");
	snprintf(moved, sizeof(moved), "%" PRId64, h->refs_moved);
	page_cell(pg, "<td class=\"num\">", moved);
	page_html(pg, "</tr>");
}

static int scope_row(const char *key_id, const char *orgs, const char *set_by, const char *set_at, void *arg)
{
	struct page *pg = arg;
	page_cell(pg, "<tr><td class=\"mono\">", key_id);
	page_cell(pg, "<td>", orgs);
	page_cell(pg, "<td>", set_by);
	page_cell(pg, "<td>", set_at);
	page_html(pg, "</tr>");
	return 0;
}

/* /admin/airgap: the bundles applied, newest first, and the keys' scopes. */
enum MHD_Result page_admin_airgap(struct request *req)
{
	struct page pg;
	size_t n = 0;
	int rc = 0;
	struct sync_import_record *h = db_sync_history(&n, &rc);
	page_init(&pg, req, "Air-gap imports");
	page_html(&pg, "<h1>Air-gap imports</h1><p>Bundles applied by <code>khub sync import</code> (docs/sync.md), "
		       "newest first.</p>");
	if (section_open(&pg, "imports", "Bundles", rc) == 0) {
		if (n == 0)
			page_html(&pg, "<p>No bundle was imported here.</p>");
		else
			page_html(&pg, SCROLL_REGION("Imports table") "<table id=\"sync-imports\"><thead><tr>"
				       "<th scope=\"col\">Started (UTC)</th><th scope=\"col\">Bundle</th>"
				       "<th scope=\"col\">Exporter #</th><th scope=\"col\">Key</th><th scope=\"col\">From</th>"
				       "<th scope=\"col\">Operator</th><th scope=\"col\">State</th>"
				       "<th scope=\"col\" class=\"num\">Refs moved</th></tr></thead><tbody>");
		for (size_t i = n; i-- > 0;)
			import_row(&pg, &h[i]);
		page_html(&pg, n ? "</tbody></table></div></section>" : "</section>");
	}
	db_sync_history_free(h, n);
	page_html(&pg, "<section aria-labelledby=\"scopes-h\"><h2 id=\"scopes-h\">Signing key scopes</h2><p>Set with "
		       "<code>khub sync key-scope</code>; a trusted key not listed may bring in any org.</p>"
		       SCROLL_REGION("Sync scopes table") "<table id=\"sync-scopes\"><thead><tr><th scope=\"col\">Key</th>"
		       "<th scope=\"col\">Orgs</th><th scope=\"col\">Set by</th><th scope=\"col\">Set (UTC)</th>"
		       "</tr></thead><tbody>");
	if (db_sync_key_scope_list(scope_row, &pg) < 0) {
		page_html(&pg, "<tr>");
		page_cell(&pg, "<td colspan=\"4\" class=\"problem\">", web_db_unavailable_text);
		page_html(&pg, "</tr>");
	}
	page_html(&pg, "</tbody></table></div></section>");
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
		return web_db_unavailable(req);
	api_audit(req, "mirror.trigger", selection ? selection : "*", NULL);
	return web_redirect(req, "/admin?synced=1", NULL);
}

enum MHD_Result page_admin_trust(struct request *req)
{
	const char *name = form_value(req, "name"), *trusted = form_value(req, "trusted"), *why;
	struct accounts_actor who = api_actor(req);
	if (!name || !trusted)
		return web_error_page(req, 400, "Give an account name.");
	/* as PUT /api/admin/trusted-publishers/{org}: one call, one audit entry */
	int rc = accounts_trust_set(&who, name, strcmp(trusted, "true") == 0, NULL, NULL, &why);
	if (rc == KHUB_EPERM)
		return web_error_page(req, 403, "Changing trusted publishers needs a session opened with an admin-scoped "
					   "token.");
	if (rc == KHUB_ENOTFOUND)
		return web_error_page(req, 404, "no such account");
	if (rc < 0)
		return web_db_unavailable(req);
	return web_redirect(req, "/admin", NULL);
}
