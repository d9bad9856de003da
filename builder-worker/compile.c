/* compile.c -- Path B of the build contract: the compiler invocations that
 * the generated CMake project would make, run one by one in the sandbox.
 * C/C++ sources go to cxx, .cu to nvcc (CUDA) or hipcc -x hip (ROCm), .hip
 * to hipcc; then one link into <ops>.abi3.so without RPATH. */
#include "builder-worker/build_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Default CUDA archs by nvcc version (contract 2.4). */
static const char *const cuda_archs_13[] = { "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX", NULL };
static const char *const cuda_archs_128[] = { "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0+PTX", NULL };
static const char *const cuda_archs_old[] = { "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX", NULL };
/* ROCm archs torch supports (contract 2.4); rocm-archs is intersected with it. */
static const char *const rocm_archs_supported[] = { "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030",
						    "gfx1100", "gfx1101", "gfx1200", "gfx1201", NULL };

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int has_string(const struct strvec *v, const char *s)
{
	for (size_t i = 0; i < v->count; i++)
		if (strcmp(v->items[i], s) == 0)
			return 1;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "9.0a+PTX" -> major 9, minor 0, suffix "a", ptx 1. */
static int parse_cap(const char *s, int *major, int *minor, char *suffix, int *ptx)
{
	int n = 0;
	if (sscanf(s, "%d.%d%n", major, minor, &n) != 2)
		return -1;
	const char *rest = s + n;
	*ptx = ends_with(rest, "+PTX");
	size_t len = strlen(rest) - (*ptx ? 4 : 0);
	if (len > 3)
		return -1;
	memcpy(suffix, rest, len);
	suffix[len] = 0;
	return 0;
}

void cuda_archs_select(int nvcc_major, int nvcc_minor, const char *const *caps, size_t ncaps, struct strvec *out)
{
	const char *const *defaults = nvcc_major >= 13 ? cuda_archs_13 :
		(nvcc_major == 12 && nvcc_minor >= 8) ? cuda_archs_128 : cuda_archs_old;
	for (size_t d = 0; defaults[d]; d++) {
		if (!caps || ncaps == 0) {
			if (!has_string(out, defaults[d]))
				strvec_pushf(out, "%s", defaults[d]);
			continue;
		}
		int dmaj, dmin, dptx;
		char dsuf[4];
		parse_cap(defaults[d], &dmaj, &dmin, dsuf, &dptx);
		/* The kernel's highest capability <= this default, same major (a
		 * PTX one may cross majors); 9.0a / 10.0f only match exactly. */
		const char *best = NULL;
		int bmaj = -1, bmin = -1;
		for (size_t k = 0; k < ncaps; k++) {
			int kmaj, kmin, kptx;
			char ksuf[4];
			if (parse_cap(caps[k], &kmaj, &kmin, ksuf, &kptx) < 0)
				continue;
			if (ksuf[0] && (kmaj != dmaj || kmin != dmin))
				continue;
			if (kmaj > dmaj || (kmaj == dmaj && kmin > dmin))
				continue;
			if (kmaj != dmaj && !kptx)
				continue;
			if (kmaj > bmaj || (kmaj == bmaj && kmin > bmin)) {
				best = caps[k];
				bmaj = kmaj;
				bmin = kmin;
			}
		}
		if (best && !has_string(out, best))
			strvec_pushf(out, "%s", best);
	}
}

/* nvcc -gencode flags for "8.0", "9.0a", "12.1+PTX". */
static void push_gencode(struct strvec *args, const char *cap)
{
	int maj, min, ptx;
	char suf[4];
	if (parse_cap(cap, &maj, &min, suf, &ptx) < 0)
		return;
	strvec_pushf(args, "-gencode");
	strvec_pushf(args, "arch=compute_%d%d%s,code=sm_%d%d%s", maj, min, suf, maj, min, suf);
	if (ptx) {
		strvec_pushf(args, "-gencode");
		strvec_pushf(args, "arch=compute_%d%d%s,code=compute_%d%d%s", maj, min, suf, maj, min, suf);
	}
}

static void push_strings(struct strvec *args, json_t *array, const char *prefix, const char *root)
{
	size_t i;
	json_t *v;
	json_array_foreach(array, i, v)
		if (json_is_string(v)) {
			if (root)
				strvec_pushf(args, "%s%s/%s", prefix, root, json_string_value(v));
			else
				strvec_pushf(args, "%s%s", prefix, json_string_value(v));
		}
}

/* The directory above a compiler's bin/ (the CUDA or ROCm root), as the
 * commands see it (inside the toolchain's root when it has one). */
static char *toolkit_root(const struct toolchain *tc, const char *compiler)
{
	char *found = sandbox_find_program(tc->root, compiler, "/usr/local/bin:/usr/bin:/bin");
	if (!found)
		return NULL;
	char real[PATH_MAX];
	char *root = NULL;
	if (tc->root) {
		char *resolved = sandbox_root_resolve(tc->root, found);
		char *bin = dirname(resolved);
		root = xasprintf("%s/..", bin);
		free(resolved);
	} else if (realpath(found, real)) {
		char *bin = dirname(real);
		root = xasprintf("%s/..", bin);
	}
	free(found);
	return root;
}

/* The macro naming the op namespace; what a unit registering under the
 * runtime namespace is given instead of its value; the namespace file. */
#define NAMESPACE_MACRO "TORCH_EXTENSION_NAME"
#define RUNTIME_NAMESPACE_DEFINE "-DKHUB_RUNTIME_NAMESPACE"
#define RUNTIME_NAMESPACE_ID "khub_ops"
#define NAMESPACE_FILE "khub_op_namespace"

static const char *compile_dir(const struct build_plan *p);

static int names_extension(const struct build_plan *p, const char *rel);
static int gpu_source(const struct compile_backend *b, const char *rel);
static int scan_unit(const struct build_plan *p, const char *rel, struct namespace_use *u);
static void choose_runtime_units(struct build_plan *p, const struct strvec *units, const struct namespace_use *uses);

/* Flags every C++ translation unit gets. The source's directories by the
 * name the compilers see them at (a fixed one in the sandbox): the same
 * command line whatever the scratch is called, which a cache hit needs.
 * The op namespace only for the units that name it (names_extension); a
 * host_cxx unit (the host C++ compiler's) that registers under the runtime
 * namespace gets a fixed identifier instead (choose_runtime_units). */
static void push_common_defines(const struct build_plan *p, const char *rel, int host_cxx, struct strvec *args)
{
	const struct toolchain *tc = p->tc;
	long tmaj = p->torch_major, tmin = p->torch_minor;	/* the installed torch, also for stable ABI */
	int cxx20 = tmaj > 2 || (tmaj == 2 && tmin >= 12);
	strvec_pushf(args, "-std=%s", cxx20 ? "c++20" : "c++17");
	if (p->stable_abi[0]) {
		/* kernel-builder's define: (major << 56) | (minor << 48); torch's
		 * headers then keep to the stable ABI of that version. */
		unsigned long long smaj = (unsigned long long)p->parsed.framework_major;
		unsigned long long smin = (unsigned long long)p->parsed.framework_minor;
		strvec_pushf(args, "-DTORCH_TARGET_VERSION=0x%016llx", (smaj << 56) | (smin << 48));
	}
	strvec_pushf(args, "-D_GLIBCXX_USE_CXX11_ABI=%d", tc->cxx11_abi ? 1 : 0);
	if (host_cxx && rel && has_string(&p->runtime_units, rel)) {
		strvec_pushf(args, RUNTIME_NAMESPACE_DEFINE);
		strvec_pushf(args, "-D" NAMESPACE_MACRO "=" RUNTIME_NAMESPACE_ID);
	} else if (names_extension(p, rel))
		strvec_pushf(args, "-D" NAMESPACE_MACRO "=%s", p->ops_name);
	strvec_pushf(args, "-DPy_LIMITED_API=0x03090000");
	for (size_t i = 0; i < sizeof(p->cb->defines) / sizeof(p->cb->defines[0]) && p->cb->defines[i]; i++)
		strvec_pushf(args, "%s", p->cb->defines[i]);
	if (p->cb->toolchain_defines)
		p->cb->toolchain_defines(tc, args);
	strvec_pushf(args, "-I%s/torch-ext", compile_dir(p));
	push_strings(args, json_object_get(json_object_get(p->config, "torch"), "include"), "-I", compile_dir(p));
	for (size_t i = 0; i < tc->ntorch_includes; i++)
		strvec_pushf(args, "-I%s", tc->torch_includes[i]);
	if (tc->python_include)
		strvec_pushf(args, "-I%s", tc->python_include);
	const char *gpu = compile_backend_compiler(p->cb, tc);
	char *root = gpu ? toolkit_root(tc, gpu) : NULL;
	if (root) {
		strvec_pushf(args, "-I%s/include", root);
		free(root);
	}
}

/* Where a compile runs: the source directory under its fixed name in the
 * sandbox (nvcc names a translation unit's internal symbols after its full
 * path: the same bytes need the same path), its real path without one. */
static const char *compile_dir(const struct build_plan *p)
{
	return p->sb->mode == SANDBOX_BWRAP ? BUILD_FIXED_SRC : p->src;
}

/* Flags that keep the scratch directory's random name out of the objects
 * (__FILE__, debug paths; docs/worker-build.md "Reproducible builds"):
 * the scratch is seen as BUILD_PREFIX_MAP_TO. For nvcc they go to the host
 * compiler. seed: a name stable across builds of the same source (gcc's
 * -frandom-seed, which otherwise may differ between two runs). */
static void push_reproducible(const struct build_plan *p, struct strvec *args, int via_nvcc, const char *seed)
{
	if (via_nvcc)
		strvec_pushf(args, "-Xcompiler");
	strvec_pushf(args, "-ffile-prefix-map=%s=" BUILD_PREFIX_MAP_TO, p->scratch);
	if (!seed)
		return;	/* clang (hipcc) has no -frandom-seed */
	/* nvcc 13 has its own (its symbol names, then the host compiler's);
	 * older ones: the host compiler's only */
	if (via_nvcc && p->tc->nvcc_major < 13)
		strvec_pushf(args, "-Xcompiler");
	strvec_pushf(args, "-frandom-seed=%s", seed);
}

static void log_command(struct build_plan *p, const struct strvec *args)
{
	struct strbuf line = STRBUF_INIT;
	strbuf_adds(&line, "+");
	for (size_t i = 0; i < args->count; i++)
		strbuf_addf(&line, " %s", args->items[i]);
	dprintf(p->sb->log_fd, "%s\n", line.buf);
	strbuf_release(&line);
}

/* A sandbox result as a build outcome, with a log line for a failure. */
static int outcome(struct build_plan *p, const char *prog, int rc)
{
	/* build.c says which limit ended it */
	if (rc == SANDBOX_TIMED_OUT || rc == SANDBOX_CPU_LIMIT || rc == SANDBOX_DISK_LIMIT)
		return BUILD_TIMED_OUT;
	if (rc < 0) {
		log_error("khub-worker: could not start %s", prog);
		return BUILD_INTERNAL;
	}
	if (rc != 0) {
		log_error("khub-worker: %s exited with status %d", prog, rc);
		return BUILD_FAILED;
	}
	return BUILD_OK;
}

int compile_run(struct build_plan *p, struct strvec *args)
{
	log_command(p, args);
	return outcome(p, args->items[0], sandbox_run(p->sb, args->items, compile_dir(p), -1));
}

/* The unit a compile command compiles (its argument before -o OBJECT). */
static const char *command_unit(const struct strvec *cmd)
{
	return cmd->count >= 3 ? cmd->items[cmd->count - 3] : "?";
}

/* Run cmds[0..n) at most p->jobs at a time; the first failure stops the
 * rest (killed) and is the result. Each unit's time is logged ("compiled
 * cpu/silu.cpp in 3.2 s"): which unit is slow, nvcc's apart. */
static int run_all(struct build_plan *p, struct strvec *cmds, size_t n)
{
	size_t jobs = p->jobs > 0 ? (size_t)p->jobs : 1;
	pid_t *pids = xcalloc(jobs, sizeof(*pids));
	size_t *which = xcalloc(jobs, sizeof(*which));
	uint64_t *started = xcalloc(jobs, sizeof(*started));
	size_t next = 0, running = 0;
	int rc = BUILD_OK;
	for (;;) {
		while (rc == BUILD_OK && next < n && running < jobs) {
			size_t slot = 0;
			while (pids[slot] > 0)
				slot++;
			log_command(p, &cmds[next]);
			int r = sandbox_start(p->sb, cmds[next].items, compile_dir(p), -1, &pids[slot]);
			if (r != 0) {
				pids[slot] = 0;
				rc = outcome(p, cmds[next].items[0], r);
				break;
			}
			which[slot] = next++;
			started[slot] = monotonic_usec();
			running++;
		}
		if (running == 0 || rc != BUILD_OK)
			break;
		size_t slot;
		int r = sandbox_wait_any(p->sb, pids, jobs, &slot);
		if (r == SANDBOX_TIMED_OUT || r == SANDBOX_DISK_LIMIT) {	/* every group was killed */
			running = 0;
			rc = outcome(p, "", r);
			break;
		}
		running--;
		rc = outcome(p, cmds[which[slot]].items[0], r);
		if (rc != BUILD_OK)
			log_error("khub-worker: while compiling %s", command_unit(&cmds[which[slot]]));
		else
			dprintf(p->sb->log_fd, "compiled %s in %.1f s\n", command_unit(&cmds[which[slot]]),
				(double)(monotonic_usec() - started[slot]) / 1e6);
	}
	if (running)
		sandbox_kill_all(pids, jobs);
	free(pids);
	free(which);
	free(started);
	return rc;
}

/* The value of KEY in the toolchain's env, or NULL. */
static const char *toolchain_env(const struct toolchain *tc, const char *key)
{
	size_t n = strlen(key);
	for (size_t i = 0; i < tc->nenv; i++)
		if (!strncmp(tc->env[i], key, n) && tc->env[i][n] == '=')
			return tc->env[i] + n + 1;
	return NULL;
}

/* A kernel's depends beyond torch: the worker fetches nothing, so CUTLASS
 * and sycl-tla come from a checkout the toolchain names in its env
 * (CUTLASS_SRC_DIR, SYCL_TLA_SRC_DIR, as the CMake project reads them). */
static int push_dependencies(struct build_plan *p, json_t *kernel, struct strvec *args)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(kernel, "depends"), i, v) {
		const char *dep = json_string_value(v);
		const char *var = !strncmp(dep, "cutlass_", 8) ? "CUTLASS_SRC_DIR" : !strcmp(dep, "sycl_tla") ? "SYCL_TLA_SRC_DIR" : NULL;
		if (!var)
			continue;	/* torch; metal-cpp has no Linux part */
		const char *dir = toolchain_env(p->tc, var);
		if (!dir) {
			log_error("khub-worker: depends = \"%s\" needs a checkout: set %s in toolchain %s's env",
				dep, var, p->tc->name);
			return BUILD_FAILED;
		}
		strvec_pushf(args, "-I%s/include", dir);
		strvec_pushf(args, "-I%s/tools/util/include", dir);
	}
	return BUILD_OK;
}

