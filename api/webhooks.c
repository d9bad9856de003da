/* webhooks.c -- a repo's webhooks (docs/webhooks.md): GET and POST
 * /api/{type}s/{ns}/{name}/webhooks, DELETE …/webhooks/{id}, and the
 * delivery log GET …/webhooks/{id}/deliveries, for those who may change
 * the repo's settings (ACCESS_REPO_MANAGE, as PUT …/settings). A hook's
 * secret is answered once, when the server made it, and never again; its
 * URL is http or https, and names no loopback, private, link-local or
 * reserved address unless webhooks_allow_private (deliveries check the
 * address again when they connect: server/webhooks.c). */
#include "api/api.h"
#include "storage/db/webhooks.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define URL_MAX 2048
#define SECRET_MIN 16
#define SECRET_MAX 256
#define DELIVERIES_MAX 200

/* 1 when host (a URL's, IPv6 without brackets) is an address refused
 * while webhooks_allow_private is 0, or a name for this machine. */
static int host_refused(const char *host)
{
	unsigned char addr[16];
	size_t n = strlen(host);
	if (strcasecmp(host, "localhost") == 0 || (n > 10 && strcasecmp(host + n - 10, ".localhost") == 0))
		return 1;
	if (inet_pton(AF_INET, host, addr) == 1)
		return net_address_reserved(AF_INET, addr);
	char v6[64];
	if (host[0] == '[' && n > 2 && n - 2 < sizeof(v6)) {
		memcpy(v6, host + 1, n - 2);
		v6[n - 2] = '\0';
		host = v6;
	}
	if (inet_pton(AF_INET6, host, addr) == 1)
		return net_address_reserved(AF_INET6, addr);
	return 0;
}

/* NULL when url may be a hook's target, else why not (static). */
static const char *url_refused(const char *url)
{
	char *scheme = NULL, *host = NULL, *user = NULL;
	const char *why = NULL;
	CURLU *u = curl_url();
	if (strlen(url) > URL_MAX || !u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0])
		why = "\"url\" must be an absolute http or https URL of at most 2048 bytes";
	else if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)
		why = "\"url\" must be http or https";
	else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK)
		why = "\"url\" must not carry credentials (the secret authenticates deliveries)";
	else if (!api_ctx.webhooks_allow_private && host_refused(host))
		why = "\"url\" names a loopback, private, link-local or reserved address "
		      "(this server's webhooks_allow_private is 0)";
	curl_free(scheme);
	curl_free(host);
	curl_free(user);
	curl_url_cleanup(u);
	return why;
}

static json_t *hook_json(const struct db_webhook *w)
{
	json_t *scopes = json_array();
	if (w->content)
		json_array_append_new(scopes, json_string(WEBHOOK_SCOPE_CONTENT));
	if (w->build)
		json_array_append_new(scopes, json_string(WEBHOOK_SCOPE_BUILD));
	if (w->benchmark)
		json_array_append_new(scopes, json_string(WEBHOOK_SCOPE_BENCHMARK));
	return json_pack("{s:I, s:s, s:o, s:s, s:s}", "id", (json_int_t)w->id, "url", w->url, "scopes", scopes,
			 "createdBy", w->created_by, "createdAt", w->created_at);
}

/* ---- GET …/webhooks ------------------------------------------------------------ */

static enum MHD_Result handle_list(struct request *req)
{
	struct db_webhook *hooks = NULL;
	size_t n = 0;
	if (db_webhook_list(req->repo->record.id, &hooks, &n) < 0)
		return respond_db_unavailable(req);
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, hook_json(&hooks[i]));
	db_webhooks_free(hooks, n);
	return respond_json(req, 200, json_pack("{s:o}", "webhooks", list));
}

/* ---- POST …/webhooks -------------------------------------------------------------- */

/* "scopes" of a create body into *content, *build and *benchmark
 * (absent: content and build; repo.benchmark only when named): 0 or -1. */
static int scopes_from_body(json_t *doc, int *content, int *build, int *benchmark)
{
	json_t *scopes = json_object_get(doc, "scopes"), *s;
	size_t i;
	*benchmark = 0;
	*content = *build = !scopes || json_is_null(scopes);
	if (*content)
		return 0;
	if (!json_is_array(scopes) || json_array_size(scopes) == 0)
		return -1;
	json_array_foreach(scopes, i, s) {
		const char *v = json_string_value(s);
		if (v && strcmp(v, WEBHOOK_SCOPE_CONTENT) == 0)
			*content = 1;
		else if (v && strcmp(v, WEBHOOK_SCOPE_BUILD) == 0)
			*build = 1;
		else if (v && strcmp(v, WEBHOOK_SCOPE_BENCHMARK) == 0)
			*benchmark = 1;
		else
			return -1;
	}
	return 0;
}

/* The secret given (checked), or a new one in made (then *generated). */
static const char *secret_from_body(json_t *doc, char made[65], int *generated, int *bad)
{
	const char *secret = NULL;
	unsigned char raw[32];
	*generated = *bad = 0;
	if (json_optional_string(doc, "secret", &secret) < 0 ||
	    (secret && (strlen(secret) < SECRET_MIN || strlen(secret) > SECRET_MAX))) {
		*bad = 1;
		return NULL;
	}
	if (secret)
		return secret;
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return NULL;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(made + 2 * i, 3, "%02x", raw[i]);
	*generated = 1;
	return made;
}

