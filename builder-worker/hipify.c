/* hipify.c -- ROCm from CUDA sources, as kernel-builder does it: a ROCm
 * variant's .cu sources are translated to HIP by the toolchain's hipify
 * tool (torch.utils.hipify run by its Python, the translator kernel-builder's
 * cmake/hipify.py calls, or a hipify-perl program) inside the sandbox, into
 * .hip copies beside them in the scratch copy of the source, and hipcc
 * compiles the copies; the project headers they include are translated
 * too (<name>_hip<ext>) and the includes pointed at them. The build log and
 * the ABI report name the tool, its version and the files
 * (docs/worker-build.md, "ROCm from CUDA sources"). */
#include "builder-worker/build_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Run as `python SCRIPT IN OUT` in the source directory: IN hipified
 * alone (no header followed), as a PyTorch extension's source, its result
 * moved to OUT. */
static const char torch_hipify_script[] =
	"import os, shutil, sys\n"
	"from torch.utils.hipify import hipify_python as h\n"
	"src, dst = sys.argv[1], sys.argv[2]\n"
	"root = os.getcwd()\n"
	"fin = os.path.join(root, src)\n"
	"res = h.hipify(project_directory=root, output_directory=root, includes=[], extra_files=[fin],\n"
	"               hipify_extra_files_only=True, is_pytorch_extension=True, show_progress=False)\n"
	"r = res.get(fin)\n"
	"path = r.get('hipified_path') if isinstance(r, dict) else getattr(r, 'hipified_path', None)\n"
	"if not path or not os.path.isfile(path):\n"
	"    sys.exit('hipify: no output for %s' % src)\n"
	"if os.path.abspath(path) == fin:\n"
	"    shutil.copyfile(fin, os.path.join(root, dst))\n"
	"else:\n"
	"    os.replace(path, os.path.join(root, dst))\n"
	"    try:\n"
	"        os.removedirs(os.path.dirname(path))\n"
	"    except OSError:\n"
	"        pass\n"
	"print('hipify: %s -> %s' % (src, dst))\n";

/* Where hipify_sources writes the script: obj/, as the compilers in src/ see it. */
#define TORCH_SCRIPT "khub-hipify.py"

static void torch_command(const struct toolchain *tc, const char *in, const char *out, struct strvec *args)
{
	strvec_pushf(args, "%s", tc->python);
	strvec_pushf(args, "-B");
	strvec_pushf(args, "../obj/" TORCH_SCRIPT);
	strvec_pushf(args, "%s", in);
	strvec_pushf(args, "%s", out);
}

static void perl_command(const struct toolchain *tc, const char *in, const char *out, struct strvec *args)
{
	strvec_pushf(args, "%s", tc->hipify);
	strvec_pushf(args, "-quiet-warnings");
	strvec_pushf(args, "-o=%s", out);
	strvec_pushf(args, "%s", in);
}

static const struct hipify_tool hipify_tools[] = {
	{ .name = "torch", .python = 1, .command = torch_command },
	{ .name = "hipify-perl", .command = perl_command },	/* any other value: its path */
};

const struct hipify_tool *hipify_tool_of(const char *value)
{
	return value && !strcmp(value, hipify_tools[0].name) ? &hipify_tools[0] : &hipify_tools[1];
}

int hipify_wanted(const char *rel)
{
	size_t n = rel ? strlen(rel) : 0;
	return n > 3 && !strcmp(rel + n - 3, ".cu");
}

/* "dir/x.cu" -> "dir/x.hip" (a new string). */
static char *hip_name(const char *rel)
{
	return xasprintf("%.*s.hip", (int)(strlen(rel) - 3), rel);
}

char *hipify_compiled_name(const struct build_plan *p, const char *rel)
{
	for (size_t i = 0; i < p->hipified.count; i++)
		if (!strcmp(p->hipified.items[i], rel))
			return hip_name(rel);
	return xstrdup(rel);
}

