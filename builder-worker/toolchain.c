/* toolchain.c -- toolchains.json and what each toolchain can build: its
 * Python's torch fixes the arch variant (torch version, CUDA/ROCm version,
 * C++ ABI, CPU), its compilers decide whether it can compile it. A usable
 * toolchain also packages the noarch variant torch-<its backend>, which
 * needs no compiler (its smoke import runs on the toolchain's torch). With
 * "rocm_from_hipcc" a CPU torch also builds the ROCm arch variant of its
 * version, the ROCm version read from `hipcc --version` (an explicit opt-in:
 * such a variant is compiled against a torch that is not a ROCm build). */
#include "builder-worker/build_internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROBE_TIMEOUT_S 120

/* Printed as one JSON line by the toolchain's Python. */
static const char probe_script[] =
	"import json, os, platform, sys, sysconfig\n"
	"r = {'python': platform.python_version(), 'machine': platform.machine(),\n"
	"     'python_include': sysconfig.get_paths()['include']}\n"
	"try:\n"
	"    import torch\n"
	"    r['torch'] = torch.__version__.split('+')[0]\n"
	"    r['cuda'] = torch.version.cuda\n"
	"    r['hip'] = getattr(torch.version, 'hip', None)\n"
	"    r['cxx11_abi'] = bool(torch.compiled_with_cxx11_abi())\n"
	"    try:\n"	/* a torch without CUDA support (or a stub) has no device but the CPU */
	"        r['device'] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu'\n"
	"    except Exception:\n"
	"        r['device'] = 'cpu'\n"
	"    try:\n"
	"        import re\n"
	"        m = re.search(r'Module\\s+([0-9.]+)', open('/proc/driver/nvidia/version').read())\n"
	"        r['driver'] = m.group(1) if m else ''\n"
	"    except Exception:\n"
	"        r['driver'] = ''\n"
	"    r['torch_version_file'] = os.path.join(os.path.dirname(torch.__file__), 'version.py')\n"
	"    r['site_dirs'] = [p for p in sys.path if os.path.isabs(p) and os.path.isdir(p)]\n"
	"    try:\n"
	"        from torch.utils import cpp_extension as ce\n"
	"        r['torch_include'] = [p for p in ce.include_paths() if os.path.isdir(p)]\n"
	"        r['torch_lib'] = ce.library_paths()[0]\n"
	"    except Exception:\n"
	"        base = os.path.dirname(torch.__file__)\n"
	"        r['torch_include'] = [os.path.join(base, 'include'), os.path.join(base, 'include', 'torch', 'csrc', 'api', 'include')]\n"
	"        r['torch_lib'] = os.path.join(base, 'lib')\n"
	"    try:\n"
	"        from torch.utils.hipify import version as hv\n"
	"        r['hipify'] = hv.__version__\n"
	"    except Exception:\n"
	"        r['hipify'] = None\n"
	"except Exception as e:\n"
	"    r['error'] = 'import torch: %s' % e\n"
	"try:\n"
	"    import kernels\n"
	"    r['kernels'] = True\n"
	"except Exception:\n"
	"    r['kernels'] = False\n"
	"try:\n"
	"    import tomllib\n"
	"    r['tomllib'] = True\n"
	"except ImportError:\n"
	"    try:\n"
	"        import tomli\n"
	"        r['tomllib'] = True\n"
	"    except ImportError:\n"
	"        try:\n"
	"            import toml\n"
	"            r['tomllib'] = True\n"
	"        except ImportError:\n"
	"            r['tomllib'] = False\n"
	"print(json.dumps(r))\n";

static const char *const toolchain_keys[] = { "name", "python", "cxx", "nvcc", "hipcc", "cmake", "ninja", "env",
					       "allow_no_sandbox", "rocm_from_hipcc", "root", "benchmarks", "hipify",
					       NULL };

static void toolchain_clear_probe(struct toolchain *tc)
{
	free(tc->torch_version);
	free(tc->cuda_version);
	free(tc->rocm_version);
	free_strings(tc->variants, tc->nvariants);
	free(tc->python_version);
	free(tc->machine);
	free(tc->python_include);
	free_strings(tc->torch_includes, tc->ntorch_includes);
	free(tc->torch_lib);
	free(tc->cxx_version);
	free(tc->nvcc_version);
	free(tc->hipcc_version);
	free(tc->hipify_version);
	tc->hipify_version = NULL;
	free(tc->root_digest);
	tc->root_digest = NULL;
	free(tc->device);
	free(tc->driver);
	tc->device = tc->driver = NULL;
	tc->torch_version = tc->cuda_version = tc->rocm_version = NULL;
	tc->variants = NULL;
	tc->nvariants = 0;
	tc->python_version = tc->machine = tc->python_include = tc->torch_lib = NULL;
	tc->torch_includes = NULL;
	tc->ntorch_includes = 0;
	tc->cxx_version = tc->nvcc_version = tc->hipcc_version = NULL;
	tc->torch_build = NULL;
	tc->usable = 0;
	tc->why[0] = 0;
	tc->nvcc_major = tc->nvcc_minor = -1;
	tc->has_kernels = 0;
}

