/* cache.c -- the build cache: a ccache directory per (repo, toolchain),
 * kept by the worker under its work directory and bind-mounted into that
 * repo's builds only, so one author's build code can fill or poison its own
 * cache and never another repo's. Compiles see fixed paths (compile.c), so
 * a hit gives the bytes a cold compile would. */
#include "builder-worker/build_internal.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATS_LOG_MAX (4 * 1024 * 1024)	/* a build's stats log read at most */

char *build_cache_dir(const char *root, const char *repo, const char *toolchain)
{
	char *key = xasprintf("%s\n%s", repo, toolchain), hex[65];
	sha256_hex(key, strlen(key), hex);
	free(key);
	return xasprintf("%s/%s", root, hex);
}

/* ccache's settings for build code, in the sandbox's environment: where
 * the cache is, its bound, and what must not be hashed: the scratch's
 * random name (only in -ffile-prefix-map, which maps it to a fixed one),
 * nvcc's thread count (the worker's CPUs, not the output), the working
 * directory, the fresh mtimes of the copied sources. */
static void cache_environment(const struct build_cache *c, struct sandbox *sb)
{
	strvec_pushf(&sb->env, "CCACHE_DIR=%s", sb->mode == SANDBOX_BWRAP ? BUILD_CACHE_AT : c->dir);
	strvec_pushf(&sb->env, "CCACHE_MAXSIZE=%ldMi", c->max_mb);
	strvec_pushf(&sb->env, "CCACHE_IGNOREOPTIONS=-ffile-prefix-map=* --threads=*");	/* nvcc's: same output */
	strvec_pushf(&sb->env, "CCACHE_SLOPPINESS=include_file_mtime,include_file_ctime");
	strvec_pushf(&sb->env, "CCACHE_NOHASHDIR=1");
	strvec_pushf(&sb->env, "CCACHE_UMASK=007");	/* the build group's: sandbox_give_shared */
	strvec_pushf(&sb->env, "CCACHE_STATSLOG=%s", c->stats_log);
}

/* ccache as the build sees it in a toolchain's root file system (the
 * commands run with the root as /), or NULL when the root has none. */
static char *ccache_in_root(const char *root)
{
	static const char *const dirs[] = { "/usr/local/bin", "/usr/bin", "/bin" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *host = xasprintf("%s%s/ccache", root, dirs[i]);
		int found = access(host, X_OK) == 0;
		free(host);
		if (found)
			return xasprintf("%s/ccache", dirs[i]);
	}
	return NULL;
}

int build_cache_prepare(struct build_cache *c, struct sandbox *sb, const char *home)
{
	if (!c->dir)
		return 0;
	char *prog = sb->root ? ccache_in_root(sb->root) : NULL;
	for (size_t i = 0; i < sb->env.count && !prog && !sb->root; i++)
		if (!strncmp(sb->env.items[i], "PATH=", 5))
			prog = spawn_find_program("ccache", sb->env.items[i] + 5);
	if (!prog && !sb->root)
		prog = spawn_find_program("ccache", "/usr/local/bin:/usr/bin:/bin");
	if (!prog) {
		snprintf(c->why_off, sizeof(c->why_off), "ccache is not installed%s", sb->root ? " in the toolchain's root" : "");
		log_warn("khub-worker build: no build cache: ccache is not installed%s (apt-get install ccache)",
			 sb->root ? " in the toolchain's root" : "");
		free(c->dir);
		c->dir = NULL;
		return 0;
	}
	c->program = prog;
	c->stats_log = xasprintf("%s/ccache-stats.log", home);
	/* the root searchable by the build uid (bwrap binds as that uid), each
	 * repo's directory the build group's alone */
	char *root = xstrdup(c->dir), real[PATH_MAX];
	*strrchr(root, '/') = 0;
	int made = mkdir_p(root, 0711) == 0 && mkdir_p(c->dir, 02770) == 0 && realpath(c->dir, real);
	free(root);
	struct stat st;
	if (!made || lstat(real, &st) < 0 || !S_ISDIR(st.st_mode) || chmod(real, 02770) < 0 ||
	    sandbox_give_shared(sb, real) < 0) {
		log_error("khub-worker build: cannot make the build cache %s: %s", c->dir, strerror(errno));
		return KHUB_EIO;
	}
	free(c->dir);
	c->dir = xstrdup(real);
	sb->cache_dir = xstrdup(c->dir);
	sb->cache_start = tree_disk_usage(c->dir);
	if (sb->mode == SANDBOX_BWRAP)
		sandbox_bind_at(sb, c->dir, BUILD_CACHE_AT, 1);
	cache_environment(c, sb);
	log_info("khub-worker build: build cache %s (ccache, at most %ld MiB, %.1f MiB now)", c->dir, c->max_mb,
		 (double)sb->cache_start / (1024.0 * 1024.0));
	return 0;
}

