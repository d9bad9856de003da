/* assets.c -- the files of web/: templates and /-/static/ files, from the
 * copies compiled into the binary (web/embed_assets.sh), or from web_root
 * on disk while working on the UI. */
#include "web/web_internal.h"

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

enum MHD_Result page_static(struct request *req)
{
	char name[256];
	char *data;
	size_t len;
	if (!req->path || strlen(req->path) > 200)
		return respond_error(req, 404, NULL, "no such file");	/* a page: web_page_error */
	snprintf(name, sizeof(name), "static/%s", req->path);
	if (web_file(name, &data, &len) < 0)
		return respond_error(req, 404, NULL, "no such file");	/* a page: web_page_error */
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", content_type(name));
	answer_body_take(&a, data, len);
	return answer_send(req, &a);
}
