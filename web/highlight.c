/* highlight.c -- the web UI's one syntax highlighter, for README code
 * blocks (highlight_code, by the fence's language) and the file page
 * (highlight_lines, by the file's extension: numbered, linkable rows,
 * #L12): a small scanner driven by one table row per language (comments,
 * strings, keywords, and a few flags), emitting <span class="tok-...">;
 * every byte of the code goes out HTML-escaped. */
#include "web/web_internal.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

enum {
	HL_TRIPLE_QUOTES = 1 << 0,	/* Python's """ and ''' */
	HL_PREPROCESSOR = 1 << 1,	/* C: a line starting with # */
	HL_DECORATORS = 1 << 2,		/* Python: @name */
	HL_SHELL_VARS = 1 << 3,		/* $name, ${...}, $1 */
	HL_MULTILINE_STRINGS = 1 << 4,	/* a string may go on past a newline */
	HL_JSON_KEYS = 1 << 5,		/* a string before ':' is a key */
	HL_TOML_KEYS = 1 << 6,		/* key = at a line's start; [table] */
	HL_HASH_NEEDS_SPACE = 1 << 7,	/* shell: # starts a comment only after a blank */
};

struct highlight_lang {
	const char *names;		/* info-string names, ' '-separated; the first is its name */
	const char *line_comment;	/* NULL: none */
	const char *block_open, *block_close;
	const char *quotes;
	const char *const *keywords;	/* NULL-terminated */
	unsigned flags;
};

static const char *const python_kw[] = { "False", "None", "True", "and", "as", "assert", "async", "await",
	"break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
	"if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
	"with", "yield", "match", "case", "self", NULL };
static const char *const c_kw[] = { "auto", "bool", "break", "case", "char", "const", "constexpr", "continue",
	"default", "do", "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
	"register", "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
	"union", "unsigned", "void", "volatile", "while", "class", "namespace", "template", "typename", "using",
	"public", "private", "protected", "virtual", "override", "new", "delete", "nullptr", "true", "false",
	"this", "auto", "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
	"uint64_t", "__global__", "__device__", "__host__", "__shared__", "__constant__", "__restrict__",
	"__syncthreads", "threadIdx", "blockIdx", "blockDim", "gridDim", "half", "__half", "__nv_bfloat16",
	"kernel", "device", "threadgroup", "thread", "uint", NULL };
static const char *const shell_kw[] = { "if", "then", "else", "elif", "fi", "for", "while", "until", "do",
	"done", "case", "esac", "in", "function", "return", "export", "local", "readonly", "set", "unset",
	"source", "exit", NULL };
static const char *const json_kw[] = { "true", "false", "null", NULL };

static const struct highlight_lang languages[] = {
	{ "python py python3 py3", "#", NULL, NULL, "\"'", python_kw, HL_TRIPLE_QUOTES | HL_DECORATORS },
	{ "c h cpp c++ cxx cc hpp hxx cuda cu cuh", "//", "/*", "*/", "\"'", c_kw, HL_PREPROCESSOR },
	{ "sh bash shell zsh console", "#", NULL, NULL, "\"'", shell_kw,
	  HL_SHELL_VARS | HL_MULTILINE_STRINGS | HL_HASH_NEEDS_SPACE },
	{ "json jsonc json5", "//", "/*", "*/", "\"", json_kw, HL_JSON_KEYS },
	{ "toml", "#", NULL, NULL, "\"'", json_kw, HL_TRIPLE_QUOTES | HL_TOML_KEYS },
};

/* The row whose names list the first word of lang (case-insensitive). */
static const struct highlight_lang *lang_find(const char *lang)
{
	if (!lang)
		return NULL;
	size_t n = strcspn(lang, " \t{,");
	if (n == 0 || n > 16)
		return NULL;
	char word[17];
	for (size_t i = 0; i < n; i++)
		word[i] = (char)tolower((unsigned char)lang[i]);
	word[n] = '\0';
	for (size_t i = 0; i < sizeof(languages) / sizeof(languages[0]); i++) {
		const char *p = languages[i].names;
		while (*p) {
			size_t m = strcspn(p, " ");
			if (m == n && memcmp(p, word, n) == 0)
				return &languages[i];
			p += m + (p[m] == ' ');
		}
	}
	return NULL;
}

struct scan {
	const struct highlight_lang *syn;
	const char *s;
	size_t len, i;
	struct strbuf *out;
	size_t row;		/* rows: the line being written (1, 2, ...); 0: no rows */
};

static void row_open(struct scan *sc)
{
	sc->row++;
	strbuf_addf(sc->out, "<tr id=\"L%zu\"><td class=\"ln\"><a href=\"#L%zu\">%zu</a></td><td class=\"lc\">", sc->row,
		    sc->row, sc->row);
}

/* Bytes of one class (NULL: plain); with rows, split at each newline: a
 * token that spans lines is closed and opened again on each row. */
