/* test_terminal_text.c -- a build log made safe to show
 * (common/terminal_text.c): colours and OSC titles dropped, other
 * controls, C1 and broken UTF-8 escaped, text and UTF-8 kept; and text
 * made one line of khub's log: every control escaped, no line forged. */
#include "common/common.h"
#include "tap.h"

static const struct {
	const char *in, *want, *what;
} cases[] = {
	{ "plain text\n\tindented\n", "plain text\n\tindented\n", "text, \\n and \\t kept" },
	{ "\x1b[31mred\x1b[0m done", "red done", "CSI colours dropped" },
	{ "\x1b[2J\x1b[H\x1b[?25lclear", "clear", "clear screen, cursor moves, private modes dropped" },
	{ "\x1b]0;pwned title\x07" "after", "after", "an OSC window title (BEL) dropped" },
	{ "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "link", "an OSC 8 hyperlink (ST) dropped, its text kept" },
	{ "a\x1b" "cb", "a\\x1bcb", "a lone ESC (reset) escaped" },
	{ "bell\x07" " bs\x08" " nul", "bell\\x07 bs\\x08 nul", "BEL and BS escaped" },
	{ "del\x7f", "del\\x7f", "DEL escaped" },
	{ "crlf\r\nline", "crlf\nline", "\\r\\n is a line end" },
	{ "50%\r100%\n", "50%\n100%\n", "a lone \\r starts a new line" },
	{ "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x94\xa5", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x94\xa5", "UTF-8 kept" },
	{ "c1 \xc2\x9b" "31m", "c1 \\xc2\\x9b31m", "a C1 CSI (U+009B) escaped" },
	{ "raw \x9b" "2J", "raw \\x9b2J", "a raw C1 byte escaped" },
	{ "bad \xc3( \xe0\x80\xaf", "bad \\xc3( \\xe0\\x80\\xaf", "broken and overlong UTF-8 escaped" },
	{ "cut \x1b[3", "cut ", "a CSI cut by the end dropped" },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct strbuf out = STRBUF_INIT;
		terminal_text_sanitize(cases[i].in, strlen(cases[i].in), &out);
		is_str(out.buf ? out.buf : "", cases[i].want, "%s", cases[i].what);
		strbuf_release(&out);
	}
	struct strbuf out = STRBUF_INIT;
	terminal_text_sanitize("a\0b", 3, &out);
	is_str(out.buf, "a\\x00b", "NUL escaped");
	strbuf_release(&out);

	static const struct {
		const char *in, *want, *what;
	} lines[] = {
		{ "GET /x 404", "GET /x 404", "log line: plain text kept" },
		{ "/a\r2026-01-01 info forged", "/a\\x0d2026-01-01 info forged", "log line: a bare CR escaped" },
		{ "/a\n2026 info forged", "/a\\x0a2026 info forged", "log line: LF escaped" },
		{ "\x1b[2Jkey\tx", "\\x1b[2Jkey\\x09x", "log line: ESC and tab escaped, sequence kept visible" },
		{ "caf\xc3\xa9 \x9b", "caf\xc3\xa9 \\x9b", "log line: UTF-8 kept, a raw C1 byte escaped" },
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		struct strbuf line = STRBUF_INIT;
		terminal_text_escape_line(lines[i].in, strlen(lines[i].in), &line);
		is_str(line.buf ? line.buf : "", lines[i].want, "%s", lines[i].what);
		ok(terminal_text_needs_escape(lines[i].in, strlen(lines[i].in)) == (strcmp(lines[i].in, lines[i].want) != 0),
		   "%s: terminal_text_needs_escape agrees", lines[i].what);
		strbuf_release(&line);
	}
	return done_testing();
}
