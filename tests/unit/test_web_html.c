/* test_web_html.c -- the web UI's one HTML escaping function and its
 * sanitizing Markdown renderer: hostile READMEs render inert. */
#include "web/web.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

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
	ok(has(s, "<h1 id=\"title\">") && has(s, "Title\n</h1>"), "headings");
	ok(has(s, "<table>") && has(s, "<td>1</td>"), "GFM tables");
	ok(has(s, "<div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Table 1\">\n<table>"),
	   "a table scrolls in a focusable region of its own");
	ok(has(s, "<label class=\"task\"><input type=\"checkbox\" disabled checked> done</label>") &&
	   has(s, "<label class=\"task\"><input type=\"checkbox\" disabled> todo</label>"),
	   "task lists: each checkbox in a label with its item's text");
	ok(has(s, "<del>old</del>"), "strikethrough");
	free(s);

	/* heading anchors: GitHub's slugs, unique, from text only */
	s = md("# Hello, *World* `x`!\n\n## Usage\n\n## Usage\n\n## Usage 1\n\n### !!!\n\n## \u00dcn\u00efcode Stra\u00dfe\n", 0);
	ok(has(s, "<div class=\"heading\"><h1 id=\"hello-world-x\">"), "slug: lower case, punctuation dropped");
	ok(has(s, "<a class=\"anchor\" href=\"#hello-world-x\" aria-label=\"Link to this section: Hello, World x!\">#</a>"),
	   "a # link to the heading, named by its text");
	ok(has(s, "id=\"usage\"") && has(s, "id=\"usage-1\"") && has(s, "id=\"usage-1-1\""),
	   "repeated slugs are numbered, never repeated");
	ok(has(s, "id=\"section\""), "a heading without letters still gets an id");
	ok(has(s, "id=\"\u00dcn\u00efcode-stra\u00dfe\""), "letters of other scripts are kept");
	free(s);
	s = md("## \"><script>alert(1)</script> x' onmouseover='y\n\n## [a](javascript:x) \"b\"\n", 0);
	ok(!has(s, "<script") && !has(s, "javascript:") &&
	   has(s, "aria-label=\"Link to this section: &quot;&gt;alert(1) x&#39; onmouseover=&#39;y\">"),
	   "hostile heading text: no tag, attribute or quote gets through");
	ok(has(s, "<h2 id=\"alert1-x-onmouseovery\">") && has(s, "href=\"#alert1-x-onmouseovery\""),
	   "its id is only letters, digits and dashes");
	free(s);

	/* code blocks: highlighted server-side, everything escaped */
	s = md("```python\nimport torch  # <b>c</b>\n@torch.jit\ndef f(x=\"</code>\", y=1.5e-3): return None\n```\n", 0);
	ok(has(s, "<pre class=\"code\" tabindex=\"0\" role=\"region\" aria-label=\"Code block 1, python\">"
		  "<code class=\"language-python\">"), "a code block is a focusable region with its language");
	ok(has(s, "<span class=\"tok-kw\">import</span> torch  <span class=\"tok-com\"># &lt;b&gt;c&lt;/b&gt;</span>"),
	   "Python keywords and comments, escaped");
	ok(has(s, "<span class=\"tok-meta\">@torch.jit</span>") && has(s, "<span class=\"tok-str\">&quot;&lt;/code&gt;&quot;</span>") &&
	   has(s, "<span class=\"tok-num\">1.5e-3</span>") && has(s, "<span class=\"tok-kw\">None</span>"),
	   "decorators, strings, numbers");
	ok(!has(s, "</code>\"") && !has(s, "<b>"), "nothing in the code closes the block");
	free(s);
	s = md("```cuda title=k.cu\n#include <x.h>\n__global__ void k(float *x) { /* c */ int i = 0x1F; // l\n}\n```\n"
	       "```sh\nexport A=\"$HOME/x\" # hi\necho ${A} a#b\n```\n```json\n{\"a\": 1, \"b\": [true, null]}\n```\n"
	       "```toml\n[general]\nname = \"relu\" # x\n```\n```brainfuck\n<+>\n```\n", 0);
	ok(has(s, "<span class=\"tok-meta\">#include &lt;x.h&gt;</span>") && has(s, "<span class=\"tok-kw\">__global__</span>") &&
	   has(s, "<span class=\"tok-com\">/* c */</span>") && has(s, "<span class=\"tok-num\">0x1F</span>") &&
	   has(s, "<span class=\"tok-com\">// l</span>"), "C/CUDA: preprocessor, keywords, comments, hex numbers");
	ok(has(s, "<span class=\"tok-kw\">export</span>") && has(s, "<span class=\"tok-meta\">${A}</span>") &&
	   has(s, "<span class=\"tok-com\"># hi</span>") && has(s, "a#b"), "shell: keywords, variables, comments");
	ok(has(s, "<span class=\"tok-key\">&quot;a&quot;</span>") && has(s, "<span class=\"tok-kw\">null</span>"),
	   "JSON: keys and literals");
	ok(has(s, "<span class=\"tok-meta\">[general]</span>") && has(s, "<span class=\"tok-key\">name</span>") &&
	   has(s, "<span class=\"tok-str\">&quot;relu&quot;</span>"), "TOML: tables, keys, strings");
	ok(has(s, "<code class=\"language-brainfuck\">&lt;+&gt;\n</code>"), "an unknown language is only escaped");
	free(s);
	struct strbuf hl = STRBUF_INIT;
	ok(highlight_code("PYTHON", "'''a\n", 5, &hl) == 1 &&
	   strcmp(hl.buf, "<span class=\"tok-str\">&#39;&#39;&#39;a\n</span>") == 0, "an unclosed string ends with the code");
	strbuf_reset(&hl);
	ok(highlight_code(NULL, "a\0<", 3, &hl) == 0 && strcmp(hl.buf, "a\xef\xbf\xbd&lt;") == 0, "no language: escaped");
	strbuf_release(&hl);

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
