/* test_worker_tar.c -- khub-worker's tar code: the source unpacker refuses
 * every entry that could land outside the scratch directory (.., absolute,
 * links out, hard links, devices) and writes nothing outside; the output
 * packer round-trips a variant directory and refuses links. */
#include "builder-worker/daemon_internal.h"
#include "tests/unit/tap.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[256];

struct ent {
	const char *path;
	unsigned type;		/* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR; 0 = hard link */
	const char *data;	/* file content, or the link target */
};

static void make_tar(const char *tar, const struct ent *ents, size_t n)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_open_filename(a, tar);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, ents[i].path);
		if (ents[i].type == 0) {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_hardlink(e, ents[i].data);
		} else {
			archive_entry_set_filetype(e, ents[i].type);
		}
		archive_entry_set_perm(e, 0644);
		if (ents[i].type == AE_IFLNK)
			archive_entry_set_symlink(e, ents[i].data);
		if (ents[i].type == AE_IFREG)
			archive_entry_set_size(e, (la_int64_t)strlen(ents[i].data));
		archive_write_header(a, e);
		if (ents[i].type == AE_IFREG)
			archive_write_data(a, ents[i].data, strlen(ents[i].data));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
}

static int exists(const char *rel)
{
	char *p = xasprintf("%s/%s", base, rel);
	struct stat st;
	int r = lstat(p, &st) == 0;
	free(p);
	return r;
}

