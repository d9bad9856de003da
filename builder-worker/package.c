/* package.c -- the variant directory around the compiled library:
 * registration.h for the binding, _ops.py, the kernel's Python files,
 * metadata.json with provenance and digest, and README.md from CARD.md. */
#include "builder-worker/build_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Our own wording of the macros the kernel-builder contract describes:
 * TORCH_LIBRARY needs a literal namespace, so these expand NAME (the
 * TORCH_EXTENSION_NAME macro) one level first; REGISTER_EXTENSION gives
 * the library the PyInit_ function that makes it importable. A unit
 * compiled with KHUB_RUNTIME_NAMESPACE (compile.c: its every mention of
 * the macro is a registration's first argument) registers under the string
 * khub_op_namespace instead, defined with PyInit_ in the namespace file the
 * worker links in: its command line is the same on every commit. */
const char registration_header[] =
	"// registration.h -- written by khub-worker before compiling. Registers\n"
	"// ops under this build's namespace (TORCH_EXTENSION_NAME, a macro) and\n"
	"// makes the library an importable (empty) Python module.\n"
	"#pragma once\n"
	"\n"
	"#include <Python.h>\n"
	"\n"
	"#define KHUB_JOIN_(a, b) a##b\n"
	"#define KHUB_JOIN(a, b) KHUB_JOIN_(a, b)\n"
	"#define KHUB_TEXT_(x) #x\n"
	"#define KHUB_TEXT(x) KHUB_TEXT_(x)\n"
	"\n"
	"#ifdef KHUB_RUNTIME_NAMESPACE\n"
	"// The namespace is khub_op_namespace, linked in by khub-worker; NAME is not used.\n"
	"extern \"C\" const char khub_op_namespace[];\n"
	"#define KHUB_LIBRARY(id, m)                                                       \\\n"
	"  static void KHUB_JOIN(id, _init)(torch::Library &);                            \\\n"
	"  static const torch::detail::TorchLibraryInit KHUB_JOIN(id, _static)(          \\\n"
	"      torch::Library::DEF, &KHUB_JOIN(id, _init), khub_op_namespace, {},         \\\n"
	"      __FILE__, __LINE__);                                                       \\\n"
	"  void KHUB_JOIN(id, _init)(torch::Library & m)\n"
	"#define KHUB_LIBRARY_IMPL(id, k, m)                                               \\\n"
	"  static void KHUB_JOIN(id, _init)(torch::Library &);                            \\\n"
	"  static const torch::detail::TorchLibraryInit KHUB_JOIN(id, _static)(          \\\n"
	"      torch::Library::IMPL, &KHUB_JOIN(id, _init), khub_op_namespace,            \\\n"
	"      c10::DispatchKey::k, __FILE__, __LINE__);                                  \\\n"
	"  void KHUB_JOIN(id, _init)(torch::Library & m)\n"
	"#define TORCH_LIBRARY_EXPAND(NAME, MODULE) KHUB_LIBRARY(KHUB_JOIN(khub_def_, __COUNTER__), MODULE)\n"
	"#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) \\\n"
	"  KHUB_LIBRARY_IMPL(KHUB_JOIN(khub_impl_, __COUNTER__), DEVICE, MODULE)\n"
	"#define REGISTER_EXTENSION(NAME) extern \"C\" { extern const char khub_op_namespace[]; }\n"
	"#else\n"
	"#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)\n"
	"#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)\n"
	"#define REGISTER_EXTENSION(NAME)                                                  \\\n"
	"  PyMODINIT_FUNC KHUB_JOIN(PyInit_, NAME)(void) {                                \\\n"
	"    static struct PyModuleDef khub_module = {PyModuleDef_HEAD_INIT, KHUB_TEXT(NAME), \\\n"
	"                                             nullptr, 0, nullptr};               \\\n"
	"    return PyModule_Create(&khub_module);                                       \\\n"
	"  }\n"
	"#endif\n"
	"#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)\n"
	"#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) STABLE_TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)\n";

static int write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return KHUB_EIO;
	if (write_all(fd, data, len) < 0) {
		int err = errno;
		close(fd);
		return khub_err_from_errno(err);
	}
	return close(fd) == 0 ? 0 : KHUB_EIO;
}

