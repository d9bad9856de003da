/* util.c -- allocation, hex, hashing, time and filesystem helpers. */
#include "common.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void out_of_memory(void)
{
	fputs("khub: out of memory\n", stderr);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		out_of_memory();
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		out_of_memory();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		out_of_memory();
	return p;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	return strbuf_detach(&sb, NULL);
}

void free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void hex_encode(const unsigned char *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int hex_decode(const char *hex, unsigned char *out, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		int hi = hex_value(hex[2 * i]), lo = hi < 0 ? -1 : hex_value(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int is_lower_hex(const char *s, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[i] == '\0';
}

char *base64_encode(const void *data, size_t len)
{
	char *out = xmalloc(4 * ((len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

unsigned char *base64_decode_strict(const char *text, size_t len, size_t *out_len)
{
	if (len % 4 != 0 || len > INT_MAX)
		return NULL;
	for (size_t i = 0; i < len; i++)	/* EVP_DecodeBlock skips blanks: the strict alphabet only */
		if (!isalnum((unsigned char)text[i]) && text[i] != '+' && text[i] != '/' &&
		    !(text[i] == '=' && i + 2 >= len))
			return NULL;
	if (len && text[len - 2] == '=' && text[len - 1] != '=')
		return NULL;
	unsigned char *out = xmalloc(len / 4 * 3 + 1);
	int n = len ? EVP_DecodeBlock(out, (const unsigned char *)text, (int)len) : 0;
	if (n < 0) {
		free(out);
		return NULL;
	}
	size_t pad = len && text[len - 1] == '=' ? (text[len - 2] == '=' ? 2 : 1) : 0;
	*out_len = (size_t)n - pad;
	return out;
}

void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char digest[32];
	unsigned int dlen = 0;
	EVP_Digest(data, len, digest, &dlen, EVP_sha256(), NULL);
	hex_encode(digest, 32, out);
}

void sha256_final_hex(EVP_MD_CTX *ctx, char out[65])
{
	unsigned char digest[32];
	unsigned int dlen = 0;
	EVP_DigestFinal_ex(ctx, digest, &dlen);
	hex_encode(digest, 32, out);
}

int percent_decode_inplace(char *s)
{
	char *out = s;
	for (char *in = s; *in; in++) {
		if (*in == '%') {
			int hi = hex_value(in[1]), lo = hi < 0 ? -1 : hex_value(in[2]);
			if (hi < 0 || lo < 0)
				return -1;
			char c = (char)(hi << 4 | lo);
			if (c == '\0')
				return -1;
			*out++ = c;
			in += 2;
		} else {
			*out++ = *in;
		}
	}
	*out = '\0';
	return 0;
}

void format_iso8601(time_t t, char out[32])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

static uint64_t clock_usec(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t monotonic_usec(void)
{
	return clock_usec(CLOCK_MONOTONIC);
}

uint64_t monotonic_coarse_usec(void)
{
	return clock_usec(CLOCK_MONOTONIC_COARSE);
}

struct timespec clock_after_usec(clockid_t clock, uint64_t usec)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(usec / 1000000u);
	ts.tv_nsec += (long)(usec % 1000000u) * 1000;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

void dlist_append(struct dlist *l, struct dlist_node *n)
{
	n->prev = l->last;
	n->next = NULL;
	if (l->last)
		l->last->next = n;
	else
		l->first = n;
	l->last = n;
}

void dlist_unlink(struct dlist *l, struct dlist_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		l->first = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->last = n->prev;
	n->prev = n->next = NULL;
}

void bg_thread_start(struct bg_thread *t, void *(*fn)(void *), const char *what)
{
	t->stopping = 0;
	if (pthread_create(&t->thread, NULL, fn, NULL) != 0)
		fatal("cannot start the %s", what);
	t->running = 1;
}

void bg_thread_stop(struct bg_thread *t)
{
	if (!t->running)
		return;
	pthread_mutex_lock(&t->lock);
	t->stopping = 1;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	t->running = 0;
}

int mkdir_p(const char *path, unsigned mode)
{
	char *copy = xstrdup(path);
	int rc = 0;
	for (char *p = copy + 1; ; p++) {
		if (*p == '/' || *p == '\0') {
			char saved = *p;
			*p = '\0';
			if (mkdir(copy, mode) < 0 && errno != EEXIST) {
				rc = -1;
				break;
			}
			*p = saved;
			if (saved == '\0')
				break;
		}
	}
	free(copy);
	return rc;
}

int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* read_until_deadline and read_until_deadline_or_limit: stop (2) at the
 * limit, or keep draining past it. */
static int read_pipe(int fd, uint64_t deadline, size_t limit, int stop_at_limit, struct strbuf *out)
{
	for (;;) {
		uint64_t now = monotonic_usec();
		if (now >= deadline)
			return 1;
		if (stop_at_limit && out->len >= limit)
			return 2;
		struct pollfd p = { fd, POLLIN, 0 };
		int n = poll(&p, 1, (int)((deadline - now) / 1000) + 1);
		if (n < 0 && errno != EINTR)
			return -1;
		if (n <= 0)
			continue;
		char buf[4096];
		ssize_t got = read(fd, buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -1 : 0;
		if (stop_at_limit || !limit || out->len < limit)
			strbuf_add(out, buf, (size_t)got);
	}
}

int read_until_deadline(int fd, uint64_t deadline, size_t limit, struct strbuf *out)
{
	return read_pipe(fd, deadline, limit, 0, out);
}

int read_until_deadline_or_limit(int fd, uint64_t deadline, size_t limit, struct strbuf *out)
{
	return read_pipe(fd, deadline, limit, 1, out);
}

/* Names in byte order, whatever the file system or locale: a walk visits
 * the same tree in the same order (reproducible builds). */
static int walk_order(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int walk_below(const char *root, const char *rel,
		      int (*visit)(const char *rel, const char *path, const char *name, void *ctx), void *ctx)
{
	char *dir = *rel ? xasprintf("%s/%s", root, rel) : xstrdup(root);
	struct dirent **list = NULL;
	int n = scandir(dir, &list, NULL, walk_order);
	free(dir);
	if (n < 0)
		return KHUB_EIO;
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		const char *name = list[i]->d_name;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		char *sub = *rel ? xasprintf("%s/%s", rel, name) : xstrdup(name);
		char *path = xasprintf("%s/%s", root, sub);
		rc = visit(sub, path, name, ctx);
		if (rc == DIR_WALK_ENTER)
			rc = walk_below(root, sub, visit, ctx);
		free(path);
		free(sub);
	}
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
	return rc;
}

int dir_walk(const char *root, int (*visit)(const char *rel, const char *path, const char *name, void *ctx), void *ctx)
{
	return walk_below(root, "", visit, ctx);
}

/* Open the directory name (under dirfd) to empty it, never through a
 * link: one the worker cannot search or write (a build's chmod 0500) is
 * given u+rwx first. -1 with errno when it cannot be opened. */
static int open_dir_to_empty(int dirfd, const char *name)
{
	int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(dirfd, name, flags);
	if (fd < 0 && errno == EACCES) {
		struct stat st;	/* O_NOFOLLOW gave EACCES: a directory, not a link */
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
		    fchmodat(dirfd, name, (st.st_mode & 07777) | S_IRWXU, 0) == 0)
			fd = openat(dirfd, name, flags);
	}
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
		(void)fchmod(fd, (st.st_mode & 07777) | S_IRWXU);
	return fd;
}

/* Remove name (under dirfd) and everything below it; one descriptor per
 * level, so no path grows with the depth. 0 or -1. */
static int remove_at(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -1 : 0;
	int fd = open_dir_to_empty(dirfd, name);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && remove_at(fd, e->d_name) < 0)
			rc = -1;
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -1;
	return rc;
}

int tree_remove(const char *path)
{
	return remove_at(AT_FDCWD, path) < 0 ? KHUB_EIO : 0;
}

static int fsync_opened(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

int fsync_dir(const char *path)
{
	return fsync_opened(path, O_RDONLY | O_DIRECTORY);
}

int fsync_file(const char *path)
{
	return fsync_opened(path, O_RDONLY);
}

char *read_file_limited(const char *path, size_t limit, size_t *len)
{
	FILE *fp = fopen(path, "rbe");
	if (!fp)
		return NULL;
	struct strbuf sb = STRBUF_INIT;
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
		if (sb.len + n > limit) {
			strbuf_release(&sb);
			fclose(fp);
			errno = EFBIG;
			return NULL;
		}
		strbuf_add(&sb, chunk, n);
	}
	fclose(fp);
	return strbuf_detach(&sb, len);
}

const char *khub_strerror(int err)
{
	switch (err) {
	case KHUB_OK: return "ok";
	case KHUB_ENOTFOUND: return "not found";
	case KHUB_EINVAL: return "invalid input";
	case KHUB_EEXIST: return "already exists";
	case KHUB_ECONFLICT: return "conflict";
	case KHUB_EIO: return "storage failure";
	case KHUB_EDB: return "database failure";
	case KHUB_ETOOBIG: return "too large";
	case KHUB_EPERM: return "not allowed";
	case KHUB_ENOTDIR: return "not a directory";
	case KHUB_ENOSPC: return "no space left on the storage device";
	case KHUB_EBUSY: return "busy: another writer holds it, retry";
	}
	return "unknown error";
}

int khub_err_from_errno(int errnum)
{
	return errnum == ENOSPC || errnum == EDQUOT ? KHUB_ENOSPC : KHUB_EIO;
}
