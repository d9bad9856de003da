/* fuzz_markdown.c -- fuzz the web UI's README renderer: whatever the input,
 * the HTML it gives has no script, no event handler, no raw HTML the input
 * brought in, and no link or image with a scheme other than http(s) or
 * mailto; and the code highlighter writes no tag but its own spans. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "web/web.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Every href=" (web: 1) or src=" (0) value of html: empty, local, fragment,
 * relative to the repo, or for links http(s) and mailto (a scheme the
 * browser would run, javascript: or data:, never). */
static void check_urls(const char *html, const char *attr, int web)
{
	size_t n = strlen(attr);
	for (const char *p = strstr(html, attr); p; p = strstr(p + 1, attr)) {
		const char *v = p + n;
		if (v[0] == '"' || v[0] == '#' || v[0] == '/')
			continue;
		if (strncmp(v, "prefix/", 7) == 0)
			continue;
		/* images come from this hub only */
		assert(web && (strncasecmp(v, "http:", 5) == 0 || strncasecmp(v, "https:", 6) == 0 ||
			       strncasecmp(v, "mailto:", 7) == 0));
	}
}

/* The highlighter (README code blocks) on the same bytes, in each language:
 * every '<' it writes opens or closes one of its own spans. */
static void check_highlight(const unsigned char *data, size_t size)
{
	static const char *const langs[] = { "python", "cuda", "sh", "json", "toml", "none" };
	struct strbuf out = STRBUF_INIT;
	highlight_code(langs[size % 6], (const char *)data, size, &out);
	size_t spans = 0, quotes = 0;
	for (const char *p = out.buf ? strchr(out.buf, '<') : NULL; p; p = strchr(p + 1, '<')) {
		assert(strncmp(p, "<span class=\"tok-", 17) == 0 || strncmp(p, "</span>", 7) == 0);
		spans += p[1] == 's';
	}
	for (const char *p = out.buf ? strchr(out.buf, '"') : NULL; p; p = strchr(p + 1, '"'))
		quotes++;
	assert(quotes == 2 * spans);	/* the code's own quotes are all &quot; */
	strbuf_release(&out);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	check_highlight(data, size);
	struct strbuf out = STRBUF_INIT;
	static const struct markdown_bases bases = { "prefix/", "prefix/" };
	if (markdown_render_safe((const char *)data, size, size % 2 ? &bases : NULL, &out) == 0 && out.buf) {
		/* raw HTML of the input never survives: every '<' the renderer
		 * writes starts one of its own tags */
		assert(!strcasestr(out.buf, "<script") && !strcasestr(out.buf, "<iframe") &&
		       !strcasestr(out.buf, "<object") && !strcasestr(out.buf, "<style"));
		check_urls(out.buf, "href=\"", 1);
		check_urls(out.buf, "src=\"", 0);
		/* no attribute of any tag is an event handler: outside quoted
		 * values, no name starts with "on" */
		for (const char *p = strchr(out.buf, '<'); p; p = strchr(p + 1, '<')) {
			int quoted = 0;
			for (const char *a = p + 1; *a && *a != '>'; a++) {
				if (*a == '"')
					quoted = !quoted;
				else if (!quoted && *a == ' ')
					assert(strncasecmp(a + 1, "on", 2) != 0);
			}
		}
	}
	strbuf_release(&out);
	return 0;
}
