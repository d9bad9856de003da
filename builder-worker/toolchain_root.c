/* toolchain_root.c -- a toolchain's own root file system ("root" in
 * toolchains.json): whether it can be used here, and its digest, which the
 * worker registers and every build's report names, so that a build record
 * says which system image compiled it. The digest covers what decides the
 * binaries a build makes, cheaply enough to compute at each probe: the
 * root's os-release, its package database (dpkg, rpm or apk: every
 * installed package and version) and the toolchain's own programs (python,
 * cxx, nvcc, hipcc, cmake, ninja, links resolved inside the root). */
#include "builder-worker/build_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The files of a root that say what is installed (those present count). */
static const char *const root_manifest_files[] = {
	"/etc/os-release", "/usr/lib/os-release", "/var/lib/dpkg/status", "/var/lib/rpm/rpmdb.sqlite",
	"/var/lib/rpm/Packages", "/lib/apk/db/installed",
};

int toolchain_root_check(struct toolchain *tc)
{
	if (!tc->root)
		return 0;
	char *bwrap = spawn_find_program("bwrap", "/usr/local/bin:/usr/bin:/bin");
	free(bwrap);
	if (bwrap)
		return 0;
	snprintf(tc->why, sizeof(tc->why), "root %s: showing it as / needs bubblewrap (bwrap), which is not installed",
		 tc->root);
	return KHUB_EPERM;
}

static int digest_chunk(const char *buf, size_t n, void *ctx)
{
	EVP_DigestUpdate(ctx, buf, n);
	return 0;
}

/* One manifest line "PATH MODE SIZE SHA256\n" for path inside root, or
 * nothing when it is not a regular file there. 0, or KHUB_EIO. */
static int manifest_line(const char *root, const char *path, struct strbuf *manifest)
{
	char *full = xasprintf("%s%s", root, path);
	struct stat st;
	int rc = 0, fd = -1;
	if (lstat(full, &st) < 0 || !S_ISREG(st.st_mode))
		goto cleanup;
	if ((fd = open(full, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		rc = KHUB_EIO;
		goto cleanup;
	}
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	rc = read_chunks(fd, digest_chunk, ctx);
	char hex[65];
	sha256_final_hex(ctx, hex);
	EVP_MD_CTX_free(ctx);
	if (rc == 0)
		strbuf_addf(manifest, "%s %o %lld %s\n", path, (unsigned)(st.st_mode & 07777), (long long)st.st_size, hex);
cleanup:
	if (fd >= 0)
		close(fd);
	free(full);
	return rc;
}

int toolchain_root_digest(struct toolchain *tc)
{
	struct strbuf manifest = STRBUF_INIT;
	struct strvec env = STRVEC_INIT;
	strbuf_adds(&manifest, "");
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < sizeof(root_manifest_files) / sizeof(*root_manifest_files); i++)
		rc = manifest_line(tc->root, root_manifest_files[i], &manifest);
	toolchain_environment(tc, "/tmp", &env);
	const char *path = toolchain_env_path(&env), *programs[TOOLCHAIN_PROGRAMS];
	toolchain_programs(tc, programs);
	for (size_t i = 0; rc == 0 && i < TOOLCHAIN_PROGRAMS; i++) {
		char *found = programs[i] ? sandbox_find_program(tc->root, programs[i], path) : NULL;
		char *real = found ? sandbox_root_resolve(tc->root, found) : NULL;
		if (real)
			rc = manifest_line(tc->root, real, &manifest);
		free(found);
		free(real);
	}
	if (rc == 0) {
		char hex[65];
		sha256_hex(manifest.buf, manifest.len, hex);
		tc->root_digest = xasprintf("sha256:%s", hex);
	} else {
		snprintf(tc->why, sizeof(tc->why), "root %s: its digest cannot be computed (a file cannot be read)", tc->root);
	}
	strvec_release(&env);
	strbuf_release(&manifest);
	return rc;
}
