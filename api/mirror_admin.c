/* mirror_admin.c -- the mirror through the admin API: status per repo (last
 * sync, lag, errors, bytes), a sync trigger that `khub mirror run` picks up,
 * the configuration, and Prometheus-style metrics at /metrics (site admins;
 * public repo counts for anyone with metrics_public). */
#include "api/api.h"

#include <stdlib.h>
#include <string.h>

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
	PGresult *res = db_exec(
		"SELECT r.namespace || '/' || r.name, r.type, m.selection, m.upstream_name, m.upstream_url,"
		" m.upstream_repo, to_char(m.last_sync_started AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
		" to_char(m.last_sync_finished AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
		" to_char(m.last_success AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
		" extract(epoch FROM now() - m.last_success)::bigint, m.refs_behind, m.last_error, m.warnings,"
		" m.bytes_total, m.objects_total, m.syncs_total, m.lazy"
		" FROM mirror_repos m JOIN repos r ON r.id = m.repo_id ORDER BY 1", 0, NULL, NULL);
	if (!res)
		return respond_db_unavailable(req);
	json_t *list = json_array();
	for (int i = 0; i < PQntuples(res); i++) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", PQgetvalue(res, i, 0), "type",
				      PQgetvalue(res, i, 1), "selection", PQgetvalue(res, i, 2), "upstream",
				      PQgetvalue(res, i, 3), "upstreamUrl", PQgetvalue(res, i, 4), "upstreamRepo",
				      PQgetvalue(res, i, 5));
		static const char *const times[] = { "lastSyncStarted", "lastSyncFinished", "lastSuccess" };
		for (int k = 0; k < 3; k++)
			json_object_set_new(o, times[k], PQgetisnull(res, i, 6 + k) ? json_null()
										: json_string(PQgetvalue(res, i, 6 + k)));
		json_object_set_new(o, "lagSeconds", PQgetisnull(res, i, 9) ? json_null()
							: json_integer(strtoll(PQgetvalue(res, i, 9), NULL, 10)));
		json_object_set_new(o, "refsBehind", json_integer(strtoll(PQgetvalue(res, i, 10), NULL, 10)));
		json_object_set_new(o, "lastError", PQgetisnull(res, i, 11) ? json_null() : json_string(PQgetvalue(res, i, 11)));
		json_object_set_new(o, "warnings", PQgetisnull(res, i, 12) ? json_null() : json_string(PQgetvalue(res, i, 12)));
		json_object_set_new(o, "bytes", json_integer(strtoll(PQgetvalue(res, i, 13), NULL, 10)));
		json_object_set_new(o, "objects", json_integer(strtoll(PQgetvalue(res, i, 14), NULL, 10)));
		json_object_set_new(o, "syncs", json_integer(strtoll(PQgetvalue(res, i, 15), NULL, 10)));
		json_object_set_new(o, "lazy", json_boolean(PQgetvalue(res, i, 16)[0] == 't'));
		json_array_append_new(list, o);
	}
	PQclear(res);
	return respond_json(req, 200, list);
}

static enum MHD_Result handle_trigger(struct request *req)
{
	enum MHD_Result result;
	json_t *body = request_json_body(req, &result);
	if (!body)
		return result;
	const char *selection = json_string_value(json_object_get(body, "selection"));
	const char *params[2] = { selection, req->principal.name };
	PGresult *res = db_exec("INSERT INTO mirror_triggers (selection, requested_by) VALUES ($1, $2) RETURNING id",
				2, params, NULL);
	if (!res) {
		json_decref(body);
		return respond_db_unavailable(req);
	}
	json_t *out = json_pack("{s:I, s:s}", "trigger", (json_int_t)strtoll(PQgetvalue(res, 0, 0), NULL, 10), "status",
				"queued for khub mirror run");
	PQclear(res);
	/* selection points into body: audit before releasing it */
	api_audit(req, "mirror.trigger", selection ? selection : "*", NULL);
	json_decref(body);
	return respond_json(req, 202, out);
}

static enum MHD_Result handle_get_config(struct request *req)
{
	PGresult *res = db_exec("SELECT config::text FROM mirror_config WHERE id = 1", 0, NULL, NULL);
	if (!res)
		return respond_db_unavailable(req);
	enum MHD_Result r = PQntuples(res) == 1
		? respond_json_text(req, 200, PQgetvalue(res, 0, 0), strlen(PQgetvalue(res, 0, 0)))
		: respond_error(req, 404, NULL, "no mirror configuration stored");
	PQclear(res);
	return r;
}

