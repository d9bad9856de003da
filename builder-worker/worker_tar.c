/* worker_tar.c -- the worker's tar files (libarchive): the job's source
 * unpacked with every entry checked (the bytes come over the network, so no
 * entry may land outside the scratch directory), the build's output packed,
 * and scratch directories removed. */
#include "builder-worker/daemon_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Normalise an entry name in place: "./" prefixes and one trailing '/'
 * dropped. Then 0 when it is a clean relative path, -1 otherwise. */
static int entry_path_clean(char *p, const char **out)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	size_t n = strlen(p);
	if (n && p[n - 1] == '/')
		p[--n] = '\0';
	*out = p;
	if (n == 0 || p[0] == '/')
		return n == 0 ? 1 : -1;	/* 1: the root itself, skipped */
	const char *c = p;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return -1;
		if (len == 4 && memcmp(c, ".git", 4) == 0)
			return -1;
		c += len + (slash ? 1 : 0);
		if (slash && !*c)
			return -1;
	}
	return 0;
}

/* 1 when a symbolic link at path (relative, clean) pointing to target stays
 * inside the tree, judged on the names alone. */
static int symlink_stays_inside(const char *path, const char *target)
{
	if (!target[0] || target[0] == '/')
		return 0;
	long depth = 0;
	for (const char *c = path; *c; c++)
		depth += *c == '/';	/* components of the link's directory */
	const char *c = target;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			if (--depth < 0)
				return 0;
		} else if (!(len == 0 || (len == 1 && c[0] == '.'))) {
			depth++;
		}
		c += len + (slash ? 1 : 0);
	}
	return 1;
}

/* Whether entry e (its name normalised into *name, inside copy) may be
 * unpacked: 0, 1 for the root directory itself (skipped), or KHUB_EINVAL
 * with why. */
static int entry_allowed(struct archive_entry *e, char *copy, const char **name, char *why, size_t why_size)
{
	const char *name0 = archive_entry_pathname(e);
	int clean = entry_path_clean(copy, name);
	unsigned type = archive_entry_filetype(e);
	if (clean == 1 && type == AE_IFDIR)
		return 1;
	if (clean != 0) {
		snprintf(why, why_size, "source tar: refused entry '%s' (not a clean relative path)", name0 ? name0 : "");
		return KHUB_EINVAL;
	}
	if (archive_entry_hardlink(e) || (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)) {
		snprintf(why, why_size, "source tar: refused entry '%s' (only files, directories "
			 "and links inside the tree)", *name);
		return KHUB_EINVAL;
	}
	const char *target = type == AE_IFLNK ? archive_entry_symlink(e) : NULL;
	if (type == AE_IFLNK && (!target || !symlink_stays_inside(*name, target))) {
		snprintf(why, why_size, "source tar: refused link '%s' -> '%s' (points outside "
			 "the tree)", *name, target ? target : "");
		return KHUB_EINVAL;
	}
	return 0;
}

/* A regular entry's data, at most size bytes of it. */
static int unpack_data(struct archive *in, struct archive *out, const char *name0, int64_t size, char *why,
		       size_t why_size)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	uint64_t got = 0;
	int r;
	while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
		got += len;
		if (got > (uint64_t)size || archive_write_data_block(out, buf, len, off) != ARCHIVE_OK) {
			snprintf(why, why_size, "source tar: writing '%s': %s", name0,
				 archive_error_string(out) ? archive_error_string(out) : "size mismatch");
			return KHUB_EIO;
		}
	}
	if (r != ARCHIVE_EOF) {
		snprintf(why, why_size, "source tar: %s", archive_error_string(in));
		return KHUB_EINVAL;
	}
	return KHUB_OK;
}

/* What one unpack has counted so far, against its limits. */
struct unpack_state {
	const char *root;
	const struct tar_limits *limits;
	uint64_t total, entries;
	int64_t *newest_mtime;
};