/* The CUDA sources of src (a build.toml src array) into out, unique. */
static void add_cuda_sources(json_t *src, struct strvec *out)
{
	size_t i, k;
	json_t *v;
	json_array_foreach(src, i, v) {
		const char *rel = json_string_value(v);
		if (!hipify_wanted(rel))
			continue;
		for (k = 0; k < out->count && strcmp(out->items[k], rel) != 0; k++)
			;
		if (k == out->count)
			strvec_pushf(out, "%s", rel);
	}
}

/* One file (a CUDA source, or a header: what "header " says) through the
 * tool into out; the output must exist afterwards. */
static int hipify_one(struct build_plan *p, const struct hipify_tool *tool, const char *rel, const char *out,
		      const char *what)
{
	struct strvec args = STRVEC_INIT;
	char *path = xasprintf("%s/%s", p->src, out);
	struct stat st;
	tool->command(p->tc, rel, out, &args);
	int rc = compile_run(p, &args);
	if (rc == BUILD_OK && (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))) {
		log_error("khub-worker build: hipify wrote no %s", out);
		rc = BUILD_FAILED;
	}
	if (rc == BUILD_OK)
		log_info("khub-worker build: hipified %s%s -> %s", what, rel, out);
	strvec_release(&args);
	free(path);
	return rc;
}

/* A script of ours into obj/ (read by the build uid). */
static int write_script(const struct build_plan *p, const char *name, const char *text, size_t len)
{
	char *path = xasprintf("%s/%s", p->obj, name);
	FILE *f = fopen(path, "we");
	int ok = f && fwrite(text, 1, len, f) == len;
	if (f && fclose(f) != 0)
		ok = 0;
	if (!ok)
		log_error("khub-worker build: cannot write %s", path);
	free(path);
	return ok ? BUILD_OK : BUILD_INTERNAL;
}

/* ---- the project headers a CUDA source includes ------------------------------------------- */

/* kernel-builder's hipify (includes of the project, is_pytorch_extension)
 * translates the headers a source includes with a quoted #include found
 * beside it, transitively, and points the include at the translation. The
 * worker finds them itself in its scratch copy of the source before any of
 * the kernel's code ran: never through a link, never outside the tree,
 * bounded; the tool translates each in the sandbox as the build uid. */
#define HIPIFY_HEADERS_MAX 128
#define HIPIFY_HEADER_MAX_BYTES (1L << 20)
#define HIPIFY_SPELLING_MAX 1024

/* Run as `python SCRIPT FILE OLD NEW [OLD NEW]...` in the source directory:
 * each quoted #include "OLD" of FILE becomes #include "NEW". */
static const char include_rewrite_script[] =
	"import re, sys\n"
	"path, pairs = sys.argv[1], sys.argv[2:]\n"
	"m = dict(zip(pairs[0::2], pairs[1::2]))\n"
	"with open(path, encoding='utf-8', errors='surrogateescape') as f:\n"
	"    text = f.read()\n"
	"def repl(x):\n"
	"    new = m.get(x.group(2))\n"
	"    return x.group(0) if new is None else '%s\"%s\"' % (x.group(1), new)\n"
	"out = re.sub(r'^([ \\t]*#[ \\t]*include[ \\t]*)\"([^\"\\n]*)\"', repl, text, flags=re.M)\n"
	"with open(path, 'w', encoding='utf-8', errors='surrogateescape') as f:\n"
	"    f.write(out)\n";
#define REWRITE_SCRIPT "khub-hipify-includes.py"

/* The files of one translation: the CUDA sources first, then the headers
 * found; per file the include rewrites of its translation (pairs: the
 * spelling, the new spelling). */
struct hipify_set {
	struct strvec files;
	size_t nsources;
	struct strvec *rewrites;	/* one per file (owned) */
	size_t cap;
};

/* "dir/x.h" -> "dir/x_hip.h", "dir/x" -> "dir/x_hip" (a new string). */
static char *header_hip_name(const char *rel)
{
	const char *base = strrchr(rel, '/'), *dot;
	base = base ? base + 1 : rel;
	dot = strrchr(base, '.');
	if (!dot || dot == base)
		return xasprintf("%s_hip", rel);
	return xasprintf("%.*s_hip%s", (int)(dot - rel), rel, dot);
}

