/* test_build_output.c -- the build farm's checks of a worker's output: tar
 * member names, build.toml's version, and whole tars (made here with
 * libarchive) against the layout rules and the attacks: sparse members
 * claiming a gigabyte, sizes past the bytes the tar holds, hard links,
 * symlinks, devices, fifos and absurd member counts. */
#include "farm/farm.h"
#include "tap.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *clean(const char *raw)
{
	static char buf[256];
	char *p = build_output_clean_path(raw);
	snprintf(buf, sizeof(buf), "%s", p ? p : "(refused)");
	free(p);
	return buf;
}

#define V "torch211-cxx11-cpu-x86_64-linux"
static const char metadata[] = "{\"id\":\"_relu\",\"name\":\"relu\",\"version\":2,\"license\":\"apache-2.0\","
			       "\"python-depends\":[],\"backend\":{\"type\":\"cpu\"}}";

/* Member types: f file, d directory, l symlink (content: target), h hard
 * link (content: target), c character device, p fifo, S sparse file of 1 GiB
 * (content: the few real bytes at its start and at its end). */
static void write_member(struct archive *a, const char *name, const char *type, const char *data)
{
	struct archive_entry *e = archive_entry_new();
	static const struct {
		char type;
		mode_t mode;
	} kinds[] = { { 'f', AE_IFREG }, { 'd', AE_IFDIR }, { 'l', AE_IFLNK }, { 'h', AE_IFREG },
		      { 'c', AE_IFCHR }, { 'p', AE_IFIFO }, { 'S', AE_IFREG } };
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		if (kinds[k].type == type[0])
			archive_entry_set_filetype(e, kinds[k].mode);
	archive_entry_set_pathname(e, name);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 0);
	if (type[0] == 'l')
		archive_entry_set_symlink(e, data);
	if (type[0] == 'h')
		archive_entry_set_hardlink(e, data);
	if (type[0] == 'f')
		archive_entry_set_size(e, (la_int64_t)strlen(data));
	if (type[0] == 'S') {
		la_int64_t big = (la_int64_t)1 << 30, n = (la_int64_t)strlen(data);
		archive_entry_set_size(e, big);
		archive_entry_sparse_add_entry(e, 0, n);
		archive_entry_sparse_add_entry(e, big - n, n);
	}
	archive_write_header(a, e);
	if (type[0] == 'f')
		archive_write_data(a, data, strlen(data));
	if (type[0] == 'S') {
		/* the writer takes the real bytes in order, holes skipped */
		archive_write_data(a, data, strlen(data));
		archive_write_data(a, data, strlen(data));
	}
	archive_entry_free(e);
}

/* A tar of (name, type, content) triples; returns its path (caller frees). */
static char *make_tar(const char *const *members, size_t n)
{
	char *path = strdup("/tmp/test_build_output-XXXXXX");
	int fd = mkstemp(path);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_open_fd(a, fd);
	for (size_t i = 0; i + 2 < n * 3; i += 3)
		write_member(a, members[i], members[i + 1], members[i + 2]);
	archive_write_close(a);
	archive_write_free(a);
	close(fd);
	return path;
}

static int check(const char *const *members, size_t n, const char *toml, char *why, size_t why_size)
{
	char *path = make_tar(members, n);
	struct build_output out;
	int rc = build_output_check(path, V, toml, &out, why, why_size);
	build_output_release(&out);
	unlink(path);
	free(path);
	return rc;
}

/* The peak memory of this process so far, in MiB. */
static long peak_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024;
}

/* A tar of `count` copies of one directory entry and nothing else. */
static char *many_entries(size_t count)
{
	char *path = strdup("/tmp/test_build_output-XXXXXX");
	int fd = mkstemp(path);
	struct archive *a = archive_write_new();
	archive_write_set_format_ustar(a);
	archive_write_open_fd(a, fd);
	for (size_t i = 0; i < count; i++)
		write_member(a, "./", "d", "");
	archive_write_close(a);
	archive_write_free(a);
	close(fd);
	return path;
}

