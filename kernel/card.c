/* card.c -- a kernel README's card, as the Hub reads a model card: the YAML
 * front matter between --- lines at the top (only the subset cards use:
 * `key: scalar`, `key: [a, b]` and block lists of `- a`), the body after
 * it, the body's first paragraph as a description and its text for search.
 * The README is the author's: every part is bounded and UTF-8 clean. */
#include "kernel/kernel.h"

#include <stdlib.h>
#include <string.h>

/* One line of text[0..len) from pos: its end (before "\r\n" or "\n") and
 * where the next starts. */
static void line_at(const char *text, size_t len, size_t pos, size_t *end, size_t *next)
{
	const char *nl = memchr(text + pos, '\n', len - pos);
	size_t e = nl ? (size_t)(nl - text) : len;
	*next = nl ? e + 1 : len;
	if (e > pos && text[e - 1] == '\r')
		e--;
	*end = e;
}

static void trim(const char **s, size_t *n)
{
	while (*n && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

/* A copy of s[0..n) with well-formed UTF-8 only (other bytes dropped,
 * control characters as spaces, runs of space as one), at most max bytes,
 * cut between characters; NULL when nothing is left. */
static char *clean_text(const char *s, size_t n, size_t max)
{
	char *out = xmalloc(max + 1);
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int k = utf8_decode((const unsigned char *)s + i, n - i, &cp);
		if (k < 0) {
			i++;
			continue;
		}
		if (cp < 0x20 || cp == 0x7f) {
			if (o && out[o - 1] != ' ' && o < max)
				out[o++] = ' ';
		} else if (cp != ' ' || (o && out[o - 1] != ' ')) {
			if (o + (size_t)k > max)
				break;
			memcpy(out + o, s + i, (size_t)k);
			o += (size_t)k;
		}
		i += (size_t)k;
	}
	while (o && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
	if (!o) {
		free(out);
		return NULL;
	}
	return out;
}

/* A YAML scalar without its quotes or a trailing comment. */
static void scalar(const char **s, size_t *n)
{
	trim(s, n);
	const char *close;
	if (*n >= 2 && (**s == '"' || **s == '\'') && (close = memchr(*s + 1, **s, *n - 1))) {
		*n = (size_t)(close - *s) - 1;
		(*s)++;
		return;
	}
	for (size_t i = 0; i + 1 < *n; i++)
		if ((*s)[i] == ' ' && (*s)[i + 1] == '#') {
			*n = i;
			break;
		}
	trim(s, n);
}

enum card_key { KEY_OTHER, KEY_LICENSE, KEY_LIBRARY, KEY_TAGS };

static void card_value(struct kernel_card *c, enum card_key key, const char *s, size_t n)
{
	scalar(&s, &n);
	char *v = n ? clean_text(s, n, key == KEY_TAGS ? CARD_TAG_MAX : CARD_VALUE_MAX) : NULL;
	char **slot = key == KEY_LICENSE ? &c->license : key == KEY_LIBRARY ? &c->library_name : NULL;
	if (!v)
		return;
	if (slot && !*slot) {
		*slot = v;
		return;
	}
	for (size_t i = 0; key == KEY_TAGS && i < c->tags.count; i++)
		if (strcmp(c->tags.items[i], v) == 0)
			key = KEY_OTHER;	/* a repeated tag */
	if (key == KEY_TAGS && c->tags.count < CARD_TAGS_MAX)
		strvec_pushf(&c->tags, "%s", v);
	free(v);
}

/* `[a, "b", c]`: each item as a value of key. */
static void inline_list(struct kernel_card *c, enum card_key key, const char *s, size_t n)
{
	const char *close = memchr(s, ']', n);
	s++;
	n = close ? (size_t)(close - s) : n - 1;
	while (n) {
		const char *comma = memchr(s, ',', n);
		size_t item = comma ? (size_t)(comma - s) : n;
		card_value(c, key, s, item);
		if (!comma)
			break;
		s += item + 1;
		n -= item + 1;
	}
}

static enum card_key key_of(const char *s, size_t n)
{
	static const struct { const char *name; enum card_key key; } keys[] = {
		{ "license", KEY_LICENSE }, { "library_name", KEY_LIBRARY }, { "tags", KEY_TAGS },
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strlen(keys[i].name) == n && memcmp(keys[i].name, s, n) == 0)
			return keys[i].key;
	return KEY_OTHER;
}

/* One line of the front matter (top: it starts at column 0); *key is the
 * key a block list belongs to. */
static void front_matter_line(struct kernel_card *c, const char *s, size_t n, int top, enum card_key *key)
{
	const char *colon;
	trim(&s, &n);
	if (!n || s[0] == '#')
		return;
	if (s[0] == '-' && (n == 1 || s[1] == ' ')) {
		if (*key != KEY_OTHER && n > 1)
			card_value(c, *key, s + 1, n - 1);
		return;
	}
	if (!top || !(colon = memchr(s, ':', n)))
		return;
	*key = key_of(s, (size_t)(colon - s));
	const char *v = colon + 1;
	size_t vn = n - (size_t)(v - s);
	trim(&v, &vn);
	if (vn && v[0] == '[')
		inline_list(c, *key, v, vn);
	else if (vn)
		card_value(c, *key, v, vn);
}

/* The front matter of text, when it opens with one that closes within
 * CARD_FRONT_MATTER_MAX bytes: parsed into c, with c->body_offset after it. */
static void front_matter(struct kernel_card *c, const char *text, size_t len, size_t start)
{
	size_t end, next, pos;
	enum card_key key = KEY_OTHER;
	line_at(text, len, start, &end, &pos);
	if (end - start != 3 || memcmp(text + start, "---", 3) != 0 || pos == len)
		return;
	for (size_t p = pos; p < len && p - start <= CARD_FRONT_MATTER_MAX; p = next) {
		line_at(text, len, p, &end, &next);
		if (end - p == 3 && (memcmp(text + p, "---", 3) == 0 || memcmp(text + p, "...", 3) == 0)) {
			c->has_front_matter = 1;
			c->body_offset = next;
			break;
		}
	}
	if (!c->has_front_matter)
		return;
	for (size_t p = pos; p < len; p = next) {
		line_at(text, len, p, &end, &next);
		if (next == c->body_offset)
			break;
		/* a top-level key starts at column 0; indented lines belong to it */
		int top = end > p && text[p] != ' ' && text[p] != '\t' && text[p] != '-';
		if (top)
			key = KEY_OTHER;
		front_matter_line(c, text + p, end - p, top, &key);
	}
}

/* Lines that are no prose: headings, HTML, images and badges, tables,
 * code fences, rules, quotes and list items. */
static int prose_line(const char *s, size_t n)
{
	static const char *const not_prose[] = { "#", "<", "![", "[![", "|", "```", "~~~", "---", "===", "***", ">",
						 "- ", "* ", "+ ", "    ", "\t" };
	for (size_t i = 0; i < sizeof(not_prose) / sizeof(not_prose[0]); i++)
		if (n >= strlen(not_prose[i]) && memcmp(s, not_prose[i], strlen(not_prose[i])) == 0)
			return 0;
	return n > 0;
}

/* The first paragraph's text without Markdown's marks: [text](url) as text,
 * no *, ` or inline HTML. */
static void paragraph_text(struct strbuf *sb, const char *s, size_t n)
{
	for (size_t i = 0; i < n && sb->len < 4 * CARD_DESCRIPTION_MAX; i++) {
		const char *close;
		if (s[i] == '*' || s[i] == '`')
			continue;
		if (s[i] == '<' && (close = memchr(s + i, '>', n - i))) {
			i = (size_t)(close - s);
			continue;
		}
		if (s[i] == ']' && i + 1 < n && s[i + 1] == '(' && (close = memchr(s + i, ')', n - i))) {
			i = (size_t)(close - s);
			continue;
		}
		if (s[i] != '[')
			strbuf_add(sb, s + i, 1);
	}
}

static void description(struct kernel_card *c, const char *body, size_t len)
{
	struct strbuf sb = STRBUF_INIT;
	size_t end, next, p = 0;
	for (; p < len; p = next) {
		line_at(body, len, p, &end, &next);
		const char *s = body + p;
		size_t n = end - p;
		if (prose_line(s, n))
			break;
	}
	for (; p < len && sb.len < 4 * CARD_DESCRIPTION_MAX; p = next) {
		line_at(body, len, p, &end, &next);
		if (!prose_line(body + p, end - p))
			break;
		paragraph_text(&sb, body + p, end - p);
		strbuf_adds(&sb, " ");
	}
	if (sb.len)
		c->description = clean_text(sb.buf, sb.len, CARD_DESCRIPTION_MAX);
	strbuf_release(&sb);
}

void kernel_card_parse(const char *text, size_t len, struct kernel_card *out)
{
	memset(out, 0, sizeof(*out));
	size_t start = len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;	/* a BOM */
	out->body_offset = start;
	if (len > start)
		front_matter(out, text, len, start);
	const char *body = text + out->body_offset;
	size_t body_len = len - out->body_offset;
	description(out, body, body_len < CARD_SEARCH_TEXT_MAX ? body_len : CARD_SEARCH_TEXT_MAX);
	out->body_text = clean_text(body, body_len, CARD_SEARCH_TEXT_MAX);
}

void kernel_card_release(struct kernel_card *c)
{
	if (!c)
		return;
	free(c->license);
	free(c->library_name);
	free(c->description);
	free(c->body_text);
	strvec_release(&c->tags);
	memset(c, 0, sizeof(*c));
}