/* One entry checked, counted and written under st->root. */
static int unpack_entry(struct archive *in, struct archive *out, struct archive_entry *e, struct unpack_state *st,
			char *why, size_t why_size)
{
	const char *name0 = archive_entry_pathname(e), *name;
	char *copy = xstrdup(name0 ? name0 : "");
	unsigned type = archive_entry_filetype(e);
	int ret = entry_allowed(e, copy, &name, why, why_size);
	if (ret != 0)
		goto cleanup;
	if (st->newest_mtime && archive_entry_mtime_is_set(e) && archive_entry_mtime(e) > *st->newest_mtime)
		*st->newest_mtime = archive_entry_mtime(e);
	int64_t size = type == AE_IFREG ? archive_entry_size(e) : 0;
	st->total += size > 0 ? (uint64_t)size : 0;
	if (++st->entries > st->limits->max_entries || st->total > st->limits->max_bytes) {
		snprintf(why, why_size, "source tar: over the limit (%llu entries, %llu bytes at most)",
			 (unsigned long long)st->limits->max_entries, (unsigned long long)st->limits->max_bytes);
		ret = KHUB_ETOOBIG;
		goto cleanup;
	}
	char *full = xasprintf("%s/%s", st->root, name);
	archive_entry_set_pathname(e, full);
	if (type != AE_IFLNK)
		archive_entry_set_perm(e, type == AE_IFDIR || (archive_entry_perm(e) & 0111) ? 0755 : 0644);
	free(full);
	name0 = copy;	/* e's own name is the full path now */
	if (archive_write_header(out, e) != ARCHIVE_OK) {
		snprintf(why, why_size, "source tar: %s", archive_error_string(out));
		ret = KHUB_EINVAL;
		goto cleanup;
	}
	if (type == AE_IFREG && (ret = unpack_data(in, out, name0, size, why, why_size)) != KHUB_OK)
		goto cleanup;
	if (archive_write_finish_entry(out) != ARCHIVE_OK) {
		snprintf(why, why_size, "source tar: %s", archive_error_string(out));
		ret = KHUB_EIO;
	}
cleanup:
	free(copy);
	return ret == 1 ? KHUB_OK : ret;
}

int tar_unpack(const char *tar_path, const char *dest, const struct tar_limits *limits, int64_t *newest_mtime,
	       char *why, size_t why_size)
{
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	struct archive_entry *e;
	char root[PATH_MAX];
	struct unpack_state st = { .root = root, .limits = limits, .newest_mtime = newest_mtime };
	int ret = KHUB_OK, r = ARCHIVE_EOF;

	why[0] = '\0';
	if (newest_mtime)
		*newest_mtime = 0;
	/* the root without symbolic links: libarchive's link check below then
	 * only ever sees links the archive itself made */
	if (!realpath(dest, root)) {
		snprintf(why, why_size, "%s: %s", dest, strerror(errno));
		ret = KHUB_EIO;
		goto cleanup;
	}
	archive_read_support_format_tar(in);
	archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT);
	if (archive_read_open_filename(in, tar_path, 64 * 1024) != ARCHIVE_OK) {
		snprintf(why, why_size, "source tar: %s", archive_error_string(in));
		ret = KHUB_EINVAL;
		goto cleanup;
	}
	while (ret == KHUB_OK && (r = archive_read_next_header(in, &e)) == ARCHIVE_OK)
		ret = unpack_entry(in, out, e, &st, why, why_size);
	if (ret == KHUB_OK && r != ARCHIVE_EOF) {
		snprintf(why, why_size, "source tar: %s", archive_error_string(in));
		ret = KHUB_EINVAL;
	}
cleanup:
	if (archive_write_close(out) != ARCHIVE_OK && ret == KHUB_OK) {
		snprintf(why, why_size, "source tar: %s", archive_error_string(out));
		ret = KHUB_EIO;
	}
	archive_write_free(out);
	archive_read_free(in);
	return ret;
}

/* ---- packing --------------------------------------------------------------------------- */

