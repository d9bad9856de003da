/* test_web_html.c -- the web UI's one HTML escaping function and its
 * sanitizing Markdown renderer: hostile READMEs render inert. */
#include "web/web.h"
#include "tap.h"

#include <stdlib.h>

static char *escape(const char *s)
{
	struct strbuf sb = STRBUF_INIT;
	html_escape(&sb, s);
	return sb.buf ? strbuf_detach(&sb, NULL) : xstrdup("");
}

static char *md(const char *text, const char *base)
{
	struct strbuf sb = STRBUF_INIT;
	if (markdown_render_safe(text, strlen(text), base, &sb) < 0) {
		strbuf_release(&sb);
		return xstrdup("(failed)");
	}
	return sb.buf ? strbuf_detach(&sb, NULL) : xstrdup("");
}

static int has(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

int main(void)
{
	char *s;
	s = escape("<script>alert('x')</script> & \"q\"");
	is_str(s, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;", "every special character");
	free(s);
	s = escape("plain text, ünïcode ✓");
	is_str(s, "plain text, ünïcode ✓", "other bytes unchanged");
	free(s);
	s = escape("");
	is_str(s, "", "empty string");
	free(s);
	struct strbuf sb = STRBUF_INIT;
	html_escape(&sb, NULL);
	ok(sb.len == 0, "NULL appends nothing");
	html_escape_n(&sb, "a\0<b", 4);
	is_str(sb.buf, "a\xef\xbf\xbd&lt;b", "a NUL byte becomes U+FFFD, the rest is escaped");
	strbuf_release(&sb);
	s = escape("\" onmouseover=\"alert(1)");
	ok(!has(s, "\""), "no quote survives: attribute values cannot be closed");
	free(s);

	/* Markdown: what a README may do */
	s = md("# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n- [ ] todo\n\n~~old~~\n", NULL);
	ok(has(s, "<h1>Title</h1>"), "headings");
	ok(has(s, "<table>") && has(s, "<td>1</td>"), "GFM tables");
	ok(has(s, "type=\"checkbox\"") && has(s, "checked=\"\""), "task lists");
	ok(has(s, "<del>old</del>"), "strikethrough");
	free(s);

	/* and what it may not */
	s = md("<script>alert(1)</script>\n\nhello <img src=x onerror=alert(1)> <b onclick=\"x()\">b</b>\n\n"
	       "<iframe src=\"https://evil\"></iframe>\n", NULL);
	ok(!has(s, "<script") && !has(s, "<img") && !has(s, "<b ") && !has(s, "<iframe") && !has(s, "onerror") &&
	   !has(s, "onclick"), "raw HTML, blocks and inline, never reaches the page");
	ok(has(s, "hello"), "the text around it stays");
	free(s);
	s = md("[a](javascript:alert(1)) [b](JavaScript:alert(1)) [c](java\tscript:alert(1)) "
	       "[d](data:text/html;base64,PHNjcmlwdD4=) [e](vbscript:x) [f](file:///etc/passwd)\n", NULL);
	ok(!has(s, "javascript:") && !has(s, "JavaScript:") && !has(s, "data:") && !has(s, "vbscript:") &&
	   !has(s, "file:"), "javascript:, data:, vbscript: and file: links are emptied");
	free(s);
	s = md("<javascript:alert(1)> [ok](https://example.com/x) [mail](mailto:a@b.c) [frag](#usage) "
	       "[rel](docs/a.md)\n", "/kernels/acme/relu/resolve/abc/");
	ok(!has(s, "href=\"javascript:"), "autolinks with a bad scheme are emptied (their text stays text)");
	ok(has(s, "href=\"https://example.com/x\""), "https links kept");
	ok(has(s, "href=\"mailto:a@b.c\""), "mailto links kept");
	ok(has(s, "href=\"#usage\""), "fragments kept");
	ok(has(s, "href=\"/kernels/acme/relu/resolve/abc/docs/a.md\""), "relative links point into the repo");
	free(s);
	s = md("![ext](https://evil.example/track.png) ![data](data:image/png;base64,AAAA) "
	       "![proto](//evil.example/x.png) ![local](/kernels/acme/relu/resolve/abc/img.png) ![rel](./plot.png)\n",
	       "/kernels/acme/relu/resolve/abc/");
	ok(!has(s, "evil.example") && !has(s, "data:"), "images from elsewhere are dropped");
	ok(has(s, "src=\"/kernels/acme/relu/resolve/abc/img.png\""), "same-hub images kept");
	ok(has(s, "src=\"/kernels/acme/relu/resolve/abc/plot.png\""), "relative images resolved in the repo");
	free(s);
	s = md("[x](docs/a.md)\n", NULL);
	ok(!has(s, "docs/a.md"), "relative links without a base are emptied");
	free(s);

	/* a 10,000-row table renders, bounded and inert */
	struct strbuf big = STRBUF_INIT;
	strbuf_adds(&big, "| n | html |\n|---|---|\n");
	for (int i = 0; i < 10000; i++)
		strbuf_addf(&big, "| %d | <script>x()</script> |\n", i);
	s = md(big.buf, NULL);
	ok(has(s, "<td>9999</td>") && !has(s, "<script"), "a 10,000-row table renders without its raw HTML");
	free(s);
	strbuf_release(&big);
	return done_testing();
}
