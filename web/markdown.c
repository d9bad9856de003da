/* markdown.c -- READMEs and model cards to HTML with Debian's libcmark-gfm
 * (tables, task lists, strikethrough, autolinks), sanitized: raw HTML is
 * never rendered (cmark's default, safe mode), and every link and image URL
 * is checked against an allow list on the parsed tree before rendering.
 * Headings get ids and "#" links, code blocks highlighting, tables and code
 * their own scrolling regions, task-list checkboxes a label: as custom
 * nodes whose HTML is built here from escaped text only. */
#include "web/web_internal.h"

#include <cmark-gfm.h>
#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm-extension_api.h>
#include <stdio.h>
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

/* The nodes the walk changes after it (a cmark tree is not changed while an
 * iterator walks it), in document order. */
struct md_nodes {
	cmark_node **items;
	size_t n, cap;
};

static void md_nodes_push(struct md_nodes *list, cmark_node *node)
{
	if (list->n == list->cap) {
		list->cap = list->cap ? list->cap * 2 : 16;
		list->items = xrealloc(list->items, list->cap * sizeof(*list->items));
	}
	list->items[list->n++] = node;
}

/* Headings beyond this many get no anchor (each new slug is compared with
 * every earlier one); slugs and link labels are cut at these many bytes. */
enum { ANCHORS_MAX = 500, SLUG_MAX = 80, LABEL_MAX = 160 };

/* The plain text of node's descendants (text, code spans, line breaks as
 * spaces), at most LABEL_MAX bytes, cut at a UTF-8 character's start. */
static void node_text(cmark_node *node, struct strbuf *out)
{
	cmark_iter *it = cmark_iter_new(node);
	cmark_event_type ev;
	while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE && out->len < LABEL_MAX) {
		cmark_node *n = cmark_iter_get_node(it);
		cmark_node_type type = cmark_node_get_type(n);
		if (ev != CMARK_EVENT_ENTER)
			continue;
		if (type == CMARK_NODE_TEXT || type == CMARK_NODE_CODE)
			strbuf_adds(out, cmark_node_get_literal(n));
		else if (type == CMARK_NODE_SOFTBREAK || type == CMARK_NODE_LINEBREAK)
			strbuf_adds(out, " ");
	}
	cmark_iter_free(it);
	size_t len = out->len;
	if (len > LABEL_MAX) {
		len = LABEL_MAX;
		while (len > 0 && ((unsigned char)out->buf[len] & 0xc0) == 0x80)
			len--;
	}
	if (out->buf)
		out->buf[out->len = len] = '\0';
}

/* GitHub's slug of a heading's text: lower case, letters, digits, '-' and
 * '_' (any non-ASCII byte is kept: letters of other scripts), a space
 * becomes '-', the rest is dropped. Never an attribute-breaking byte. */
static void slugify(const char *text, struct strbuf *slug)
{
	const unsigned char *p = (const unsigned char *)text;
	while (*p) {
		size_t n = 1;	/* a whole UTF-8 character (cmark validated it) */
		if (*p >= 0xc0)
			while (n < 4 && (p[n] & 0xc0) == 0x80)
				n++;
		if (slug->len + n > SLUG_MAX)
			break;
		if (*p >= 0x80)
			strbuf_add(slug, p, n);
		else if (isalnum(*p) || *p == '-' || *p == '_') {
			char c = (char)tolower(*p);
			strbuf_add(slug, &c, 1);
		} else if (*p == ' ')
			strbuf_adds(slug, "-");
		p += n;
	}
	if (slug->len == 0)
		strbuf_adds(slug, "section");
}

/* slug made unique among used[0..n): "usage", "usage-1", "usage-2"... as
 * GitHub does. The caller owns the result. */
static char *slug_unique(const char *slug, char **used, size_t n)
{
	char *id = xstrdup(slug);
	for (unsigned k = 1;; k++) {
		size_t i = 0;
		while (i < n && strcmp(used[i], id) != 0)
			i++;
		if (i == n)
			return id;
		free(id);
		id = xasprintf("%s-%u", slug, k);
	}
}

/* Replace node with a block that renders open, node's children, close. */
static void wrap_children(cmark_node *node, const char *open, const char *close)
{
	cmark_node *block = cmark_node_new(CMARK_NODE_CUSTOM_BLOCK);
	cmark_node_set_on_enter(block, open);
	cmark_node_set_on_exit(block, close);
	cmark_node *child;
	while ((child = cmark_node_first_child(node)))
		cmark_node_append_child(block, child);
	cmark_node_insert_before(node, block);
	cmark_node_free(node);
}

/* <div class="heading"><hN id="slug">...</hN><a class="anchor"
 * href="#slug">#</a></div>: the id and link from the text, escaped. */
static void heading_anchor(cmark_node *heading, char **used, size_t *n_used)
{
	struct strbuf text = STRBUF_INIT, slug = STRBUF_INIT, open = STRBUF_INIT, close = STRBUF_INIT;
	int level = cmark_node_get_heading_level(heading);
	node_text(heading, &text);
	slugify(text.buf ? text.buf : "", &slug);
	char *id = slug_unique(slug.buf, used, *n_used);
	strbuf_addf(&open, "<div class=\"heading\"><h%d id=\"", level);
	html_escape(&open, id);
	strbuf_adds(&open, "\">");
	strbuf_addf(&close, "</h%d><a class=\"anchor\" href=\"#", level);
	html_escape(&close, id);
	strbuf_adds(&close, "\" aria-label=\"Link to this section: ");
	html_escape(&close, text.buf ? text.buf : id);
	strbuf_adds(&close, "\">#</a></div>");
	wrap_children(heading, open.buf, close.buf);
	used[(*n_used)++] = id;
	strbuf_release(&text);
	strbuf_release(&slug);
	strbuf_release(&open);
	strbuf_release(&close);
}