static void emit(struct scan *sc, const char *cls, size_t start, size_t end)
{
	while (end > start) {
		const char *nl = sc->row ? memchr(sc->s + start, '\n', end - start) : NULL;
		size_t stop = nl ? (size_t)(nl - sc->s) : end;
		if (stop > start && cls)
			strbuf_addf(sc->out, "<span class=\"tok-%s\">", cls);
		if (stop > start)
			html_escape_n(sc->out, sc->s + start, stop - start);
		if (stop > start && cls)
			strbuf_adds(sc->out, "</span>");
		if (!nl)
			break;
		strbuf_adds(sc->out, "</td></tr>\n");
		row_open(sc);
		start = stop + 1;
	}
}

static int starts(const struct scan *sc, size_t at, const char *with)
{
	size_t n = with ? strlen(with) : 0;
	return n && at + n <= sc->len && memcmp(sc->s + at, with, n) == 0;
}

static int ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

static size_t line_end(const struct scan *sc, size_t at)
{
	const char *nl = memchr(sc->s + at, '\n', sc->len - at);
	return nl ? (size_t)(nl - sc->s) : sc->len;
}

/* Only blanks between the line's start and at. */
static int at_line_start(const struct scan *sc, size_t at)
{
	while (at > 0 && (sc->s[at - 1] == ' ' || sc->s[at - 1] == '\t'))
		at--;
	return at == 0 || sc->s[at - 1] == '\n';
}

/* The end of the string opening at i (past its closing quote, or where it
 * stops: a newline for one-line strings, the end of the code). */
static size_t string_end(const struct scan *sc, size_t i)
{
	char q = sc->s[i];
	char triple[4] = { q, q, q, '\0' };
	if ((sc->syn->flags & HL_TRIPLE_QUOTES) && starts(sc, i, triple)) {
		for (size_t j = i + 3; j < sc->len; j++) {
			if (sc->s[j] == '\\' && q != '\'')
				j++;
			else if (starts(sc, j, triple))
				return j + 3;
		}
		return sc->len;
	}
	int escapes = !((sc->syn->flags & HL_SHELL_VARS) && q == '\'');
	for (size_t j = i + 1; j < sc->len; j++) {
		if (sc->s[j] == '\\' && escapes)
			j++;
		else if (sc->s[j] == q)
			return j + 1;
		else if (sc->s[j] == '\n' && !(sc->syn->flags & HL_MULTILINE_STRINGS))
			return j;
	}
	return sc->len;
}

static int is_keyword(const struct scan *sc, size_t start, size_t end)
{
	for (const char *const *k = sc->syn->keywords; k && *k; k++)
		if ((*k)[0] == sc->s[start] && strncmp(*k, sc->s + start, end - start) == 0 && (*k)[end - start] == '\0')
			return 1;
	return 0;
}

/* A number at i: digits, letters (hex, suffixes), '.', '_', an exponent's sign. */
static size_t number_end(const struct scan *sc, size_t i)
{
	size_t j = i;
	while (j < sc->len) {
		char c = sc->s[j];
		if (isalnum((unsigned char)c) || c == '.' || c == '_')
			j++;
		else if ((c == '+' || c == '-') && j > i && strchr("eE", sc->s[j - 1]) && !starts(sc, i, "0x"))
			j++;
		else
			break;
	}
	return j;
}

/* $name, ${...}, $1, $?: the end of the variable at i, or i when none. */
static size_t shell_var_end(const struct scan *sc, size_t i)
{
	if (i + 1 >= sc->len)
		return i;
	char c = sc->s[i + 1];
	if (c == '{') {
		const char *close = memchr(sc->s + i, '}', line_end(sc, i) - i);
		return close ? (size_t)(close - sc->s) + 1 : i;
	}
	if (strchr("?#@*$!0123456789", c))
		return i + 2;
	size_t j = i + 1;
	while (j < sc->len && ident_char(sc->s[j]))
		j++;
	return j > i + 1 ? j : i;
}

/* A comment at i (line or block): its end, or i when none starts here. */
static size_t comment_end(const struct scan *sc, size_t i)
{
	const struct highlight_lang *syn = sc->syn;
	if (starts(sc, i, syn->block_open)) {
		for (size_t j = i + strlen(syn->block_open); j < sc->len; j++)
			if (starts(sc, j, syn->block_close))
				return j + strlen(syn->block_close);
		return sc->len;
	}
	if (!starts(sc, i, syn->line_comment))
		return i;
	if ((syn->flags & HL_HASH_NEEDS_SPACE) && i > 0 && !isspace((unsigned char)sc->s[i - 1]))
		return i;
	return line_end(sc, i);
}