/* rel inside the tree at root_fd opened without following a link at any
 * component: a descriptor of a regular file, or -1 with *why. */
static int open_in_tree(int root_fd, const char *rel, const char **why)
{
	char *copy = xstrdup(rel), *save = NULL, *part = strtok_r(copy, "/", &save), *next;
	int fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
	struct stat st;
	while (fd >= 0 && part) {
		next = strtok_r(NULL, "/", &save);
		int dots = !strcmp(part, ".") || !strcmp(part, "..");	/* never a step up, whoever named it */
		int at = dots ? -1 : openat(fd, part, (next ? O_DIRECTORY : O_NONBLOCK) | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (dots)
			*why = "a path with . or .. in it";
		else if (at < 0)
			*why = errno == ENOENT ? "no such file in the source tree (a system or -I header)"
			     : errno == ELOOP || errno == ENOTDIR ? "a symbolic link (never followed)" : strerror(errno);
		close(fd);
		fd = at;
		part = next;
	}
	free(copy);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		*why = "not a regular file";
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The including file's directory joined with spelling, "." and ".."
 * resolved in words only: a new string, or NULL (*why) when it is
 * absolute or leads outside the tree. */
static char *resolve_include(const char *from, const char *spelling, const char **why)
{
	struct strvec parts = STRVEC_INIT;
	const char *slash = strrchr(from, '/');
	char *joined = xasprintf("%.*s%s%s", slash ? (int)(slash - from) : 0, from, slash ? "/" : "", spelling);
	char *save = NULL, *out = NULL;
	int outside = spelling[0] == '/';
	*why = outside ? "an absolute path" : NULL;
	for (char *part = strtok_r(joined, "/", &save); part && !outside; part = strtok_r(NULL, "/", &save)) {
		if (!strcmp(part, "."))
			continue;
		if (strcmp(part, "..") != 0) {
			strvec_pushf(&parts, "%s", part);
			continue;
		}
		if (!parts.count) {
			outside = 1;
			*why = "it leads outside the source tree";
			break;
		}
		free(parts.items[--parts.count]);
	}
	if (!outside && parts.count) {
		struct strbuf b = STRBUF_INIT;
		for (size_t i = 0; i < parts.count; i++)
			strbuf_addf(&b, "%s%s", i ? "/" : "", parts.items[i]);
		out = strbuf_detach(&b, NULL);
	} else if (!outside) {
		*why = "not a file";
	}
	free(joined);
	strvec_release(&parts);
	return out;
}

static size_t set_index(const struct hipify_set *s, const char *rel)
{
	size_t i;
	for (i = 0; i < s->files.count && strcmp(s->files.items[i], rel) != 0; i++)
		;
	return i;
}

static void set_add(struct hipify_set *s, const char *rel)
{
	if (s->files.count == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->rewrites = xrealloc(s->rewrites, s->cap * sizeof(*s->rewrites));
	}
	s->rewrites[s->files.count] = (struct strvec)STRVEC_INIT;
	strvec_pushf(&s->files, "%s", rel);
}

static void set_release(struct hipify_set *s)
{
	for (size_t i = 0; i < s->files.count; i++)
		strvec_release(&s->rewrites[i]);
	free(s->rewrites);
	strvec_release(&s->files);
}

/* Whether header rel (resolved from file from's spelling) is one to
 * translate: 1, or 0 logged with why. */
static int header_ok(struct hipify_set *s, int root_fd, const char *from, const char *spelling, const char *rel)
{
	const char *why = NULL;
	struct stat st;
	char *hip = header_hip_name(rel);
	int fd = open_in_tree(root_fd, rel, &why);
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > HIPIFY_HEADER_MAX_BYTES)
		why = "over 1 MiB";
	else if (fd >= 0 && fstatat(root_fd, hip, &st, AT_SYMLINK_NOFOLLOW) == 0)
		why = "the source already has a file of its translation's name";
	else if (fd >= 0 && set_index(s, rel) == s->files.count && s->files.count - s->nsources >= HIPIFY_HEADERS_MAX)
		why = "more than 128 headers to translate (the bound)";
	if (fd >= 0)
		close(fd);
	free(hip);
	if (why)
		log_info("khub-worker build: hipify: \"%s\" (included by %s) not translated: %s", spelling, from, why);
	return why == NULL;
}

/* One quoted include of file i: a header to translate is added to the set
 * (once) and the include to rewrite in file i's translation. */
static void take_include(struct hipify_set *s, int root_fd, size_t i, const char *spelling)
{
	const char *why = NULL;
	const char *from = s->files.items[i];
	char *rel = resolve_include(from, spelling, &why);
	if (!rel) {
		log_info("khub-worker build: hipify: \"%s\" (included by %s) not translated: %s", spelling, from, why);
		return;
	}
	if (set_index(s, rel) >= s->nsources && header_ok(s, root_fd, from, spelling, rel)) {
		if (set_index(s, rel) == s->files.count)
			set_add(s, rel);
		const char *slash = strrchr(spelling, '/');
		char *hip = header_hip_name(slash ? slash + 1 : spelling);
		strvec_pushf(&s->rewrites[i], "%s", spelling);
		strvec_pushf(&s->rewrites[i], "%.*s%s", slash ? (int)(slash + 1 - spelling) : 0, spelling, hip);
		free(hip);
	}
	free(rel);
}

/* The quoted #include spellings of text (len bytes) into out. */
static void quoted_includes(const char *text, size_t len, struct strvec *out)
{
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *q = p;
		eol = eol ? eol : end;
		while (q < eol && (*q == ' ' || *q == '\t'))
			q++;
		if (q < eol && *q == '#') {
			for (q++; q < eol && (*q == ' ' || *q == '\t'); q++)
				;
			if ((size_t)(eol - q) > 7 && !memcmp(q, "include", 7)) {
				for (q += 7; q < eol && (*q == ' ' || *q == '\t'); q++)
					;
				const char *close = q < eol && *q == '"' ? memchr(q + 1, '"', (size_t)(eol - q - 1)) : NULL;
				if (close && close > q + 1 && close - q - 1 <= HIPIFY_SPELLING_MAX)
					strvec_pushf(out, "%.*s", (int)(close - q - 1), q + 1);
			}
		}
		p = eol + 1;
	}
}