/* A fenced or indented code block, highlighted (web/highlight.c) in a
 * region that scrolls on its own and takes the keyboard focus. */
static void code_block(cmark_node *node, unsigned number)
{
	const char *info = cmark_node_get_fence_info(node);
	const char *code = cmark_node_get_literal(node);
	size_t lang_len = info ? strcspn(info, " \t") : 0;
	char *lang = xasprintf("%.*s", (int)lang_len, info ? info : "");
	struct strbuf html = STRBUF_INIT;
	strbuf_addf(&html, "<pre class=\"code\" tabindex=\"0\" role=\"region\" aria-label=\"Code block %u", number);
	if (lang[0]) {
		strbuf_adds(&html, ", ");
		html_escape(&html, lang);
	}
	strbuf_adds(&html, "\"><code");
	if (lang[0]) {
		strbuf_adds(&html, " class=\"language-");
		html_escape(&html, lang);
		strbuf_adds(&html, "\"");
	}
	strbuf_adds(&html, ">");
	highlight_code(lang, code ? code : "", code ? strlen(code) : 0, &html);
	strbuf_adds(&html, "</code></pre>");
	cmark_node *block = cmark_node_new(CMARK_NODE_CUSTOM_BLOCK);
	cmark_node_set_on_enter(block, html.buf);
	cmark_node_insert_before(node, block);
	cmark_node_free(node);
	strbuf_release(&html);
	free(lang);
}

/* A GFM table in a region of its own that scrolls sideways. */
static void table_region(cmark_node *table, unsigned number)
{
	char open[128];
	snprintf(open, sizeof(open), "<div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Table %u\">",
		 number);
	cmark_node *block = cmark_node_new(CMARK_NODE_CUSTOM_BLOCK);
	cmark_node_set_on_enter(block, open);
	cmark_node_set_on_exit(block, "</div>");
	cmark_node_insert_before(table, block);
	cmark_node_append_child(block, table);
}

/* A task-list item: its checkbox inside a <label> with the item's text
 * (the extension's bare <input> has no accessible name). */
static void task_item(cmark_node *item)
{
	int checked = cmark_gfm_extensions_get_tasklist_item_checked(item);
	cmark_node_set_syntax_extension(item, NULL);	/* a plain <li> */
	const char *open = checked ? "<label class=\"task\"><input type=\"checkbox\" disabled checked> "
				   : "<label class=\"task\"><input type=\"checkbox\" disabled> ";
	cmark_node *para = cmark_node_first_child(item);
	cmark_node *label = cmark_node_new(CMARK_NODE_CUSTOM_INLINE);
	cmark_node_set_on_enter(label, open);
	cmark_node_set_on_exit(label, "</label>");
	if (para && cmark_node_get_type(para) == CMARK_NODE_PARAGRAPH) {
		cmark_node *child;
		while ((child = cmark_node_first_child(para)))
			cmark_node_append_child(label, child);
		cmark_node_append_child(para, label);
	} else {
		para = cmark_node_new(CMARK_NODE_PARAGRAPH);
		cmark_node_append_child(para, label);
		cmark_node_prepend_child(item, para);
	}
}

/* A node of the GFM extension that names its type so (a table, a task-list
 * item); core nodes are never one. */
static int extension_node(cmark_node *node, const char *type)
{
	return cmark_node_get_syntax_extension(node) && strcmp(cmark_node_get_type_string(node), type) == 0;
}

/* Anchors, highlighted code, table regions and labelled checkboxes, on the
 * nodes the walk collected. */
static void md_decorate(struct md_nodes *list)
{
	char **used = xcalloc(ANCHORS_MAX, sizeof(*used));
	size_t n_used = 0;
	unsigned codes = 0, tables = 0;
	for (size_t i = 0; i < list->n; i++) {
		cmark_node *node = list->items[i];
		cmark_node_type type = cmark_node_get_type(node);
		if (type == CMARK_NODE_HEADING && n_used < ANCHORS_MAX)
			heading_anchor(node, used, &n_used);
		else if (type == CMARK_NODE_CODE_BLOCK)
			code_block(node, ++codes);
		else if (extension_node(node, "table"))
			table_region(node, ++tables);
		else if (extension_node(node, "tasklist"))
			task_item(node);
	}
	for (size_t i = 0; i < n_used; i++)
		free(used[i]);
	free(used);
}

/* Check every URL (sanitize_node); note the nodes md_decorate changes. */
static void md_walk(cmark_node *doc, const struct markdown_bases *bases, struct md_nodes *list)
{
	cmark_iter *it = cmark_iter_new(doc);
	cmark_event_type ev;
	while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
		cmark_node *node = cmark_iter_get_node(it);
		cmark_node_type type = cmark_node_get_type(node);
		if (ev != CMARK_EVENT_ENTER)
			continue;
		if (type == CMARK_NODE_LINK || type == CMARK_NODE_IMAGE)
			sanitize_node(node, bases);
		else if (type == CMARK_NODE_HEADING || type == CMARK_NODE_CODE_BLOCK || extension_node(node, "table") ||
			 extension_node(node, "tasklist"))
			md_nodes_push(list, node);
	}
	cmark_iter_free(it);
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
	struct md_nodes list = { NULL, 0, 0 };
	md_walk(doc, bases, &list);
	md_decorate(&list);
	free(list.items);
	char *html = cmark_render_html(doc, options, cmark_parser_get_syntax_extensions(parser));
	if (html) {
		strbuf_adds(out, html);
		cmark_get_default_mem_allocator()->free(html);
	}
	cmark_node_free(doc);
	cmark_parser_free(parser);
	return html ? 0 : -1;
}
