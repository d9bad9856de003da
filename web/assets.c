/* assets.c -- the files of web/: templates and /-/static/ files, from the
 * copies compiled into the binary (web/embed_assets.sh), or from web_root
 * on disk while working on the UI. */
#include "web/web_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct web_settings web_settings = { "", 0, 7 * 86400 };

/* Where a compiled-in name lives under web_root: the chart library comes
 * from web/node_modules/, the rest from web/ itself. */
static char *disk_path(const char *name)
{
	if (strcmp(name, "static/vendor/uPlot-LICENSE.txt") == 0)
		return xasprintf("%s/node_modules/uplot/LICENSE", web_settings.root);
	if (strncmp(name, "static/vendor/", 14) == 0)
		return xasprintf("%s/node_modules/uplot/dist/%s", web_settings.root, name + 14);
	return xasprintf("%s/%s", web_settings.root, name);
}

/* Names are only ever those of the compiled-in table: nothing else under
 * web_root (or outside it) can be asked for. */
static const struct web_asset *asset_find(const char *name)
{
	for (size_t i = 0; i < web_asset_count; i++)
		if (strcmp(web_assets[i].name, name) == 0)
			return &web_assets[i];
	return NULL;
}

int web_file(const char *name, char **data, size_t *len)
{
	const struct web_asset *a = asset_find(name);
	if (!a)
		return KHUB_ENOTFOUND;
	if (web_settings.root[0]) {
		char *path = disk_path(name);
		char *text = read_file_limited(path, 8u << 20, len);
		free(path);
		if (text) {
			*data = text;
			return 0;
		}
		log_warn("web_root: cannot read %s, serving the compiled-in copy", name);
	}
	*data = xmalloc(a->len + 1);
	memcpy(*data, a->data, a->len);
	(*data)[a->len] = '\0';
	*len = a->len;
	return 0;
}

