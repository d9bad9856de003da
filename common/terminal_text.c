/* terminal_text.c -- text from a build (its log) made safe to show, and
 * text made safe for one line of khub's own log: no byte of it can drive
 * the reader's terminal, confuse a page or start a line. */
#include "common/common.h"

/* Length of the escape sequence at s (ESC already seen at s[0]) that is
 * dropped whole: CSI (ESC [ params intermediates final) and OSC (ESC ]
 * ... BEL or ESC \); 0 when it is neither (the ESC is escaped instead).
 * A sequence cut by the end of the text is dropped to the end. */
static size_t escape_sequence_len(const unsigned char *s, size_t n)
{
	size_t i = 2;
	if (n < 2)
		return 0;
	if (s[1] == '[') {
		while (i < n && s[i] >= 0x20 && s[i] <= 0x3f)
			i++;
		if (i < n && s[i] >= 0x40 && s[i] <= 0x7e)
			return i + 1;
		return i == n ? n : 0;
	}
	if (s[1] == ']') {
		for (; i < n; i++) {
			if (s[i] == 0x07)
				return i + 1;
			if (s[i] == 0x1b && i + 1 < n && s[i + 1] == '\\')
				return i + 2;
		}
		return n;
	}
	return 0;
}

/* Length of the well-formed UTF-8 character at s of a code point from
 * U+00A0 up (C1 controls, overlongs, surrogates refused); 0 when not. */
static size_t utf8_printable_len(const unsigned char *s, size_t n)
{
	uint32_t cp;
	int len = utf8_decode(s, n, &cp);
	return len > 1 && cp >= 0xa0 ? (size_t)len : 0;
}

static const char hex_digits[] = "0123456789abcdef";

static void add_hex_escape(struct strbuf *out, unsigned char c)
{
	char esc[4] = { '\\', 'x', hex_digits[c >> 4], hex_digits[c & 15] };
	strbuf_add(out, esc, 4);
}

int terminal_text_needs_escape(const char *text, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c < 0x20 || c >= 0x7f)
			return 1;	/* UTF-8 included: the slow path looks closer */
	}
	return 0;
}

void terminal_text_escape_line(const char *text, size_t n, struct strbuf *out)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t i = 0, len;
	strbuf_grow(out, n);
	while (i < n) {
		if (s[i] >= 0x20 && s[i] < 0x7f) {
			strbuf_add(out, s + i++, 1);
		} else if (s[i] >= 0x80 && (len = utf8_printable_len(s + i, n - i)) > 0) {
			strbuf_add(out, s + i, len);
			i += len;
		} else {
			add_hex_escape(out, s[i++]);
		}
	}
}

void terminal_text_sanitize(const char *text, size_t n, struct strbuf *out)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t i = 0;
	strbuf_grow(out, n);
	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t') {
			strbuf_add(out, s + i++, 1);
		} else if (c == '\r') {
			/* \r\n is a line end; a lone \r rewrote the line: a new one */
			if (i + 1 >= n || s[i + 1] != '\n')
				strbuf_add(out, "\n", 1);
			i++;
		} else if (c == 0x1b && (len = escape_sequence_len(s + i, n - i)) > 0) {
			i += len;
		} else if (c >= 0x80 && (len = utf8_printable_len(s + i, n - i)) > 0) {
			strbuf_add(out, s + i, len);
			i += len;
		} else {
			add_hex_escape(out, c);
			i++;
		}
	}
}