static void attacks(void)
{
	char why[512];
	struct build_output out;
	long before = peak_mib();
	farm_settings.output_max_bytes = 4L << 30;	/* the default: the check must not lean on it */
	const char *sparse[] = { V "/metadata.json", "f", metadata, V "/a.so", "S", "ELF", V "/b.so", "S", "ELF" };
	char *path = make_tar(sparse, 3);
	struct stat st;
	stat(path, &st);
	ok(st.st_size < 64 * 1024, "the sparse tar is small (%lld bytes) and claims two 1 GiB members",
	   (long long)st.st_size);
	ok(build_output_check(path, V, NULL, &out, why, sizeof(why)) < 0 && strstr(why, "sparse"),
	   "sparse members are refused: %s", why);
	build_output_release(&out);
	unlink(path);
	free(path);
	ok(peak_mib() - before < 64, "… without allocating their declared size (peak grew %ld MiB)", peak_mib() - before);

	const char *big[] = { V "/metadata.json", "f", metadata, V "/a.so", "f", "0123456789" };
	path = make_tar(big, 2);
	size_t tar_len = 0;
	char *bytes = read_file_limited(path, 1 << 20, &tar_len);
	char *at = bytes ? memmem(bytes, tar_len, "0123456789", 10) : NULL;
	ok(at && truncate(path, at - bytes + 5) == 0, "(a tar cut in the middle of a member's bytes)");
	free(bytes);
	ok(build_output_check(path, V, NULL, &out, why, sizeof(why)) < 0, "a member whose bytes are missing: %s", why);
	build_output_release(&out);
	unlink(path);
	free(path);

	struct archive *ar;
	path = make_tar(big, 2);
	ok(build_output_open(path, &ar) == 0, "(a tar to read a member from)");
	struct archive_entry *e;
	archive_read_next_header(ar, &e);
	size_t len = 7;
	char *data = build_output_read_member(ar, (int64_t)1 << 31, (size_t)1 << 32, &len);
	ok(!data && peak_mib() - before < 64, "read_member of a member said to hold 2 GiB but holding %d bytes: NULL",
	   (int)strlen(metadata));
	archive_read_free(ar);
	unlink(path);
	free(path);

	const char *hard[] = { V "/metadata.json", "f", metadata, V "/x", "h", "../../../etc/passwd" };
	ok(check(hard, 2, NULL, why, sizeof(why)) < 0 && strstr(why, "not a regular file"), "a hard link: %s", why);
	const char *hardin[] = { V "/metadata.json", "f", metadata, V "/x", "h", V "/metadata.json" };
	ok(check(hardin, 2, NULL, why, sizeof(why)) < 0, "a hard link inside the variant: %s", why);
	const char *sym[] = { V "/metadata.json", "f", metadata, V "/lib", "l", "../../../../root" };
	ok(check(sym, 2, NULL, why, sizeof(why)) < 0, "a symlink escaping: %s", why);
	const char *dev[] = { V "/metadata.json", "f", metadata, V "/null", "c", "" };
	ok(check(dev, 2, NULL, why, sizeof(why)) < 0, "a character device: %s", why);
	const char *fifo[] = { V "/metadata.json", "f", metadata, V "/pipe", "p", "" };
	ok(check(fifo, 2, NULL, why, sizeof(why)) < 0, "a fifo: %s", why);
	const char *twice[] = { V "/metadata.json", "f", metadata, "README.md", "f", "a", "README.md", "f", "b" };
	ok(check(twice, 3, NULL, why, sizeof(why)) < 0, "README.md twice: %s", why);

	path = many_entries(30000);
	ok(build_output_check(path, V, NULL, &out, why, sizeof(why)) < 0 && strstr(why, "entries"),
	   "30000 \"./\" entries: %s", why);
	build_output_release(&out);
	unlink(path);
	free(path);
	farm_settings.output_max_bytes = 1 << 20;
}

int main(void)
{
	farm_settings.output_max_bytes = 1 << 20;
	ok(strcmp(clean("a/b.py"), "a/b.py") == 0, "a plain path");
	ok(strcmp(clean("./a/b.py"), "a/b.py") == 0, "a leading ./ is dropped");
	ok(strcmp(clean("a/"), "a") == 0, "a directory's trailing / is dropped");
	ok(strcmp(clean("/etc/passwd"), "(refused)") == 0, "absolute: refused");
	ok(strcmp(clean("a/../b"), "(refused)") == 0, "..: refused");
	ok(strcmp(clean(".."), "(refused)") == 0, "bare ..: refused");
	ok(strcmp(clean("a/./b"), "(refused)") == 0, ". inside: refused");
	ok(strcmp(clean("a//b"), "(refused)") == 0, "empty component: refused");
	ok(strcmp(clean(""), "(refused)") == 0, "empty: refused");
	ok(strcmp(clean(".git/config"), "(refused)") == 0, ".git: refused");

	ok(build_toml_version("[general]\nname = \"relu\"\nversion = 3\n") == 3, "build.toml [general] version");
	ok(build_toml_version("[torch]\nversion = 9\n[general]\nname = \"x\"\n") == -1, "a version in another table is not it");
	ok(build_toml_version("") == -1, "no version");

	char why[512];
	const char *good[] = { V, "d", "", V "/__init__.py", "f", "x = 1\n", V "/metadata.json", "f", metadata,
			       "abi-report.json", "f", "{\"ok\": true}", "README.md", "f", "# relu\n" };
	ok(check(good, 5, "[general]\nversion = 2\n", why, sizeof(why)) == 0, "a good output passes");
	ok(check(good, 5, "[general]\nversion = 1\n", why, sizeof(why)) < 0 && strstr(why, "version"),
	   "build.toml says another version: %s", why);
	const char *link[] = { V "/metadata.json", "f", metadata, V "/x", "l", "/etc/passwd" };
	ok(check(link, 2, NULL, why, sizeof(why)) < 0, "a symlink: %s", why);
	const char *other[] = { V "/metadata.json", "f", metadata, "torch999-x/a.py", "f", "" };
	ok(check(other, 2, NULL, why, sizeof(why)) < 0, "another top directory: %s", why);
	const char *nometa[] = { V "/a.py", "f", "" };
	ok(check(nometa, 1, NULL, why, sizeof(why)) < 0 && strstr(why, "metadata.json"), "no metadata.json: %s", why);
	const char *badreport[] = { V "/metadata.json", "f", metadata, "abi-report.json", "f", "[1]" };
	ok(check(badreport, 2, NULL, why, sizeof(why)) < 0, "a report without \"ok\": %s", why);
	attacks();
	return done_testing();
}