static const char *content_type(const char *name)
{
	static const struct { const char *ext, *type; } types[] = {
		{ ".css", "text/css; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
		{ ".svg", "image/svg+xml" }, { ".html", "text/html; charset=utf-8" },
		{ ".txt", "text/plain; charset=utf-8" },
	};
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return "application/octet-stream";
}

/* What start-up computes once per compiled-in file of static/: its
 * content-hashed name and URL, its ETags, and its gzipped bytes. */
struct asset_version {
	char hash[13];			/* the first 12 hex digits of its SHA-256 */
	char *hashed;			/* "khub.<hash>.css", under static/ */
	char *url;			/* "/-/static/khub.<hash>.css" */
	char etag[20], etag_gz[24];	/* "\"<hash>\"", "\"<hash>-gz\"" */
	char *gz;			/* NULL: not text, or too small to gain */
	size_t gz_len;
};
static struct asset_version *versions;	/* [web_asset_count], never freed */
static pthread_once_t versions_once = PTHREAD_ONCE_INIT;

static void version_one(const struct web_asset *a, struct asset_version *v)
{
	char hex[65];
	sha256_hex(a->data, a->len, hex);
	memcpy(v->hash, hex, 12);
	v->hash[12] = '\0';
	const char *base = a->name + 7;	/* after "static/" */
	const char *dot = strrchr(base, '.');
	if (dot && !strchr(dot, '/'))
		v->hashed = xasprintf("%.*s.%s%s", (int)(dot - base), base, v->hash, dot);
	else
		v->hashed = xasprintf("%s.%s", base, v->hash);
	v->url = xasprintf("/-/static/%s", v->hashed);
	snprintf(v->etag, sizeof(v->etag), "\"%s\"", v->hash);
	snprintf(v->etag_gz, sizeof(v->etag_gz), "\"%s-gz\"", v->hash);
	const char *type = content_type(a->name);
	if (a->len >= 1024 && (strncmp(type, "text/", 5) == 0 || strcmp(type, "image/svg+xml") == 0) &&
	    http_gzip(a->data, a->len, &v->gz, &v->gz_len) == 0 && v->gz_len >= a->len) {
		free(v->gz);
		v->gz = NULL;
	}
}

static void versions_init(void)
{
	versions = xcalloc(web_asset_count, sizeof(*versions));
	for (size_t i = 0; i < web_asset_count; i++)
		if (strncmp(web_assets[i].name, "static/", 7) == 0)
			version_one(&web_assets[i], &versions[i]);
}

const char *web_static_url(const char *static_name)
{
	pthread_once(&versions_once, versions_init);
	for (size_t i = 0; i < web_asset_count; i++)
		if (versions[i].hashed && strcmp(web_assets[i].name + 7, static_name) == 0)
			return versions[i].url;
	return NULL;
}

/* The compiled-in file a path under /-/static/ names: its plain name, or
 * its content-hashed one (*hashed = 1). -1 when none. */
static long static_index(const char *path, int *hashed)
{
	pthread_once(&versions_once, versions_init);
	for (size_t i = 0; i < web_asset_count; i++) {
		if (!versions[i].hashed)
			continue;
		*hashed = strcmp(versions[i].hashed, path) == 0;
		if (*hashed || strcmp(web_assets[i].name + 7, path) == 0)
			return (long)i;
	}
	return -1;
}

/* Whether If-None-Match names this file's ETag (either encoding's). */
static int not_modified(struct request *req, const struct asset_version *v)
{
	const char *inm = request_header(req, "If-None-Match");
	return inm && (strcmp(inm, "*") == 0 || strstr(inm, v->hash));
}

/* Answer compiled-in file i with cache_control: 304 when the client holds
 * it, else its bytes, gzipped when the client allows it. */
static enum MHD_Result send_asset(struct request *req, size_t i, const char *cache_control)
{
	const struct web_asset *f = &web_assets[i];
	const struct asset_version *v = &versions[i];
	int gz = v->gz && http_accepts_gzip(req);
	struct answer a;
	answer_init(&a, not_modified(req, v) ? 304 : 200);
	answer_header(&a, "Cache-Control", cache_control);
	answer_header(&a, "ETag", gz ? v->etag_gz : v->etag);
	if (v->gz)
		answer_header(&a, "Vary", "Accept-Encoding");
	if (a.status == 304)
		return answer_send(req, &a);
	answer_header(&a, "Content-Type", content_type(f->name));
	if (gz) {
		answer_header(&a, "Content-Encoding", "gzip");
		answer_body_static(&a, v->gz, v->gz_len);
	} else {
		answer_body_static(&a, (const char *)f->data, f->len);
	}
	return answer_send(req, &a);
}

/* A file read from web_root (working on the UI): never kept by browsers. */
static enum MHD_Result send_from_disk(struct request *req, const char *name)
{
	char *data;
	size_t len;
	if (web_file(name, &data, &len) < 0)
		return respond_error(req, 404, NULL, "no such file");	/* a page: web_page_error */
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", content_type(name));
	answer_header(&a, "Cache-Control", "no-cache");
	answer_body_take(&a, data, len);
	return answer_send(req, &a);
}

enum MHD_Result page_static(struct request *req)
{
	int hashed = 0;
	long i = req->path ? static_index(req->path, &hashed) : -1;
	if (i < 0)
		return respond_error(req, 404, NULL, "no such file");	/* a page: web_page_error */
	if (web_settings.root[0])
		return send_from_disk(req, web_assets[i].name);
	/* a hashed URL names these bytes forever; the plain one is revalidated */
	return send_asset(req, (size_t)i, hashed ? "public, max-age=31536000, immutable" : "public, no-cache");
}

enum MHD_Result page_favicon(struct request *req)
{
	int hashed;
	long i = static_index("favicon.svg", &hashed);
	if (i < 0)
		return respond_error(req, 404, NULL, "no such file");
	return send_asset(req, (size_t)i, "public, max-age=86400");
}
