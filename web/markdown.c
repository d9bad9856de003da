/* markdown.c -- READMEs and model cards to HTML with Debian's libcmark-gfm
 * (tables, task lists, strikethrough, autolinks), sanitized: raw HTML is
 * never rendered (cmark's default, safe mode), and every link and image URL
 * is checked against an allow list on the parsed tree before rendering. */
#include "web/web_internal.h"

#include <cmark-gfm.h>
#include <cmark-gfm-core-extensions.h>
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t extensions_once = PTHREAD_ONCE_INIT;

static void register_extensions(void)
{
	cmark_gfm_core_extensions_ensure_registered();
}

enum url_kind { URL_RELATIVE, URL_LOCAL_ABSOLUTE, URL_FRAGMENT, URL_WEB, URL_MAILTO, URL_REFUSED };

/* What a URL is, by its scheme (none: relative). A scheme is letters,
 * digits, + . - before the first ':' that comes before any / ? #. */
static enum url_kind url_kind(const char *url)
{
	if (url[0] == '#')
		return URL_FRAGMENT;
	if (url[0] == '/')
		return url[1] == '/' || url[1] == '\\' ? URL_REFUSED : URL_LOCAL_ABSOLUTE;
	if (url[0] == '\\')
		return URL_REFUSED;
	size_t n = strcspn(url, ":/?#");
	if (url[n] != ':')
		return URL_RELATIVE;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)url[i]) && url[i] != '+' && url[i] != '.' && url[i] != '-')
			return URL_REFUSED;	/* "java\tscript:" and the like */
	if ((n == 4 && strncasecmp(url, "http", 4) == 0) || (n == 5 && strncasecmp(url, "https", 5) == 0))
		return URL_WEB;
	if (n == 6 && strncasecmp(url, "mailto", 6) == 0)
		return URL_MAILTO;
	return URL_REFUSED;	/* javascript:, data:, vbscript:, file:, ... */
}

/* An image URL of this hub's API resolve path, /kernels/NS/NAME/resolve/...,
 * as the page route /kernels/NS/NAME/-/resolve/... (the API ignores the
 * session: a private repo's image would not load); NULL when it is not one. */
static char *image_via_page_route(const char *url)
{
	static const char prefix[] = "/kernels/";
	if (strncmp(url, prefix, sizeof(prefix) - 1) != 0)
		return NULL;
	const char *p = url + sizeof(prefix) - 1;
	for (int segment = 0; segment < 2; segment++) {	/* NS, NAME */
		size_t n = strcspn(p, "/?#");
		if (n == 0 || p[n] != '/')
			return NULL;
		p += n + 1;
	}
	if (strncmp(p, "resolve/", 8) != 0)
		return NULL;
	return xasprintf("%.*s-/%s", (int)(p - url), url, p);
}

/* Links: web, mail, local and fragment URLs; relative ones point into the
 * repo (bases->link). Images: from this hub only; relative ones resolve in
 * the repo (bases->image). */
static void sanitize_node(cmark_node *node, const struct markdown_bases *bases)
{
	int image = cmark_node_get_type(node) == CMARK_NODE_IMAGE;
	const char *url = cmark_node_get_url(node);
	if (!url)
		url = "";
	enum url_kind kind = url_kind(url);
	const char *base = bases ? (image ? bases->image : bases->link) : NULL;
	char *fixed = NULL;
	if (kind == URL_RELATIVE && base && url[0])
		fixed = xasprintf("%s%s", base, strncmp(url, "./", 2) == 0 ? url + 2 : url);
	else if (image && kind == URL_LOCAL_ABSOLUTE)
		fixed = image_via_page_route(url);
	else if (kind == URL_REFUSED || (image && kind != URL_LOCAL_ABSOLUTE) || (kind == URL_RELATIVE && !base))
		fixed = xstrdup("");
	if (fixed) {
		cmark_node_set_url(node, fixed);
		free(fixed);
	}
}

int markdown_render_safe(const char *text, size_t len, const struct markdown_bases *bases, struct strbuf *out)
{
	static const char *const extensions[] = { "table", "tasklist", "strikethrough", "autolink" };
	pthread_once(&extensions_once, register_extensions);
	/* no CMARK_OPT_UNSAFE: raw HTML and javascript:-like URLs are left out
	 * by the renderer as well */
	int options = CMARK_OPT_DEFAULT | CMARK_OPT_VALIDATE_UTF8;
	cmark_parser *parser = cmark_parser_new(options);
	if (!parser)
		return -1;
	for (size_t i = 0; i < sizeof(extensions) / sizeof(extensions[0]); i++) {
		cmark_syntax_extension *ext = cmark_find_syntax_extension(extensions[i]);
		if (ext)
			cmark_parser_attach_syntax_extension(parser, ext);
	}
	cmark_parser_feed(parser, text, len);
	cmark_node *doc = cmark_parser_finish(parser);
	if (!doc) {
		cmark_parser_free(parser);
		return -1;
	}
	cmark_iter *it = cmark_iter_new(doc);
	cmark_event_type ev;
	while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
		cmark_node *node = cmark_iter_get_node(it);
		cmark_node_type type = cmark_node_get_type(node);
		if (ev == CMARK_EVENT_ENTER && (type == CMARK_NODE_LINK || type == CMARK_NODE_IMAGE))
			sanitize_node(node, bases);
	}
	cmark_iter_free(it);
	char *html = cmark_render_html(doc, options, cmark_parser_get_syntax_extensions(parser));
	if (html) {
		strbuf_adds(out, html);
		cmark_get_default_mem_allocator()->free(html);
	}
	cmark_node_free(doc);
	cmark_parser_free(parser);
	return html ? 0 : -1;
}