/* Read fd to its end, handing each chunk to use (which returns 0 or a
 * KHUB_E* that stops the reading): 0, use's error, or KHUB_EIO. */
int read_chunks(int fd, int (*use)(const char *buf, size_t n, void *ctx), void *ctx)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return KHUB_EIO;
		if (n == 0)
			return 0;
		int rc = use(buf, (size_t)n, ctx);
		if (rc < 0)
			return rc;
	}
}

static int write_chunk(const char *buf, size_t n, void *fd)
{
	return write_all(*(int *)fd, buf, n) < 0 ? khub_err_from_errno(errno) : 0;
}

static int copy_file(const char *from, const char *to, mode_t mode)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return KHUB_EIO;
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode & 0111) ? 0755 : 0644);
	if (out < 0) {
		close(in);
		return KHUB_EIO;
	}
	int rc = read_chunks(in, write_chunk, &out);
	close(in);
	if (close(out) < 0 && rc == 0)
		rc = KHUB_EIO;
	return rc;
}

/* Copying a tree: what keep() accepts (every regular file when NULL),
 * without symbolic links, __pycache__ or .git. */
struct tree_copy {
	const char *to;
	int (*keep)(const char *name, void *ctx);
	void *ctx;
	int log_fd;
};

static int copy_visit(const char *rel, const char *src, const char *name, void *arg)
{
	const struct tree_copy *c = arg;
	if (!strcmp(name, "__pycache__") || !strcmp(name, ".git"))
		return 0;
	char *dst = xasprintf("%s/%s", c->to, rel);
	struct stat st;
	int rc = 0;
	if (lstat(src, &st) < 0) {
		rc = KHUB_EIO;
	} else if (S_ISLNK(st.st_mode)) {
		if (c->log_fd >= 0)
			log_warn("khub-worker: %s: a symbolic link, not copied", rel);
	} else if (S_ISDIR(st.st_mode)) {
		rc = mkdir(dst, 0755) < 0 && errno != EEXIST ? KHUB_EIO : DIR_WALK_ENTER;
	} else if (S_ISREG(st.st_mode) && (!c->keep || c->keep(name, c->ctx))) {
		rc = copy_file(src, dst, st.st_mode);
	}
	free(dst);
	return rc;
}

int copy_tree(const char *from, const char *to, int log_fd)
{
	if (mkdir_p(to, 0755) < 0)
		return KHUB_EIO;
	struct tree_copy c = { to, NULL, NULL, log_fd };
	return dir_walk(from, copy_visit, &c);
}

unsigned long long tree_disk_usage(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;
	unsigned long long total = (unsigned long long)st.st_blocks * 512;
	if (!S_ISDIR(st.st_mode))
		return total;
	DIR *d = opendir(path);
	if (!d)
		return total;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *sub = xasprintf("%s/%s", path, e->d_name);
		total += tree_disk_usage(sub);
		free(sub);
	}
	closedir(d);
	return total;
}

void package_remove_bytecode(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *sub = xasprintf("%s/%s", dir, e->d_name);
		struct stat st;
		if (lstat(sub, &st) == 0) {
			size_t n = strlen(e->d_name);
			if (S_ISDIR(st.st_mode) && !strcmp(e->d_name, "__pycache__"))
				tree_remove(sub);
			else if (S_ISDIR(st.st_mode))
				package_remove_bytecode(sub);
			else if (n > 4 && !strcmp(e->d_name + n - 4, ".pyc"))
				unlink(sub);
		}
		free(sub);
	}
	closedir(d);
}

/* py files and the pyext extensions of build.toml (pyi is not shipped). */
static int keep_python(const char *name, void *ctx)
{
	json_t *pyext = ctx;
	const char *dot = strrchr(name, '.');
	if (!dot)
		return 0;
	if (!strcmp(dot + 1, "py"))
		return 1;
	size_t i;
	json_t *v;
	json_array_foreach(pyext, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), "pyi") != 0 && !strcmp(json_string_value(v), dot + 1))
			return 1;
	return 0;
}

