/* html.c -- building a page: the one HTML escaping function, the layout
 * template, the headers every page carries, redirects and error pages. */
#include "web/web_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void html_escape_n(struct strbuf *sb, const char *s, size_t n)
{
	if (!s)
		return;
	size_t start = 0;
	for (size_t i = 0; i < n; i++) {
		const char *rep = NULL;
		switch (s[i]) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		case '\0': rep = "\xef\xbf\xbd"; break;	/* U+FFFD: no NUL reaches the page */
		default: continue;
		}
		strbuf_add(sb, s + start, i - start);
		strbuf_adds(sb, rep);
		start = i + 1;
	}
	strbuf_add(sb, s + start, n - start);
}

void html_escape(struct strbuf *sb, const char *s)
{
	if (s)
		html_escape_n(sb, s, strlen(s));
}

void page_init(struct page *pg, struct request *req, const char *title)
{
	memset(pg, 0, sizeof(*pg));
	pg->req = req;
	pg->title = xstrdup(title);
	strbuf_init(&pg->main);
	strbuf_init(&pg->head);
}

void page_release(struct page *pg)
{
	strbuf_release(&pg->main);
	strbuf_release(&pg->head);
	free(pg->title);
	pg->title = NULL;
}

void page_text(struct page *pg, const char *text)
{
	html_escape(&pg->main, text);
}

void page_html(struct page *pg, const char *html)
{
	strbuf_adds(&pg->main, html);
}

void page_htmlf(struct page *pg, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&pg->main, fmt, ap);
	va_end(ap);
}

void page_account_link(struct page *pg, const char *name)
{
	page_html(pg, "<a href=\"/");
	page_text(pg, name);
	page_html(pg, "\">");
	page_text(pg, name);
	page_html(pg, "</a>");
}

void page_cell(struct page *pg, const char *open, const char *text)
{
	page_html(pg, open);
	page_text(pg, text ? text : "");
	page_html(pg, strncmp(open, "<th", 3) == 0 ? "</th>" : "</td>");
}

