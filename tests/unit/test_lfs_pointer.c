/* test_lfs_pointer.c -- LFS pointer parsing and formatting, and the
 * store-as-LFS decision. */
#include "storage/lfs/lfs.h"
#include "storage/git/repo.h"
#include "tap.h"

int main(void)
{
	struct lfs_pointer p;
	const char *good = "version https://git-lfs.github.com/spec/v1\n"
			   "oid sha256:097417381d6c7230bd9e3557456d726de6e83245ec8b24f529f60198a67b203a\n"
			   "size 440473133\n";
	ok(lfs_pointer_parse(good, strlen(good), &p) == 0, "parse a real pointer");
	is_str(p.oid, "097417381d6c7230bd9e3557456d726de6e83245ec8b24f529f60198a67b203a", "oid");
	ok(p.size == 440473133u, "size");
	char buf[LFS_POINTER_MAX];
	size_t n = lfs_pointer_format(&p, buf);
	ok(n == 134 && memcmp(buf, good, n) == 0, "format gives the same 134 bytes (pointerSize)");

	const char *upper = "version https://git-lfs.github.com/spec/v1\n"
			    "oid sha256:097417381D6C7230BD9E3557456D726DE6E83245EC8B24F529F60198A67B203A\n"
			    "size 1\n";
	ok(lfs_pointer_parse(upper, strlen(upper), &p) < 0, "uppercase oid refused");
	const char *no_nl = "version https://git-lfs.github.com/spec/v1\n"
			    "oid sha256:097417381d6c7230bd9e3557456d726de6e83245ec8b24f529f60198a67b203a\n"
			    "size 12";
	ok(lfs_pointer_parse(no_nl, strlen(no_nl), &p) < 0, "missing final newline refused");
	const char *no_size = "version https://git-lfs.github.com/spec/v1\n"
			      "oid sha256:097417381d6c7230bd9e3557456d726de6e83245ec8b24f529f60198a67b203a\n";
	ok(lfs_pointer_parse(no_size, strlen(no_size), &p) < 0, "missing size refused");
	const char *big = "version https://git-lfs.github.com/spec/v1\n"
			  "oid sha256:097417381d6c7230bd9e3557456d726de6e83245ec8b24f529f60198a67b203a\n"
			  "size 999999999999999999999999\n";
	ok(lfs_pointer_parse(big, strlen(big), &p) < 0, "overflowing size refused");
	ok(lfs_pointer_parse("hello\n", 6, &p) < 0, "text refused");
	ok(lfs_pointer_parse("", 0, &p) < 0, "empty refused");

	/* what becomes LFS */
	const char *attrs = "*.bin filter=lfs diff=lfs merge=lfs -text\n*.so filter=lfs diff=lfs merge=lfs -text\n";
	ok(lfs_should_store(attrs, "build/x/_ops.so", "ELF", 3, 3), ".so by .gitattributes");
	ok(lfs_should_store(attrs, "a/b/weights.bin", "x", 1, 1), ".bin by .gitattributes");
	ok(!lfs_should_store(attrs, "build/x/__init__.py", "import torch\n", 13, 13), "python stays regular");
	ok(lfs_should_store(attrs, "data.raw", "a\0b", 3, 3), "binary content");
	ok(!lfs_should_store(attrs, "empty.bin", "", 0, 0), "empty file never LFS");
	ok(lfs_should_store(NULL, "big.txt", "aaaa", 4, 11u * 1024 * 1024), "text over 10 MiB");
	return done_testing();
}
