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

#define TREE "/kernels/acme/relu/tree/abc/"
#define FILES "/kernels/acme/relu/-/resolve/abc/"

/* Render text; with_bases: links into TREE, images from FILES. */
static char *md(const char *text, int with_bases)
{
	static const struct markdown_bases bases = { TREE, FILES };
	struct strbuf sb = STRBUF_INIT;
	if (markdown_render_safe(text, strlen(text), with_bases ? &bases : NULL, &sb) < 0) {
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
	html_escape(&sb, 0);
	ok(sb.len == 0, "NULL appends nothing");
	html_escape_n(&sb, "a\0<b", 4);
	is_str(sb.buf, "a\xef\xbf\xbd&lt;b", "a NUL byte becomes U+FFFD, the rest is escaped");
	strbuf_release(&sb);
	s = escape("\" onmouseover=\"alert(1)");
	ok(!has(s, "\""), "no quote survives: attribute values cannot be closed");
	free(s);

	/* Markdown: what a README may do */
	s = md("# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n- [ ] todo\n\n~~old~~\n", 0);
	ok(has(s, "<h1>Title</h1>"), "headings");
	ok(has(s, "<table>") && has(s, "<td>1</td>"), "GFM tables");
	ok(has(s, "type=\"checkbox\"") && has(s, "checked=\"\""), "task lists");
	ok(has(s, "<del>old</del>"), "strikethrough");
	free(s);

	/* and what it may not */
	s = md("<script>alert(1)</script>\n\nhello <img src=x onerror=alert(1)> <b onclick=\"x()\">b</b>\n\n"
	       "<iframe src=\"https://evil\"></iframe>\n", 0);
	ok(!has(s, "<script") && !has(s, "<img") && !has(s, "<b ") && !has(s, "<iframe") && !has(s, "onerror") &&
	   !has(s, "onclick"), "raw HTML, blocks and inline, never reaches the page");
	ok(has(s, "hello"), "the text around it stays");
	free(s);
	s = md("[a](javascript:alert(1)) [b](JavaScript:alert(1)) [c](java\tscript:alert(1)) "
	       "[d](data:text/html;base64,PHNjcmlwdD4=) [e](vbscript:x) [f](file:///etc/passwd)\n", 0);
	ok(!has(s, "javascript:") && !has(s, "JavaScript:") && !has(s, "data:") && !has(s, "vbscript:") &&
	   !has(s, "file:"), "javascript:, data:, vbscript: and file: links are emptied");
	free(s);
	s = md("<javascript:alert(1)> [ok](https://example.com/x) [mail](mailto:a@b.c) [frag](#usage) "
	       "[rel](docs/a.md)\n", 1);
	ok(!has(s, "href=\"javascript:"), "autolinks with a bad scheme are emptied (their text stays text)");
	ok(has(s, "href=\"https://example.com/x\""), "https links kept");
	ok(has(s, "href=\"mailto:a@b.c\""), "mailto links kept");
	ok(has(s, "href=\"#usage\""), "fragments kept");
	ok(has(s, "href=\"" TREE "docs/a.md\""), "relative links open the file browser");
	free(s);
	s = md("![ext](https://evil.example/track.png) ![data](data:image/png;base64,AAAA) "
	       "![proto](//evil.example/x.png) ![local](/kernels/acme/relu/resolve/abc/img.png) ![rel](./plot.png)\n",
	       1);
	ok(!has(s, "evil.example") && !has(s, "data:"), "images from elsewhere are dropped");
	ok(has(s, "src=\"/kernels/acme/relu/-/resolve/abc/img.png\""),
	   "same-hub images of the API's resolve path come from the page route");
	ok(has(s, "src=\"" FILES "plot.png\""), "relative images come from the page route (the session, no download)");
	free(s);
	s = md("![a](/kernels/acme/relu/-/resolve/main/a.png) ![b](/kernels/acme/relu/tree/main/b.png) "
	       "![c](/kernels/acme/resolve/main/c.png) ![d](/kernels/a/b/resolve) [l](/kernels/acme/relu/resolve/main/l.md)\n", 0);
	ok(has(s, "src=\"/kernels/acme/relu/-/resolve/main/a.png\"") && has(s, "src=\"/kernels/acme/relu/tree/main/b.png\"") &&
	   has(s, "src=\"/kernels/acme/resolve/main/c.png\"") && has(s, "src=\"/kernels/a/b/resolve\"") &&
	   has(s, "href=\"/kernels/acme/relu/resolve/main/l.md\""), "other local URLs and links are left as they are");
	free(s);
	s = md("[x](docs/a.md)\n", 0);
	ok(!has(s, "docs/a.md"), "relative links without a base are emptied");
	free(s);

	/* ?next= of the sign-in page: what a browser could read as another host */
	static const char *const foreign[] = {
		"//evil.example/x", "/\\evil.example/x", "\\\\evil.example", "/\t/evil.example/x", "\t//evil.example",
		"/\n/evil.example", "/\r/evil.example", " //evil.example", "/ /evil.example", "/%2F/evil.example",
		"/%2f/evil.example", "/%5Cevil.example", "/%5cevil.example", "/%09/evil.example", "/%0a/evil.example",
		"/%00", "/%", "/%g0", "https://evil.example/", "javascript:alert(1)", "evil.example", "",
		"/a//b", "/a\x7f", "/\xc2\xa0/evil.example", NULL,
	};
	for (size_t i = 0; foreign[i]; i++) {
		char shown[64];
		size_t n = 0;
		for (const char *p = foreign[i]; *p && n < sizeof(shown) - 5; p++)
			n += (size_t)snprintf(shown + n, sizeof(shown) - n, *p > 0x20 && *p < 0x7f ? "%c" : "\\x%02x",
					      (unsigned char)*p);
		shown[n] = '\0';
		ok(!web_local_path_ok(foreign[i]), "not a local path: \"%s\"", shown);
	}
	ok(!web_local_path_ok(NULL), "NULL is not a local path");
	static const char *const local[] = {
		"/", "/kernels", "/kernels/acme/relu?rev=v1#readme", "/kernels/acme/relu/tree/feature%2Fx/", "/%C3%A9",
		"/settings/tokens", NULL,
	};
	for (size_t i = 0; local[i]; i++)
		ok(web_local_path_ok(local[i]), "a local path: %s", local[i]);

	/* a 10,000-row table renders, bounded and inert */
	struct strbuf big = STRBUF_INIT;
	strbuf_adds(&big, "| n | html |\n|---|---|\n");
	for (int i = 0; i < 10000; i++)
		strbuf_addf(&big, "| %d | <script>x()</script> |\n", i);
	s = md(big.buf, 0);
	ok(has(s, "<td>9999</td>") && !has(s, "<script"), "a 10,000-row table renders without its raw HTML");
	free(s);
	strbuf_release(&big);
	return done_testing();
}