/* One compile's counters into c: served, stored, or neither. */
static void count_compile(struct build_cache *c, int hit, int miss)
{
	if (hit)
		c->hits++;
	else if (miss)
		c->misses++;
	else
		c->uncached++;
}

void build_cache_count(struct build_cache *c, const char *text)
{
	/* one "# <source>" line per compile, then its counters, one a line */
	int in = 0, hit = 0, miss = 0;
	for (const char *line = text, *next; *line; line = next) {
		size_t n = strcspn(line, "\n");
		next = line + n + (line[n] == '\n');
		if (line[0] == '#') {
			if (in)
				count_compile(c, hit, miss);
			in = 1;
			hit = miss = 0;
		} else if ((n == 16 && !strncmp(line, "direct_cache_hit", n)) ||
			   (n == 22 && !strncmp(line, "preprocessed_cache_hit", n))) {
			hit = 1;
		} else if (n == 10 && !strncmp(line, "cache_miss", n)) {
			miss = 1;
		}
	}
	if (in)
		count_compile(c, hit, miss);
}

void build_cache_read_stats(struct build_cache *c)
{
	if (!c->dir)
		return;
	/* build code wrote it: a regular file only, never through a link */
	int fd = open(c->stats_log, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	struct strbuf text = STRBUF_INIT;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		read_until_deadline(fd, monotonic_usec() + 5000000, STATS_LOG_MAX, &text);
	if (fd >= 0)
		close(fd);
	build_cache_count(c, text.buf ? text.buf : "");
	strbuf_release(&text);
	log_info("khub-worker build: build cache: %ld hit%s, %ld miss%s, %ld not cacheable", c->hits,
		 c->hits == 1 ? "" : "s", c->misses, c->misses == 1 ? "" : "es", c->uncached);
}

void build_cache_bound(struct build_cache *c)
{
	if (!c->dir)
		return;
	/* ccache keeps itself under max_size; build code could write past it */
	unsigned long long used = tree_disk_usage(c->dir), bound = ((unsigned long long)c->max_mb << 20) * 5 / 4 + (8 << 20);
	if (used <= bound)
		return;
	log_warn("khub-worker build: the build cache holds %.1f MiB, over its bound of %ld MiB: emptied",
		 (double)used / (1024.0 * 1024.0), c->max_mb);
	if (tree_remove(c->dir) < 0)
		log_error("khub-worker build: cannot empty the build cache %s", c->dir);
}

json_t *build_cache_json(const struct build_cache *c)
{
	if (!c->dir)
		return json_pack("{s:b,s:s}", "used", 0, "why", c->why_off[0] ? c->why_off : "not asked for");
	return json_pack("{s:b,s:s,s:I,s:I,s:I,s:I}", "used", 1, "tool", "ccache", "max_mb", (json_int_t)c->max_mb,
			 "hits", (json_int_t)c->hits, "misses", (json_int_t)c->misses, "uncached", (json_int_t)c->uncached);
}

void build_cache_release(struct build_cache *c)
{
	if (!c)
		return;
	free(c->dir);
	free(c->program);
	free(c->stats_log);
	memset(c, 0, sizeof(*c));
}
