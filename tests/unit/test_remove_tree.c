/* test_remove_tree.c -- common/'s tree_remove (rm -rf of a build's scratch,
 * a bundle's staging): nested directories go, a symbolic link to a
 * directory outside is removed without what it points to, a directory a
 * build left read-only (0500, 0000) is still emptied, a missing path is no
 * error, and a failure (a directory of another uid) is reported. As root the tests run as nobody, so the
 * permission bits count. */
#include "common/common.h"
#include "tests/unit/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[256];

static void put(const char *rel, const char *text)
{
	char *path = xasprintf("%s/%s", base, rel);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write_all(fd, text, strlen(text)) < 0)
			perror(path);
		close(fd);
	}
	free(path);
}

static void dir(const char *rel)
{
	char *path = xasprintf("%s/%s", base, rel);
	mkdir_p(path, 0755);
	free(path);
}

static int exists(const char *rel)
{
	char *path = xasprintf("%s/%s", base, rel);
	struct stat st;
	int rc = lstat(path, &st) == 0;
	free(path);
	return rc;
}

static int remove_rel(const char *rel)
{
	char *path = xasprintf("%s/%s", base, rel);
	int rc = tree_remove(path);
	free(path);
	return rc;
}

static void test_nested(void)
{
	dir("a/b/c/d");
	put("a/top", "1");
	put("a/b/c/d/deep", "2");
	char rel[512] = "a/long";
	for (int i = 0; i < 60; i++)
		strcat(rel, "/x");
	dir(rel);
	put("a/b/fifo-less", "3");
	ok(remove_rel("a") == 0, "nested directories: 0");
	ok(!exists("a"), "… and nothing is left");
	ok(remove_rel("a") == 0, "a missing path: 0 (nothing to do)");
	put("file", "x");
	ok(remove_rel("file") == 0 && !exists("file"), "a plain file is removed too");
}

static void test_links(void)
{
	dir("outside/keep");
	put("outside/secret", "s");
	put("outside/keep/inner", "i");
	dir("t/sub");
	char *target = xasprintf("%s/outside", base);
	char *link = xasprintf("%s/t/sub/to-outside", base), *link2 = xasprintf("%s/t/file-link", base);
	char *top = xasprintf("%s/top-link", base);
	ok(symlink(target, link) == 0 && symlink("../outside/secret", link2) == 0 && symlink(target, top) == 0,
	   "links to a directory and a file outside the tree");
	ok(remove_rel("t") == 0 && !exists("t"), "the tree with links: 0, gone");
	ok(exists("outside/secret") && exists("outside/keep/inner"), "… what the links pointed to is untouched");
	ok(remove_rel("top-link") == 0 && !exists("top-link"), "path itself a link to a directory: the link goes");
	ok(exists("outside/keep/inner"), "… not the directory behind it");
	free(target);
	free(link);
	free(link2);
	free(top);
}

static void test_read_only(void)
{
	dir("ro/locked/inner");
	put("ro/locked/inner/f", "1");
	put("ro/locked/g", "2");
	dir("ro/blind");
	put("ro/blind/h", "3");
	char *locked = xasprintf("%s/ro/locked", base), *inner = xasprintf("%s/ro/locked/inner", base);
	char *blind = xasprintf("%s/ro/blind", base), *ro = xasprintf("%s/ro", base);
	ok(chmod(inner, 0500) == 0 && chmod(locked, 0500) == 0 && chmod(blind, 0) == 0 && chmod(ro, 0500) == 0,
	   "directories left 0500 and 0000 by a build");
	char *in_locked = xasprintf("%s/g", locked);
	ok(unlink(in_locked) < 0 && errno == EACCES, "… (an unlink in them fails for this uid: the test means something)");
	free(in_locked);
	ok(remove_rel("ro") == 0, "read-only directories: 0");
	ok(!exists("ro"), "… and they are gone");
	free(locked);
	free(inner);
	free(blind);
	free(ro);
}

static void test_failure(void)
{
	/* made by root before the switch to nobody: nobody can neither remove
	 * its file nor chmod it; the rest of the tree still goes */
	if (exists("mixed/foreign/f")) {
		dir("mixed/mine");
		put("mixed/mine/g", "1");
		ok(remove_rel("mixed") == KHUB_EIO, "a directory of another uid inside the tree: KHUB_EIO");
		ok(!exists("mixed/mine") && exists("mixed/foreign/f"), "… what could go went, the rest stays");
	} else {
		ok(1, "# skip: not run as root, no directory of another uid");
	}
	char *too_long = xmalloc(8192);
	memset(too_long, 'x', 8191);
	too_long[8191] = 0;
	ok(tree_remove(too_long) == KHUB_EIO, "a path that cannot be looked at: KHUB_EIO");
	free(too_long);
}

static int run_tests(void)
{
	test_nested();
	test_links();
	test_read_only();
	test_failure();
	ok(remove_rel("outside") == 0 && !exists("outside"), "the links' target removed in turn");
	return done_testing();
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(base, sizeof(base), "%s/khub-rmtree-XXXXXX", tmp);
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	if (geteuid() != 0) {
		int rc = run_tests();
		return tree_remove(base) < 0 ? 1 : rc;
	}
	/* root ignores permission bits: run as nobody in a directory of its own */
	dir("mixed/foreign");
	put("mixed/foreign/f", "root's");
	char *mixed = xasprintf("%s/mixed", base);
	int owned = chown(mixed, 65534, 65534);
	free(mixed);
	if (owned < 0 || chown(base, 65534, 65534) < 0 || chmod(base, 0700) < 0) {
		perror(base);
		return 1;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0) {
			perror("setuid");
			_exit(1);
		}
		int rc = run_tests();
		fflush(stdout);
		_exit(rc);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	if (tree_remove(base) < 0)
		perror(base);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
