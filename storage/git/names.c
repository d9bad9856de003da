/* names.c -- repo types, and validation of names, file paths and ref names. */
#include "storage/git/repo.h"

#include <string.h>

static const struct {
	const char *name, *plural, *url_prefix;
} repo_types[REPO_TYPE_COUNT] = {
	[REPO_MODEL] = { "model", "models", "" },
	[REPO_DATASET] = { "dataset", "datasets", "datasets/" },
	[REPO_SPACE] = { "space", "spaces", "spaces/" },
	[REPO_KERNEL] = { "kernel", "kernels", "kernels/" },
};

const char *repo_type_name(enum repo_type type) { return repo_types[type].name; }
const char *repo_type_plural(enum repo_type type) { return repo_types[type].plural; }
const char *repo_type_url_prefix(enum repo_type type) { return repo_types[type].url_prefix; }

int repo_type_parse(const char *s, enum repo_type *out)
{
	for (int t = 0; t < REPO_TYPE_COUNT; t++) {
		if (strcmp(s, repo_types[t].name) == 0 || strcmp(s, repo_types[t].plural) == 0) {
			*out = (enum repo_type)t;
			return 0;
		}
	}
	return KHUB_EINVAL;
}

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.';
}

static int fail(const char **why, const char *msg)
{
	if (why)
		*why = msg;
	return KHUB_EINVAL;
}

int repo_name_validate(const char *name, const char **why)
{
	size_t len = strlen(name);
	if (len == 0 || len > REPO_NAME_MAX)
		return fail(why, len ? "name is longer than 96 characters" : "name is empty");
	if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
	      (name[0] >= '0' && name[0] <= '9')))
		return fail(why, "name must start with a letter or digit");
	for (size_t i = 0; i < len; i++)
		if (!is_name_char(name[i]))
			return fail(why, "name may only contain letters, digits, '-', '_' and '.'");
	if (strstr(name, ".."))
		return fail(why, "name must not contain '..'");
	if (len >= 4 && strcmp(name + len - 4, ".git") == 0)
		return fail(why, "name must not end in '.git'");
	if (name[len - 1] == '.' || name[len - 1] == '-')
		return fail(why, "name must not end in '.' or '-'");
	return 0;
}

/* Is the UTF-8 text valid (no overlongs, no surrogates, <= U+10FFFF)? */
static int utf8_valid(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		int len = utf8_decode(s + i, n - i, NULL);
		if (len < 0)
			return 0;
		i += (size_t)len;
	}
	return 1;
}

/* Code points HFS+ ignores when comparing names (git's is_hfs_dotgit). */
static int hfs_ignorable(uint32_t cp)
{
	return cp == 0x200c || cp == 0x200d || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x206a && cp <= 0x206f) || cp == 0xfeff;
}

/* A component a checkout on some platform would treat as ".git": any case,
 * with HFS-ignorable characters, trailing dots/spaces (NTFS), or the NTFS
 * short name GIT~1. */
static int names_dot_git(const char *seg, size_t n)
{
	char folded[8];
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)seg[i];
		if (c >= 0x80) {
			uint32_t cp;
			int len = utf8_decode((const unsigned char *)seg + i, n - i, &cp);
			if (len < 0 || !hfs_ignorable(cp))
				return 0;
			i += (size_t)len;
			continue;
		}
		if (k == sizeof(folded))
			return 0;
		folded[k++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		i++;
	}
	while (k > 4 && (folded[k - 1] == '.' || folded[k - 1] == ' '))
		k--;	/* NTFS drops trailing dots and spaces */
	if (k == 4 && memcmp(folded, ".git", 4) == 0)
		return 1;
	return k == 5 && memcmp(folded, "git~1", 5) == 0;
}

int repo_path_validate(const char *path, const char **why)
{
	size_t len = strlen(path);
	if (len == 0 || len > REPO_PATH_MAX)
		return fail(why, len ? "path is longer than 1024 bytes" : "path is empty");
	if (path[0] == '/')
		return fail(why, "path must be relative");
	if (!utf8_valid((const unsigned char *)path, len))
		return fail(why, "path is not valid UTF-8");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)path[i];
		if (c < 0x20 || c == 0x7f)
			return fail(why, "path contains a control character");
		if (c == '\\')
			return fail(why, "path contains a backslash");
	}
	const char *seg = path;
	for (;;) {
		const char *slash = strchr(seg, '/');
		size_t n = slash ? (size_t)(slash - seg) : strlen(seg);
		if (n == 0)
			return fail(why, "path has an empty component");
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return fail(why, "path must not contain '.' or '..' components");
		if (names_dot_git(seg, n))
			return fail(why, "path must not contain a '.git' component (in any spelling)");
		if (n == 6 && strncasecmp(seg, ".cache", 6) == 0)
			return fail(why, "path must not contain a '.cache' component");
		if (n > 255)
			return fail(why, "path component is longer than 255 bytes");
		if (!slash)
			break;
		seg = slash + 1;
	}
	return 0;
}

int ref_name_validate(const char *name, const char **why)
{
	size_t len = strlen(name);
	if (len == 0)
		return fail(why, "ref name is empty");
	if (len > REF_NAME_MAX)
		return fail(why, "ref name is too long");
	if (name[0] == '/' || name[len - 1] == '/' || name[0] == '-')
		return fail(why, "ref name must not start or end with '/' or start with '-'");
	if (name[len - 1] == '.')
		return fail(why, "ref name must not end with '.'");
	if (strstr(name, "..") || strstr(name, "//") || strstr(name, "@{") || strstr(name, "/."))
		return fail(why, "ref name contains '..', '//', '/.' or '@{'");
	if (name[0] == '.')
		return fail(why, "ref name must not start with '.'");
	if (strcmp(name, "@") == 0)
		return fail(why, "ref name must not be '@'");
	/* Names git would resolve to something else than this branch or tag. */
	static const char *const ambiguous[] = { "HEAD", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD",
						 "CHERRY_PICK_HEAD", "REVERT_HEAD", "BISECT_HEAD", "AUTO_MERGE" };
	for (size_t i = 0; i < sizeof(ambiguous) / sizeof(ambiguous[0]); i++)
		if (strcmp(name, ambiguous[i]) == 0)
			return fail(why, "ref name must not be HEAD or another name git reserves");
	if (strncmp(name, "refs/", 5) == 0)
		return fail(why, "ref name must not start with 'refs/'");
	if (len == 40 || len == 64) {
		size_t hex = strspn(name, "0123456789abcdefABCDEF");
		if (hex == len)
			return fail(why, "ref name must not look like a commit sha");
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c < 0x20 || c == 0x7f || strchr(" ~^:?*[\\", c))
			return fail(why, "ref name contains a forbidden character");
	}
	const char *seg = name;
	for (;;) {
		const char *slash = strchr(seg, '/');
		size_t n = slash ? (size_t)(slash - seg) : strlen(seg);
		if (n >= 5 && strncmp(seg + n - 5, ".lock", 5) == 0)
			return fail(why, "ref name component must not end in '.lock'");
		if (!slash)
			break;
		seg = slash + 1;
	}
	return 0;
}