/* ---- which translation units get the op namespace ------------------------------------ */

/* The op namespace changes with every commit. Given to every compile, it
 * would change every compile's command line, and ccache's direct mode
 * would miss on all of them: only the units that name it get it, unless a
 * header (which any unit may include) names it. A unit that does not name
 * it compiles to the same bytes with or without it. */

/* Bytes looked for in chunks: the last bytes seen are carried over, so a
 * needle cut between two chunks is found. */
struct mention_scan {
	const char *needle;
	size_t len;
	char *carry;		/* 2 * len bytes (owned) */
	size_t ncarry;
	int found;
};

static int scan_chunk(const char *buf, size_t n, void *ctx)
{
	struct mention_scan *m = ctx;
	const size_t keep = m->len - 1;
	size_t head = n < keep ? n : keep;
	memcpy(m->carry + m->ncarry, buf, head);
	if (memmem(m->carry, m->ncarry + head, m->needle, m->len) || memmem(buf, n, m->needle, m->len))
		m->found = 1;
	if (n >= keep) {
		memcpy(m->carry, buf + n - keep, keep);
		m->ncarry = keep;
	} else {
		size_t total = m->ncarry + n, drop = total > keep ? total - keep : 0;
		memmove(m->carry, m->carry + drop, total - drop);
		m->ncarry = total - drop;
	}
	return 0;
}

