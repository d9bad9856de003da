/* build_plan.c -- which variants a commit is built as, from its build.toml:
 * the file is read by Python's tomllib (builder-worker/build_toml.py
 * --plan, compiled in) in a child process with no environment and bounded
 * CPU, memory, output and time, on the work queue for a request; each
 * variant a live worker offers, or the author names, is judged against the
 * backends, framework, bounds and capabilities it declares, and every one
 * left out gets a reason (docs/build-farm.md, "Planning"). */
#include "farm/farm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define PLAN_OUTPUT_MAX (64 * 1024)
#define PLAN_CPU_SECONDS 10
#define PLAN_MEMORY_MB 512
#define PLAN_SYSTEM_PATH "/usr/local/bin:/usr/bin:/bin"

/* ---- the planner child ----------------------------------------------------------- */

/* A memfd holding data at offset 0 (the child's stdin), or -1. */
static int input_fd(const char *data, size_t len)
{
	int fd = memfd_create("build.toml", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write_all(fd, data, len) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static pid_t start_planner(int in_fd, int out_fd)
{
	static const struct spawn_rlimit limits[] = {
		{ RLIMIT_CPU, PLAN_CPU_SECONDS }, { RLIMIT_AS, (unsigned long long)PLAN_MEMORY_MB << 20 },
		{ RLIMIT_FSIZE, 0 }, { RLIMIT_CORE, 0 }, { RLIMIT_NOFILE, 16 },
	};
	const char *python = farm_settings.plan_python && farm_settings.plan_python[0] ? farm_settings.plan_python
											    : "python3";
	char *program = spawn_find_program(python, PLAN_SYSTEM_PATH);
	if (!program)
		return -1;
	char *argv[] = { program, "-I", "-S", "-c", (char *)embedded_build_toml_py, "--plan", NULL };
	char *envp[] = { NULL };
	struct spawn_opts o = { .argv = argv, .envp = envp, .fd_in = in_fd, .fd_out = out_fd, .fd_err = out_fd,
				.dir = "/", .new_process_group = 1, .die_with_parent = 1, .reset_signals = 1,
				.rlimits = limits, .nrlimits = sizeof(limits) / sizeof(limits[0]),
				/* a server run as root reads hostile input as nobody */
				.drop_privileges = geteuid() == 0, .uid = 65534, .gid = 65534 };
	pid_t pid = -1;
	if (spawn_process(&o, &pid) < 0)
		pid = -1;
	free(program);
	return pid;
}

/* Run the planner on build.toml text: 0 with *status (the child's exit
 * status, -1 when it was killed or ran past a limit: *limit says which)
 * and its output in out; KHUB_EIO when it cannot be started. */
static int run_planner(const char *toml, size_t len, int *status, const char **limit, struct strbuf *out)
{
	int p[2] = { -1, -1 }, in = input_fd(toml, len);
	if (in < 0 || pipe2(p, O_CLOEXEC) < 0) {
		if (in >= 0)
			close(in);
		return KHUB_EIO;
	}
	pid_t pid = start_planner(in, p[1]);
	close(in);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return KHUB_EIO;
	}
	uint64_t deadline = monotonic_usec() + (uint64_t)farm_settings.plan_wall_ms * 1000u;
	int r = read_until_deadline_or_limit(p[0], deadline, PLAN_OUTPUT_MAX, out);
	close(p[0]);
	*limit = r == 1 ? "its wall-clock limit" : r == 2 ? "its output limit" : NULL;
	if (*limit || r < 0)
		kill(-pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	*status = *limit || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
	if (!*limit && WIFSIGNALED(st))
		*limit = WTERMSIG(st) == SIGXCPU || WTERMSIG(st) == SIGKILL ? "its CPU limit" : "a signal";
	if (*status == 126 || *status == 127)
		return KHUB_EIO;	/* could not be set up or run: the server's fault */
	return 0;
}

/* ---- results, kept by the hash of the build.toml bytes ------------------------------ */

struct plan_entry {
	char key[65];
	char *doc;		/* the planner's JSON, or NULL */
	char *refused;		/* why not, or NULL */
	uint64_t expires_usec;	/* 0: kept; else a limit was hit, which load may explain: tried again after */
};

/* How long a result stopped at a limit stands (the requests that waited
 * for it read it at once). */
#define PLAN_LIMIT_KEEP_USEC (60u * 1000000u)

#define PLAN_CACHE_SIZE 64
static struct plan_entry cache[PLAN_CACHE_SIZE];
static size_t cache_next;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void cache_put(const char *key, const char *doc, const char *refused, int at_limit)
{
	pthread_mutex_lock(&cache_lock);
	struct plan_entry *e = &cache[cache_next++ % PLAN_CACHE_SIZE];
	free(e->doc);
	free(e->refused);
	snprintf(e->key, sizeof(e->key), "%s", key);
	e->doc = doc ? xstrdup(doc) : NULL;
	e->refused = refused ? xstrdup(refused) : NULL;
	e->expires_usec = at_limit ? monotonic_usec() + PLAN_LIMIT_KEEP_USEC : 0;
	pthread_mutex_unlock(&cache_lock);
}

/* 1 and *out filled when key's result is kept. */
static int cache_get(const char *key, struct build_plan *out)
{
	int found = 0;
	uint64_t now = monotonic_usec();
	pthread_mutex_lock(&cache_lock);
	for (size_t i = 0; i < PLAN_CACHE_SIZE && !found; i++) {
		struct plan_entry *e = &cache[i];
		if (!e->key[0] || strcmp(e->key, key) != 0 || (e->expires_usec && now > e->expires_usec))
			continue;
		found = 1;
		out->doc = e->doc ? json_loads(e->doc, 0, NULL) : NULL;
		out->refused = e->refused ? xstrdup(e->refused) : NULL;
		if (!out->doc && !out->refused)
			out->refused = xstrdup("build.toml: the planner printed no JSON");
	}
	pthread_mutex_unlock(&cache_lock);
	return found;
}

/* The planner's answer for toml, kept under key. */
static int plan_and_keep(const char *key, const char *toml, size_t len)
{
	struct strbuf out = STRBUF_INIT;
	int status = 0;
	const char *limit = NULL;
	int rc = run_planner(toml, len, &status, &limit, &out);
	if (rc < 0) {
		log_error("build planner: cannot run %s", farm_settings.plan_python);
		strbuf_release(&out);
		return rc;
	}
	while (out.len && (out.buf[out.len - 1] == '\n' || out.buf[out.len - 1] == '\r'))
		out.buf[--out.len] = '\0';
	if (status == 0) {
		cache_put(key, out.buf ? out.buf : "", NULL, 0);
	} else if (status == 2 && out.len && !memchr(out.buf, '\n', out.len)) {
		cache_put(key, NULL, out.buf, 0);	/* its one line: "build.toml: <key>: <what>" */
	} else {
		char *why = limit ? xasprintf("build.toml: reading it was stopped at %s (%ld ms, %d s CPU, %d MiB, "
					      "%d KiB of output)", limit, farm_settings.plan_wall_ms, PLAN_CPU_SECONDS,
					      PLAN_MEMORY_MB, PLAN_OUTPUT_MAX / 1024)
				  : xasprintf("build.toml: the reader failed (status %d)", status);
		log_warn("build planner: %s", why);
		cache_put(key, NULL, why, 1);
		free(why);
	}
	strbuf_release(&out);
	return 0;
}

void build_plan_release(struct build_plan *p)
{
	if (!p)
		return;
	json_decref(p->doc);
	free(p->refused);
	p->doc = NULL;
	p->refused = NULL;
}

int build_plan_text(const char *toml, size_t len, struct build_plan *out)
{
	char key[65];
	memset(out, 0, sizeof(*out));
	sha256_hex(toml, len, key);
	if (cache_get(key, out))
		return 0;
	int rc = plan_and_keep(key, toml, len);
	if (rc == 0 && !cache_get(key, out))
		rc = plan_and_keep(key, toml, len) == 0 && cache_get(key, out) ? 0 : KHUB_EIO;
	return rc;
}

/* ---- reading build.toml of a commit ----------------------------------------------------- */

int build_plan_read_toml(git_repository *git, const char *sha, char **text, size_t *len, char *why, size_t size)
{
	struct tree_entry e;
	memset(&e, 0, sizeof(e));
	*text = NULL;
	*len = 0;
	int rc = repo_stat_path(git, sha, "build.toml", &e);
	if (rc == KHUB_ENOTFOUND || (rc == 0 && e.is_dir)) {
		snprintf(why, size, "no build.toml at the root of the source: nothing to build");
		rc = KHUB_ENOTFOUND;
	} else if (rc == 0 && e.is_lfs) {
		snprintf(why, size, "build.toml is stored in LFS; it must be a plain git file");
		rc = KHUB_EINVAL;
	} else if (rc == 0 && e.size > BUILD_TOML_MAX) {
		snprintf(why, size, "build.toml is %llu bytes; at most %d are read", (unsigned long long)e.size,
			 BUILD_TOML_MAX);
		rc = KHUB_ETOOBIG;
	} else if (rc == 0) {
		rc = repo_read_blob(git, e.oid, BUILD_TOML_MAX, text, len) < 0 ? KHUB_EIO : 0;
	}
	if (rc == KHUB_EIO || (rc < 0 && rc != KHUB_ENOTFOUND && rc != KHUB_EINVAL && rc != KHUB_ETOOBIG))
		snprintf(why, size, "cannot read build.toml");
	if (rc == 0 || e.path)
		tree_entry_release(&e);
	return rc;
}

int build_plan_commit(git_repository *git, const char *sha, struct build_plan *out)
{
	char why[160], *text;
	size_t len;
	memset(out, 0, sizeof(*out));
	int rc = build_plan_read_toml(git, sha, &text, &len, why, sizeof(why));
	if (rc == KHUB_EIO)
		return rc;
	if (rc < 0) {
		out->refused = xstrdup(why);
		return 0;
	}
	rc = build_plan_text(text, len, out);
	free(text);
	return rc;
}

/* ---- for a request: a job for the work queue (the request waits parked) ------------------ */

#define PLAN_JOB_KEY_PREFIX "plan|"

struct plan_job {
	char key[65];
	char *toml;
	size_t len;
};

static int plan_job_run(void *arg)
{
	struct plan_job *j = arg;
	return plan_and_keep(j->key, j->toml, j->len);
}

static void plan_job_free(void *arg)
{
	struct plan_job *j = arg;
	free(j->toml);
	free(j);
}

int build_plan_lookup(git_repository *git, const char *sha, struct build_plan *out, struct farm_job *job,
		      char *why, size_t why_size)
{
	struct plan_job *j = xcalloc(1, sizeof(*j));
	memset(out, 0, sizeof(*out));
	memset(job, 0, sizeof(*job));
	int rc = build_plan_read_toml(git, sha, &j->toml, &j->len, why, why_size);
	if (rc < 0) {
		plan_job_free(j);
		return rc == KHUB_EIO ? KHUB_EIO : FARM_EREFUSED;
	}
	sha256_hex(j->toml, j->len, j->key);
	if (cache_get(j->key, out)) {
		plan_job_free(j);
		return 0;
	}
	snprintf(job->key, sizeof(job->key), PLAN_JOB_KEY_PREFIX "%s", j->key);
	job->run = plan_job_run;
	job->free_arg = plan_job_free;
	job->arg = j;
	return 1;
}

int build_plan_kept(const char *key, struct build_plan *out)
{
	memset(out, 0, sizeof(*out));
	if (strncmp(key, PLAN_JOB_KEY_PREFIX, strlen(PLAN_JOB_KEY_PREFIX)) != 0 ||
	    !cache_get(key + strlen(PLAN_JOB_KEY_PREFIX), out))
		return KHUB_ENOTFOUND;
	return 0;
}

/* ---- judging one variant -------------------------------------------------------------- */

static int doc_lists(json_t *array, const char *value)
{
	size_t i;
	json_t *v;
	json_array_foreach(array, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), value) == 0)
			return 1;
	return 0;
}