void toolchains_release(struct toolchain_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->count; i++) {
		struct toolchain *tc = &set->items[i];
		toolchain_clear_probe(tc);
		free(tc->name);
		free(tc->python);
		free(tc->cxx);
		free(tc->nvcc);
		free(tc->hipcc);
		free(tc->hipify);
		free(tc->cmake);
		free(tc->ninja);
		free(tc->root);
		free_strings(tc->env, tc->nenv);
	}
	free(set->items);
	set->items = NULL;
	set->count = 0;
}

static int string_key(json_t *entry, const char *key, char **out, int required, size_t idx, char *why, size_t why_size)
{
	json_t *v = json_object_get(entry, key);
	if (!v || json_is_null(v)) {
		if (!required)
			return 0;
		snprintf(why, why_size, "toolchains[%zu].%s: missing", idx, key);
		return KHUB_EINVAL;
	}
	if (!json_is_string(v) || json_string_length(v) == 0) {
		snprintf(why, why_size, "toolchains[%zu].%s: must be a non-empty string", idx, key);
		return KHUB_EINVAL;
	}
	*out = xstrdup(json_string_value(v));
	return 0;
}

/* An optional true/false key of entry idx into *out: 0, or KHUB_EINVAL with why. */
static int bool_key(json_t *entry, const char *key, int *out, size_t idx, char *why, size_t why_size)
{
	json_t *v = json_object_get(entry, key);
	if (v && !json_is_boolean(v)) {
		snprintf(why, why_size, "toolchains[%zu].%s: must be true or false", idx, key);
		return KHUB_EINVAL;
	}
	*out = json_is_true(v);
	return 0;
}

/* Entry idx's env object into tc->env as KEY=VALUE strings. */
static int env_key(json_t *entry, struct toolchain *tc, size_t idx, char *why, size_t why_size)
{
	json_t *env = json_object_get(entry, "env"), *value;
	const char *key;
	if (env && !json_is_object(env)) {
		snprintf(why, why_size, "toolchains[%zu].env: must be an object of strings", idx);
		return KHUB_EINVAL;
	}
	json_object_foreach(env, key, value) {
		if (!json_is_string(value) || !*key || strchr(key, '=')) {
			snprintf(why, why_size, "toolchains[%zu].env.%s: must be a string (and the name have no '=')", idx, key);
			return KHUB_EINVAL;
		}
		tc->env = xrealloc(tc->env, (tc->nenv + 1) * sizeof(*tc->env));
		tc->env[tc->nenv++] = xasprintf("%s=%s", key, json_string_value(value));
	}
	return 0;
}

/* Entry idx's root: an absolute directory with a usr/ (its real path into
 * tc->root), or none. */
static int root_key(json_t *entry, struct toolchain *tc, size_t idx, char *why, size_t why_size)
{
	char *root = NULL, real[PATH_MAX];
	if (string_key(entry, "root", &root, 0, idx, why, why_size) < 0)
		return KHUB_EINVAL;
	if (!root)
		return 0;
	char *usr = xasprintf("%s/usr", root);
	struct stat st;
	int ok = root[0] == '/' && realpath(root, real) && strcmp(real, "/") != 0 && stat(usr, &st) == 0 &&
		 S_ISDIR(st.st_mode);
	if (!ok)
		snprintf(why, why_size, "toolchains[%zu].root: %s is not an absolute path to an unpacked root file system "
			 "(a directory, not /, with a usr/)", idx, root);
	else
		tc->root = xstrdup(real);
	free(usr);
	free(root);
	return ok ? 0 : KHUB_EINVAL;
}

/* toolchains[idx] into out->items[idx] (the earlier ones loaded): 0, or
 * KHUB_EINVAL with why naming the key. */