static const char ops_arch_template[] =
	"import torch\n"
	"from . import @OPS@\n"
	"ops = torch.ops.@OPS@\n"
	"\n"
	"\n"
	"def add_op_namespace_prefix(op_name: str):\n"
	"    \"\"\"The op's name under this build's namespace.\"\"\"\n"
	"    return \"@OPS@::\" + op_name\n";

/* Noarch: the namespace follows the backend torch runs on at import time. */
static const char ops_noarch_template[] =
	"import torch\n"
	"\n"
	"\n"
	"def _backend():\n"
	"    if hasattr(torch, 'xla') or hasattr(torch, '_tpu'):\n"
	"        return 'tpu'\n"
	"    if hasattr(torch, 'neuron'):\n"
	"        return 'neuron'\n"
	"    if torch.version.cuda is not None and torch.cuda.is_available():\n"
	"        return 'cuda'\n"
	"    if getattr(torch.version, 'hip', None) is not None and torch.cuda.is_available():\n"
	"        return 'rocm'\n"
	"    if hasattr(torch.backends, 'mps') and torch.backends.mps.is_available():\n"
	"        return 'metal'\n"
	"    if hasattr(torch, 'xpu') and torch.xpu.is_available():\n"
	"        return 'xpu'\n"
	"    return 'cpu'\n"
	"\n"
	"\n"
	"_OPS_NAME = '_@MODULE@_' + _backend() + '_@UID@'\n"
	"ops = getattr(torch.ops, _OPS_NAME)\n"
	"\n"
	"\n"
	"def add_op_namespace_prefix(op_name: str):\n"
	"    \"\"\"The op's name under this build's namespace.\"\"\"\n"
	"    return _OPS_NAME + '::' + op_name\n";

int package_python(struct build_plan *p)
{
	json_t *framework = json_object_get(p->config, p->noarch && json_object_get(p->config, "torch-noarch") ?
					    "torch-noarch" : "torch");
	char *from = xasprintf("%s/torch-ext/%s", p->src, p->module);
	struct tree_copy copy = { p->stage, keep_python, json_object_get(framework, "pyext"), p->sb->log_fd };
	int rc = dir_walk(from, copy_visit, &copy);
	free(from);
	if (rc < 0)
		return rc;
	struct strbuf ops = STRBUF_INIT;
	/* ops_name is _<module>_<backend>_<uid>. */
	const char *uid = strrchr(p->ops_name, '_');
	const char *vars[][2] = { { "@OPS@", p->ops_name }, { "@MODULE@", p->module }, { "@UID@", uid ? uid + 1 : "" } };
	for (const char *c = p->noarch ? ops_noarch_template : ops_arch_template; *c;) {
		size_t k = 0;
		while (k < 3 && strncmp(c, vars[k][0], strlen(vars[k][0])) != 0)
			k++;
		if (k < 3) {
			strbuf_adds(&ops, vars[k][1]);
			c += strlen(vars[k][0]);
		} else {
			strbuf_add(&ops, c++, 1);
		}
	}
	char *path = xasprintf("%s/_ops.py", p->stage);
	rc = write_file(path, ops.buf, ops.len);
	free(path);
	strbuf_release(&ops);
	return rc;
}

/* general.X + general.<backend>.X (python-depends, kernel-depends). */
static json_t *merged_list(json_t *general, const char *backend, const char *key)
{
	json_t *out = json_array();
	json_t *a = json_object_get(general, key);
	if (json_is_array(a))
		json_array_extend(out, a);
	json_t *b = json_object_get(json_object_get(general, backend), key);
	if (json_is_array(b))
		json_array_extend(out, b);
	return out;
}

static int dump_json(json_t *doc, const char *path)
{
	char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text)
		return KHUB_EIO;
	size_t len = strlen(text);
	char *with_nl = xasprintf("%s\n", text);
	int rc = write_file(path, with_nl, len + 1);
	free(text);
	free(with_nl);
	return rc;
}