/* 1 when the open fd holds needle (at least 2 bytes), or cannot be read
 * (then it may: the safe answer); 0 when it does not. */
static int fd_contains(int fd, const char *needle)
{
	struct mention_scan m = { .needle = needle, .len = strlen(needle), .ncarry = 0, .found = 0 };
	struct stat st;
	m.carry = xmalloc(2 * m.len);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || read_chunks(fd, scan_chunk, &m) < 0)
		m.found = 1;
	free(m.carry);
	return m.found;
}

/* fd_contains of the file at path, never through a link. */
static int file_contains(const char *path, const char *needle)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 1;
	int found = fd_contains(fd, needle);
	close(fd);
	return found;
}

static int file_names_namespace(const char *path)
{
	return file_contains(path, NAMESPACE_MACRO);
}

/* Whether unit rel gets -DTORCH_EXTENSION_NAME: every unit when a header
 * names it, else the units choose_namespace_units found naming it. */
static int names_extension(const struct build_plan *p, const char *rel)
{
	return p->namespace_everywhere || !rel || has_string(&p->namespace_units, rel);
}

/* 1 for a file a compiler is given (the others are only listed). */
static int compiled_source(const char *rel)
{
	static const char *const exts[] = { ".cu", ".hip", ".cpp", ".cc", ".cxx", ".c", NULL };
	for (size_t i = 0; exts[i]; i++)
		if (ends_with(rel, exts[i]))
			return 1;
	return 0;
}

/* The variant's compiled units: of [torch].src and its backend's [kernel.*]. */
static void variant_units(const struct build_plan *p, struct strvec *units)
{
	size_t i;
	json_t *v, *k;
	const char *name;
	json_array_foreach(json_object_get(json_object_get(p->config, "torch"), "src"), i, v)
		if (json_is_string(v) && compiled_source(json_string_value(v)))
			strvec_pushf(units, "%s", json_string_value(v));
	json_object_foreach(json_object_get(p->config, "kernel"), name, k)
		if (!strcmp(json_string_value(json_object_get(k, "backend")), p->backend))
			json_array_foreach(json_object_get(k, "src"), i, v)
				if (json_is_string(v) && compiled_source(json_string_value(v)))
					strvec_pushf(units, "%s", json_string_value(v));
}

/* What a header may be: any file but the compiled units, khub's own
 * registration.h and files no compiler includes (Python, docs, config). */
struct header_scan {
	const struct strvec *units;
	char *why_all;	/* "<the first header naming the macro> names it" (owned) */
};

static int scan_header(const char *rel, const char *path, const char *name, void *ctx)
{
	static const char *const not_included[] = { ".py", ".pyi", ".md", ".rst", ".txt", ".toml", ".json", NULL };
	struct header_scan *h = ctx;
	struct stat st;
	if (h->why_all || lstat(path, &st) < 0)
		return 0;
	if (S_ISDIR(st.st_mode))
		return strcmp(name, ".git") ? DIR_WALK_ENTER : 0;
	if (!S_ISREG(st.st_mode) || !strcmp(rel, "torch-ext/registration.h") || has_string(h->units, rel))
		return 0;
	for (size_t i = 0; not_included[i]; i++)
		if (ends_with(name, not_included[i]))
			return 0;
	if (file_names_namespace(path))
		h->why_all = xasprintf("%s names it", rel);
	return 0;
}

/* Set p->namespace_everywhere when a header names the macro (or the tree
 * cannot be read); log which units get the namespace. */