/* Names in byte order, whatever the locale (alphasort uses strcoll). */
static int bytesort(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int pack_path(struct archive *a, const char *dir, const char *rel, int64_t mtime, char *why, size_t why_size);

/* A regular member's size bytes from fd. */
static int pack_data(struct archive *a, int fd, off_t size, const char *rel, char *why, size_t why_size)
{
	char buf[64 * 1024];
	ssize_t got;
	off_t left = size;
	while (left > 0 && (got = read(fd, buf, sizeof(buf))) > 0) {
		if (got > left)
			got = left;
		if (archive_write_data(a, buf, (size_t)got) != got) {
			snprintf(why, why_size, "output tar: %s", archive_error_string(a));
			return KHUB_EIO;
		}
		left -= got;
	}
	if (left != 0) {
		snprintf(why, why_size, "output %s: changed while packing", rel);
		return KHUB_EIO;
	}
	return KHUB_OK;
}

/* Every entry of the directory rel, in byte order. */
static int pack_children(struct archive *a, const char *dir, const char *rel, int64_t mtime, char *why,
			 size_t why_size)
{
	char *full = xasprintf("%s/%s", dir, rel);
	struct dirent **list = NULL;
	int n = scandir(full, &list, NULL, bytesort), ret = KHUB_OK;
	free(full);
	if (n < 0) {
		snprintf(why, why_size, "output %s: %s", rel, strerror(errno));
		return KHUB_EIO;
	}
	for (int i = 0; i < n && ret == KHUB_OK; i++) {
		const char *d = list[i]->d_name;
		if (strcmp(d, ".") == 0 || strcmp(d, "..") == 0)
			continue;
		char *child = xasprintf("%s/%s", rel, d);
		ret = pack_path(a, dir, child, mtime, why, why_size);
		free(child);
	}
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
	return ret;
}

/* One member; the same tree gives the same bytes (docs/worker-build.md
 * "Reproducible builds"): names sorted by byte, every mtime the given one,
 * owner 0:0 without names, mode 0755 or 0644. */
static int pack_path(struct archive *a, const char *dir, const char *rel, int64_t mtime, char *why, size_t why_size)
{
	char *full = xasprintf("%s/%s", dir, rel);
	struct archive_entry *e = NULL;
	int ret = KHUB_OK, fd = -1;
	struct stat st;

	if (lstat(full, &st) < 0) {
		snprintf(why, why_size, "output %s: %s", rel, strerror(errno));
		ret = KHUB_EIO;
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		snprintf(why, why_size, "output %s: not a regular file or directory", rel);
		ret = KHUB_EINVAL;
		goto cleanup;
	}
	e = archive_entry_new();
	archive_entry_set_pathname(e, rel);
	archive_entry_set_filetype(e, S_ISDIR(st.st_mode) ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(e, S_ISDIR(st.st_mode) || (st.st_mode & 0111) ? 0755 : 0644);
	archive_entry_set_size(e, S_ISREG(st.st_mode) ? st.st_size : 0);
	archive_entry_set_mtime(e, (time_t)mtime, 0);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	if (S_ISREG(st.st_mode) && (fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		snprintf(why, why_size, "output %s: %s", rel, strerror(errno));
		ret = KHUB_EIO;
		goto cleanup;
	}
	if (archive_write_header(a, e) != ARCHIVE_OK) {
		snprintf(why, why_size, "output tar: %s", archive_error_string(a));
		ret = KHUB_EIO;
		goto cleanup;
	}
	if (fd >= 0)
		ret = pack_data(a, fd, st.st_size, rel, why, why_size);
	else if (S_ISDIR(st.st_mode))
		ret = pack_children(a, dir, rel, mtime, why, why_size);
cleanup:
	if (fd >= 0)
		close(fd);
	archive_entry_free(e);
	free(full);
	return ret;
}

int tar_pack(const char *dir, const char *const *names, size_t nnames, int64_t mtime, const char *tar_path,
	     char *why, size_t why_size)
{
	struct archive *a = archive_write_new();
	int ret = KHUB_OK;
	why[0] = '\0';
	archive_write_set_format_pax_restricted(a);
	if (archive_write_open_filename(a, tar_path) != ARCHIVE_OK) {
		snprintf(why, why_size, "output tar: %s", archive_error_string(a));
		ret = KHUB_EIO;
		goto cleanup;
	}
	for (size_t i = 0; i < nnames && ret == KHUB_OK; i++) {
		char *full = xasprintf("%s/%s", dir, names[i]);
		struct stat st;
		int present = lstat(full, &st) == 0;
		free(full);
		if (present)
			ret = pack_path(a, dir, names[i], mtime, why, why_size);
	}
	if (archive_write_close(a) != ARCHIVE_OK && ret == KHUB_OK) {
		snprintf(why, why_size, "output tar: %s", archive_error_string(a));
		ret = KHUB_EIO;
	}
cleanup:
	archive_write_free(a);
	return ret;
}
