/* fuzz_highlight.c -- fuzz the file page's tokenizer: whatever the bytes
 * and the language, every '<' in its output starts one of the tags it
 * writes itself (rows, cells, line links, token spans), spans are balanced
 * within each row, and there is one row per line. */
#include <assert.h>
#include <string.h>

#include "web/web_internal.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const char *const own_tags[] = {
	"<tr id=\"L", "</tr>", "<td class=\"ln\">", "<td class=\"lc\">", "</td>", "<a href=\"#L", "</a>",
	"<span class=\"tok-", "</span>", NULL,
};

static size_t own_tag(const char *p)
{
	for (size_t i = 0; own_tags[i]; i++)
		if (strncmp(p, own_tags[i], strlen(own_tags[i])) == 0)
			return i;
	assert(!"a tag the highlighter does not write");
	return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static const char *const paths[] = { "a.py", "a.cu", "a.sh", "a.json", "a.toml", "a.svg" };
	if (size == 0)
		return 0;
	const char *path = paths[data[0] % (sizeof(paths) / sizeof(paths[0]))];
	const char *text = (const char *)data + 1;
	size_t len = size - 1, lines = 1;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n' && i + 1 < len;
	struct strbuf out = STRBUF_INIT;
	highlight_lines(&out, text, len, highlight_lang_for(path));
	size_t rows = 0;
	int open_spans = 0;
	for (const char *p = strchr(out.buf, '<'); p; p = strchr(p + 1, '<')) {
		size_t tag = own_tag(p);
		rows += tag == 0;
		open_spans += tag == 7 ? 1 : tag == 8 ? -1 : 0;
		assert(open_spans == 0 || open_spans == 1);
		if (tag == 1)
			assert(open_spans == 0);
	}
	assert(rows == lines && open_spans == 0);
	strbuf_release(&out);
	return 0;
}
