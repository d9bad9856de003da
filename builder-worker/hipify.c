/* hipify.c -- ROCm from CUDA sources, as kernel-builder does it: a ROCm
 * variant's .cu sources are translated to HIP by the toolchain's hipify
 * tool (torch.utils.hipify run by its Python, the translator kernel-builder's
 * cmake/hipify.py calls, or a hipify-perl program) inside the sandbox, into
 * .hip copies beside them in the scratch copy of the source, and hipcc
 * compiles the copies. The build log and the ABI report name the tool, its
 * version and the files (docs/worker-build.md, "ROCm from CUDA sources"). */
#include "builder-worker/build_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* One source through the tool; its output must exist afterwards. */
static int hipify_one(struct build_plan *p, const struct hipify_tool *tool, const char *rel)
{
	struct strvec args = STRVEC_INIT;
	char *out = hip_name(rel), *path = xasprintf("%s/%s", p->src, out);
	struct stat st;
	tool->command(p->tc, rel, out, &args);
	int rc = compile_run(p, &args);
	if (rc == BUILD_OK && (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))) {
		log_error("khub-worker build: hipify wrote no %s", out);
		rc = BUILD_FAILED;
	}
	if (rc == BUILD_OK) {
		log_info("khub-worker build: hipified %s -> %s", rel, out);
		strvec_pushf(&p->hipified, "%s", rel);
	}
	strvec_release(&args);
	free(out);
	free(path);
	return rc;
}

/* The torch tool's script into obj/ (read by the build uid). */
static int write_torch_script(const struct build_plan *p)
{
	char *path = xasprintf("%s/" TORCH_SCRIPT, p->obj);
	FILE *f = fopen(path, "we");
	int ok = f && fwrite(torch_hipify_script, 1, sizeof(torch_hipify_script) - 1, f) == sizeof(torch_hipify_script) - 1;
	if (f && fclose(f) != 0)
		ok = 0;
	if (!ok)
		log_error("khub-worker build: cannot write %s", path);
	free(path);
	return ok ? BUILD_OK : BUILD_INTERNAL;
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
		rc = hipify_tool_of(p->tc->hipify)->python ? write_torch_script(p) : BUILD_OK;
	}
	for (size_t i = 0; i < cuda.count && rc == BUILD_OK; i++)
		rc = hipify_one(p, hipify_tool_of(p->tc->hipify), cuda.items[i]);
	strvec_release(&cuda);
	return rc;
}
