/* mirror_admin.c -- the mirror through the admin API: status per repo (last
 * sync, lag, errors, bytes), a sync trigger that `khub mirror run` picks up,
 * the configuration, and Prometheus-style metrics at /metrics (site admins;
 * public repo counts for anyone with metrics_public). */
#include "api/api.h"
#include "farm/farm.h"
#include "api/metrics.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int require_site_admin(struct request *req, enum MHD_Result *result)
{
	if (require_signed_in(req, result) < 0)
		return -1;
	if (!req->principal.is_site_admin) {
		*result = respond_error(req, 403, NULL, "site administrators only");
		return -1;
	}
	return 0;
}

static enum MHD_Result handle_status(struct request *req)
{
	struct mirror_status_list mirrors;
	if (db_mirror_status_list(&mirrors) < 0)
		return respond_db_unavailable(req);
	json_t *list = json_array();
	for (size_t i = 0; i < mirrors.count; i++) {
		const struct mirror_status *m = &mirrors.items[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", m->repo, "type", repo_type_name(m->type),
				      "selection", m->selection, "upstream", m->upstream_name, "upstreamUrl",
				      m->upstream_url, "upstreamRepo", m->upstream_repo);
		static const char *const times[] = { "lastSyncStarted", "lastSyncFinished", "lastSuccess" };
		const time_t at[3] = { m->last_sync_started, m->last_sync_finished, m->last_success };
		for (int k = 0; k < 3; k++) {
			char text[32];
			struct tm tm;
			if (at[k])
				strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&at[k], &tm));
			json_object_set_new(o, times[k], at[k] ? json_string(text) : json_null());
		}
		json_object_set_new(o, "lagSeconds", m->lag_seconds < 0 ? json_null() : json_integer(m->lag_seconds));
		json_object_set_new(o, "refsBehind", json_integer(m->refs_behind));
		json_object_set_new(o, "lastError", m->last_error ? json_string(m->last_error) : json_null());
		json_object_set_new(o, "warnings", m->warnings ? json_string(m->warnings) : json_null());
		json_object_set_new(o, "bytes", json_integer(m->bytes));
		json_object_set_new(o, "objects", json_integer(m->objects));
		json_object_set_new(o, "syncs", json_integer(m->syncs));
		json_object_set_new(o, "lazy", json_boolean(m->lazy));
		json_array_append_new(list, o);
	}
	mirror_status_list_release(&mirrors);
	return respond_json(req, 200, list);
}

static enum MHD_Result handle_trigger(struct request *req)
{
	json_t *body = req->json;
	const char *selection = json_string_value(json_object_get(body, "selection"));
	int64_t trigger = 0;
	if (db_mirror_trigger_add(selection, req->principal.name, &trigger) < 0)
		return respond_db_unavailable(req);
	json_t *out = json_pack("{s:I, s:s}", "trigger", (json_int_t)trigger, "status", "queued for khub mirror run");
	api_audit(req, "mirror.trigger", selection ? selection : "*", NULL);
	return respond_json(req, 202, out);
}

static enum MHD_Result handle_get_config(struct request *req)
{
	char *text = NULL;
	int rc = db_mirror_config_get(&text);
	if (rc == KHUB_EDB)
		return respond_db_unavailable(req);
	enum MHD_Result r = text ? respond_json_text(req, 200, text, strlen(text))
				 : respond_error(req, 404, NULL, "no mirror configuration stored");
	free(text);
	return r;
}

static enum MHD_Result handle_put_config(struct request *req)
{
	json_t *body = req->json;
	json_t *ups = json_object_get(body, "upstreams"), *sels = json_object_get(body, "selections");
	if (!json_is_array(ups) || !json_is_array(sels))
		return respond_error(req, 400, NULL, "the configuration needs \"upstreams\" and \"selections\" arrays");
	char *text = json_dumps(body, JSON_COMPACT);
	int rc = db_mirror_config_put(text, req->principal.name);
	api_audit(req, "mirror.config", "mirror", text);
	free(text);
	if (rc < 0)
		return respond_error(req, 400, NULL, "the configuration was not stored");
	return respond_json_text(req, 200, "{\"stored\":true}", 15);
}

static void metric_label(struct strbuf *sb, const char *v)
{
	for (; *v; v++) {
		if (*v == '"' || *v == '\\')
			strbuf_add(sb, "\\", 1);
		if (*v != '\n')
			strbuf_add(sb, v, 1);
	}
}

static enum MHD_Result respond_metrics(struct request *req, struct strbuf *sb)
{
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	size_t len;
	char *text = strbuf_detach(sb, &len);
	answer_body_take(&a, text, len);
	return answer_send(req, &a);
}

