/* highlight.c -- a file's text as numbered, linkable lines (#L12) with
 * server-side syntax classes: one small tokenizer driven by a table of
 * language families (keywords, comments, strings, numbers, preprocessor
 * lines). Every byte of the file is HTML-escaped; the only markup is the
 * rows and <span class="tok-…"> this file writes. */
#include "web/web_internal.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

enum {
	LANG_TRIPLE = 1,	/* """…""" and '''…''' strings */
	LANG_RAW_SINGLE = 2,	/* '…' has no escapes (shell, TOML) */
	LANG_MULTILINE = 4,	/* a plain string may span lines (shell) */
	LANG_PREPROCESSOR = 8,	/* a line starting with # is a directive */
	LANG_HASH_AT_WORD = 16,	/* # starts a comment only at a word's start */
};

struct highlight_lang {
	const char *name;
	const char *const *keywords;	/* NULL-terminated */
	const char *line_comment;	/* NULL: none */
	const char *block_open, *block_close;
	const char *quotes;
	unsigned flags;
};

static const char *const python_words[] = {
	"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
	"elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "match",
	"case", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "self", NULL,
};
static const char *const c_words[] = {
	"auto", "bool", "break", "case", "char", "class", "const", "constexpr", "continue", "default", "delete", "do",
	"double", "else", "enum", "extern", "false", "float", "for", "goto", "half", "if", "inline", "int", "long",
	"namespace", "new", "nullptr", "private", "protected", "public", "return", "short", "signed", "size_t",
	"sizeof", "static", "static_cast", "struct", "switch", "template", "this", "true", "typedef", "typename",
	"union", "unsigned", "using", "void", "volatile", "while", "__global__", "__device__", "__host__",
	"__shared__", "__constant__", "__restrict__", "__syncthreads", "kernel", "device", "threadgroup", "constant",
	"thread", "uint", NULL,
};
static const char *const shell_words[] = {
	"case", "do", "done", "elif", "else", "esac", "exit", "export", "fi", "for", "function", "if", "in", "local",
	"return", "set", "then", "until", "while", NULL,
};
static const char *const json_words[] = { "true", "false", "null", NULL };
static const char *const toml_words[] = { "true", "false", "inf", "nan", NULL };

static const struct highlight_lang langs[] = {
	{ "python", python_words, "#", NULL, NULL, "\"'", LANG_TRIPLE },
	{ "c", c_words, "//", "/*", "*/", "\"'", LANG_PREPROCESSOR },
	{ "shell", shell_words, "#", NULL, NULL, "\"'", LANG_RAW_SINGLE | LANG_MULTILINE | LANG_HASH_AT_WORD },
	{ "json", json_words, NULL, NULL, NULL, "\"", 0 },
	{ "toml", toml_words, "#", NULL, NULL, "\"'", LANG_TRIPLE | LANG_RAW_SINGLE },
};

static const struct {
	const char *ext;
	const struct highlight_lang *lang;
} by_extension[] = {
	{ ".py", &langs[0] }, { ".pyi", &langs[0] },
	{ ".c", &langs[1] }, { ".h", &langs[1] }, { ".cc", &langs[1] }, { ".cpp", &langs[1] }, { ".cxx", &langs[1] },
	{ ".hh", &langs[1] }, { ".hpp", &langs[1] }, { ".cu", &langs[1] }, { ".cuh", &langs[1] },
	{ ".metal", &langs[1] }, { ".mm", &langs[1] },
	{ ".sh", &langs[2] }, { ".bash", &langs[2] },
	{ ".json", &langs[3] },
	{ ".toml", &langs[4] },
};

const struct highlight_lang *highlight_lang_for(const char *path)
{
	size_t n = strlen(path);
	for (size_t i = 0; i < sizeof(by_extension) / sizeof(by_extension[0]); i++) {
		size_t e = strlen(by_extension[i].ext);
		if (n > e && strcasecmp(path + n - e, by_extension[i].ext) == 0)
			return by_extension[i].lang;
	}
	return NULL;
}

const char *highlight_lang_name(const struct highlight_lang *lang)
{
	return lang ? lang->name : "text";
}

/* ---- writing rows ---------------------------------------------------------- */

struct emitter {
	struct strbuf *out;
	size_t line;
};

static void row_open(struct emitter *e)
{
	e->line++;
	strbuf_addf(e->out, "<tr id=\"L%zu\"><td class=\"ln\"><a href=\"#L%zu\">%zu</a></td><td class=\"lc\">", e->line,
		    e->line, e->line);
}

/* Bytes of one class (NULL: plain), split into rows at each newline: a
 * token that spans lines is closed and opened again on each. */