/* 1 when a [torch] kernel without compiled sources, or a [torch-noarch]
 * one: built as torch-<backend> (as Nix does for a backend without
 * kernels); never for a kernel with compiled sources. */
static int plan_noarch(json_t *doc)
{
	const char *fw = json_string_value(json_object_get(doc, "framework"));
	return strcmp(fw, "torch-noarch") == 0 || (strcmp(fw, "torch") == 0 && !json_is_true(json_object_get(doc, "compiled")));
}

/* The framework rules; 1 when v fits. backend: the variant's. */
static int judge_framework(json_t *doc, const struct variant_name *v, const char *backend, char *why, size_t size)
{
	const char *fw = json_string_value(json_object_get(doc, "framework"));
	const char *stable = json_string_value(json_object_get(json_object_get(doc, "stable-abi"), backend));
	long smaj = -1, smin = -1;
	if (strcmp(fw, "tvm-ffi") == 0) {
		if (v->framework == VARIANT_TVM_FFI)
			return 1;
		snprintf(why, size, "a [tvm-ffi] kernel builds only tvm-ffi<MM>-<compute>-<cpu>-<os> variants");
	} else if (plan_noarch(doc)) {
		if (v->framework == VARIANT_TORCH_NOARCH)
			return 1;
		snprintf(why, size, "%s: builds only torch-<backend> variants (torch-%s)",
			 strcmp(fw, "torch") == 0 ? "[torch] without compiled sources" : "a [torch-noarch] kernel",
			 v->framework == VARIANT_TORCH_NOARCH ? v->backend : backend);
	} else if (v->framework == VARIANT_TORCH_NOARCH) {
		snprintf(why, size, "the kernel has compiled sources: a noarch variant would ship its Python without its ops");
	} else if (v->framework == VARIANT_TVM_FFI) {
		snprintf(why, size, "not a [tvm-ffi] kernel");
	} else if (json_array_size(json_object_get(doc, "kernel-backends")) &&
		   !doc_lists(json_object_get(doc, "kernel-backends"), backend)) {
		snprintf(why, size, "no [kernel.*] has backend = \"%s\": nothing to compile for it", backend);
	} else if (stable && kernel_version_of(stable, &smaj, &smin) == 0 && v->framework == VARIANT_TORCH) {
		snprintf(why, size, "torch.stable-abi targets %s for %s: built as torch-stable-abi%ld%ld-%s-%s-%s instead",
			 stable, backend, smaj, smin, v->backend_tag, v->arch, v->os);
	} else if (!stable && v->framework == VARIANT_TORCH_STABLE_ABI) {
		snprintf(why, size, "build.toml sets no torch.stable-abi for %s: built as torch<MM>-… variants", backend);
	} else if (stable && kernel_version_cmp(v->framework_major, v->framework_minor, smaj, smin) != 0) {
		snprintf(why, size, "torch.stable-abi is %s for %s, not %ld.%ld", stable, backend, v->framework_major,
			 v->framework_minor);
	} else {
		return 1;
	}
	return 0;
}