/* The class of the word (identifier) from start to end. */
static const char *word_class(const struct scan *sc, size_t start, size_t end)
{
	unsigned flags = sc->syn->flags;
	if (is_keyword(sc, start, end))
		return "kw";
	if ((flags & HL_TOML_KEYS) && at_line_start(sc, start)) {
		size_t j = end;
		while (j < sc->len && (ident_char(sc->s[j]) || strchr("-. \t\"", sc->s[j])))
			j++;
		if (j < sc->len && sc->s[j] == '=')
			return "key";
	}
	return NULL;
}

/* One token at sc->i, emitted; sc->i moves past it. */
static void scan_token(struct scan *sc)
{
	const struct highlight_lang *syn = sc->syn;
	size_t i = sc->i, end;
	char c = sc->s[i];
	const char *cls = NULL;
	if ((end = comment_end(sc, i)) > i)
		cls = "com";
	else if ((syn->flags & HL_PREPROCESSOR) && c == '#' && at_line_start(sc, i))
		end = line_end(sc, i), cls = "meta";
	else if ((syn->flags & HL_TOML_KEYS) && c == '[' && at_line_start(sc, i))
		end = line_end(sc, i), cls = "meta";
	else if (strchr(syn->quotes, c) && c) {
		end = string_end(sc, i);
		size_t j = end;
		while (j < sc->len && (sc->s[j] == ' ' || sc->s[j] == '\t'))
			j++;
		cls = (syn->flags & HL_JSON_KEYS) && j < sc->len && sc->s[j] == ':' ? "key" : "str";
	} else if ((syn->flags & HL_SHELL_VARS) && c == '$' && (end = shell_var_end(sc, i)) > i)
		cls = "meta";
	else if ((syn->flags & HL_DECORATORS) && c == '@' && at_line_start(sc, i)) {
		for (end = i + 1; end < sc->len && (ident_char(sc->s[end]) || sc->s[end] == '.'); end++)
			;
		cls = "meta";
	} else if ((isdigit((unsigned char)c) || (c == '.' && i + 1 < sc->len && isdigit((unsigned char)sc->s[i + 1]))) &&
		   (i == 0 || !ident_char(sc->s[i - 1])))
		end = number_end(sc, i), cls = "num";
	else if (ident_char(c)) {
		for (end = i; end < sc->len && ident_char(sc->s[end]); end++)
			;
		cls = word_class(sc, i, end);
	} else
		end = i + 1;
	if (end <= i)
		end = i + 1;
	emit(sc, cls, i, end);
	sc->i = end;
}

/* Every token of sc's text, emitted; a run of plain bytes in one piece. */
static void scan_all(struct scan *sc)
{
	size_t plain = 0;
	while (sc->syn && sc->i < sc->len) {
		char c = sc->s[sc->i];
		if (isspace((unsigned char)c) || (!ident_char(c) && !strchr(sc->syn->quotes, c) && !strchr("#/$@.[", c))) {
			sc->i++;
			continue;
		}
		emit(sc, NULL, plain, sc->i);
		scan_token(sc);
		plain = sc->i;
	}
	emit(sc, NULL, plain, sc->len);
}

int highlight_code(const char *lang, const char *text, size_t len, struct strbuf *out)
{
	struct scan sc = { lang_find(lang), text, len, 0, out, 0 };
	scan_all(&sc);
	return sc.syn != NULL;
}

/* ---- the file page: by extension, as numbered rows ------------------------------ */

static const struct {
	const char *ext, *lang;
} by_extension[] = {
	{ ".py", "python" }, { ".pyi", "python" },
	{ ".c", "c" }, { ".h", "c" }, { ".cc", "c" }, { ".cpp", "c" }, { ".cxx", "c" }, { ".hh", "c" }, { ".hpp", "c" },
	{ ".cu", "c" }, { ".cuh", "c" }, { ".metal", "c" }, { ".mm", "c" },
	{ ".sh", "sh" }, { ".bash", "sh" },
	{ ".json", "json" },
	{ ".toml", "toml" },
};

const struct highlight_lang *highlight_lang_for(const char *path)
{
	size_t n = strlen(path);
	for (size_t i = 0; i < sizeof(by_extension) / sizeof(by_extension[0]); i++) {
		size_t e = strlen(by_extension[i].ext);
		if (n > e && strcasecmp(path + n - e, by_extension[i].ext) == 0)
			return lang_find(by_extension[i].lang);
	}
	return NULL;
}

const char *highlight_lang_name(const struct highlight_lang *lang)
{
	static const char *const names[] = { "python", "c", "shell", "json", "toml" };
	for (size_t i = 0; lang && i < sizeof(names) / sizeof(names[0]); i++)
		if (lang == lang_find(names[i]))
			return names[i];
	return "text";
}

void highlight_lines(struct strbuf *out, const char *text, size_t len, const struct highlight_lang *lang)
{
	if (len && text[len - 1] == '\n')
		len--;	/* no empty row after the last line */
	struct scan sc = { lang, text, len, 0, out, 0 };
	row_open(&sc);
	scan_all(&sc);
	strbuf_adds(out, "</td></tr>\n");
}