static void choose_namespace_units(struct build_plan *p)
{
	struct strvec units = STRVEC_INIT;
	variant_units(p, &units);
	struct header_scan h = { .units = &units, .why_all = NULL };
	if (dir_walk(p->src, scan_header, &h) < 0 && !h.why_all)
		h.why_all = xstrdup("the source tree could not be read");
	p->namespace_everywhere = h.why_all != NULL;
	struct strbuf list = STRBUF_INIT;
	struct namespace_use *uses = xcalloc(units.count ? units.count : 1, sizeof(*uses));
	for (size_t i = 0; i < units.count && !h.why_all; i++)
		if (scan_unit(p, units.items[i], &uses[i])) {
			strvec_pushf(&p->namespace_units, "%s", units.items[i]);
			strbuf_addf(&list, " %s", units.items[i]);
		}
	if (h.why_all)
		log_info("khub-worker build: every unit gets -D" NAMESPACE_MACRO "=%s: %s", p->ops_name, h.why_all);
	else
		log_info("khub-worker build: -D" NAMESPACE_MACRO "=%s only for the units that name it:%s", p->ops_name,
			 list.buf ? list.buf : " none");
	if (!h.why_all)
		choose_runtime_units(p, &units, uses);
	free(uses);
	free(h.why_all);
	strbuf_release(&list);
	strvec_release(&units);
}

/* ---- which C++ units register under the runtime namespace --------------------------- */

/* A unit whose every mention of the macro is the first argument of one of
 * these registers through khub's registration.h: compiled with
 * -DKHUB_RUNTIME_NAMESPACE, its command line names no commit (a ccache hit
 * on every commit), and the op namespace comes from khub_op_namespace, a
 * string of the namespace file linked in (write_namespace_file). */
static const char *const registration_macros[] = { "TORCH_LIBRARY_EXPAND", "TORCH_LIBRARY_IMPL_EXPAND",
						   "REGISTER_EXTENSION", NULL };

struct cxx_token {
	const char *at;
	size_t len;
};