int build_plan_judge(const struct build_plan *p, const char *name, char *why, size_t size)
{
	struct variant_name v;
	const char *bad = NULL;
	json_t *doc = p->doc;
	if (variant_name_parse(name, &v, &bad) < 0) {
		snprintf(why, size, "not a build variant name: %s", bad);
		return 0;
	}
	const char *backend = variant_implied_backend_type(&v);
	if (!backend) {
		snprintf(why, size, "khub builds torch-<backend> variants, not torch-universal");
		return 0;
	}
	if (!doc_lists(json_object_get(doc, "backends"), backend)) {
		snprintf(why, size, "general.backends does not list %s", backend);
		return 0;
	}
	return judge_framework(doc, &v, backend, why, size) && kernel_toolkit_judge(doc, &v, why, size);
}

/* ---- the variants of a plan ------------------------------------------------------------- */

static void skip(json_t *skipped, const char *variant, const char *reason)
{
	if (skipped)
		json_array_append_new(skipped, json_pack("{s:s, s:s}", "variant", variant, "reason", reason));
}

void build_plan_filter(const struct build_plan *p, char **names, size_t *n, json_t *skipped)
{
	size_t kept = 0;
	char why[VARIANT_REASON_MAX + 64];
	for (size_t i = 0; i < *n; i++) {
		if (build_plan_judge(p, names[i], why, sizeof(why))) {
			names[kept++] = names[i];
			continue;
		}
		skip(skipped, names[i], why);
		free(names[i]);
	}
	*n = kept;
	names[kept] = NULL;
}

