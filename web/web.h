/* web.h -- khub's web UI: pages rendered in C from the templates and
 * static files of web/ (compiled in, or read from web_root), browser
 * sessions opened with a token, and the HTML helpers the pages share. The
 * pages use the API's access checks (api/repo_access.c) and its queries;
 * server/ routes to web_routes after every API table (docs/web-ui.md). */
#ifndef KHUB_WEB_H
#define KHUB_WEB_H

#include "api/api.h"

/* The page table (web/routes.c): every row flagged ROUTE_PAGE. */
extern const struct route web_routes[];

/* What the server tells the web UI: server/config.c binds web_root,
 * web_session_hours and public_url to these fields (at start-up). Strings
 * borrowed. */
struct web_settings {
	const char *root;		/* web_root: "" = compiled-in files */
	int secure_cookies;		/* public_url is https */
	long session_seconds;		/* web_session_hours, in seconds */
};
extern struct web_settings web_settings;
/* The caller of a page request, from its session cookie (anonymous when
 * none or unknown; auth_unavailable when the database cannot say). */
void web_identify(struct request *req);
/* Run a page route: the route's access check (the API's), then its handler;
 * errors are HTML pages. */
enum MHD_Result web_dispatch(struct request *req);
/* api_ctx hooks: the headers of every page answer (CSP, nosniff,
 * frame-ancestors, Referrer-Policy), and errors of page routes as pages. */
size_t web_page_headers(struct request *req, struct answer_header out[PAGE_HEADERS_MAX]);
int web_page_error(struct request *req, int status, const char *message, enum MHD_Result *result);

/* ---- HTML (web/html.c) ----------------------------------------------------- */

/* Append s with & < > " ' escaped: safe in element content and in quoted
 * attribute values. NULL appends nothing. The one escaping function. */
void html_escape(struct strbuf *sb, const char *s);
void html_escape_n(struct strbuf *sb, const char *s, size_t n);

/* 1 when path is a path on this site however a browser reads it: starts
 * with one '/', no control characters or whitespace anywhere (browsers drop
 * them), no "//", no backslash, no malformed or dangerous %-escape. */
int web_local_path_ok(const char *path);

/* ---- Markdown (web/markdown.c) --------------------------------------------- */

/* Where a README's relative URLs point: links to the file browser
 * ("/kernels/ns/name/tree/sha/"), images to the page route that serves a
 * file for the visitor's session ("/kernels/ns/name/-/resolve/sha/"); a NULL
 * base drops relative URLs of its kind. */
struct markdown_bases {
	const char *link;
	const char *image;
};

/* Render a README (GitHub Flavored Markdown: tables, task lists,
 * strikethrough, autolinks) to HTML that is safe to embed: raw HTML is
 * dropped, links are http(s), mailto, fragments or relative, images only
 * from this hub (relative URLs are made absolute with bases; NULL bases =
 * dropped). Appends to out; 0, or -1 when the parser failed. */
int markdown_render_safe(const char *text, size_t len, const struct markdown_bases *bases, struct strbuf *out);

/* ---- Syntax highlighting (web/highlight.c) ---------------------------------- */

/* Append text (len bytes, any bytes) to out as HTML-escaped code, with
 * <span class="tok-kw|str|com|num|meta|key"> around the tokens of lang: the
 * first word of a fence's info string (python, c, cpp, cuda, sh, bash, json,
 * toml and their usual aliases; case-insensitive). 1 when lang is known, 0
 * when not (then the text is only escaped). No <pre>/<code> around it. */
int highlight_code(const char *lang, const char *text, size_t len, struct strbuf *out);

#endif