int package_metadata(struct build_plan *p, const char *commit, json_t *khub_fields)
{
	json_t *general = json_object_get(p->config, "general");
	json_t *md = json_object();
	json_object_set(md, "name", json_object_get(general, "name"));
	json_object_set_new(md, "id", json_string(p->ops_name));
	json_object_set(md, "version", json_object_get(general, "version"));
	json_object_set(md, "license", json_object_get(general, "license"));
	json_object_set_new(md, "python-depends", merged_list(general, p->backend, "python-depends"));
	json_object_set_new(md, "kernel-depends", merged_list(general, p->backend, "kernel-depends"));
	if (json_object_get(general, "upstream"))
		json_object_set(md, "upstream", json_object_get(general, "upstream"));
	if (json_object_get(general, "source"))
		json_object_set(md, "source", json_object_get(general, "source"));
	json_t *backend = json_pack("{s:s}", "type", p->backend);
	if (p->archs.count) {
		json_t *archs = json_array();
		for (size_t i = 0; i < p->archs.count; i++)
			json_array_append_new(archs, json_string(p->archs.items[i]));
		json_object_set_new(backend, "archs", archs);
	} else if (p->noarch) {
		json_t *noarch = json_object_get(p->config, "torch-noarch");
		json_t *archs = json_object_get(noarch, p->cb->noarch_archs_key ? p->cb->noarch_archs_key : "");
		if (json_is_array(archs))
			json_object_set(backend, "archs", archs);
	}
	json_object_set_new(md, "backend", backend);
	if (commit)
		json_object_set_new(md, "provenance", json_pack("{s:{s:s,s:b}}", "kernel", "commit", commit, "dirty", 0));
	if (khub_fields)
		json_object_set(md, "khub", khub_fields);
	char *path = xasprintf("%s/" BUILD_METADATA_FILE, p->stage);
	int rc = dump_json(md, path);
	free(path);
	json_decref(md);
	return rc;
}

static int digest_chunk(const char *buf, size_t n, void *ctx)
{
	EVP_DigestUpdate(ctx, buf, n);
	return 0;
}

/* sha256 of a file as standard base64 (with padding). */
static int hash_file(const char *path, char out[64])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KHUB_EIO;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	int rc = read_chunks(fd, digest_chunk, ctx);
	close(fd);
	unsigned char md[SHA256_DIGEST_LENGTH];
	EVP_DigestFinal_ex(ctx, md, NULL);
	EVP_MD_CTX_free(ctx);
	EVP_EncodeBlock((unsigned char *)out, md, SHA256_DIGEST_LENGTH);
	return rc;
}

/* The digest's files: all but metadata.json and its signature at the top,
 * and Python caches; symbolic links followed. */
static int digest_visit(const char *rel, const char *path, const char *name, void *files)
{
	if (!strchr(rel, '/') && (!strcmp(name, BUILD_METADATA_FILE) || !strcmp(name, "metadata.json.sigstore")))
		return 0;
	size_t n = strlen(name);
	if (!strcmp(name, "__pycache__") || (n > 4 && !strcmp(name + n - 4, ".pyc")))
		return 0;
	struct stat st;
	if (stat(path, &st) < 0)
		return KHUB_EIO;
	if (S_ISDIR(st.st_mode))
		return DIR_WALK_ENTER;
	char b64[64];
	int rc = hash_file(path, b64);
	if (rc == 0)
		json_object_set_new(files, rel, json_string(b64));
	return rc;
}

int package_tree_digest(const char *dir, json_t *files)
{
	return dir_walk(dir, digest_visit, files);
}

int copy_tree_file(const char *from, const char *to)
{
	return copy_file(from, to, 0644);
}