static int is_ident(int c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Past the comment or (raw) string or character literal at s, or s when
 * none begins there. prefix: the identifier just before s (R"...( raw). */
static const char *skip_opaque(const char *s, const char *end, const struct cxx_token *prefix)
{
	if (end - s >= 2 && s[0] == '/' && (s[1] == '/' || s[1] == '*')) {
		if (s[1] == '*') {
			const char *e = memmem(s + 2, (size_t)(end - s - 2), "*/", 2);
			return e ? e + 2 : end;
		}
		for (; s < end && *s != '\n'; s++)
			if (*s == '\\' && s + 1 < end)
				s++;
		return s;
	}
	if (*s == '"' && prefix && prefix->at + prefix->len == s && prefix->at[prefix->len - 1] == 'R') {
		const char *open = memchr(s, '(', (size_t)(end - s));
		if (!open || open - s > 17)
			return end;
		char close[20];
		int n = snprintf(close, sizeof(close), ")%.*s\"", (int)(open - s - 1), s + 1);
		const char *e = memmem(open, (size_t)(end - open), close, (size_t)n);
		return e ? e + n : end;
	}
	if (*s == '"' || *s == '\'') {
		char q = *s++;
		for (; s < end && *s != q && *s != '\n'; s++)
			if (*s == '\\' && s + 1 < end)
				s++;
		return s < end ? s + 1 : end;
	}
	return s;
}

/* The tokens of text[0..n) that matter here: identifiers (and numbers),
 * punctuation one byte each, a literal as a token "\"". */
static struct cxx_token *cxx_tokens(const char *text, size_t n, size_t *count)
{
	const char *s = text, *end = text + n;
	struct cxx_token *t = NULL;
	size_t cap = 0;
	*count = 0;
	while (s < end) {
		const struct cxx_token *last = *count ? &t[*count - 1] : NULL;
		const char *past = skip_opaque(s, end, last);
		if (past == s && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v')) {
			s++;
			continue;
		}
		if (*count == cap) {
			t = xrealloc(t, (cap = cap ? 2 * cap : 256) * sizeof(*t));
			last = *count ? &t[*count - 1] : NULL;	/* t moved */
		}
		if (past != s) {
			int literal = *s == '"' || *s == '\'';
			if (literal && last && last->at + last->len == s)
				(*count)--;	/* a prefix (u8, L, R) and its literal: one token */
			if (literal)
				t[(*count)++] = (struct cxx_token){ "\"", 1 };
			s = past;
			continue;
		}
		const char *b = s;
		if (is_ident((unsigned char)*s))
			while (s < end && is_ident((unsigned char)*s))
				s++;
		else
			s++;
		t[(*count)++] = (struct cxx_token){ b, (size_t)(s - b) };
	}
	return t;
}

static int token_is(const struct cxx_token *t, const char *s)
{
	return t->len == strlen(s) && !memcmp(t->at, s, t->len);
}

static int registration_macro(const struct cxx_token *t)
{
	for (size_t i = 0; registration_macros[i]; i++)
		if (token_is(t, registration_macros[i]))
			return (int)i + 1;
	return 0;
}

/* Why the mention t[i] is not a registration's first argument, or NULL. */
static const char *other_use(const struct cxx_token *t, size_t n, size_t i)
{
	int m = i >= 2 && token_is(&t[i - 1], "(") ? registration_macro(&t[i - 2]) : 0;
	if (!m)
		return "not the first argument of TORCH_LIBRARY_EXPAND, TORCH_LIBRARY_IMPL_EXPAND or REGISTER_EXTENSION";
	if (i + 1 >= n || !(token_is(&t[i + 1], ")") || (m < 3 && token_is(&t[i + 1], ","))))
		return "part of a longer argument";
	if (i >= 3 && (token_is(&t[i - 3], "define") || token_is(&t[i - 3], "undef")))
		return "in a #define of its own";
	return NULL;
}

void compile_namespace_use(const char *text, size_t n, struct namespace_use *u)
{
	size_t count;
	struct cxx_token *t = cxx_tokens(text, n, &count);
	memset(u, 0, sizeof(*u));
	for (size_t i = 0; i < count && !u->why[0]; i++) {
		if (registration_macro(&t[i]) && i >= 1 && (token_is(&t[i - 1], "define") || token_is(&t[i - 1], "undef"))) {
			snprintf(u->why, sizeof(u->why), "it defines %.*s itself", (int)t[i].len, t[i].at);
			break;
		}
		if (!token_is(&t[i], NAMESPACE_MACRO))
			continue;
		const char *why = other_use(t, count, i);
		if (why) {
			size_t line = 1;
			for (const char *c = text; c < t[i].at; c++)
				line += *c == '\n';
			snprintf(u->why, sizeof(u->why), "line %zu: " NAMESPACE_MACRO " %s", line, why);
		} else {
			u->registrations++;
			u->registers_module |= token_is(&t[i - 2], "REGISTER_EXTENSION");
		}
	}
	free(t);
}

static int append_chunk(const char *buf, size_t n, void *text)
{
	strbuf_add(text, buf, n);
	return 0;
}

#define UNIT_TEXT_MAX (64L * 1024 * 1024)

/* Unit rel read once: 1 when it names the macro (or cannot be read: it
 * may, the safe answer), else 0; for a host C++ unit naming it, its use
 * of the macro in u (one that cannot be read whole: an other use, the
 * safe answer). A unit over UNIT_TEXT_MAX bytes is scanned in chunks. */
static int scan_unit(const struct build_plan *p, const char *rel, struct namespace_use *u)
{
	char *path = xasprintf("%s/%s", p->src, rel);
	struct strbuf text = STRBUF_INIT;
	struct stat st;
	int named = 1;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	memset(u, 0, sizeof(*u));
	snprintf(u->why, sizeof(u->why), "it could not be read");
	int regular = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	if (regular && st.st_size >= UNIT_TEXT_MAX) {
		named = fd_contains(fd, NAMESPACE_MACRO);
	} else if (regular && read_chunks(fd, append_chunk, &text) == 0) {
		const char *buf = text.buf ? text.buf : "";
		named = memmem(buf, text.len, NAMESPACE_MACRO, strlen(NAMESPACE_MACRO)) != NULL;
		if (named && !gpu_source(p->cb, rel))
			compile_namespace_use(buf, text.len, u);
	}
	if (fd >= 0)
		close(fd);
	strbuf_release(&text);
	free(path);
	return named;
}

/* Each host C++ unit naming the macro: into p->runtime_units, or logged
 * with why it gets the namespace itself. */
static void choose_runtime_units(struct build_plan *p, const struct strvec *units, const struct namespace_use *uses)
{
	for (size_t i = 0; i < units->count; i++) {
		const char *rel = units->items[i];
		if (gpu_source(p->cb, rel) || !names_extension(p, rel))
			continue;
		const struct namespace_use *u = &uses[i];
		if (u->registrations && !u->why[0]) {
			strvec_pushf(&p->runtime_units, "%s", rel);
			p->runtime_module |= u->registers_module;
			dprintf(p->sb->log_fd, "khub-worker build: %s: registers under the runtime op namespace %s ("
				RUNTIME_NAMESPACE_DEFINE ")\n", rel, p->ops_name);
		} else {
			dprintf(p->sb->log_fd, "khub-worker build: %s: compiled with -D" NAMESPACE_MACRO "=%s: %s\n",
				rel, p->ops_name, u->why[0] ? u->why : "no registration names it");
		}
	}
}

/* The namespace file: khub_op_namespace (and the module's PyInit_ when a
 * runtime unit has REGISTER_EXTENSION), written under the scratch's obj/
 * and compiled as C; its object goes to objects. */
static int write_namespace_file(struct build_plan *p, struct strvec *objects)
{
	if (!p->runtime_units.count)
		return BUILD_OK;
	struct strbuf c = STRBUF_INIT;
	strbuf_addf(&c, "/* written by khub-worker: the op namespace of this build */\n"
			"const char khub_op_namespace[] = \"%s\";\n", p->ops_name);
	if (p->runtime_module)
		strbuf_addf(&c, "#include <Python.h>\n"
				"PyMODINIT_FUNC PyInit_%s(void)\n{\n"
				"\tstatic struct PyModuleDef khub_module = { PyModuleDef_HEAD_INIT, \"%s\", NULL, 0, NULL };\n"
				"\treturn PyModule_Create(&khub_module);\n}\n", p->ops_name, p->ops_name);
	char *path = xasprintf("%s/" NAMESPACE_FILE ".c", p->obj);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	int rc = fd >= 0 && write_all(fd, c.buf, c.len) == 0 ? BUILD_OK : BUILD_INTERNAL;
	if (fd >= 0 && close(fd) != 0)
		rc = BUILD_INTERNAL;
	if (rc != BUILD_OK)
		log_error("khub-worker: %s could not be written", path);
	struct strvec args = STRVEC_INIT;
	strvec_pushf(&args, "%s", p->tc->cxx);
	strvec_pushf(&args, "-x");
	strvec_pushf(&args, "c");
	strvec_pushf(&args, "-O2");
	strvec_pushf(&args, "-fPIC");
	push_reproducible(p, &args, 0, NAMESPACE_FILE ".c");
	strvec_pushf(&args, "-DPy_LIMITED_API=0x03090000");
	if (p->tc->python_include)
		strvec_pushf(&args, "-I%s", p->tc->python_include);
	strvec_pushf(&args, "-c");
	strvec_pushf(&args, "../obj/" NAMESPACE_FILE ".c");
	strvec_pushf(&args, "-o");
	strvec_pushf(&args, "../obj/" NAMESPACE_FILE ".o");
	if (rc == BUILD_OK && (rc = compile_run(p, &args)) == BUILD_OK)
		strvec_pushf(objects, "%s/" NAMESPACE_FILE ".o", p->obj);
	strvec_release(&args);
	strbuf_release(&c);
	free(path);
	return rc;
}

/* ---- the backends compiled here ------------------------------------------------------- */

/* nvcc for a .cu of a CUDA build. */
static void nvcc_command(struct build_plan *p, const char *rel, json_t *kernel, struct strvec *args)
{
	const struct toolchain *tc = p->tc;
	strvec_pushf(args, "%s", tc->nvcc);
	strvec_pushf(args, "-O3");
	if (p->gpu_threads > 0)	/* its code targets compiled in parallel (one argument: ccache ignores it) */
		strvec_pushf(args, "--threads=%d", p->gpu_threads);
	strvec_pushf(args, "-DNDEBUG");
	strvec_pushf(args, "-Xcompiler");
	strvec_pushf(args, "-fPIC");
	if (tc->cxx) {
		strvec_pushf(args, "-ccbin");
		strvec_pushf(args, "%s", tc->cxx);
	}
	strvec_pushf(args, "--expt-relaxed-constexpr");
	push_reproducible(p, args, 1, rel);
	push_common_defines(p, rel, 0, args);
	for (size_t i = 0; i < p->archs.count; i++)
		push_gencode(args, p->archs.items[i]);
	push_strings(args, json_object_get(kernel, p->cb->flags_key), "", NULL);
}

/* hipcc -x hip for a .cu or .hip of a ROCm build. */
static void hipcc_command(struct build_plan *p, const char *rel, json_t *kernel, struct strvec *args)
{
	strvec_pushf(args, "%s", p->tc->hipcc);
	strvec_pushf(args, "-O3");
	strvec_pushf(args, "-DNDEBUG");
	strvec_pushf(args, "-fPIC");
	push_reproducible(p, args, 0, NULL);
	push_common_defines(p, rel, 0, args);
	for (size_t i = 0; i < p->archs.count; i++)
		strvec_pushf(args, "--offload-arch=%s", p->archs.items[i]);
	push_strings(args, json_object_get(kernel, p->cb->flags_key), "", NULL);
	strvec_pushf(args, "-x");
	strvec_pushf(args, "hip");
}

/* FP8 types from nvcc 11.8 on. */
static void cuda_version_defines(const struct toolchain *tc, struct strvec *args)
{
	if (tc->nvcc_major > 11 || (tc->nvcc_major == 11 && tc->nvcc_minor >= 8))
		strvec_pushf(args, "-DENABLE_FP8");
}

int nvcc_threads(int nvcc_major, int nvcc_minor, int jobs, size_t compiles, size_t targets)
{
	if (nvcc_major < 11 || (nvcc_major == 11 && nvcc_minor < 2))
		return 0;
	size_t cpus = jobs > 0 ? (size_t)jobs : 1;
	size_t at_once = compiles < 1 ? 1 : compiles < cpus ? compiles : cpus;
	size_t n = cpus / at_once;
	if (targets > 0 && n > targets)
		n = targets;
	return n < 1 ? 1 : (int)n;
}

/* nvcc's threads for this build: its -gencode targets (a +PTX arch is two). */
static int cuda_threads(const struct build_plan *p, size_t compiles)
{
	size_t targets = 0;
	for (size_t i = 0; i < p->archs.count; i++)
		targets += ends_with(p->archs.items[i], "+PTX") ? 2 : 1;
	return nvcc_threads(p->tc->nvcc_major, p->tc->nvcc_minor, p->jobs, compiles, targets);
}

static void cuda_select_archs(struct build_plan *p, const char *const *caps, size_t n)
{
	cuda_archs_select(p->tc->nvcc_major, p->tc->nvcc_minor, caps, n, &p->archs);
}

/* The supported ROCm archs the kernel asks for (all of them: none asked). */
static void rocm_select_archs(struct build_plan *p, const char *const *caps, size_t n)
{
	for (size_t s = 0; rocm_archs_supported[s]; s++) {
		int want = n == 0;
		for (size_t i = 0; i < n && !want; i++)
			want = caps[i] && !strcmp(caps[i], rocm_archs_supported[s]);
		if (want && !has_string(&p->archs, rocm_archs_supported[s]))
			strvec_pushf(&p->archs, "%s", rocm_archs_supported[s]);
	}
}

/* One row per backend this worker compiles, named as kernel/'s table names
 * it; a backend without a row has no arch variant here. */
static const struct compile_backend compile_backends[] = {
	{ .name = "cuda", .compiler_key = "nvcc", .compiler = offsetof(struct toolchain, nvcc),
	  .version = offsetof(struct toolchain, cuda_version), .version_title = "CUDA",
	  .defines = { "-DUSE_CUDA=1", "-DCUDA_KERNEL" }, .toolchain_defines = cuda_version_defines,
	  .gpu_sources = { ".cu" }, .gpu_command = nvcc_command, .flags_key = "cuda-flags",
	  .archs_key = "cuda-capabilities", .noarch_archs_key = "cuda_capabilities", .select_archs = cuda_select_archs,
	  .gpu_threads = cuda_threads,
	  .discard_locals = 1, .toolkit_lib = "lib64", .torch_libs = { "torch_cuda", "c10_cuda" }, .runtime_lib = "cudart" },
	{ .name = "rocm", .compiler_key = "hipcc", .compiler = offsetof(struct toolchain, hipcc),
	  .version = offsetof(struct toolchain, rocm_version), .version_title = "HIP",
	  .defines = { "-DUSE_ROCM=1", "-DROCM_KERNEL", "-D__HIP_PLATFORM_AMD__=1" },
	  .gpu_sources = { ".cu", ".hip" }, .gpu_command = hipcc_command, .flags_key = "hip-flags",
	  .archs_key = "rocm-archs", .noarch_archs_key = "rocm_archs", .select_archs = rocm_select_archs,
	  .probe_archs = 1, .offload_report = 1, .from_hipcc = 1,
	  .discard_locals = 1, .toolkit_lib = "lib", .torch_libs = { "torch_hip", "c10_hip" }, .runtime_lib = "amdhip64" },
	{ .name = "cpu", .defines = { "-DCPU_KERNEL" } },
	{ .name = NULL },
};

const struct compile_backend *compile_backend_for(const struct kernel_backend *kb)
{
	for (const struct compile_backend *b = compile_backends; kb && b->name; b++)
		if (kernel_backend_find(b->name) == kb)
			return b;
	return NULL;
}

const struct compile_backend *compile_backend_find(const char *name)
{
	return compile_backend_for(kernel_backend_find(name));
}

const struct compile_backend *compile_backend_of_torch(const struct toolchain *tc)
{
	const struct compile_backend *none = NULL;
	for (const struct compile_backend *b = compile_backends; b->name; b++) {
		if (b->compiler_key && compile_backend_version(b, tc))
			return b;
		if (!b->compiler_key && !none)
			none = b;
	}
	return none;
}

static const char *toolchain_string(const struct toolchain *tc, size_t offset)
{
	return *(char *const *)(const void *)((const char *)tc + offset);
}

const char *compile_backend_compiler(const struct compile_backend *b, const struct toolchain *tc)
{
	return b && b->compiler_key ? toolchain_string(tc, b->compiler) : NULL;
}

const char *compile_backend_version(const struct compile_backend *b, const struct toolchain *tc)
{
	return b && b->compiler_key ? toolchain_string(tc, b->version) : NULL;
}

/* 1 when rel is a source the backend's GPU compiler takes. */
static int gpu_source(const struct compile_backend *b, const char *rel)
{
	for (size_t i = 0; b->gpu_command && i < sizeof(b->gpu_sources) / sizeof(b->gpu_sources[0]) && b->gpu_sources[i]; i++)
		if (ends_with(rel, b->gpu_sources[i]))
			return 1;
	return 0;
}

/* The link's GPU part: the toolkit's library directory, torch's libraries
 * for the backend (when the torch is its build: a rocm_from_hipcc torch is
 * a CPU one) and the runtime. */
static void push_gpu_libraries(struct build_plan *p, struct strvec *args)
{
	const struct compile_backend *b = p->cb;
	const struct toolchain *tc = p->tc;
	if (!b->runtime_lib)
		return;
	char *root = toolkit_root(tc, compile_backend_compiler(b, tc));
	if (root) {
		strvec_pushf(args, "-L%s/%s", root, b->toolkit_lib);
		free(root);
	}
	if (compile_backend_find(tc->torch_build) == b) {
		strvec_pushf(args, "-l%s", b->torch_libs[0]);
		strvec_pushf(args, "-l%s", b->torch_libs[1]);
	} else {
		log_warn("khub-worker: linking without %s and %s: torch %s is a %s build, "
			"not a %s one (rocm_from_hipcc)", b->torch_libs[0], b->torch_libs[1], tc->torch_version,
			tc->torch_build, kernel_backend_find(b->name)->title);
	}
	strvec_pushf(args, "-l%s", b->runtime_lib);
}

/* One source file: which compiler, and the flags its table gives. */
static int compile_one(struct build_plan *p, const char *rel, json_t *kernel, size_t index, struct strvec *objects,
		       struct strvec *cmd)
{
	const struct toolchain *tc = p->tc;
	int is_cxx = compiled_source(rel) && !ends_with(rel, ".cu") && !ends_with(rel, ".hip");
	if (!compiled_source(rel))
		return BUILD_OK;	/* headers and data are only listed */
	char *base = xstrdup(rel);
	for (char *c = base; *c; c++)
		if (*c == '/')
			*c = '_';
	char *obj = xasprintf("%s/%zu-%s.o", p->obj, index, base);
	/* as the compiler is told it (it runs in src/, obj/'s sibling) */
	char *obj_rel = xasprintf("../obj/%zu-%s.o", index, base);
	free(base);
	struct strvec args = STRVEC_INIT;
	int rc = BUILD_OK;
	if (p->cache.dir)	/* the compiler through ccache (build_cache_prepare) */
		strvec_pushf(&args, "%s", p->cache.program);
	if (gpu_source(p->cb, rel)) {
		p->cb->gpu_command(p, rel, kernel, &args);
	} else if (is_cxx) {
		strvec_pushf(&args, "%s", tc->cxx);
		strvec_pushf(&args, "-O3");
		strvec_pushf(&args, "-DNDEBUG");
		strvec_pushf(&args, "-fPIC");
		strvec_pushf(&args, "-fno-gnu-unique");
		push_reproducible(p, &args, 0, rel);
		push_common_defines(p, rel, 1, &args);
		if (kernel)
			push_strings(&args, json_object_get(kernel, "cxx-flags"), "", NULL);
		else
			push_strings(&args, json_object_get(json_object_get(p->config, "torch"), "cxx-flags"), "", NULL);
	} else {
		log_error("khub-worker: %s: no compiler for a %s build", rel, p->backend);
		rc = BUILD_BAD_SOURCE;
		goto cleanup;
	}
	if (kernel) {
		push_strings(&args, json_object_get(kernel, "include"), "-I", compile_dir(p));
		if ((rc = push_dependencies(p, kernel, &args)) != BUILD_OK)
			goto cleanup;
	}
	strvec_pushf(&args, "-c");
	char *compiled = hipify_compiled_name(p, rel);	/* relative: the compilers run in p->src */
	strvec_pushf(&args, "%s", compiled);
	free(compiled);
	strvec_pushf(&args, "-o");
	/* relative too: nvcc names a translation unit's internal symbols
	 * after its output path, scratch name included */
	strvec_pushf(&args, "%s", obj_rel);
	strvec_pushf(objects, "%s", obj);
	*cmd = args;
	args = (struct strvec)STRVEC_INIT;
cleanup:
	strvec_release(&args);
	free(obj);
	free(obj_rel);
	return rc;
}

/* The archs of the variant's GPU backend into p->archs (sorted, unique). */
static void select_archs(struct build_plan *p)
{
	json_t *kernels = json_object_get(p->config, "kernel");
	const char *name;
	json_t *k;
	json_object_foreach(kernels, name, k) {
		if (strcmp(json_string_value(json_object_get(k, "backend")), p->backend) != 0)
			continue;
		json_t *list = json_object_get(k, p->cb->archs_key);
		size_t n = json_array_size(list);
		const char **caps = n ? xcalloc(n, sizeof(*caps)) : NULL;
		for (size_t i = 0; i < n; i++)
			caps[i] = json_string_value(json_array_get(list, i));
		p->cb->select_archs(p, caps, n);
		free(caps);
	}
	if (p->archs.count > 1)
		qsort(p->archs.items, p->archs.count, sizeof(char *), cmp_str);
}

void compile_capabilities_left_out(json_t *config, const struct variant_name *v, const char *archs_key, json_t *out)
{
	/* build.toml's kernels of the variant's backend as the planner's JSON
	 * has them ("cuda-kernels"), judged by kernel/toolkit.c as the planner does */
	char key[sizeof(v->backend) + 16];
	snprintf(key, sizeof(key), "%s-kernels", v->backend);
	json_t *plan = json_object(), *list = json_array(), *k;
	const char *name;
	json_object_foreach(json_object_get(config, "kernel"), name, k)
		if (!strcmp(json_string_value(json_object_get(k, "backend")), v->backend) &&
		    json_is_array(json_object_get(k, archs_key)))
			json_array_append_new(list, json_pack("{s:O}", "capabilities", json_object_get(k, archs_key)));
	json_object_set_new(plan, key, list);
	kernel_toolkit_left_out(plan, v, out);
	json_decref(plan);
}

/* The capabilities the kernel asks for that the variant's toolkit cannot
 * build, each logged with its reason and kept for the ABI report. */
static void note_capabilities_left_out(struct build_plan *p)
{
	size_t i;
	json_t *c;
	if (!p->capabilities_left_out)
		p->capabilities_left_out = json_array();
	compile_capabilities_left_out(p->config, &p->parsed, p->cb->archs_key, p->capabilities_left_out);
	json_array_foreach(p->capabilities_left_out, i, c)
		log_warn("khub-worker build: %s", json_string_value(json_object_get(c, "reason")));
}

/* Keep the ROCm archs this hipcc can compile for: one device-only compile
 * of an empty HIP file per arch (an unknown arch, or one without device
 * libraries, fails at once). The others are left out with a log line and
 * listed in p->archs_left_out (the ABI report says so). */
static int hip_archs_available(struct build_plan *p)
{
	char *probe = xasprintf("%s/khub-arch-probe.hip", p->obj);
	struct strvec keep = STRVEC_INIT;
	FILE *f = fopen(probe, "we");
	int rc = BUILD_INTERNAL;
	if (!f || fclose(f) != 0)
		goto cleanup;
	rc = BUILD_OK;
	for (size_t i = 0; i < p->archs.count && rc == BUILD_OK; i++) {
		struct strvec args = STRVEC_INIT;
		strvec_pushf(&args, "%s", p->tc->hipcc);
		strvec_pushf(&args, "-x");
		strvec_pushf(&args, "hip");
		strvec_pushf(&args, "--offload-arch=%s", p->archs.items[i]);
		strvec_pushf(&args, "--cuda-device-only");
		strvec_pushf(&args, "-S");
		strvec_pushf(&args, "%s", probe);
		strvec_pushf(&args, "-o");
		strvec_pushf(&args, "/dev/null");
		log_info("khub-worker: can %s compile for %s?", p->tc->hipcc, p->archs.items[i]);
		int r = sandbox_run(p->sb, args.items, p->src, -1);
		strvec_release(&args);
		if (r == SANDBOX_TIMED_OUT || r == SANDBOX_CPU_LIMIT || r < 0) {
			rc = outcome(p, p->tc->hipcc, r);
		} else if (r == 0) {
			strvec_pushf(&keep, "%s", p->archs.items[i]);
		} else {
			log_warn("khub-worker: rocm-archs: %s (%s) cannot compile for %s: left out",
				p->tc->hipcc, p->tc->hipcc_version ? p->tc->hipcc_version : "?", p->archs.items[i]);
			strvec_pushf(&p->archs_left_out, "%s", p->archs.items[i]);
		}
	}
	strvec_release(&p->archs);
	p->archs = keep;
	keep = (struct strvec)STRVEC_INIT;
cleanup:
	strvec_release(&keep);
	if (rc == BUILD_INTERNAL)
		log_error("khub-worker: cannot write %s", probe);
	unlink(probe);
	free(probe);
	return rc;
}

/* The GPU compiler's sources of this variant ([torch] and its backend's
 * [kernel.*]), and from them its threads per compile (logged). */
static void choose_gpu_threads(struct build_plan *p)
{
	size_t n = 0, i;
	json_t *v, *k;
	const char *name;
	if (!p->cb->gpu_threads)
		return;
	json_array_foreach(json_object_get(json_object_get(p->config, "torch"), "src"), i, v)
		n += gpu_source(p->cb, json_string_value(v));
	json_object_foreach(json_object_get(p->config, "kernel"), name, k)
		if (!strcmp(json_string_value(json_object_get(k, "backend")), p->backend))
			json_array_foreach(json_object_get(k, "src"), i, v)
				n += gpu_source(p->cb, json_string_value(v));
	if (n == 0)
		return;
	p->gpu_threads = p->cb->gpu_threads(p, n);
	if (p->gpu_threads > 0)
		log_info("khub-worker build: %s --threads=%d: %d CPUs for %zu %s compile%s at once",
			 compile_backend_compiler(p->cb, p->tc), p->gpu_threads, p->jobs, n < (size_t)p->jobs ? n : (size_t)p->jobs,
			 p->cb->compiler_key, n == 1 ? "" : "s");
	else
		log_info("khub-worker build: %s (%s) compiles its targets one by one (no --threads before 11.2)",
			 compile_backend_compiler(p->cb, p->tc), p->tc->nvcc_version ? p->tc->nvcc_version : "?");
}

/* compile_one, its command appended to *cmds. */
static int add_compile(struct build_plan *p, const char *rel, json_t *kernel, size_t index, struct strvec *objects,
		       struct strvec **cmds, size_t *ncmds)
{
	struct strvec cmd = STRVEC_INIT;
	int rc = compile_one(p, rel, kernel, index, objects, &cmd);
	if (rc == BUILD_OK && cmd.count) {
		*cmds = xrealloc(*cmds, (*ncmds + 1) * sizeof(**cmds));
		(*cmds)[(*ncmds)++] = cmd;
	} else {
		strvec_release(&cmd);
	}
	return rc;
}

int compile_variant(struct build_plan *p)
{
	const struct toolchain *tc = p->tc;
	struct strvec *cmds = NULL;
	size_t ncmds = 0;
	struct strvec objects = STRVEC_INIT;
	struct strvec args = STRVEC_INIT;
	int rc = BUILD_OK;
	if (p->cb->archs_key) {
		select_archs(p);
		note_capabilities_left_out(p);
		if (p->cb->probe_archs && p->archs.count && (rc = hip_archs_available(p)) != BUILD_OK)
			goto cleanup;
		if (p->archs.count == 0) {
			dprintf(p->sb->log_fd, "build.toml: kernel.*.%s: no arch left after intersecting with the supported set\n",
				p->cb->archs_key);
			rc = BUILD_BAD_SOURCE;
			goto cleanup;
		}
	}
	if ((rc = hipify_sources(p)) != BUILD_OK)
		goto cleanup;
	choose_gpu_threads(p);
	choose_namespace_units(p);
	size_t index = 0;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(json_object_get(p->config, "torch"), "src"), i, v)
		if ((rc = add_compile(p, json_string_value(v), NULL, index++, &objects, &cmds, &ncmds)) != BUILD_OK)
			goto cleanup;
	const char *name;
	json_t *k;
	json_object_foreach(json_object_get(p->config, "kernel"), name, k) {
		if (strcmp(json_string_value(json_object_get(k, "backend")), p->backend) != 0)
			continue;
		json_array_foreach(json_object_get(k, "src"), i, v)
			if ((rc = add_compile(p, json_string_value(v), k, index++, &objects, &cmds, &ncmds)) != BUILD_OK)
				goto cleanup;
	}
	if (objects.count == 0) {
		dprintf(p->sb->log_fd, "build.toml: torch.src: nothing to compile for %s\n", p->backend);
		rc = BUILD_BAD_SOURCE;
		goto cleanup;
	}
	if ((rc = run_all(p, cmds, ncmds)) != BUILD_OK || (rc = write_namespace_file(p, &objects)) != BUILD_OK)
		goto cleanup;
	/* The link: torch's libraries, no RPATH (the loader finds them through
	 * the already imported torch). */
	strvec_pushf(&args, "%s", tc->cxx);
	strvec_pushf(&args, "-shared");
	/* no local symbols: nvcc's objects name their temp file (tmpxft_<pid>_...)
	 * in a FILE symbol, different on every run; loading needs none of them */
	if (p->cb->discard_locals)
		strvec_pushf(&args, "-Wl,--discard-all");
	strvec_pushf(&args, "-o");
	strvec_pushf(&args, "%s/%s.abi3.so", p->stage, p->ops_name);
	for (i = 0; i < objects.count; i++)
		strvec_pushf(&args, "%s", objects.items[i]);
	if (tc->torch_lib)
		strvec_pushf(&args, "-L%s", tc->torch_lib);
	strvec_pushf(&args, "-ltorch");
	strvec_pushf(&args, "-ltorch_cpu");
	strvec_pushf(&args, "-lc10");
	push_gpu_libraries(p, &args);
	rc = compile_run(p, &args);
cleanup:
	for (size_t c = 0; c < ncmds; c++)
		strvec_release(&cmds[c]);
	free(cmds);
	strvec_release(&objects);
	strvec_release(&args);
	return rc;
}