/* How a backend of the plan would be named (torch-cuda, torch<MM>-…-cuda-…),
 * for a backend nothing is built for. */
static void backend_pattern(json_t *doc, const char *backend, char *out, size_t size)
{
	const char *fw = json_string_value(json_object_get(doc, "framework"));
	const char *stable = json_string_value(json_object_get(json_object_get(doc, "stable-abi"), backend));
	const struct kernel_backend *row = kernel_backend_find(backend);
	const char *tag = row && row->variant_prefix ? row->variant_prefix : backend;
	long maj, min;
	if (plan_noarch(doc))
		snprintf(out, size, "torch-%s", row && row->noarch ? row->noarch : backend);
	else if (strcmp(fw, "tvm-ffi") == 0)
		snprintf(out, size, "tvm-ffi<MM>-%s…", tag);
	else if (stable && kernel_version_of(stable, &maj, &min) == 0)
		snprintf(out, size, "torch-stable-abi%ld%ld-%s…", maj, min, tag);
	else
		snprintf(out, size, "torch<MM>-cxx11-%s…", tag);
}

static int backend_planned(char *const *names, size_t n, const char *backend)
{
	for (size_t i = 0; i < n; i++) {
		struct variant_name v;
		if (variant_name_parse(names[i], &v, NULL) == 0 && variant_implied_backend_type(&v) &&
		    strcmp(variant_implied_backend_type(&v), backend) == 0)
			return 1;
	}
	return 0;
}