/* Unpack ents into a fresh <base>/<dir>; the result of tar_unpack. */
static int unpack(const char *dir, const struct ent *ents, size_t n, char *why, size_t why_size)
{
	char *tar = xasprintf("%s/%s.tar", base, dir);
	char *dest = xasprintf("%s/%s", base, dir);
	mkdir(dest, 0755);
	make_tar(tar, ents, n);
	struct tar_limits lim = { .max_bytes = 1024 * 1024, .max_entries = 100 };
	int r = tar_unpack(tar, dest, &lim, NULL, why, why_size);
	free(tar);
	free(dest);
	return r;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The same files made in another order, at other times, with other
 * modes' group bits and in a directory of another name pack to the same
 * bytes (a rebuild's output tar is the same). */
static void same_bytes_from_another_tree(const char *root, const char *out, const char *tar)
{
	char why[256];
	char *other = xasprintf("%s/other-scratch-name/out", root);
	char *sub = xasprintf("%s/torch-cpu/sub", other);
	mkdir_p(sub, 0775);
	const char *files[][2] = { { "abi-report.json", "{\"ok\": true}\n" }, { "torch-cpu/sub/a.py", "a = 1\n" },
				   { "torch-cpu/__init__.py", "import torch\n" } };
	for (size_t i = 0; i < 3; i++) {
		char *f = xasprintf("%s/%s", other, files[i][0]);
		FILE *fp = fopen(f, "w");
		fputs(files[i][1], fp);
		fclose(fp);
		chmod(f, 0664);
		struct timespec times[2] = { { 12345, 0 }, { 1000000 + (time_t)i, 0 } };
		utimensat(AT_FDCWD, f, times, 0);
		free(f);
	}
	/* a name that sorts differently by locale than by byte */
	char *a = xasprintf("%s/torch-cpu/B.py", out), *b = xasprintf("%s/torch-cpu/B.py", other);
	char *c = xasprintf("%s/torch-cpu/a_.py", out), *d = xasprintf("%s/torch-cpu/a_.py", other);
	const char *made[] = { a, c, d, b };
	for (size_t i = 0; i < 4; i++) {
		FILE *fp = fopen(made[i], "w");
		fputs("x = 2\n", fp);
		fclose(fp);
	}
	const char *names[] = { "torch-cpu", "abi-report.json", "README.md" };
	char *tar2 = xasprintf("%s/output2.tar", root);
	ok(tar_pack(out, names, 3, 1700000000, tar, why, sizeof(why)) == KHUB_OK &&
	   tar_pack(other, names, 3, 1700000000, tar2, why, sizeof(why)) == KHUB_OK, "both trees pack");
	size_t n1 = 0, n2 = 0;
	char *t1 = read_file_limited(tar, 1 << 20, &n1), *t2 = read_file_limited(tar2, 1 << 20, &n2);
	ok(t1 && t2 && n1 == n2 && memcmp(t1, t2, n1) == 0,
	   "the same files from another directory, made in another order at other times: the same tar bytes");
	free(t1);
	free(t2);
	free(tar2);
	free(a);
	free(b);
	free(c);
	free(d);
	free(sub);
	free(other);
}

int main(void)
{
	char why[512];
	snprintf(base, sizeof(base), "%s/khub-tar-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(base))
		return 1;

	const struct ent good[] = { { "./", AE_IFDIR, NULL }, { "build.toml", AE_IFREG, "[general]\nname = \"relu\"\n" },
				    { "torch-ext/", AE_IFDIR, NULL }, { "torch-ext/relu/__init__.py", AE_IFREG, "x = 1\n" },
				    { "torch-ext/link.py", AE_IFLNK, "relu/__init__.py" },
				    { "docs/up", AE_IFLNK, "../torch-ext" } };
	ok(unpack("good", good, N(good), why, sizeof(why)) == KHUB_OK, "a clean source tree unpacks (%s)", why);
	ok(exists("good/build.toml") && exists("good/torch-ext/relu/__init__.py") && exists("good/torch-ext/link.py"),
	   "its files and in-tree links are there");

	const struct ent dotdot[] = { { "ok.txt", AE_IFREG, "fine\n" }, { "../escaped-dotdot", AE_IFREG, "evil\n" } };
	ok(unpack("dotdot", dotdot, N(dotdot), why, sizeof(why)) == KHUB_EINVAL, "'../x' is refused");
	ok(!exists("escaped-dotdot"), "nothing written outside for '../x'");
	ok(strstr(why, "../escaped-dotdot") != NULL, "the error names the entry: %s", why);

	const struct ent inner[] = { { "a/../../escaped-inner", AE_IFREG, "evil\n" } };
	ok(unpack("inner", inner, N(inner), why, sizeof(why)) == KHUB_EINVAL, "'a/../../x' is refused");
	ok(!exists("escaped-inner"), "nothing written outside for 'a/../../x'");

	char *abs_target = xasprintf("%s/escaped-abs", base);
	const struct ent absolute[] = { { abs_target, AE_IFREG, "evil\n" } };
	ok(unpack("abs", absolute, N(absolute), why, sizeof(why)) == KHUB_EINVAL, "an absolute path is refused");
	ok(!exists("escaped-abs"), "nothing written at the absolute path");
	free(abs_target);

	const struct ent linkout[] = { { "l", AE_IFLNK, "../.." }, { "l/escaped-link", AE_IFREG, "evil\n" } };
	ok(unpack("linkout", linkout, N(linkout), why, sizeof(why)) == KHUB_EINVAL, "a link pointing out is refused");
	ok(!exists("linkout/l") && !exists("../escaped-link"), "and not made");

	const struct ent linkabs[] = { { "etc", AE_IFLNK, "/etc" } };
	ok(unpack("linkabs", linkabs, N(linkabs), why, sizeof(why)) == KHUB_EINVAL, "a link to an absolute path is refused");

	const struct ent linkdeep[] = { { "a/b/l", AE_IFLNK, "../../../x" } };
	ok(unpack("linkdeep", linkdeep, N(linkdeep), why, sizeof(why)) == KHUB_EINVAL,
	   "a nested link climbing one level too far is refused");

	/* a link inside the tree, then a file through it: libarchive refuses to follow */
	const struct ent through[] = { { "sub/", AE_IFDIR, NULL }, { "l", AE_IFLNK, "sub" }, { "l/x", AE_IFREG, "y\n" } };
	int r = unpack("through", through, N(through), why, sizeof(why));
	ok(r != KHUB_OK || exists("through/sub/x"), "a file through an in-tree link stays inside (%d)", r);

	const struct ent hard[] = { { "f", AE_IFREG, "x\n" }, { "h", 0, "/etc/passwd" } };
	ok(unpack("hard", hard, N(hard), why, sizeof(why)) == KHUB_EINVAL, "a hard link is refused");
	ok(!exists("hard/h"), "and not made");

	const struct ent dev[] = { { "dev", AE_IFCHR, NULL } };
	ok(unpack("dev", dev, N(dev), why, sizeof(why)) == KHUB_EINVAL, "a device is refused");

	const struct ent git[] = { { ".git/config", AE_IFREG, "[core]\n" } };
	ok(unpack("git", git, N(git), why, sizeof(why)) == KHUB_EINVAL, "a .git entry is refused");

	/* size limit */
	char *big = xmalloc(2 * 1024 * 1024 + 1);
	memset(big, 'a', 2 * 1024 * 1024);
	big[2 * 1024 * 1024] = '\0';
	const struct ent toobig[] = { { "big", AE_IFREG, big } };
	ok(unpack("toobig", toobig, N(toobig), why, sizeof(why)) == KHUB_ETOOBIG, "over max_bytes is refused");
	free(big);

	/* pack: a variant directory round-trips; a link in the output is refused */
	char *out = xasprintf("%s/out", base);
	char *vdir = xasprintf("%s/out/torch-cpu/sub", base);
	mkdir_p(vdir, 0755);
	char *f1 = xasprintf("%s/out/torch-cpu/__init__.py", base);
	char *f2 = xasprintf("%s/out/torch-cpu/sub/a.py", base);
	char *f3 = xasprintf("%s/out/abi-report.json", base);
	FILE *fp = fopen(f1, "w"); fputs("import torch\n", fp); fclose(fp);
	fp = fopen(f2, "w"); fputs("a = 1\n", fp); fclose(fp);
	fp = fopen(f3, "w"); fputs("{\"ok\": true}\n", fp); fclose(fp);
	const char *names[] = { "torch-cpu", "abi-report.json", "README.md" };
	char *tar = xasprintf("%s/output.tar", base);
	ok(tar_pack(out, names, 3, 1700000000, tar, why, sizeof(why)) == KHUB_OK,
	   "the output packs (README.md absent: skipped)");
	char *back = xasprintf("%s/back", base);
	mkdir(back, 0755);
	struct tar_limits lim = { .max_bytes = 1024 * 1024, .max_entries = 100 };
	int64_t newest = -1;
	ok(tar_unpack(tar, back, &lim, &newest, why, sizeof(why)) == KHUB_OK, "and unpacks");
	ok(newest == 1700000000, "the newest member mtime comes back (the source's SOURCE_DATE_EPOCH): %lld",
	   (long long)newest);
	ok(exists("back/torch-cpu/__init__.py") && exists("back/torch-cpu/sub/a.py") && exists("back/abi-report.json"),
	   "with every file at its place");
	same_bytes_from_another_tree(base, out, tar);
	char *lnk = xasprintf("%s/out/torch-cpu/evil", base);
	symlink("/etc/passwd", lnk);
	ok(tar_pack(out, names, 3, 0, tar, why, sizeof(why)) == KHUB_EINVAL, "a link in the output is refused: %s", why);

	/* tree_remove (common/) copes with a directory without permissions */
	char *locked = xasprintf("%s/out/torch-cpu/sub", base);
	chmod(locked, 0);
	ok(tree_remove(base) == 0 && access(base, F_OK) != 0, "tree_remove removes everything");
	free(locked);
	free(lnk);
	free(back);
	free(tar);
	free(f1);
	free(f2);
	free(f3);
	free(vdir);
	free(out);
	return done_testing();
}