int package_digest(const char *stage)
{
	char *path = xasprintf("%s/" BUILD_METADATA_FILE, stage);
	json_t *md = json_load_file(path, 0, NULL);
	int rc = KHUB_EIO;
	if (!md)
		goto cleanup;
	json_t *files = json_object();
	rc = dir_walk(stage, digest_visit, files);
	json_object_set_new(md, "digest", json_pack("{s:s,s:o}", "algorithm", "sha256", "files", files));
	if (rc == 0)
		rc = dump_json(md, path);
cleanup:
	json_decref(md);
	free(path);
	return rc;
}

/* The names in `__all__ = [...]` of the kernel's __init__.py, minus
 * "layers", as "a, b". */
static char *card_functions(const struct build_plan *p)
{
	char *path = xasprintf("%s/torch-ext/%s/__init__.py", p->src, p->module);
	size_t len;
	char *text = read_file_limited(path, 1 << 20, &len);
	free(path);
	struct strbuf out = STRBUF_INIT;
	strbuf_adds(&out, "");
	const char *all = text ? strstr(text, "__all__") : NULL;
	const char *open_br = all ? strpbrk(all, "[(") : NULL;
	const char *close_br = open_br ? strpbrk(open_br, "])") : NULL;
	for (const char *c = open_br; c && c < close_br; c++) {
		if (*c != '"' && *c != '\'')
			continue;
		const char *end = memchr(c + 1, *c, (size_t)(close_br - c - 1));
		if (!end)
			break;
		if ((size_t)(end - c - 1) != 6 || strncmp(c + 1, "layers", 6) != 0)
			strbuf_addf(&out, "%s%.*s", out.len ? ", " : "", (int)(end - c - 1), c + 1);
		c = end;
	}
	free(text);
	return strbuf_detach(&out, NULL);
}

int package_card(const struct build_plan *p, const char *out_path, const char *repo)
{
	char *path = xasprintf("%s/CARD.md", p->src);
	size_t len;
	char *card = read_file_limited(path, 1 << 20, &len);
	free(path);
	if (!card)
		return 1;
	json_t *general = json_object_get(p->config, "general");
	char *license = xstrdup(json_string_value(json_object_get(general, "license")));
	for (char *c = license; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	char version[32];
	snprintf(version, sizeof(version), "%lld", (long long)json_integer_value(json_object_get(general, "version")));
	char *functions = card_functions(p);
	char *bench = xasprintf("%s/benchmarks", p->src);
	struct stat st;
	const char *has_benchmark = stat(bench, &st) == 0 ? "true" : "false";
	free(bench);
	const char *upstream = json_string_value(json_object_get(general, "upstream"));
	const char *source = json_string_value(json_object_get(general, "source"));
	const char *vars[][2] = {
		{ "repo_id", repo ? repo : "" }, { "version", version }, { "license", license },
		{ "functions", functions }, { "has_benchmark", has_benchmark },
		{ "upstream", upstream ? upstream : "" }, { "source", source ? source : "" },
	};
	struct strbuf out = STRBUF_INIT;
	const char *c = card;
	while (*c) {
		const char *open_var = strstr(c, "{{");
		if (!open_var) {
			strbuf_adds(&out, c);
			break;
		}
		strbuf_add(&out, c, (size_t)(open_var - c));
		const char *close_var = strstr(open_var + 2, "}}");
		if (!close_var) {
			strbuf_adds(&out, open_var);
			break;
		}
		const char *name = open_var + 2;
		while (name < close_var && isspace((unsigned char)*name))
			name++;
		const char *name_end = close_var;
		while (name_end > name && isspace((unsigned char)name_end[-1]))
			name_end--;
		const char *value = NULL;
		for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++)
			if (strlen(vars[i][0]) == (size_t)(name_end - name) && !strncmp(vars[i][0], name, (size_t)(name_end - name)))
				value = vars[i][1];
		if (value)
			strbuf_adds(&out, value);
		else
			strbuf_add(&out, open_var, (size_t)(close_var + 2 - open_var));	/* left as written */
		c = close_var + 2;
	}
	int rc = write_file(out_path, out.buf ? out.buf : "", out.len);
	strbuf_release(&out);
	free(functions);
	free(license);
	free(card);
	return rc;
}
