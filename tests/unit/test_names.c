/* test_names.c -- repo names, file paths, ref names and repo types. */
#include "storage/git/repo.h"
#include "tap.h"

int main(void)
{
	const char *why;
	/* names */
	ok(repo_name_validate("kernels-community", NULL) == 0, "plain name");
	ok(repo_name_validate("relu_2.0", NULL) == 0, "dots and underscores");
	ok(repo_name_validate("", NULL) < 0, "empty name");
	ok(repo_name_validate("-x", NULL) < 0, "leading dash");
	ok(repo_name_validate("a..b", NULL) < 0, "double dot");
	ok(repo_name_validate("x.git", NULL) < 0, "ends in .git");
	ok(repo_name_validate("a/b", NULL) < 0, "slash");
	ok(repo_name_validate("a b", NULL) < 0, "space");
	char long_name[100];
	memset(long_name, 'a', 97);
	long_name[97] = '\0';
	ok(repo_name_validate(long_name, &why) < 0, "97 chars: %s", why);
	long_name[96] = '\0';
	ok(repo_name_validate(long_name, NULL) == 0, "96 chars");

	/* paths */
	ok(repo_path_validate("build/torch-cpu/__init__.py", NULL) == 0, "nested path");
	ok(repo_path_validate("README.md", NULL) == 0, "root file");
	ok(repo_path_validate("../etc/passwd", &why) < 0, "dot-dot: %s", why);
	ok(repo_path_validate("a/../b", NULL) < 0, "inner dot-dot");
	ok(repo_path_validate("a/./b", NULL) < 0, "dot component");
	ok(repo_path_validate("/abs", &why) < 0, "absolute: %s", why);
	ok(repo_path_validate(".git/config", &why) < 0, ".git: %s", why);
	ok(repo_path_validate("x/.GIT/hooks", NULL) < 0, ".GIT any case");
	ok(repo_path_validate(".gitattributes", NULL) == 0, ".gitattributes is fine");
	ok(repo_path_validate("a//b", NULL) < 0, "empty component");
	ok(repo_path_validate("a/", NULL) < 0, "trailing slash");
	ok(repo_path_validate("a\\b", NULL) < 0, "backslash");
	ok(repo_path_validate("a\nb", NULL) < 0, "newline");
	ok(repo_path_validate("", NULL) < 0, "empty");
	char long_path[1100];
	memset(long_path, 'p', 1025);
	long_path[1025] = '\0';
	ok(repo_path_validate(long_path, NULL) < 0, "over-long path");

	/* refs */
	ok(ref_name_validate("v1", NULL) == 0, "v1");
	ok(ref_name_validate("feature/x", NULL) == 0, "with slash");
	ok(ref_name_validate("a..b", NULL) < 0, "dot-dot ref");
	ok(ref_name_validate("x.lock", NULL) < 0, ".lock ref");
	ok(ref_name_validate("a b", NULL) < 0, "space in ref");
	ok(ref_name_validate("a~1", NULL) < 0, "tilde in ref");
	ok(ref_name_validate("@", NULL) < 0, "@");
	ok(ref_name_validate("/x", NULL) < 0, "leading slash");
	ok(ref_name_validate("HEAD", NULL) < 0, "HEAD");
	ok(ref_name_validate("ORIG_HEAD", NULL) < 0, "ORIG_HEAD");
	ok(ref_name_validate("refs/heads/x", NULL) < 0, "refs/ prefix");
	ok(ref_name_validate("0123456789abcdef0123456789abcdef01234567", NULL) < 0, "40-hex");
	ok(ref_name_validate("HEADS", NULL) == 0, "HEADS is fine");

	/* types */
	enum repo_type t;
	ok(repo_type_parse("kernel", &t) == 0 && t == REPO_KERNEL, "kernel");
	ok(repo_type_parse("kernels", &t) == 0 && t == REPO_KERNEL, "kernels");
	ok(repo_type_parse("widgets", &t) < 0, "unknown type");
	is_str(repo_type_url_prefix(REPO_MODEL), "", "model prefix is empty");
	is_str(repo_type_url_prefix(REPO_KERNEL), "kernels/", "kernel prefix");
	return done_testing();
}
