/* test_web_highlight.c -- the file page's tokenizer: every language family
 * marks its tokens, tokens that span lines are closed and reopened on each
 * row, unterminated tokens end at the end of the file, and no byte of a
 * file ever becomes markup. */
#include "web/web_internal.h"
#include "tap.h"

#include <stdlib.h>

static char *lines(const char *path, const char *text)
{
	struct strbuf sb = STRBUF_INIT;
	highlight_lines(&sb, text, strlen(text), highlight_lang_for(path));
	return strbuf_detach(&sb, NULL);
}

static int has(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

/* How many times needle occurs in hay. */
static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

int main(void)
{
	char *s;
	is_str(highlight_lang_name(highlight_lang_for("a/b.PY")), "python", "extensions in any case");
	is_str(highlight_lang_name(highlight_lang_for("k.cu")), "c", ".cu is C-family");
	is_str(highlight_lang_name(highlight_lang_for("k.metal")), "c", ".metal is C-family");
	is_str(highlight_lang_name(highlight_lang_for("x.svg")), "text", "SVG is plain text");
	is_str(highlight_lang_name(highlight_lang_for("py")), "text", "a name that only is an extension is not one");

	s = lines("a.py", "import os\nx = 'a<b>' # c & d\n");
	ok(has(s, "<tr id=\"L2\"><td class=\"ln\"><a href=\"#L2\">2</a></td>"), "rows with their anchors");
	ok(!has(s, "id=\"L3\""), "no empty row after the last newline");
	ok(has(s, "<span class=\"tok-kw\">import</span>"), "a Python keyword");
	ok(has(s, "<span class=\"tok-str\">&#39;a&lt;b&gt;&#39;</span>"), "a string, escaped");
	ok(has(s, "<span class=\"tok-com\"># c &amp; d</span>"), "a comment, escaped");
	free(s);

	s = lines("a.py", "s = \"\"\"one\ntwo\"\"\"\n");
	ok(has(s, "<span class=\"tok-str\">&quot;&quot;&quot;one</span></td></tr>") &&
	   has(s, "<td class=\"lc\"><span class=\"tok-str\">two&quot;&quot;&quot;</span>"), "a triple-quoted string spans rows");
	free(s);

	s = lines("k.cu", "#include <cuda.h>\n/* a\n b */ __global__ void k(float x) { return 1.5f; }\n");
	ok(has(s, "<span class=\"tok-meta\">#include &lt;cuda.h&gt;</span>"), "a preprocessor line, escaped");
	ok(has(s, "<span class=\"tok-com\">/* a</span></td></tr>") && has(s, "<span class=\"tok-com\"> b */</span>"),
	   "a block comment spans rows");
	ok(has(s, "<span class=\"tok-kw\">__global__</span>") && has(s, "<span class=\"tok-num\">1.5f</span>"), "CUDA keyword, number");
	free(s);

	s = lines("run.sh", "echo a#b # note\nx='$y \\'\n");
	ok(has(s, "a#b ") && has(s, "<span class=\"tok-com\"># note</span>") && !has(s, "tok-com\">#b"), "# in a word is no comment");
	ok(has(s, "<span class=\"tok-str\">&#39;$y \\&#39;</span>"), "a single-quoted shell string has no escapes");
	free(s);

	s = lines("c.json", "{\"a\": [true, null, -1.5e3]}");
	ok(has(s, "<span class=\"tok-key\">&quot;a&quot;</span>") && count(s, "tok-kw") == 2 && has(s, "tok-num\">1.5e3"), "JSON");
	free(s);

	s = lines("p.toml", "# c\n[a]\nk = 'v\\'\n");
	ok(has(s, "<span class=\"tok-com\"># c</span>") && has(s, "<span class=\"tok-str\">&#39;v\\&#39;</span>"), "TOML");
	free(s);

	/* hostile content: unterminated tokens, NUL bytes, markup */
	s = lines("x.c", "\"open\n/* never closed <script>");
	ok(has(s, "&lt;script&gt;") && !has(s, "<script"), "an unterminated comment ends with the file, escaped");
	free(s);
	struct strbuf sb = STRBUF_INIT;
	highlight_lines(&sb, "a\0<b>", 5, NULL);
	ok(has(sb.buf, "a\xef\xbf\xbd&lt;b&gt;") && count(sb.buf, "<tr") == 1, "plain text: NUL replaced, markup escaped");
	strbuf_release(&sb);
	s = lines("logo.svg", "<svg onload=\"x()\"><script>alert(1)</script></svg>");
	ok(!has(s, "<svg") && !has(s, "<script") && has(s, "&lt;svg onload=&quot;x()&quot;&gt;"), "SVG source escaped");
	free(s);
	s = lines("e.py", "");
	ok(count(s, "<tr") == 1, "an empty file is one empty row");
	free(s);
	return done_testing();
}