/* One line per type that has repos, by type name. */
static void add_repo_counts(struct strbuf *sb, const int64_t counts[REPO_TYPE_COUNT])
{
	static const enum repo_type by_name[] = { REPO_DATASET, REPO_KERNEL, REPO_MODEL, REPO_SPACE };
	for (size_t i = 0; i < sizeof(by_name) / sizeof(by_name[0]); i++)
		if (counts[by_name[i]])
			strbuf_addf(sb, "khub_repos{type=\"%s\"} %" PRId64 "\n", repo_type_name(by_name[i]),
				    counts[by_name[i]]);
}

/* Site admins get every repo; with metrics_public anyone else gets only
 * the number of public repos by type (private repos must not show, even
 * as a count). */
static enum MHD_Result handle_metrics(struct request *req)
{
	struct strbuf sb = STRBUF_INIT;
	enum MHD_Result result;
	int64_t counts[REPO_TYPE_COUNT];
	/* While the database is down, what it holds is left out: the rest
	 * (khub_database_up first) is what an operator needs then. */
	if (!req->principal.is_site_admin && api_ctx.metrics_public) {
		int have_counts = db_repo_count_by_type(0, counts) == 0;	/* first: it tells whether the DB is back */
		metrics_write_database_state(&sb);
		strbuf_adds(&sb, "# HELP khub_repos number of public repos by type\n# TYPE khub_repos gauge\n");
		if (have_counts)
			add_repo_counts(&sb, counts);
		return respond_metrics(req, &sb);
	}
	if (require_site_admin(req, &result) < 0)
		return result;
	struct mirror_status_list mirrors = { 0 };
	if (db_mirror_status_list(&mirrors) < 0) {
		mirror_status_list_release(&mirrors);
		memset(&mirrors, 0, sizeof(mirrors));
	}
	enum { LAST_SUCCESS, REFS_BEHIND, BYTES, OBJECTS, SYNCS, FAILED };
	static const struct { const char *name, *type, *help; int column; } metrics[] = {
		{ "khub_mirror_last_success_timestamp_seconds", "gauge", "last sync that completed without error", LAST_SUCCESS },
		{ "khub_mirror_refs_behind", "gauge", "upstream refs not yet visible here", REFS_BEHIND },
		{ "khub_mirror_bytes_total", "counter", "LFS bytes transferred from the upstream", BYTES },
		{ "khub_mirror_objects_total", "counter", "LFS objects fetched and verified", OBJECTS },
		{ "khub_mirror_syncs_total", "counter", "sync runs", SYNCS },
		{ "khub_mirror_last_sync_failed", "gauge", "1 when the last sync recorded an error", FAILED },
	};
	for (size_t m = 0; m < sizeof(metrics) / sizeof(metrics[0]); m++) {
		strbuf_addf(&sb, "# HELP %s %s\n# TYPE %s %s\n", metrics[m].name, metrics[m].help, metrics[m].name,
			    metrics[m].type);
		for (size_t i = 0; i < mirrors.count; i++) {
			const struct mirror_status *ms = &mirrors.items[i];
			const int64_t values[] = { (int64_t)ms->last_success, ms->refs_behind, ms->bytes, ms->objects,
						   ms->syncs, ms->last_error != NULL };
			strbuf_addf(&sb, "%s{repo=\"", metrics[m].name);
			metric_label(&sb, ms->repo);
			strbuf_adds(&sb, "\",selection=\"");
			metric_label(&sb, ms->selection);
			strbuf_addf(&sb, "\"} %" PRId64 "\n", values[metrics[m].column]);
		}
	}
	mirror_status_list_release(&mirrors);
	strbuf_adds(&sb, "# HELP khub_repos number of repos by type\n# TYPE khub_repos gauge\n");
	if (db_repo_count_by_type(1, counts) == 0)
		add_repo_counts(&sb, counts);
	build_metrics_add(&sb);
	metrics_write(&sb);
	return respond_metrics(req, &sb);
}

/* /metrics is public as a route; the handler answers site admins only
 * unless metrics_public is set. */
const struct route mirror_admin_routes[] = {
	{ METHOD_GET, "/api/admin/mirror", handle_status, 0, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_POST, "/api/admin/mirror/sync", handle_trigger, ROUTE_JSON, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_GET, "/api/admin/mirror/config", handle_get_config, 0, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_PUT, "/api/admin/mirror/config", handle_put_config, ROUTE_JSON, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_GET, "/metrics", handle_metrics, ROUTE_HANDLER_ACCESS, 0, NULL, ACCESS_PUBLIC },
	{ 0, NULL, NULL, 0, 0, NULL },
};
