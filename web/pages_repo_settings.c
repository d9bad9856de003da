/* pages_repo_settings.c -- /kernels/{ns}/{name}/settings: a writer's form of
 * the repo's settings, one field per row of storage's table, changed
 * through the owner of the rule the API calls too
 * (accounts_repo_settings_set): the same checks, write and audit entries. */
#include "web/web_internal.h"

#include <stdlib.h>
#include <string.h>

/* One field of row id with its current value. */
static void setting_field(struct page *pg, enum repo_setting_id id, const struct repo_settings *s)
{
	const struct repo_setting *row = &repo_settings_table[id];
	page_htmlf(pg, "<label for=\"setting-%s\">%s</label>", row->key, row->key);
	if (row->type == REPO_SETTING_BOOL || row->type == REPO_SETTING_ENUM) {
		static const char *const bools[] = { "false", "true", NULL };
		const char *const *values = row->type == REPO_SETTING_BOOL ? bools : row->values;
		page_htmlf(pg, "<select id=\"setting-%s\" name=\"%s\">", row->key, row->key);
		for (long i = 0; values[i]; i++) {
			page_htmlf(pg, "<option%s>", s->value[id] == i ? " selected" : "");
			page_text(pg, values[i]);
			page_html(pg, "</option>");
		}
		page_html(pg, "</select>");
	} else if (row->type == REPO_SETTING_INT) {
		page_htmlf(pg, "<input type=\"number\" id=\"setting-%s\" name=\"%s\" min=\"%ld\" max=\"%ld\" value=\"%ld\">",
			   row->key, row->key, row->min, row->max, s->value[id]);
	} else {
		page_htmlf(pg, "<input type=\"text\" id=\"setting-%s\" name=\"%s\" maxlength=\"%ld\" value=\"", row->key,
			   row->key, row->max);
		page_text(pg, s->text[id]);
		page_html(pg, "\">");
	}
}

/* The settings page, with problem (may be NULL) in a banner. */
static enum MHD_Result settings_page(struct request *req, const char *problem, int status)
{
	struct repo_handle *h = req->repo;
	struct repo_settings s;
	struct page pg;
	char title[2 * REPO_NAME_MAX + 16];
	if (db_repo_settings_get(h->record.id, &s) < 0)
		return web_db_unavailable(req);
	snprintf(title, sizeof(title), "Settings of %s/%s", h->record.ns, h->record.name);
	page_init(&pg, req, title);
	kernel_page_header_at(&pg, h, "settings", NULL);
	if (problem) {
		page_html(&pg, "<p class=\"problem\" role=\"alert\">");
		page_text(&pg, problem);
		page_html(&pg, "</p>");
	}
	page_html(&pg, "<h2>Settings</h2><form method=\"post\" class=\"stack repo-settings\" action=\"/kernels/");
	page_text(&pg, h->record.ns);
	page_html(&pg, "/");
	page_text(&pg, h->record.name);
	page_html(&pg, "/settings\">");
	page_csrf_field(&pg);
	for (int i = 0; i < REPO_SETTING_COUNT; i++)
		setting_field(&pg, i, &s);
	page_html(&pg, "<button type=\"submit\" id=\"settings-save\">Save</button></form>");
	return page_send(&pg, status);
}

enum MHD_Result page_repo_settings(struct request *req)
{
	return settings_page(req, NULL, 200);
}

/* POST: the form's fields as the API's JSON body (each by its row's type),
 * then the same owner; back to the page, or the page with the refusal. */
enum MHD_Result page_repo_settings_post(struct request *req)
{
	struct accounts_actor who = api_actor(req);
	struct repo_settings_change change;
	struct repo_settings after;
	const char *why;
	json_t *doc = json_object();
	for (int i = 0; i < REPO_SETTING_COUNT; i++) {
		const char *text = form_value(req, repo_settings_table[i].key);
		if (text)
			json_object_set_new(doc, repo_settings_table[i].key, accounts_repo_setting_from_text(i, text));
	}
	int rc = accounts_repo_settings_from_json(doc, &change, &why);
	json_decref(doc);
	if (rc == 0)
		rc = accounts_repo_settings_set(&who, &req->repo->record, req->repo->role, &change, &after, &why);
	if (rc == KHUB_EDB)
		return web_db_unavailable(req);
	if (rc < 0)
		return settings_page(req, why, rc == KHUB_EPERM ? 403 : 400);
	if (after.value[REPO_SETTING_PRIVATE] != req->repo->record.private)
		repo_cache_invalidate();
	char *back = xasprintf("/kernels/%s/%s/settings", req->repo->record.ns, req->repo->record.name);
	enum MHD_Result r = web_redirect(req, back, NULL);
	free(back);
	return r;
}