/* 1 when item is one of list's ", "-separated items. */
static int listed(const char *list, const char *item)
{
	size_t n = strlen(item);
	for (const char *at = list; (at = strstr(at, item)); at += n)
		if ((at == list || at[-1] == ' ') && (at[n] == ',' || !at[n]))
			return 1;
	return 0;
}

/* The torch versions of the live variants of backend when every one is
 * a torch<MM>-… variant outside build.toml's torch bounds ("2.10, 2.11"
 * into out), else 0. */
static int torch_bounds_exclude_all(json_t *doc, char *const *live, size_t nlive, const char *backend, char *out,
				    size_t size)
{
	size_t len = 0, any = 0;
	out[0] = '\0';
	for (size_t i = 0; i < nlive; i++) {
		struct variant_name v;
		char torch[32];
		if (variant_name_parse(live[i], &v, NULL) < 0 || !variant_implied_backend_type(&v) ||
		    strcmp(variant_implied_backend_type(&v), backend) != 0)
			continue;
		if (!kernel_torch_outside_bounds(doc, &v))
			return 0;
		any = 1;
		snprintf(torch, sizeof(torch), "%s%ld.%ld", len ? ", " : "", v.framework_major, v.framework_minor);
		if (!listed(out, torch + (len ? 2 : 0)))
			len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s", torch);
	}
	return any && len < size;
}