static int toolchain_entry_load(json_t *entry, size_t idx, struct toolchain_set *out, char *why, size_t why_size)
{
	struct toolchain *tc = &out->items[idx];
	tc->nvcc_major = tc->nvcc_minor = -1;
	if (!json_is_object(entry)) {
		snprintf(why, why_size, "toolchains[%zu]: must be an object", idx);
		return KHUB_EINVAL;
	}
	const char *key;
	json_t *value;
	json_object_foreach(entry, key, value) {
		size_t k = 0;
		while (toolchain_keys[k] && strcmp(toolchain_keys[k], key) != 0)
			k++;
		if (!toolchain_keys[k]) {
			snprintf(why, why_size, "toolchains[%zu].%s: unknown key", idx, key);
			return KHUB_EINVAL;
		}
	}
	if (string_key(entry, "name", &tc->name, 1, idx, why, why_size) < 0 ||
	    string_key(entry, "python", &tc->python, 1, idx, why, why_size) < 0 ||
	    string_key(entry, "cxx", &tc->cxx, 0, idx, why, why_size) < 0 ||
	    string_key(entry, "nvcc", &tc->nvcc, 0, idx, why, why_size) < 0 ||
	    string_key(entry, "hipcc", &tc->hipcc, 0, idx, why, why_size) < 0 ||
	    string_key(entry, "hipify", &tc->hipify, 0, idx, why, why_size) < 0 ||
	    string_key(entry, "cmake", &tc->cmake, 0, idx, why, why_size) < 0 ||
	    string_key(entry, "ninja", &tc->ninja, 0, idx, why, why_size) < 0)
		return KHUB_EINVAL;
	for (size_t j = 0; j < idx; j++)
		if (strcmp(out->items[j].name, tc->name) == 0) {
			snprintf(why, why_size, "toolchains[%zu].name: \"%s\" is used twice", idx, tc->name);
			return KHUB_EINVAL;
		}
	if (bool_key(entry, "allow_no_sandbox", &tc->allow_no_sandbox, idx, why, why_size) < 0 ||
	    bool_key(entry, "rocm_from_hipcc", &tc->rocm_from_hipcc, idx, why, why_size) < 0 ||
	    bool_key(entry, "benchmarks", &tc->benchmarks, idx, why, why_size) < 0)
		return KHUB_EINVAL;
	if (root_key(entry, tc, idx, why, why_size) < 0)
		return KHUB_EINVAL;
	if (tc->hipify && !tc->hipcc) {
		snprintf(why, why_size, "toolchains[%zu].hipify: needs \"hipcc\" (hipified sources are compiled by it)", idx);
		return KHUB_EINVAL;
	}
	if (tc->rocm_from_hipcc && !tc->hipcc) {
		snprintf(why, why_size, "toolchains[%zu].rocm_from_hipcc: needs \"hipcc\"", idx);
		return KHUB_EINVAL;
	}
	return env_key(entry, tc, idx, why, why_size);
}

int toolchains_load(const char *path, struct toolchain_set *out, char *why, size_t why_size)
{
	memset(out, 0, sizeof(*out));
	json_error_t jerr;
	json_t *doc = json_load_file(path, 0, &jerr);
	if (!doc) {
		snprintf(why, why_size, "%s:%d: %s", path, jerr.line, jerr.text);
		return KHUB_EINVAL;
	}
	int rc = KHUB_EINVAL;
	json_t *list = json_object_get(doc, "toolchains");
	if (!json_is_array(list) || json_array_size(list) == 0) {
		snprintf(why, why_size, "%s: \"toolchains\" must be a non-empty array", path);
		goto cleanup;
	}
	out->items = xcalloc(json_array_size(list), sizeof(*out->items));
	size_t i;
	json_t *entry;
	json_array_foreach(list, i, entry) {
		out->count = i + 1;
		if (toolchain_entry_load(entry, i, out, why, why_size) < 0)
			goto cleanup;
	}
	rc = 0;
cleanup:
	json_decref(doc);
	if (rc < 0)
		toolchains_release(out);
	return rc;
}

/* The environment a toolchain's programs run with: PATH and HOME unless the
 * toolchain sets them, then its env. Nothing of the worker's own. */
void toolchain_environment(const struct toolchain *tc, const char *home, struct strvec *env)
{
	int has_path = 0, has_home = 0;
	for (size_t i = 0; i < tc->nenv; i++) {
		has_path |= strncmp(tc->env[i], "PATH=", 5) == 0;
		has_home |= strncmp(tc->env[i], "HOME=", 5) == 0;
	}
	if (!has_path)
		strvec_pushf(env, "PATH=/usr/local/bin:/usr/bin:/bin");
	if (!has_home)
		strvec_pushf(env, "HOME=%s", home);
	strvec_pushf(env, "TMPDIR=/tmp");
	strvec_pushf(env, "LC_ALL=C.UTF-8");
	for (size_t i = 0; i < tc->nenv; i++)
		strvec_pushf(env, "%s", tc->env[i]);
}

const char *toolchain_env_path(const struct strvec *env)
{
	for (size_t i = 0; i < env->count; i++)
		if (!strncmp(env->items[i], "PATH=", 5))
			return env->items[i] + 5;
	return "/usr/local/bin:/usr/bin:/bin";
}

void toolchain_programs(const struct toolchain *tc, const char *out[TOOLCHAIN_PROGRAMS])
{
	const char *hipify = tc->hipify && !hipify_tool_of(tc->hipify)->python ? tc->hipify : NULL;
	const char *all[TOOLCHAIN_PROGRAMS] = { tc->python, tc->cxx, tc->nvcc, tc->hipcc, tc->cmake, tc->ninja, hipify };
	memcpy(out, all, sizeof(all));
}

/* ---- what the sandbox must show of a toolchain ------------------------------------ */