void page_csrf_field(struct page *pg)
{
	char csrf[65];
	web_csrf_token(pg->req, csrf);
	page_htmlf(pg, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", csrf);
}

/* A static file's URL, escaped: its content-hashed one (cached for good) */
static void static_url(struct strbuf *out, const char *static_name)
{
	const char *url = web_static_url(static_name);
	if (!url)
		strbuf_adds(out, "/-/static/");
	html_escape(out, url ? url : static_name);
}

void page_script(struct page *pg, const char *static_name)
{
	strbuf_adds(&pg->head, "<script type=\"module\" src=\"");
	static_url(&pg->head, static_name);
	strbuf_adds(&pg->head, "\"></script>\n");
}

void page_style(struct page *pg, const char *static_name)
{
	strbuf_adds(&pg->head, "<link rel=\"stylesheet\" href=\"");
	static_url(&pg->head, static_name);
	strbuf_adds(&pg->head, "\">\n");
}

/* The navigation: who is signed in, their pages, sign out (a POST). */
static void render_nav(struct page *pg, struct strbuf *nav)
{
	const struct principal *p = &pg->req->principal;
	if (!p->user_id) {
		strbuf_adds(nav, "<a href=\"/login\">Sign in</a>");
		return;
	}
	strbuf_adds(nav, "<a href=\"/");
	html_escape(nav, p->name);
	strbuf_adds(nav, "\">");
	html_escape(nav, p->name);
	strbuf_adds(nav, "</a><a href=\"/settings/tokens\">Tokens</a>");
	if (p->is_site_admin)
		strbuf_adds(nav, "<a href=\"/admin\">Admin</a>");
	char csrf[65];
	web_csrf_token(pg->req, csrf);
	strbuf_addf(nav, "<form class=\"inline\" method=\"post\" action=\"/logout\"><input type=\"hidden\" "
			 "name=\"csrf\" value=\"%s\"><button type=\"submit\">Sign out</button></form>", csrf);
}

/* Fill {{key}} slots of a template; values are HTML already. */
static void fill_template(struct strbuf *out, const char *tpl, size_t len, const char *const *keys,
			  const char *const *values, size_t n)
{
	const char *p = tpl, *end = tpl + len;
	while (p < end) {
		const char *open = memmem(p, (size_t)(end - p), "{{", 2);
		if (!open) {
			strbuf_add(out, p, (size_t)(end - p));
			break;
		}
		strbuf_add(out, p, (size_t)(open - p));
		const char *close = memmem(open + 2, (size_t)(end - open - 2), "}}", 2);
		if (!close) {
			strbuf_add(out, open, (size_t)(end - open));
			break;
		}
		size_t klen = (size_t)(close - open - 2);
		for (size_t i = 0; i < n; i++)
			if (strlen(keys[i]) == klen && memcmp(keys[i], open + 2, klen) == 0)
				strbuf_adds(out, values[i]);
		p = close + 2;
	}
}

static enum MHD_Result send_html(struct request *req, int status, struct strbuf *html, const char *set_cookie)
{
	struct answer a;
	answer_init(&a, status);
	answer_header(&a, "Content-Type", "text/html; charset=utf-8");
	if (set_cookie)
		answer_header(&a, "Set-Cookie", set_cookie);
	if (status == 503)	/* passing (the database): retry, as the API's 503s say */
		answer_header(&a, "Retry-After", "2");
	size_t len;
	char *text = strbuf_detach(html, &len);
	answer_body_take(&a, text, len);
	return answer_send(req, &a);
}

enum MHD_Result page_send(struct page *pg, int status)
{
	return page_send_cookie(pg, status, NULL);
}

enum MHD_Result page_send_cookie(struct page *pg, int status, const char *set_cookie)
{
	char *tpl = NULL;
	size_t tpl_len = 0;
	struct strbuf out = STRBUF_INIT, title = STRBUF_INIT, nav = STRBUF_INIT;
	struct request *req = pg->req;
	if (web_file("templates/layout.html", &tpl, &tpl_len) < 0) {
		page_release(pg);
		return respond_error(req, 500, NULL, "the web UI's layout template is missing");
	}
	html_escape(&title, pg->title);
	render_nav(pg, &nav);
	static const char *const keys[] = { "title", "head", "nav", "main", "css", "icon" };
	const char *css = web_static_url("khub.css"), *icon = web_static_url("favicon.svg");
	const char *values[] = { title.buf ? title.buf : "", pg->head.buf ? pg->head.buf : "",
				 nav.buf ? nav.buf : "", pg->main.buf ? pg->main.buf : "",
				 css ? css : "/-/static/khub.css", icon ? icon : "/favicon.ico" };
	fill_template(&out, tpl, tpl_len, keys, values, 6);
	free(tpl);
	strbuf_release(&title);
	strbuf_release(&nav);
	page_release(pg);
	return send_html(req, status, &out, set_cookie);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Whether one byte of a local path is allowed as is: printable ASCII
 * without space, backslash and the characters a browser would escape or
 * read as something else. Browsers drop tabs and line breaks anywhere in
 * a URL and trim spaces and control characters, so "/\t/evil.example" is
 * "//evil.example" to them: none of those may appear at all. */
static int local_path_byte_ok(unsigned char c)
{
	return c > 0x20 && c < 0x7f && !strchr("\\\"<>`{}|^", c);
}

int web_local_path_ok(const char *path)
{
	if (!path || path[0] != '/' || strlen(path) > 2048)
		return 0;
	for (size_t i = 0; path[i]; i++) {
		unsigned char c = (unsigned char)path[i];
		if (!local_path_byte_ok(c) || (c == '/' && path[i + 1] == '/'))
			return 0;
		if (c != '%')
			continue;
		/* an escape must be well formed and decode to a byte that is
		 * allowed as is: no encoded control, space or backslash, and no
		 * encoded slash right after the first (/%2F/evil.example) */
		int hi = hex_digit(path[i + 1]), lo = hi < 0 ? -1 : hex_digit(path[i + 2]);
		if (lo < 0)
			return 0;
		unsigned char d = (unsigned char)(hi * 16 + lo);
		if ((d < 0x80 && !local_path_byte_ok(d)) || (d == '/' && i == 1))
			return 0;
	}
	return 1;
}

enum MHD_Result web_redirect(struct request *req, const char *location, const char *set_cookie)
{
	/* only local paths: no open redirect through ?next= */
	if (!web_local_path_ok(location))
		location = "/";
	struct answer a;
	answer_init(&a, 303);
	answer_redirect(&a, 303, location);
	if (set_cookie)
		answer_header(&a, "Set-Cookie", set_cookie);
	return answer_send(req, &a);
}

enum MHD_Result web_error_page(struct request *req, int status, const char *message)
{
	struct page pg;
	const char *title = status == 404 ? "Not found" : status == 401 ? "Sign in required" :
			    status == 403 ? "Not allowed" : status >= 500 ? "Server problem" : "Bad request";
	page_init(&pg, req, title);
	page_html(&pg, "<section class=\"error\"><h1>");
	page_text(&pg, title);
	page_htmlf(&pg, " <span class=\"status\">(%d)</span></h1><p>", status);
	page_text(&pg, status == 404 ? "There is nothing here, or you may not see it." : message);
	page_html(&pg, "</p>");
	if (status == 401 || (status == 404 && !req->principal.user_id)) {
		page_html(&pg, "<p><a href=\"/login?next=");
		struct strbuf next = STRBUF_INIT;
		strbuf_add_urlencoded(&next, req->log_path ? req->log_path : "/", 1);
		html_escape(&pg.main, next.buf);
		strbuf_release(&next);
		page_html(&pg, "\">Sign in</a> to see more.</p>");
	}
	page_html(&pg, "<p><a href=\"/kernels\">Browse kernels</a></p></section>");
	return page_send(&pg, status);
}

const char web_db_unavailable_text[] = "The database is unavailable; try again shortly.";

enum MHD_Result web_db_unavailable(struct request *req)
{
	return web_error_page(req, 503, web_db_unavailable_text);
}

void page_db_problem(struct page *pg)
{
	page_html(pg, "<p class=\"problem\">");
	page_text(pg, web_db_unavailable_text);
	page_html(pg, "</p>");
}

void format_size(uint64_t n, char out[32])
{
	static const char *const units[] = { "B", "kB", "MB", "GB", "TB" };
	double v = (double)n;
	size_t u = 0;
	while (v >= 1000 && u < 4) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(out, 32, "%llu B", (unsigned long long)n);
	else
		snprintf(out, 32, "%.1f %s", v, units[u]);
}

void format_day(time_t t, char out[32])
{
	struct tm tm;
	if (!t || !gmtime_r(&t, &tm)) {
		snprintf(out, 32, "never");
		return;
	}
	strftime(out, 32, "%Y-%m-%d", &tm);
}