/* 1 when a ROCm build of the plan hipifies CUDA sources (build_toml.py's
 * rocm-cuda-sources) and variant is a ROCm arch variant no toolchain with
 * a hipify tool offers (hipify: the live variants such toolchains offer). */
static int needs_hipify(json_t *doc, const char *variant, char *const *hipify, size_t nhipify)
{
	struct variant_name v;
	if (!json_array_size(json_object_get(doc, "rocm-cuda-sources")) || variant_name_parse(variant, &v, NULL) < 0 ||
	    v.framework == VARIANT_TORCH_NOARCH || !variant_implied_backend_type(&v))
		return 0;
	const struct kernel_backend *kb = kernel_backend_find(variant_implied_backend_type(&v));
	if (!kb || !kb->hipify_cuda)
		return 0;
	return !build_names_contain(hipify, nhipify, variant);
}

/* The reason a ROCm variant is not built without a hipify tool, naming
 * the first CUDA source. */
static void hipify_reason(json_t *doc, char *why, size_t size)
{
	json_t *src = json_object_get(doc, "rocm-cuda-sources");
	snprintf(why, size, "no toolchain has hipify to build ROCm from CUDA sources (%s%s)",
		 json_string_value(json_array_get(src, 0)), json_array_size(src) > 1 ? ", …" : "");
}

/* 1 when live workers offer backend's variants and every one judged
 * buildable lacks hipify. */
static int only_without_hipify(const struct build_plan *p, const char *backend, char *const *live, size_t nlive,
			       char *const *hipify, size_t nhipify)
{
	char why[VARIANT_REASON_MAX + 64];
	int any = 0;
	for (size_t i = 0; i < nlive; i++) {
		if (!build_plan_judge(p, live[i], why, sizeof(why)) || !backend_planned(&live[i], 1, backend))
			continue;
		if (!needs_hipify(p->doc, live[i], hipify, nhipify))
			return 0;
		any = 1;
	}
	return any;
}

/* Why nothing is planned for backend: the real reason (docs/build-farm.md,
 * Planning). */
static void unserved_reason(const struct build_plan *p, const char *backend, char *const *live, size_t nlive,
			    char *const *hipify, size_t nhipify, int by_stale, char *why, size_t size)
{
	char torch[128], bounds[64];
	json_t *doc = p->doc;
	int tvm = strcmp(json_string_value(json_object_get(doc, "framework")), "tvm-ffi") == 0;
	const char *tvm_note = tvm ? " (khub-worker does not build [tvm-ffi] kernels)" : "";
	if (only_without_hipify(p, backend, live, nlive, hipify, nhipify)) {
		hipify_reason(doc, why, size);
	} else if (torch_bounds_exclude_all(doc, live, nlive, backend, torch, sizeof(torch))) {
		kernel_torch_bounds_text(doc, bounds, sizeof(bounds));
		snprintf(why, size, "torch %s of every live %s toolchain is outside build.toml's torch bounds %s", torch,
			 backend, bounds);
	} else if (backend_planned(live, nlive, backend)) {
		snprintf(why, size, "every %s variant live workers offer is left out (each with its reason)%s", backend,
			 tvm_note);
	} else {
		snprintf(why, size, "no live worker builds %s%s%s", backend,
			 by_stale ? " (only workers not seen within build_worker_live_seconds offer it)" : "", tvm_note);
	}
}