/* Seen by every build already (sandbox.c binds them). */
static const char *const system_roots[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
/* Never shown to a build: a toolchain there is refused. */
static const char *const forbidden_roots[] = { "/root", "/home", "/var", "/tmp", "/etc", "/run", "/proc", "/sys",
					       "/dev", "/boot", "/mnt", "/media", "/srv", "/lost+found" };

static int under(const char *path, const char *root)
{
	size_t n = strlen(root);
	return !strncmp(path, root, n) && (path[n] == '/' || path[n] == 0);
}

static int under_any(const char *path, const char *const *roots, size_t nroots)
{
	for (size_t i = 0; i < nroots; i++)
		if (under(path, roots[i]))
			return 1;
	return 0;
}

/* Add dir (an existing absolute path) unless the sandbox shows it already. */
static int add_dir(struct strvec *dirs, const char *dir, const char *what, char *why, size_t why_size)
{
	if (dir[0] != '/' || under_any(dir, system_roots, sizeof(system_roots) / sizeof(*system_roots)))
		return 0;
	if (!strcmp(dir, "/") || under_any(dir, forbidden_roots, sizeof(forbidden_roots) / sizeof(*forbidden_roots))) {
		snprintf(why, why_size, "%s is in %s, which a build never sees: install the toolchain under /usr, /usr/local "
			 "or /opt", what, dir);
		return KHUB_EPERM;
	}
	for (size_t i = 0; i < dirs->count; i++)
		if (under(dir, dirs->items[i]))
			return 0;
	strvec_pushf(dirs, "%s", dir);
	return 0;
}

/* A program's prefix: /opt/x for /opt/x/bin/prog, else its directory. */
static int add_program(struct strvec *dirs, const char *path, const char *what, char *why, size_t why_size)
{
	char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	slash = strrchr(dir, '/');
	if (slash && slash != dir && !strcmp(slash, "/bin"))
		*slash = 0;
	int rc = *dir ? add_dir(dirs, dir, what, why, why_size) : 0;
	free(dir);
	return rc;
}

/* Every absolute, existing path in a PATH-like value (':'-separated). */
static int add_paths(struct strvec *dirs, const char *value, const char *what, char *why, size_t why_size)
{
	char *copy = xstrdup(value), *save = NULL;
	int rc = 0;
	for (char *p = strtok_r(copy, ":", &save); p && rc == 0; p = strtok_r(NULL, ":", &save)) {
		struct stat st;
		if (p[0] == '/' && stat(p, &st) == 0)
			rc = S_ISDIR(st.st_mode) ? add_dir(dirs, p, what, why, why_size) : add_program(dirs, p, what, why, why_size);
	}
	free(copy);
	return rc;
}

int toolchain_sandbox_dirs(const struct toolchain *tc, struct strvec *dirs, char *why, size_t why_size)
{
	if (tc->root)
		return 0;	/* the sandbox shows the root's /usr, /lib*, /opt: the toolchain is there */
	struct strvec env = STRVEC_INIT;
	toolchain_environment(tc, "/tmp", &env);
	const char *path = toolchain_env_path(&env), *programs[TOOLCHAIN_PROGRAMS];
	toolchain_programs(tc, programs);
	int rc = 0;
	for (size_t i = 0; i < TOOLCHAIN_PROGRAMS && rc == 0; i++) {
		char *found = programs[i] ? spawn_find_program(programs[i], path) : NULL;
		char real[PATH_MAX];
		if (found)
			rc = add_program(dirs, found, programs[i], why, why_size);
		if (found && rc == 0 && realpath(found, real))
			rc = add_program(dirs, real, programs[i], why, why_size);
		free(found);
	}
	for (size_t i = 0; i < tc->nenv && rc == 0; i++) {
		const char *eq = strchr(tc->env[i], '=');
		rc = add_paths(dirs, eq + 1, tc->env[i], why, why_size);
	}
	const char *probed[] = { tc->python_include, tc->torch_lib };
	for (size_t i = 0; i < 2 && rc == 0; i++)
		if (probed[i])
			rc = add_paths(dirs, probed[i], "the toolchain's Python or torch", why, why_size);
	for (size_t i = 0; i < tc->ntorch_includes && rc == 0; i++)
		rc = add_paths(dirs, tc->torch_includes[i], "torch's headers", why, why_size);
	strvec_release(&env);
	return rc;
}

/* First line of `prog --version` (tc's prog, in its root), or NULL. */
static char *version_line(const struct toolchain *tc, const char *prog, char *const *env)
{
	char *argv[] = { (char *)prog, "--version", NULL };
	char *out = NULL;
	int rc = run_capture_in_root(tc->root, argv, env, 30, &out, -1);
	char *line = NULL;
	if (rc == 0 && out && *out) {
		size_t n = strcspn(out, "\n");
		line = xstrndup(out, n);
	}
	free(out);
	return line;
}

/* Whole --version text (nvcc's release is on its last line). */
static char *version_text(const struct toolchain *tc, const char *prog, char *const *env)
{
	char *argv[] = { (char *)prog, "--version", NULL };
	char *out = NULL;
	int rc = run_capture_in_root(tc->root, argv, env, 60, &out, -1);
	if (rc != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void add_variant(struct toolchain *tc, const char *name)
{
	tc->variants = xrealloc(tc->variants, (tc->nvariants + 1) * sizeof(*tc->variants));
	tc->variants[tc->nvariants++] = xstrdup(name);
}

static char *json_str_dup(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? xstrdup(s) : NULL;
}

/* The first torch whose headers take TORCH_TARGET_VERSION (the stable ABI
 * of kernel-builder's [torch] stable-abi). */
#define STABLE_ABI_FIRST_MAJOR 2
#define STABLE_ABI_FIRST_MINOR 9

/* The stable ABI variants a torch tmaj.tmin builds besides its arch one:
 * torch-stable-abi<T>-<backend tag>-<arch>-linux for every target T from
 * 2.9 to the torch itself (a library for target T loads on any torch >= T;
 * it is compiled against this newer torch's headers, which keep to T). */
static void add_stable_abi_variants(struct toolchain *tc, long tmaj, long tmin, const char *backend, long bmaj,
				    long bmin, const char *arch)
{
	if (tmaj != STABLE_ABI_FIRST_MAJOR)
		return;	/* a torch 3 would start its own list */
	for (long minor = STABLE_ABI_FIRST_MINOR; minor <= tmin; minor++) {
		struct variant_name vn;
		char name[VARIANT_NAME_MAX + 1];
		variant_name_set_torch(&vn, tmaj, minor, -1, backend, bmaj, bmin, arch, "linux");
		vn.framework = VARIANT_TORCH_STABLE_ABI;
		variant_name_format(&vn, name, sizeof(name));
		add_variant(tc, name);
	}
}

/* Say why tc cannot build (tc->why) and return KHUB_EINVAL. */
static int unusable(struct toolchain *tc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int unusable(struct toolchain *tc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tc->why, sizeof(tc->why), fmt, ap);
	va_end(ap);
	return KHUB_EINVAL;
}

/* ---- the Python probe and its cache ------------------------------------------------ */

/* "path=dev:ino:size:mtime.nsec;" of path (inside root, NULL: the host's;
 * followed) into sb; "path=absent;" and -1 when it cannot be read. */
static int file_stamp(struct strbuf *sb, const char *root, const char *path)
{
	struct stat st;
	char *full = xasprintf("%s%s", root ? root : "", path);
	int rc = stat(full, &st);
	free(full);
	if (rc < 0) {
		strbuf_addf(sb, "%s=absent;", path);
		return -1;
	}
	strbuf_addf(sb, "%s=%llu:%llu:%lld:%lld.%09ld;", path, (unsigned long long)st.st_dev,
		    (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
		    st.st_mtim.tv_nsec);
	return 0;
}

/* A small host file's text (this boot, the NVIDIA driver) into sb, or "none". */
static void host_file_text(struct strbuf *sb, const char *path)
{
	size_t len = 0;
	char *text = read_file_limited(path, 4096, &len);
	strbuf_addf(sb, "%s:", path);
	if (text)
		strbuf_add(sb, text, len);
	else
		strbuf_adds(sb, "none");
	strbuf_adds(sb, "\n");
	free(text);
}

/* What the Python probe depends on: the whole entry, the environment it
 * runs in, the root's digest, the interpreter's file (as found on PATH and
 * its real path, inside the root when there is one), this boot (the GPUs
 * torch sees) and the NVIDIA driver: a change to any of them is another key. */
static void probe_cache_key(const struct toolchain *tc, char *const *env, char out[65])
{
	struct strbuf sb = STRBUF_INIT;
	const char *fields[] = { tc->name, tc->python, tc->cxx, tc->nvcc, tc->hipcc, tc->cmake, tc->ninja, tc->root,
				 tc->root_digest };
	strbuf_adds(&sb, "khub-toolchain-probe-2\n");
	for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++)
		strbuf_addf(&sb, "%zu:%s\n", i, fields[i] ? fields[i] : "(none)");
	strbuf_addf(&sb, "rocm_from_hipcc=%d allow_no_sandbox=%d benchmarks=%d\n", tc->rocm_from_hipcc,
		    tc->allow_no_sandbox, tc->benchmarks);
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (size_t i = 0; env[i]; i++) {
		strbuf_addf(&sb, "env %s\n", env[i]);
		if (!strncmp(env[i], "PATH=", 5))
			path = env[i] + 5;
	}
	char *found = sandbox_find_program(tc->root, tc->python, path), host_real[PATH_MAX], *real = NULL;
	if (found && tc->root)
		real = sandbox_root_resolve(tc->root, found);
	else if (found && realpath(found, host_real))
		real = xstrdup(host_real);
	if (!found || file_stamp(&sb, tc->root, found) < 0)
		strbuf_adds(&sb, "python not found;");
	if (real)
		file_stamp(&sb, tc->root, real);
	host_file_text(&sb, "/proc/sys/kernel/random/boot_id");
	host_file_text(&sb, "/proc/driver/nvidia/version");
	sha256_hex(sb.buf, sb.len, out);
	free(found);
	free(real);
	strbuf_release(&sb);
}

/* The stamps of what the probe's answer came from: torch's version.py and
 * every directory on the Python's sys.path (installing or removing a
 * package changes its directory). -1 when the document names no torch. */
static int probe_doc_stamp(json_t *doc, const char *root, struct strbuf *sb)
{
	const char *torch_file = json_string_value(json_object_get(doc, "torch_version_file"));
	if (!torch_file || file_stamp(sb, root, torch_file) < 0)
		return -1;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(doc, "site_dirs"), i, v)
		if (json_is_string(v))
			file_stamp(sb, root, json_string_value(v));
	return 0;
}

/* The cached probe document of key in dir, or NULL (none, unreadable, or
 * what it was read from changed since: its stamp differs). */
static json_t *probe_cache_read(const char *dir, const char *key, const char *root)
{
	char *file = xasprintf("%s/%s.json", dir, key);
	json_t *doc = json_load_file(file, 0, NULL);
	const char *stamp = json_string_value(json_object_get(doc, "probe_stamp"));
	struct strbuf now = STRBUF_INIT;
	if (!stamp || probe_doc_stamp(doc, root, &now) < 0 || strcmp(now.buf, stamp) != 0) {
		json_decref(doc);
		doc = NULL;
	}
	strbuf_release(&now);
	free(file);
	return doc;
}

/* Keep a successful probe's doc under dir/<key>.json (written whole, then
 * renamed: a reader never sees half a file). Failures only cost a probe. */
static void probe_cache_write(const char *dir, const char *key, const char *root, json_t *doc)
{
	struct strbuf stamp = STRBUF_INIT;
	if (probe_doc_stamp(doc, root, &stamp) < 0 || mkdir_p(dir, 0700) < 0)
		goto cleanup;
	json_object_set_new(doc, "probe_stamp", json_string(stamp.buf));
	char *file = xasprintf("%s/%s.json", dir, key), *tmp = xasprintf("%s.%ld.tmp", file, (long)getpid());
	if (json_dump_file(doc, tmp, JSON_COMPACT) == 0 && rename(tmp, file) == 0)
		log_info("toolchain probe cached in %s", file);
	else
		unlink(tmp);
	free(file);
	free(tmp);
cleanup:
	strbuf_release(&stamp);
}

/* Run the probe script with tc's Python: its JSON document, or NULL with tc->why. */
static json_t *probe_python_run(struct toolchain *tc, char *const *env)
{
	char *argv[] = { tc->python, "-c", (char *)probe_script, NULL };
	char *out = NULL;
	json_t *doc = NULL;
	int rc = run_capture_in_root(tc->root, argv, env, PROBE_TIMEOUT_S, &out, -1);
	if (rc != 0) {
		unusable(tc, "%s: %s%s%s", tc->python,
			 rc == 127 ? "not found" : rc == SANDBOX_TIMED_OUT ? "probe timed out" : "probe failed",
			 tc->root ? " in the root " : "", tc->root ? tc->root : "");
		goto cleanup;
	}
	const char *line = out ? strrchr(out, '{') : NULL;
	doc = line ? json_loads(line, 0, NULL) : NULL;
	if (!json_is_object(doc)) {
		unusable(tc, "%s: probe printed no JSON", tc->python);
		json_decref(doc);
		doc = NULL;
	}
cleanup:
	free(out);
	return doc;
}

/* Fill what the probe document reports (torch, Python, headers). 0, or
 * KHUB_EINVAL with tc->why. */
static int probe_python_fill(struct toolchain *tc, json_t *doc)
{
	const char *err = json_string_value(json_object_get(doc, "error"));
	if (err)
		return unusable(tc, "%s: %s", tc->python, err);
	if (!json_is_true(json_object_get(doc, "tomllib")))
		return unusable(tc, "%s: no tomllib (Python >= 3.11) tomli nor toml to read build.toml", tc->python);
	tc->python_version = json_str_dup(doc, "python");
	tc->machine = json_str_dup(doc, "machine");
	tc->python_include = json_str_dup(doc, "python_include");
	tc->has_kernels = json_is_true(json_object_get(doc, "kernels"));
	tc->torch_version = json_str_dup(doc, "torch");
	tc->cuda_version = json_str_dup(doc, "cuda");
	tc->rocm_version = json_str_dup(doc, "hip");
	tc->cxx11_abi = json_is_true(json_object_get(doc, "cxx11_abi"));
	tc->torch_lib = json_str_dup(doc, "torch_lib");
	if (tc->hipify && hipify_tool_of(tc->hipify)->python && json_is_string(json_object_get(doc, "hipify")))
		tc->hipify_version = xasprintf("torch.utils.hipify %s (torch %s)", json_string_value(json_object_get(doc,
					       "hipify")), tc->torch_version ? tc->torch_version : "?");
	tc->device = json_str_dup(doc, "device");
	tc->driver = json_str_dup(doc, "driver");
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(doc, "torch_include"), i, v) {
		if (!json_is_string(v))
			continue;
		tc->torch_includes = xrealloc(tc->torch_includes, (tc->ntorch_includes + 1) * sizeof(char *));
		tc->torch_includes[tc->ntorch_includes++] = xstrdup(json_string_value(v));
	}
	return 0;
}

/* The Python's report: from cache_dir when an earlier probe of the same
 * entry, interpreter and torch left one there (importing torch takes
 * seconds), else by running it (and caching a usable answer). */
static int probe_python(struct toolchain *tc, char *const *env, const char *cache_dir)
{
	char key[65];
	json_t *doc = NULL;
	if (cache_dir) {
		probe_cache_key(tc, env, key);
		doc = probe_cache_read(cache_dir, key, tc->root);
	}
	int cached = doc != NULL;
	if (cached)
		log_info("toolchain %s: probe reused from %s/%s.json", tc->name, cache_dir, key);
	if (!doc && !(doc = probe_python_run(tc, env)))
		return KHUB_EINVAL;
	int rc = probe_python_fill(tc, doc);
	if (rc == 0 && cache_dir && !cached)
		probe_cache_write(cache_dir, key, tc->root, doc);
	json_decref(doc);
	return rc;
}

/* The compilers' --version: tc->cxx_version, nvcc_version (and its release
 * numbers), hipcc_version with its HIP version into *hmaj.*hmin (-1 when
 * it prints none). The first compiler that does not answer, or NULL. */
static const char *probe_compilers(struct toolchain *tc, char *const *env, long *hmaj, long *hmin)
{
	const char *missing = NULL;
	*hmaj = *hmin = -1;
	if (tc->cxx && !(tc->cxx_version = version_line(tc, tc->cxx, env)))
		missing = tc->cxx;
	char *text = tc->nvcc ? version_text(tc, tc->nvcc, env) : NULL;
	if (text) {
		const char *rel = strstr(text, "release ");
		if (rel)
			sscanf(rel, "release %d.%d", &tc->nvcc_major, &tc->nvcc_minor);
		const char *last = rel ? rel : text;
		tc->nvcc_version = xstrndup(last, strcspn(last, "\n"));
		free(text);
	} else if (tc->nvcc && !missing) {
		missing = tc->nvcc;
	}
	text = tc->hipcc ? version_text(tc, tc->hipcc, env) : NULL;
	if (text) {
		const char *hv = strstr(text, "HIP version");
		const char *line0 = hv ? hv : text;
		tc->hipcc_version = xstrndup(line0, strcspn(line0, "\n"));
		if (hv && sscanf(hv, "HIP version: %ld.%ld", hmaj, hmin) != 2)
			*hmaj = *hmin = -1;
		free(text);
	} else if (tc->hipcc && !missing) {
		missing = tc->hipcc;
	}
	return missing;
}

/* The hipify tool's version into tc->hipify_version (torch's came with the
 * Python probe): 0, or KHUB_EINVAL with tc->why when it gives none. */
static int probe_hipify(struct toolchain *tc, char *const *env)
{
	const struct hipify_tool *tool = tc->hipify ? hipify_tool_of(tc->hipify) : NULL;
	if (!tool || tc->hipify_version)
		return 0;
	if (tool->python)
		return unusable(tc, "hipify \"%s\": %s has no torch.utils.hipify", tc->hipify, tc->python);
	char *line = version_line(tc, tc->hipify, env);
	if (!line)
		return unusable(tc, "hipify: %s --version failed (not installed?)", tc->hipify);
	tc->hipify_version = xasprintf("%s (%s)", tc->hipify, line);
	free(line);
	return 0;
}

/* rocm_from_hipcc: the ROCm variant of a torch that is not a ROCm build,
 * its ROCm version hipcc's (hmaj.hmin). Refused for a CUDA or ROCm torch
 * (the one contradicts it, the other makes it pointless). 0 and the
 * backend built into *backend, or KHUB_EINVAL with tc->why. */
static int probe_rocm_from_hipcc(struct toolchain *tc, long hmaj, long hmin, const struct compile_backend **backend)
{
	const struct compile_backend *torch_cb = *backend;
	if (torch_cb->compiler_key)
		return unusable(tc, "rocm_from_hipcc: torch %s is itself a %s build (%s %s): remove the key (a ROCm torch is "
				"probed as it is)", tc->torch_version, kernel_backend_find(torch_cb->name)->title,
				torch_cb->version_title, compile_backend_version(torch_cb, tc));
	if (!tc->hipcc_version || hmaj < 0)
		return unusable(tc, "rocm_from_hipcc: %s --version %s", tc->hipcc,
				!tc->hipcc_version ? "failed (not installed?)" : "prints no \"HIP version: X.Y\"");
	tc->rocm_version = xasprintf("%ld.%ld", hmaj, hmin);
	*backend = compile_backend_find("rocm");
	return 0;
}

/* The platform.machine() of tc's Python as a variant names it. */
static const char *probe_arch(const struct toolchain *tc)
{
	const char *arch = tc->machine ? tc->machine : "";
	if (!strcmp(arch, "amd64") || !strcmp(arch, "AMD64"))
		return "x86_64";
	if (!strcmp(arch, "arm64") || !strcmp(arch, "ARM64"))
		return "aarch64";
	return arch;
}

/* The arch variant of backend b for torch tmaj.tmin and its stable ABI
 * ones into tc->variants, when tc can compile them; else tc->why says why. */
static void probe_arch_variants(struct toolchain *tc, const struct compile_backend *b, long tmaj, long tmin,
				const char *missing)
{
	long bmaj = -1, bmin = -1;
	const char *version = compile_backend_version(b, tc), *arch = probe_arch(tc);
	if (version)
		sscanf(version, "%ld.%ld", &bmaj, &bmin);
	struct variant_name vn;
	char name[VARIANT_NAME_MAX + 1];
	variant_name_set_torch(&vn, tmaj, tmin, tc->cxx11_abi, b->name, bmaj, bmin, arch, "linux");
	variant_name_format(&vn, name, sizeof(name));
	if (missing) {
		snprintf(tc->why, sizeof(tc->why), "%s --version failed (not installed?)", missing);
	} else if (!tc->cxx) {
		snprintf(tc->why, sizeof(tc->why), "no cxx: only noarch variants");
	} else if (b->compiler_key && !compile_backend_compiler(b, tc)) {
		snprintf(tc->why, sizeof(tc->why), "torch is built for %s %s but the toolchain has no %s",
			 kernel_backend_find(b->name)->title, version, b->compiler_key);
	} else {
		add_variant(tc, name);
		add_stable_abi_variants(tc, tmaj, tmin, b->name, bmaj, bmin, arch);
	}
}

int toolchain_probe(struct toolchain *tc, const char *cache_dir)
{
	toolchain_clear_probe(tc);
	struct strvec env = STRVEC_INIT;
	toolchain_environment(tc, "/tmp", &env);
	int rc = toolchain_root_check(tc);
	if (rc == 0 && tc->root)	/* before the probe: its cache key names the root's digest */
		rc = toolchain_root_digest(tc);
	if (rc == 0)
		rc = probe_python(tc, env.items, cache_dir);
	if (rc < 0)
		goto cleanup;
	/* The torch's own build, and its version numbers. */
	long tmaj = -1, tmin = -1, hmaj, hmin;
	const struct compile_backend *torch_cb = compile_backend_of_torch(tc), *cpu = compile_backend_find("cpu");
	const struct compile_backend *backend = torch_cb;
	tc->torch_build = torch_cb->name;
	if (!tc->torch_version || sscanf(tc->torch_version, "%ld.%ld", &tmaj, &tmin) != 2) {
		rc = unusable(tc, "torch version \"%s\" is not MAJOR.MINOR...",
			      tc->torch_version ? tc->torch_version : "");
		goto cleanup;
	}
	/* Compilers: the arch variant needs cxx, and nvcc/hipcc for a GPU torch. */
	const char *missing = probe_compilers(tc, env.items, &hmaj, &hmin);
	if ((rc = probe_hipify(tc, env.items)) < 0)
		goto cleanup;
	if (tc->rocm_from_hipcc && (rc = probe_rocm_from_hipcc(tc, hmaj, hmin, &backend)) < 0)
		goto cleanup;
	probe_arch_variants(tc, backend, tmaj, tmin, missing);
	/* A GPU torch (or rocm_from_hipcc) also builds its version's CPU arch
	 * variant: every torch ships libtorch_cpu and c10, and the build
	 * compiles only the cpu kernels (what `get_kernel(..., backend="cpu")`
	 * loads). */
	if (tc->cxx && !missing && backend != cpu)
		probe_arch_variants(tc, cpu, tmaj, tmin, NULL);
	/* Python-only variants need the Python alone; their smoke import runs
	 * on this torch, so only the torch's own backend (never rocm for
	 * rocm_from_hipcc: its torch is a CPU one). */
	char noarch[64];
	snprintf(noarch, sizeof(noarch), "torch-%s", torch_cb->name);
	add_variant(tc, noarch);
	if (torch_cb != cpu) {
		snprintf(noarch, sizeof(noarch), "torch-%s", cpu->name);
		add_variant(tc, noarch);
	}
	tc->usable = 1;
	rc = 0;
cleanup:
	strvec_release(&env);
	return rc;
}

const struct toolchain *toolchain_for_variant(const struct toolchain_set *set, const char *variant)
{
	for (size_t i = 0; i < set->count; i++) {
		const struct toolchain *tc = &set->items[i];
		if (!tc->usable)
			continue;
		for (size_t j = 0; j < tc->nvariants; j++)
			if (strcmp(tc->variants[j], variant) == 0)
				return tc;
	}
	return NULL;
}

const struct toolchain *toolchain_for_benchmarks(const struct toolchain_set *set, const char *device)
{
	for (size_t i = 0; i < set->count; i++) {
		const struct toolchain *tc = &set->items[i];
		if (tc->usable && tc->benchmarks && strcmp(tc->device ? tc->device : BENCHMARK_DEVICE_CPU, device) == 0)
			return tc;
	}
	return NULL;
}

int toolchain_device_is_nvidia_gpu(const struct toolchain *tc)
{
	return tc->benchmarks && tc->device && strcmp(tc->device, BENCHMARK_DEVICE_CPU) != 0 && tc->cuda_version &&
	       *tc->cuda_version && !(tc->rocm_version && *tc->rocm_version);
}