static void emit(struct emitter *e, const char *cls, const char *s, size_t n)
{
	while (n) {
		const char *nl = memchr(s, '\n', n);
		size_t k = nl ? (size_t)(nl - s) : n;
		if (k) {
			if (cls)
				strbuf_addf(e->out, "<span class=\"tok-%s\">", cls);
			html_escape_n(e->out, s, k);
			if (cls)
				strbuf_adds(e->out, "</span>");
		}
		if (!nl)
			break;
		strbuf_adds(e->out, "</td></tr>\n");
		row_open(e);
		s += k + 1;
		n -= k + 1;
	}
}

/* ---- the tokenizer ---------------------------------------------------------- */

static int starts(const char *s, size_t i, size_t n, const char *what)
{
	size_t k = strlen(what);
	return k && i + k <= n && memcmp(s + i, what, k) == 0;
}

static size_t line_end(const char *s, size_t i, size_t n)
{
	const char *nl = memchr(s + i, '\n', n - i);
	return nl ? (size_t)(nl - s) : n;
}

static size_t string_end(const struct highlight_lang *L, const char *s, size_t i, size_t n)
{
	char q = s[i];
	if ((L->flags & LANG_TRIPLE) && i + 2 < n && s[i + 1] == q && s[i + 2] == q) {
		const char close[4] = { q, q, q, '\0' };
		const char *end = i + 3 < n ? memmem(s + i + 3, n - i - 3, close, 3) : NULL;
		return end ? (size_t)(end - s) + 3 : n;
	}
	int raw = q == '\'' && (L->flags & LANG_RAW_SINGLE);
	for (size_t j = i + 1; j < n; j++) {
		if (s[j] == '\\' && !raw) {
			j++;
			continue;
		}
		if (s[j] == q)
			return j + 1;
		if (s[j] == '\n' && !(L->flags & LANG_MULTILINE))
			return j;
	}
	return n;
}

static int is_keyword(const struct highlight_lang *L, const char *s, size_t len)
{
	for (const char *const *k = L->keywords; *k; k++)
		if (strlen(*k) == len && memcmp(*k, s, len) == 0)
			return 1;
	return 0;
}

static int at_line_start(const char *s, size_t i)
{
	while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t'))
		i--;
	return i == 0 || s[i - 1] == '\n';
}

/* The end of the token at i and its class (*cls NULL: plain text). */
static size_t scan_token(const struct highlight_lang *L, const char *s, size_t i, size_t n, const char **cls)
{
	unsigned char c = (unsigned char)s[i];
	*cls = "c";
	if (L->line_comment && starts(s, i, n, L->line_comment) &&
	    (!(L->flags & LANG_HASH_AT_WORD) || i == 0 || isspace((unsigned char)s[i - 1]) || s[i - 1] == ';'))
		return line_end(s, i, n);
	if (L->block_open && starts(s, i, n, L->block_open)) {
		size_t from = i + strlen(L->block_open);
		const char *end = memmem(s + from, n - from, L->block_close, strlen(L->block_close));
		return end ? (size_t)(end - s) + strlen(L->block_close) : n;
	}
	*cls = "p";
	if ((L->flags & LANG_PREPROCESSOR) && c == '#' && at_line_start(s, i))
		return line_end(s, i, n);
	*cls = "s";
	if (c && strchr(L->quotes, c))
		return string_end(L, s, i, n);
	size_t j = i + 1;
	*cls = "n";
	if (isdigit(c)) {
		while (j < n && (isalnum((unsigned char)s[j]) || s[j] == '_' || s[j] == '.'))
			j++;
		return j;
	}
	*cls = NULL;
	if (isalpha(c) || c == '_') {
		while (j < n && (isalnum((unsigned char)s[j]) || s[j] == '_'))
			j++;
		if (is_keyword(L, s + i, j - i))
			*cls = "k";
	}
	return j;
}

void highlight_lines(struct strbuf *out, const char *text, size_t len, const struct highlight_lang *lang)
{
	struct emitter e = { out, 0 };
	if (len && text[len - 1] == '\n')
		len--;	/* no empty row after the last line */
	row_open(&e);
	size_t i = 0, plain = 0;	/* plain: where the pending plain text starts */
	while (i < len) {
		const char *cls = NULL;
		size_t j = lang ? scan_token(lang, text, i, len, &cls) : len;
		if (cls) {
			emit(&e, NULL, text + plain, i - plain);
			emit(&e, cls, text + i, j - i);
			plain = j;
		}
		i = j;
	}
	emit(&e, NULL, text + plain, len - plain);
	strbuf_adds(out, "</td></tr>\n");
}