/* Read file i of the set (bounded, never through a link) and take its
 * quoted includes. */
static void scan_file(struct hipify_set *s, int root_fd, size_t i)
{
	const char *why = NULL;
	struct strvec spellings = STRVEC_INIT;
	int fd = open_in_tree(root_fd, s->files.items[i], &why);
	char *text = xmalloc(HIPIFY_HEADER_MAX_BYTES);
	size_t len = 0;
	ssize_t n = 0;
	while (fd >= 0 && len < HIPIFY_HEADER_MAX_BYTES &&
	       (n = read(fd, text + len, HIPIFY_HEADER_MAX_BYTES - len)) > 0)
		len += (size_t)n;
	if (fd >= 0 && n >= 0)
		quoted_includes(text, len, &spellings);
	else
		log_info("khub-worker build: hipify: %s not read for its includes: %s", s->files.items[i],
			 why ? why : strerror(errno));
	for (size_t k = 0; k < spellings.count; k++)
		take_include(s, root_fd, i, spellings.items[k]);
	if (fd >= 0)
		close(fd);
	free(text);
	strvec_release(&spellings);
}

/* Point file's translation (out) at the translated headers it includes. */
static int rewrite_includes(struct build_plan *p, const char *out, const struct strvec *pairs)
{
	struct strvec args = STRVEC_INIT;
	strvec_pushf(&args, "%s", p->tc->python);
	strvec_pushf(&args, "-B");
	strvec_pushf(&args, "../obj/" REWRITE_SCRIPT);
	strvec_pushf(&args, "%s", out);
	for (size_t k = 0; k < pairs->count; k++)
		strvec_pushf(&args, "%s", pairs->items[k]);
	int rc = compile_run(p, &args);
	strvec_release(&args);
	return rc;
}

