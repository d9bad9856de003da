/* test_build_output.c -- the build farm's checks of a worker's output: tar
 * member names, build.toml's version and compiled sources, and whole tars (made here with
 * libarchive) against the layout rules. */
#include "api/build_output.h"
#include "tap.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
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

/* A tar of (name, type, content) triples; returns its path (caller frees). */
static char *make_tar(const char *const *members, size_t n)
{
	char *path = strdup("/tmp/test_build_output-XXXXXX");
	int fd = mkstemp(path);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_open_fd(a, fd);
	for (size_t i = 0; i + 2 < n * 3; i += 3) {
		struct archive_entry *e = archive_entry_new();
		const char *name = members[i], *type = members[i + 1], *data = members[i + 2];
		archive_entry_set_pathname(e, name);
		archive_entry_set_filetype(e, strcmp(type, "d") == 0 ? AE_IFDIR : strcmp(type, "l") == 0 ? AE_IFLNK : AE_IFREG);
		archive_entry_set_perm(e, 0644);
		if (strcmp(type, "l") == 0)
			archive_entry_set_symlink(e, data);
		archive_entry_set_size(e, strcmp(type, "f") == 0 ? (la_int64_t)strlen(data) : 0);
		archive_write_header(a, e);
		if (strcmp(type, "f") == 0)
			archive_write_data(a, data, strlen(data));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	close(fd);
	return path;
}

static int check_variant(const char *const *members, size_t n, const char *variant, const char *toml, char *why,
			 size_t why_size)
{
	char *path = make_tar(members, n);
	struct build_output out;
	int rc = build_output_check(path, variant, toml, &out, why, why_size);
	build_output_release(&out);
	unlink(path);
	free(path);
	return rc;
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

int main(void)
{
	api_ctx.builds.output_max_bytes = 1 << 20;
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
	ok(build_toml_has_compiled_sources("[torch]\nsrc = [\"a.cpp\"]\n") == 1, "[torch] src: compiled");
	ok(build_toml_has_compiled_sources("[kernel.relu_cpu]\nbackend = \"cpu\"\nsrc = [\n  # x\n  \"r.cpp\",\n]\n") == 1,
	   "[kernel.x] src over lines: compiled");
	ok(build_toml_has_compiled_sources("[torch]\nsrc = []\n[torch-noarch]\n") == 0, "an empty src is not");
	ok(build_toml_has_compiled_sources("[torch-noarch]\npyext = [\"json\"]\n") == 0, "noarch: not compiled");
	ok(build_toml_has_compiled_sources("[general]\nsrc = [\"a\"]\n[tvm]\nsrc = [\"b\"]\n") == 0,
	   "src in other tables is not");
	ok(build_toml_has_compiled_sources("kernel.k.src = [\"a.cu\"]\n") == 1, "a dotted key: compiled");

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
	const char *noarch[] = { "torch-cpu/metadata.json", "f", metadata, "torch-cpu/__init__.py", "f", "" };
	ok(check_variant(noarch, 2, "torch-cpu", "[general]\nversion = 2\n[torch-noarch]\n", why, sizeof(why)) == 0,
	   "a noarch output of a noarch kernel passes");
	ok(check_variant(noarch, 2, "torch-cpu", "[general]\nversion = 2\n[torch]\nsrc = [\"b.cpp\"]\n", why, sizeof(why)) < 0 &&
	   strstr(why, "noarch"), "a noarch output of a compiled kernel is refused: %s", why);
	const char *badreport[] = { V "/metadata.json", "f", metadata, "abi-report.json", "f", "[1]" };
	ok(check(badreport, 2, NULL, why, sizeof(why)) < 0, "a report without \"ok\": %s", why);
	return done_testing();
}
