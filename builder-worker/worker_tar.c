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

int tar_unpack(const char *tar_path, const char *dest, const struct tar_limits *limits, int64_t *newest_mtime,
	       char *why, size_t why_size)
{
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	struct archive_entry *e;
	char root[PATH_MAX];
	uint64_t total = 0, entries = 0;
	int ret = KHUB_OK, r;

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
	while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
		const char *name0 = archive_entry_pathname(e);
		char *copy = xstrdup(name0 ? name0 : "");
		const char *name;
		int clean = entry_path_clean(copy, &name);
		unsigned type = archive_entry_filetype(e);
		if (clean == 1 && type == AE_IFDIR) {
			free(copy);
			continue;
		}
		if (clean != 0) {
			snprintf(why, why_size, "source tar: refused entry '%s' (not a clean relative path)",
				 name0 ? name0 : "");
			free(copy);
			ret = KHUB_EINVAL;
			goto cleanup;
		}
		if (archive_entry_hardlink(e) || (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)) {
			snprintf(why, why_size, "source tar: refused entry '%s' (only files, directories "
				 "and links inside the tree)", name);
			free(copy);
			ret = KHUB_EINVAL;
			goto cleanup;
		}
		if (type == AE_IFLNK) {
			const char *target = archive_entry_symlink(e);
			if (!target || !symlink_stays_inside(name, target)) {
				snprintf(why, why_size, "source tar: refused link '%s' -> '%s' (points outside "
					 "the tree)", name, target ? target : "");
				free(copy);
				ret = KHUB_EINVAL;
				goto cleanup;
			}
		}
		if (newest_mtime && archive_entry_mtime_is_set(e) && archive_entry_mtime(e) > *newest_mtime)
			*newest_mtime = archive_entry_mtime(e);
		int64_t size = type == AE_IFREG ? archive_entry_size(e) : 0;
		total += size > 0 ? (uint64_t)size : 0;
		if (++entries > limits->max_entries || total > limits->max_bytes) {
			snprintf(why, why_size, "source tar: over the limit (%llu entries, %llu bytes at most)",
				 (unsigned long long)limits->max_entries, (unsigned long long)limits->max_bytes);
			free(copy);
			ret = KHUB_ETOOBIG;
			goto cleanup;
		}
		char *full = xasprintf("%s/%s", root, name);
		archive_entry_set_pathname(e, full);
		if (type != AE_IFLNK)
			archive_entry_set_perm(e, type == AE_IFDIR || (archive_entry_perm(e) & 0111) ? 0755 : 0644);
		free(full);
		free(copy);
		if (archive_write_header(out, e) != ARCHIVE_OK) {
			snprintf(why, why_size, "source tar: %s", archive_error_string(out));
			ret = KHUB_EINVAL;
			goto cleanup;
		}
		if (type == AE_IFREG) {
			const void *buf;
			size_t len;
			la_int64_t off;
			uint64_t got = 0;
			while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
				got += len;
				if (got > (uint64_t)size || archive_write_data_block(out, buf, len, off) != ARCHIVE_OK) {
					snprintf(why, why_size, "source tar: writing '%s': %s", name0,
						 archive_error_string(out) ? archive_error_string(out) : "size mismatch");
					ret = KHUB_EIO;
					goto cleanup;
				}
			}
			if (r != ARCHIVE_EOF) {
				snprintf(why, why_size, "source tar: %s", archive_error_string(in));
				ret = KHUB_EINVAL;
				goto cleanup;
			}
		}
		if (archive_write_finish_entry(out) != ARCHIVE_OK) {
			snprintf(why, why_size, "source tar: %s", archive_error_string(out));
			ret = KHUB_EIO;
			goto cleanup;
		}
	}
	if (r != ARCHIVE_EOF) {
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

/* One member; the same tree gives the same bytes (docs/worker-build.md
 * "Reproducible builds"): names sorted by byte, every mtime the given one,
 * owner 0:0 without names, mode 0755 or 0644. */
static int pack_path(struct archive *a, const char *dir, const char *rel, int64_t mtime, char *why, size_t why_size)
{
	char *full = xasprintf("%s/%s", dir, rel);
	struct archive_entry *e = NULL;
	struct dirent **list = NULL;
	int n = 0, ret = KHUB_OK, fd = -1;
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
	if (fd >= 0) {
		char buf[64 * 1024];
		ssize_t got;
		off_t left = st.st_size;
		while (left > 0 && (got = read(fd, buf, sizeof(buf))) > 0) {
			if (got > left)
				got = left;
			if (archive_write_data(a, buf, (size_t)got) != got) {
				snprintf(why, why_size, "output tar: %s", archive_error_string(a));
				ret = KHUB_EIO;
				goto cleanup;
			}
			left -= got;
		}
		if (left != 0) {
			snprintf(why, why_size, "output %s: changed while packing", rel);
			ret = KHUB_EIO;
			goto cleanup;
		}
	}
	if (S_ISDIR(st.st_mode)) {
		n = scandir(full, &list, NULL, bytesort);
		if (n < 0) {
			snprintf(why, why_size, "output %s: %s", rel, strerror(errno));
			ret = KHUB_EIO;
			goto cleanup;
		}
		for (int i = 0; i < n && ret == KHUB_OK; i++) {
			const char *d = list[i]->d_name;
			if (strcmp(d, ".") == 0 || strcmp(d, "..") == 0)
				continue;
			char *child = xasprintf("%s/%s", rel, d);
			ret = pack_path(a, dir, child, mtime, why, why_size);
			free(child);
		}
	}
cleanup:
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
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
