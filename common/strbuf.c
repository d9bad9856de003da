/* strbuf.c -- a growable, always NUL-terminated byte buffer. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

void strbuf_init(struct strbuf *sb)
{
	sb->buf = NULL;
	sb->len = 0;
	sb->alloc = 0;
}

void strbuf_grow(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;
	if (need <= sb->alloc)
		return;
	size_t alloc = sb->alloc ? sb->alloc : 64;
	while (alloc < need)
		alloc *= 2;
	sb->buf = xrealloc(sb->buf, alloc);
	sb->alloc = alloc;
}

void strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
	strbuf_grow(sb, len);
	if (len)
		memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void strbuf_adds(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

/* Formats into the room already there and only formats again, after
 * growing, when that was too small (most calls fit: one vsnprintf). */
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list copy;
	strbuf_grow(sb, 64);
	va_copy(copy, ap);
	int n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, copy);
	va_end(copy);
	if (n < 0) {
		sb->buf[sb->len] = '\0';
		return;
	}
	if ((size_t)n >= sb->alloc - sb->len) {
		strbuf_grow(sb, (size_t)n);
		vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	}
	sb->len += (size_t)n;
}

void strbuf_add_int(struct strbuf *sb, int64_t v)
{
	char digits[24], *p = digits + sizeof(digits);
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do
		*--p = (char)('0' + u % 10);
	while ((u /= 10) > 0);
	if (v < 0)
		*--p = '-';
	strbuf_add(sb, p, (size_t)(digits + sizeof(digits) - p));
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

void strbuf_add_urlencoded(struct strbuf *sb, const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
			strbuf_add(sb, s, 1);
		} else {
			char esc[3] = { '%', hex[c >> 4], hex[c & 15] };
			strbuf_add(sb, esc, 3);
		}
	}
}

void strbuf_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
	if (!sb->buf)
		strbuf_grow(sb, 0), sb->buf[0] = '\0';
	char *out = sb->buf;
	if (len)
		*len = sb->len;
	strbuf_init(sb);
	return out;
}

void strbuf_release(struct strbuf *sb)
{
	free(sb->buf);
	strbuf_init(sb);
}

void strvec_vpushf(struct strvec *v, const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_vaddf(&sb, fmt, ap);
	v->items = xrealloc(v->items, (v->count + 2) * sizeof(*v->items));
	v->items[v->count++] = strbuf_detach(&sb, NULL);
	v->items[v->count] = NULL;
}

void strvec_pushf(struct strvec *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strvec_vpushf(v, fmt, ap);
	va_end(ap);
}

void strvec_release(struct strvec *v)
{
	if (!v)
		return;
	free_strings(v->items, v->count);
	v->items = NULL;
	v->count = 0;
}

int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };	/* shorter forms are overlong */
	if (n == 0)
		return -1;
	int len = s[0] < 0x80 ? 1 : s[0] < 0xc0 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : s[0] < 0xf8 ? 4 : 0;
	if (len == 0 || (size_t)len > n)
		return -1;	/* a stray continuation byte, 0xf8 and up, or cut short */
	uint32_t c = len == 1 ? s[0] : s[0] & (0x7fu >> len);
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return -1;
	if (cp)
		*cp = c;
	return len;
}

void strbuf_add_json_quoted(struct strbuf *sb, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	strbuf_add(sb, "\"", 1);
	for (size_t i = 0; i < n;) {
		size_t run = i;	/* plain bytes go in runs */
		while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
			run++;
		strbuf_add(sb, p + i, run - i);
		if ((i = run) == n)
			break;
		unsigned char c = p[i];
		int len = c >= 0x80 ? utf8_decode(p + i, n - i, NULL) : -1;
		if (len > 0) {
			strbuf_add(sb, p + i, (size_t)len);
			i += (size_t)len;
			continue;
		}
		if (c == '"' || c == '\\') {
			char esc[2] = { '\\', (char)c };
			strbuf_add(sb, esc, 2);
		} else if (c == '\n') {
			strbuf_add(sb, "\\n", 2);
		} else if (c == '\t') {
			strbuf_add(sb, "\\t", 2);
		} else if (c == '\r') {
			strbuf_add(sb, "\\r", 2);
		} else if (c < 0x20) {
			char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			strbuf_add(sb, esc, 6);
		} else {
			strbuf_add(sb, "\\ufffd", 6);	/* a byte that is not UTF-8 */
		}
		i++;
	}
	strbuf_add(sb, "\"", 1);
}