/* Every backend of general.backends that nothing is planned for. */
static void skip_unserved_backends(const struct build_plan *p, char *const *names, size_t n,
				   const struct worker_offers *w, json_t *skipped)
{
	size_t i;
	json_t *b;
	json_array_foreach(json_object_get(p->doc, "backends"), i, b) {
		const char *backend = json_string_value(b);
		if (backend_planned(names, n, backend))
			continue;
		char pattern[96], why[VARIANT_REASON_MAX + 64];
		backend_pattern(p->doc, backend, pattern, sizeof(pattern));
		unserved_reason(p, backend, w->live, w->nlive, w->hipify, w->nhipify,
				backend_planned(w->stale, w->nstale, backend), why, sizeof(why));
		skip(skipped, pattern, why);
	}
}

json_t *build_plan_left_out(const struct build_plan *p, char *const *names, size_t n)
{
	json_t *out = json_array();
	for (size_t i = 0; i < n; i++) {
		struct variant_name v;
		json_t *caps = json_array(), *c;
		size_t k;
		if (variant_name_parse(names[i], &v, NULL) == 0)
			kernel_toolkit_left_out(p->doc, &v, caps);
		json_array_foreach(caps, k, c) {
			json_object_set_new(c, "variant", json_string(names[i]));
			json_array_append(out, c);
		}
		json_decref(caps);
	}
	return out;
}

static int on_required_list(const struct required_variants *list, const char *name)
{
	for (size_t g = 0; g < list->count; g++)
		if (build_names_contain(list->groups[g].variants.items, list->groups[g].variants.count, name))
			return 1;
	return 0;
}

/* Of the per-torch variants planned, only those on the required list when
 * some are (as before planning: the list is what a compliant kernel has). */
static void prefer_required(const struct required_variants *list, char **names, size_t *n, json_t *skipped)
{
	int any = 0;
	for (size_t i = 0; i < *n; i++)
		any |= strncmp(names[i], "torch-", 6) != 0 && on_required_list(list, names[i]);
	if (!any)
		return;
	size_t kept = 0;
	for (size_t i = 0; i < *n; i++) {
		if (strncmp(names[i], "torch-", 6) == 0 || on_required_list(list, names[i])) {
			names[kept++] = names[i];
			continue;
		}
		skip(skipped, names[i], "not on the required list (build_variants) while other variants are");
		free(names[i]);
	}
	*n = kept;
}

void build_plan_default(const struct build_plan *p, const struct worker_offers *w,
			const struct required_variants *list, char ***names, size_t *n, json_t *skipped)
{
	char why[VARIANT_REASON_MAX + 64];
	*names = xcalloc(w->nlive + 1, sizeof(char *));
	*n = 0;
	for (size_t i = 0; i < w->nlive; i++) {
		const char *v = w->live[i];
		int ok = build_plan_judge(p, v, why, sizeof(why));
		if (ok && needs_hipify(p->doc, v, w->hipify, w->nhipify)) {
			hipify_reason(p->doc, why, sizeof(why));
			ok = 0;
		}
		if (ok)
			(*names)[(*n)++] = xstrdup(v);
		else
			skip(skipped, v, why);
	}
	prefer_required(list, *names, n, skipped);
	for (size_t i = 0; i < w->nstale; i++)
		if (!build_names_contain(w->live, w->nlive, w->stale[i]) && build_plan_judge(p, w->stale[i], why, sizeof(why)))
			skip(skipped, w->stale[i], "only workers not seen within build_worker_live_seconds offer it");
	skip_unserved_backends(p, *names, *n, w, skipped);
	(*names)[*n] = NULL;
}

json_t *build_plan_json(const struct build_plan *p)
{
	json_t *out = json_pack("{s:O, s:O, s:b}", "framework", json_object_get(p->doc, "framework"), "backends",
				json_object_get(p->doc, "backends"), "compiled",
				json_is_true(json_object_get(p->doc, "compiled")));
	json_t *warning = json_object_get(p->doc, "warning");
	if (json_is_string(warning))
		json_object_set(out, "warning", warning);
	return out;
}