static enum MHD_Result handle_create(struct request *req)
{
	const struct repo_record *rec = &req->repo->record;
	const char *url = NULL, *why;
	char made[65];
	int content, build, benchmark, generated, bad;
	int64_t id = 0;
	if (json_optional_string(req->json, "url", &url) < 0 || !url)
		return respond_error(req, 400, NULL, "\"url\" is required: the http or https URL deliveries are POSTed to");
	if ((why = url_refused(url)))
		return respond_error(req, 400, NULL, "%s", why);
	if (scopes_from_body(req->json, &content, &build, &benchmark) < 0)
		return respond_error(req, 400, NULL, "\"scopes\" must be a non-empty array of \"%s\", \"%s\" and \"%s\"",
				     WEBHOOK_SCOPE_CONTENT, WEBHOOK_SCOPE_BUILD, WEBHOOK_SCOPE_BENCHMARK);
	const char *secret = secret_from_body(req->json, made, &generated, &bad);
	if (bad)
		return respond_error(req, 400, NULL, "\"secret\" must be a string of %d to %d bytes", SECRET_MIN,
				     SECRET_MAX);
	if (!secret)
		return respond_error(req, 500, NULL, "cannot make a secret");
	if (db_webhook_create(rec->id, url, secret, content, build, benchmark, req->principal.name, &id) < 0)
		return respond_db_unavailable(req);
	json_t *details = json_pack("{s:I, s:s}", "id", (json_int_t)id, "url", url);
	char *text = json_dumps(details, JSON_COMPACT);
	api_audit(req, "repo.webhook.create", repo_audit_target(req, rec->type, rec->ns, rec->name), text);
	free(text);
	json_decref(details);
	struct db_webhook w = { .id = id, .url = (char *)url, .content = content, .build = build,
				.benchmark = benchmark };
	snprintf(w.created_by, sizeof(w.created_by), "%s", req->principal.name);
	json_t *answer = hook_json(&w);
	json_object_del(answer, "createdAt");
	if (generated)	/* shown this once: it is never answered again */
		json_object_set_new(answer, "secret", json_string(secret));
	return respond_json(req, 201, json_pack("{s:o}", "webhook", answer));
}

/* ---- DELETE …/webhooks/{id}, GET …/webhooks/{id}/deliveries -------------------- */

/* The {id} segment: > 0, else 0. */
static int64_t hook_id(const struct request *req)
{
	char *end;
	long long id = req->nargs ? strtoll(req->args[0], &end, 10) : 0;
	return id > 0 && *end == '\0' ? (int64_t)id : 0;
}

static enum MHD_Result handle_delete(struct request *req)
{
	const struct repo_record *rec = &req->repo->record;
	int64_t id = hook_id(req);
	int rc = id ? db_webhook_delete(rec->id, id) : KHUB_ENOTFOUND;
	if (rc == KHUB_ENOTFOUND)
		return respond_error(req, 404, NULL, "%s/%s has no webhook %s", rec->ns, rec->name, req->args[0]);
	if (rc < 0)
		return respond_db_unavailable(req);
	char details[48];
	snprintf(details, sizeof(details), "{\"id\":%" PRId64 "}", id);
	api_audit(req, "repo.webhook.delete", repo_audit_target(req, rec->type, rec->ns, rec->name), details);
	return respond_json(req, 200, json_pack("{s:I, s:b}", "id", (json_int_t)id, "deleted", 1));
}

static json_t *attempt_json(const struct db_webhook_attempt *a)
{
	return json_pack("{s:I, s:s, s:s, s:i, s:s, s:o, s:I, s:s?}", "delivery", (json_int_t)a->delivery_id, "event",
			 a->event, "state", a->state, "attempt", a->attempt, "time", a->at, "statusCode",
			 a->status_code ? json_integer(a->status_code) : json_null(), "durationMs",
			 (json_int_t)a->duration_ms, "error", a->error);
}

static enum MHD_Result handle_deliveries(struct request *req)
{
	const struct repo_record *rec = &req->repo->record;
	struct db_webhook_attempt *list = NULL;
	size_t n = 0;
	int64_t id = hook_id(req);
	int rc = id ? db_webhook_attempts(rec->id, id, DELIVERIES_MAX, &list, &n) : KHUB_ENOTFOUND;
	if (rc == KHUB_ENOTFOUND)
		return respond_error(req, 404, NULL, "%s/%s has no webhook %s", rec->ns, rec->name, req->args[0]);
	if (rc < 0)
		return respond_db_unavailable(req);
	json_t *items = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(items, attempt_json(&list[i]));
	db_webhook_attempts_free(list, n);
	return respond_json(req, 200, json_pack("{s:o}", "deliveries", items));
}

const struct route webhooks_routes[] = {
	{ METHOD_GET, "/api/{type}/{ns}/{name}/webhooks", handle_list, 0, 0, NULL, ACCESS_REPO_MANAGE },
	{ METHOD_POST, "/api/{type}/{ns}/{name}/webhooks", handle_create, ROUTE_JSON, 0, NULL, ACCESS_REPO_MANAGE },
	{ METHOD_DELETE, "/api/{type}/{ns}/{name}/webhooks/{arg}", handle_delete, 0, 0, NULL, ACCESS_REPO_MANAGE },
	{ METHOD_GET, "/api/{type}/{ns}/{name}/webhooks/{arg}/deliveries", handle_deliveries, 0, 0, NULL,
	  ACCESS_REPO_MANAGE },
	{ 0, NULL, NULL, 0, 0 },
};