/* The headers the CUDA sources include, translated beside them
 * (<name>_hip<ext>), and every translation's includes pointed at them. */
static int hipify_headers(struct build_plan *p, const struct hipify_tool *tool, const struct strvec *cuda)
{
	struct hipify_set s = { .files = STRVEC_INIT };
	int rc = BUILD_OK, root_fd = open(p->src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root_fd < 0) {
		log_error("khub-worker build: cannot open %s: %s", p->src, strerror(errno));
		return BUILD_INTERNAL;
	}
	for (size_t i = 0; i < cuda->count; i++)
		set_add(&s, cuda->items[i]);
	s.nsources = s.files.count;
	for (size_t i = 0; i < s.files.count; i++)	/* grows as headers are found */
		scan_file(&s, root_fd, i);
	close(root_fd);
	if (s.files.count > s.nsources && (rc = write_script(p, REWRITE_SCRIPT, include_rewrite_script,
								sizeof(include_rewrite_script) - 1)) != BUILD_OK)
		goto cleanup;
	for (size_t i = s.nsources; i < s.files.count && rc == BUILD_OK; i++) {
		char *out = header_hip_name(s.files.items[i]);
		rc = hipify_one(p, tool, s.files.items[i], out, "header ");
		if (rc == BUILD_OK)
			strvec_pushf(&p->hipified_headers, "%s", s.files.items[i]);
		free(out);
	}
	for (size_t i = 0; i < s.files.count && rc == BUILD_OK; i++) {
		if (!s.rewrites[i].count)
			continue;
		char *out = i < s.nsources ? hip_name(s.files.items[i]) : header_hip_name(s.files.items[i]);
		rc = rewrite_includes(p, out, &s.rewrites[i]);
		free(out);
	}
cleanup:
	set_release(&s);
	return rc;
}

/* 1 when a build for the backend named name hipifies its CUDA sources
 * (kernel/'s table: ROCm). */
static int backend_hipifies(const char *name)
{
	const struct kernel_backend *kb = name ? kernel_backend_find(name) : NULL;
	return kb && kb->hipify_cuda;
}

int hipify_sources(struct build_plan *p)
{
	struct strvec cuda = STRVEC_INIT;
	const char *name;
	json_t *k;
	int rc = BUILD_OK;
	if (p->noarch || !backend_hipifies(p->backend))
		return BUILD_OK;
	add_cuda_sources(json_object_get(json_object_get(p->config, "torch"), "src"), &cuda);
	json_object_foreach(json_object_get(p->config, "kernel"), name, k)
		if (backend_hipifies(json_string_value(json_object_get(k, "backend"))))
			add_cuda_sources(json_object_get(k, "src"), &cuda);
	if (cuda.count && !p->tc->hipify) {
		log_error("khub-worker build: %s is a CUDA source: a ROCm build hipifies it first (as kernel-builder does) "
			  "and toolchain %s has no hipify (toolchains.json \"hipify\", docs/worker-build.md)",
			  cuda.items[0], p->tc->name);
		rc = BUILD_LACKS_TOOL;
	} else if (cuda.count) {
		log_info("khub-worker build: hipify with %s: %zu CUDA source%s to HIP", p->tc->hipify_version,
			 cuda.count, cuda.count == 1 ? "" : "s");
		rc = hipify_tool_of(p->tc->hipify)->python
		     ? write_script(p, TORCH_SCRIPT, torch_hipify_script, sizeof(torch_hipify_script) - 1) : BUILD_OK;
	}
	for (size_t i = 0; i < cuda.count && rc == BUILD_OK; i++) {
		char *out = hip_name(cuda.items[i]);
		if ((rc = hipify_one(p, hipify_tool_of(p->tc->hipify), cuda.items[i], out, "")) == BUILD_OK)
			strvec_pushf(&p->hipified, "%s", cuda.items[i]);
		free(out);
	}
	if (rc == BUILD_OK && cuda.count)
		rc = hipify_headers(p, hipify_tool_of(p->tc->hipify), &cuda);
	strvec_release(&cuda);
	return rc;
}