static enum MHD_Result handle_put_config(struct request *req)
{
	enum MHD_Result result;
	json_t *body = request_json_body(req, &result);
	if (!body)
		return result;
	json_t *ups = json_object_get(body, "upstreams"), *sels = json_object_get(body, "selections");
	if (!json_is_array(ups) || !json_is_array(sels)) {
		json_decref(body);
		return respond_error(req, 400, NULL, "the configuration needs \"upstreams\" and \"selections\" arrays");
	}
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	const char *params[2] = { text, req->principal.name };
	PGresult *res = db_exec("INSERT INTO mirror_config (id, config, updated_by) VALUES (1, $1::jsonb, $2)"
				" ON CONFLICT (id) DO UPDATE SET config = EXCLUDED.config, updated_by = $2, updated_at = now()",
				2, params, NULL);
	api_audit(req, "mirror.config", "mirror", text);
	free(text);
	if (!res)
		return respond_error(req, 400, NULL, "the configuration was not stored");
	PQclear(res);
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
	struct MHD_Response *resp = MHD_create_response_from_buffer(sb->len, sb->buf, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	req->bytes_out = sb->len;
	strbuf_release(sb);
	return respond(req, 200, resp);
}

/* Site admins get every repo; with metrics_public anyone else gets only
 * the number of public repos by type (private repos must not show, even
 * as a count). */
static enum MHD_Result handle_metrics(struct request *req)
{
	struct strbuf sb = STRBUF_INIT;
	enum MHD_Result result;
	if (!req->principal.is_site_admin && api_ctx.metrics_public) {
		PGresult *res = db_exec("SELECT type, count(*) FROM repos WHERE NOT private GROUP BY type ORDER BY type",
					0, NULL, NULL);
		if (!res)
			return respond_error(req, 503, NULL, "database unavailable");
		strbuf_adds(&sb, "# HELP khub_repos number of public repos by type\n# TYPE khub_repos gauge\n");
		for (int i = 0; i < PQntuples(res); i++)
			strbuf_addf(&sb, "khub_repos{type=\"%s\"} %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
		PQclear(res);
		return respond_metrics(req, &sb);
	}
	if (require_site_admin(req, &result) < 0)
		return result;
	PGresult *res = db_exec("SELECT r.namespace || '/' || r.name, m.selection,"
				" coalesce(extract(epoch FROM m.last_success)::bigint, 0), m.refs_behind, m.bytes_total,"
				" m.objects_total, m.syncs_total, (m.last_error IS NOT NULL)::int"
				" FROM mirror_repos m JOIN repos r ON r.id = m.repo_id ORDER BY 1",
				0, NULL, NULL);
	if (!res)
		return respond_db_unavailable(req);
	static const struct { const char *name, *type, *help; int column; } metrics[] = {
		{ "khub_mirror_last_success_timestamp_seconds", "gauge", "last sync that completed without error", 2 },
		{ "khub_mirror_refs_behind", "gauge", "upstream refs not yet visible here", 3 },
		{ "khub_mirror_bytes_total", "counter", "LFS bytes transferred from the upstream", 4 },
		{ "khub_mirror_objects_total", "counter", "LFS objects fetched and verified", 5 },
		{ "khub_mirror_syncs_total", "counter", "sync runs", 6 },
		{ "khub_mirror_last_sync_failed", "gauge", "1 when the last sync recorded an error", 7 },
	};
	for (size_t m = 0; m < sizeof(metrics) / sizeof(metrics[0]); m++) {
		strbuf_addf(&sb, "# HELP %s %s\n# TYPE %s %s\n", metrics[m].name, metrics[m].help, metrics[m].name,
			    metrics[m].type);
		for (int i = 0; i < PQntuples(res); i++) {
			strbuf_addf(&sb, "%s{repo=\"", metrics[m].name);
			metric_label(&sb, PQgetvalue(res, i, 0));
			strbuf_adds(&sb, "\",selection=\"");
			metric_label(&sb, PQgetvalue(res, i, 1));
			strbuf_addf(&sb, "\"} %s\n", PQgetvalue(res, i, metrics[m].column));
		}
	}
	PQclear(res);
	res = db_exec("SELECT type, count(*) FROM repos GROUP BY type ORDER BY type", 0, NULL, NULL);
	strbuf_adds(&sb, "# HELP khub_repos number of repos by type\n# TYPE khub_repos gauge\n");
	for (int i = 0; res && i < PQntuples(res); i++)
		strbuf_addf(&sb, "khub_repos{type=\"%s\"} %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	PQclear(res);
	return respond_metrics(req, &sb);
}

/* /metrics is public as a route; the handler answers site admins only
 * unless metrics_public is set. */
const struct route mirror_admin_routes[] = {
	{ METHOD_GET, "/api/admin/mirror", handle_status, 0, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_POST, "/api/admin/mirror/sync", handle_trigger, ROUTE_BODY, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_GET, "/api/admin/mirror/config", handle_get_config, 0, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_PUT, "/api/admin/mirror/config", handle_put_config, ROUTE_BODY, 0, NULL, ACCESS_SITE_ADMIN },
	{ METHOD_GET, "/metrics", handle_metrics, ROUTE_HANDLER_ACCESS, 0, NULL, ACCESS_PUBLIC },
	{ 0, NULL, NULL, 0, 0, NULL },
};
