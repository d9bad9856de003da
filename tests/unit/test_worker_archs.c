/* test_worker_archs.c -- khub-worker's CUDA arch selection: the defaults of
 * each nvcc version, and the contract's loose intersection of a kernel's
 * cuda-capabilities with them; the compile-backend table against kernel/'s
 * backend table; nvcc's --threads; the build cache's directory per repo and
 * toolchain, held by one build at a time, and its count of ccache's stats
 * log; which units register under the runtime op namespace
 * (compile_namespace_use). */
#include "builder-worker/build_internal.h"
#include "tests/unit/tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *select_joined(int major, int minor, const char *const *caps, size_t ncaps)
{
	struct strvec out = STRVEC_INIT;
	cuda_archs_select(major, minor, caps, ncaps, &out);
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "");
	for (size_t i = 0; i < out.count; i++)
		strbuf_addf(&sb, "%s%s", i ? ";" : "", out.items[i]);
	strvec_release(&out);
	return strbuf_detach(&sb, NULL);
}

/* Every row of the worker's compile table is a backend of kernel/'s table,
 * found through it; a GPU row names its compiler and archs; the toolchain
 * fields it reads are the ones its key names. */
static void test_compile_backends(void)
{
	size_t rows = 0;
	for (const struct kernel_backend *kb = kernel_backends; kb->name; kb++) {
		const struct compile_backend *cb = compile_backend_for(kb);
		if (!cb)
			continue;
		rows++;
		is_str(cb->name, kb->name, "compile row %s is kernel/'s row of that name", kb->name);
		ok(compile_backend_find(kb->name) == cb, "… found by name too");
		ok(!cb->compiler_key == !cb->archs_key && !cb->compiler_key == !cb->gpu_command,
		   "… a compiler, archs and a command together, or none (%s)", kb->name);
	}
	ok(rows == 3, "cpu, cuda, rocm compile here (%zu rows)", rows);
	ok(compile_backend_find("metal") == NULL && compile_backend_find("npu") == NULL, "metal, npu: none");
	struct toolchain tc = { .nvcc = "/x/nvcc", .hipcc = "/x/hipcc", .cuda_version = "12.8", .rocm_version = NULL };
	is_str(compile_backend_compiler(compile_backend_find("cuda"), &tc), "/x/nvcc", "cuda's compiler is tc->nvcc");
	is_str(compile_backend_compiler(compile_backend_find("rocm"), &tc), "/x/hipcc", "rocm's is tc->hipcc");
	ok(compile_backend_compiler(compile_backend_find("cpu"), &tc) == NULL, "cpu: none (cxx only)");
	is_str(compile_backend_of_torch(&tc)->name, "cuda", "a torch with a CUDA version is a cuda build");
	tc.cuda_version = NULL;
	tc.rocm_version = "7.1";
	is_str(compile_backend_of_torch(&tc)->name, "rocm", "… with a HIP version a rocm one");
	tc.rocm_version = NULL;
	is_str(compile_backend_of_torch(&tc)->name, "cpu", "… with neither a cpu one");
}

/* --threads: the build's CPUs shared by the nvcc compiles running at once,
 * no more than the targets, none before nvcc 11.2. */
static void test_nvcc_threads(void)
{
	ok(nvcc_threads(11, 1, 16, 1, 8) == 0, "nvcc 11.1: no --threads");
	ok(nvcc_threads(10, 2, 16, 1, 8) == 0, "nvcc 10.2: none");
	ok(nvcc_threads(-1, -1, 16, 1, 8) == 0, "an unknown nvcc version: none");
	ok(nvcc_threads(11, 2, 16, 1, 8) == 8, "nvcc 11.2, 16 CPUs, one .cu of 8 targets: 8 threads (one per target)");
	ok(nvcc_threads(13, 0, 16, 1, 20) == 16, "one .cu of 20 targets on 16 CPUs: 16");
	ok(nvcc_threads(13, 0, 16, 4, 20) == 4, "four .cu at once on 16 CPUs: 4 each");
	ok(nvcc_threads(13, 0, 16, 40, 20) == 1, "more .cu than CPUs: 1 each (they run 16 at once)");
	ok(nvcc_threads(13, 0, 6, 4, 20) == 1, "6 CPUs for 4 compiles: 1 each");
	ok(nvcc_threads(12, 8, 0, 1, 3) == 1, "no CPU count: 1");
	ok(nvcc_threads(12, 8, 4, 0, 0) == 4, "no count of compiles or targets: the CPUs");
}

static void test_build_cache(void)
{
	char *a = build_cache_dir("/w/ccache", "acme/relu", "cpu-debian");
	char *b = build_cache_dir("/w/ccache", "evil/relu", "cpu-debian");
	char *c = build_cache_dir("/w/ccache", "acme/relu", "cuda13");
	char *again = build_cache_dir("/w/ccache", "acme/relu", "cpu-debian");
	ok(!strncmp(a, "/w/ccache/", 10) && strlen(a) == 10 + 64, "the cache of a repo and toolchain: ROOT/<64 hex> (%s)", a);
	ok(strcmp(a, b) != 0, "another repo: another directory");
	ok(strcmp(a, c) != 0, "another toolchain: another directory");
	is_str(again, a, "the same repo and toolchain: the same directory");
	free(a);
	free(b);
	free(c);
	free(again);

	struct build_cache k = { 0 };
	build_cache_count(&k, "# torch-ext/torch_binding.cpp\ncache_miss\ndirect_cache_miss\nlocal_storage_miss\n"
			  "preprocessed_cache_miss\n# relu_cpu/relu_cpu.cpp\ndirect_cache_miss\nlocal_storage_hit\n"
			  "preprocessed_cache_hit\n# a.cpp\ndirect_cache_hit\n# link.o\ncalled_for_link\n# b.cu\n"
			  "unsupported_compiler_option");
	ok(k.hits == 2 && k.misses == 1 && k.uncached == 2, "stats log: 2 hits (direct, preprocessed), 1 miss, "
	   "2 not cacheable (%ld/%ld/%ld)", k.hits, k.misses, k.uncached);
	struct build_cache e = { 0 };
	build_cache_count(&e, "");
	build_cache_count(&e, "direct_cache_hit\ncache_miss_bogus\n#");
	ok(e.hits == 0 && e.misses == 0 && e.uncached == 1, "no compile before the first '#', a counter read whole");
}

/* Two builds at once of one repo and toolchain share its cache (a
 * daemon's builds at once run as different uids of one group): both get
 * it, its directory is the group's (02770), ccache adds with umask 007,
 * and what an earlier build left owner-only is made the group's too. */
static void test_build_cache_shared(void)
{
	if (access("/usr/bin/ccache", X_OK) != 0) {
		ok(1, "# SKIP ccache is not installed");
		return;
	}
	char root[] = "/tmp/khub-test-cache-XXXXXX";
	if (!mkdtemp(root)) {
		ok(0, "mkdtemp");
		return;
	}
	struct sandbox sa = { .mode = SANDBOX_NONE }, sb = { .mode = SANDBOX_NONE };
	struct build_cache a = { .dir = build_cache_dir(root, "acme/relu", "cpu-debian"), .max_mb = 8 };
	struct build_cache b = { .dir = build_cache_dir(root, "acme/relu", "cpu-debian"), .max_mb = 8 };
	ok(build_cache_prepare(&a, &sa, root) == 0 && a.dir, "the first build gets the cache");
	char *old = xasprintf("%s/entry", a.dir);
	int fd = open(old, O_CREAT | O_WRONLY, 0600);
	if (fd >= 0)
		close(fd);
	chmod(old, 0600);
	ok(build_cache_prepare(&b, &sb, root) == 0 && b.dir && sb.cache_dir && !strcmp(a.dir, b.dir),
	   "a second build of the same repo and toolchain at once gets it too");
	struct stat dir, file;
	ok(stat(b.dir, &dir) == 0 && (dir.st_mode & 07777) == 02770, "the cache directory is the build group's (%o)",
	   dir.st_mode & 07777);
	ok(stat(old, &file) == 0 && (file.st_mode & 0777) == 0660, "an owner-only file in it is made the group's (%o)",
	   file.st_mode & 0777);
	int umask_set = 0;
	for (size_t i = 0; i < sb.env.count; i++)
		umask_set |= !strcmp(sb.env.items[i], "CCACHE_UMASK=007");
	ok(umask_set, "ccache writes what it adds group-writable (CCACHE_UMASK=007)");
	free(old);
	build_cache_release(&a);
	build_cache_release(&b);
	sandbox_release(&sa);
	sandbox_release(&sb);
	tree_remove(root);
}

/* A capability the variant's CUDA cannot build is named with the
 * planner's reason (the build log and the ABI report carry it). */
static void test_capabilities_left_out(void)
{
	json_t *config = json_loads("{\"kernel\": {\"relu_cpu\": {\"backend\": \"cpu\"}, \"relu_cuda\": {\"backend\": "
				    "\"cuda\", \"cuda-capabilities\": [\"5.0\", \"8.0\", \"9.0\"]}}}", 0, NULL);
	struct variant_name v;
	json_t *out = json_array();
	variant_name_parse("torch211-cxx11-cu130-x86_64-linux", &v, NULL);
	compile_capabilities_left_out(config, &v, "cuda-capabilities", out);
	char *dump = json_dumps(out, JSON_SORT_KEYS | JSON_COMPACT);
	is_str(dump, "[{\"capability\":\"5.0\",\"reason\":\"capability 5.0 left out: CUDA 13.0 cannot build it "
	       "(oldest it builds: 7.5)\"}]", "cu130: 5.0 left out, with the planner's reason; 8.0 and 9.0 built");
	free(dump);
	json_decref(out);
	out = json_array();
	variant_name_parse("torch211-cxx11-cu126-x86_64-linux", &v, NULL);
	compile_capabilities_left_out(config, &v, "cuda-capabilities", out);
	ok(json_array_size(out) == 0, "cu126 builds all three: nothing left out");
	json_decref(out);
	json_decref(config);
}

/* hipify.c's table and names: "torch" is torch.utils.hipify run by the
 * toolchain's Python, anything else a hipify-perl program; only .cu is a
 * CUDA source; a hipified source is compiled as its .hip copy. */
static void test_hipify_names(void)
{
	struct toolchain tc = { .python = "/usr/bin/python3", .hipify = "/opt/rocm/bin/hipify-perl" };
	struct strvec args = STRVEC_INIT;
	ok(hipify_tool_of("torch")->python && !hipify_tool_of(tc.hipify)->python, "torch vs a hipify-perl program");
	hipify_tool_of(tc.hipify)->command(&tc, "k/relu.cu", "k/relu.hip", &args);
	ok(args.count == 4 && !strcmp(args.items[0], tc.hipify) && !strcmp(args.items[2], "-o=k/relu.hip") &&
	   !strcmp(args.items[3], "k/relu.cu"), "hipify-perl -quiet-warnings -o=OUT IN");
	strvec_release(&args);
	hipify_tool_of("torch")->command(&tc, "k/relu.cu", "k/relu.hip", &args);
	ok(args.count == 5 && !strcmp(args.items[0], tc.python) && !strcmp(args.items[3], "k/relu.cu") &&
	   !strcmp(args.items[4], "k/relu.hip"), "torch: the toolchain's python, its script, IN OUT");
	strvec_release(&args);
	ok(hipify_wanted("relu_cuda/relu_kernel.cu") && !hipify_wanted("a.cuh") && !hipify_wanted("a.hip") &&
	   !hipify_wanted("a.cpp") && !hipify_wanted(".cu") && !hipify_wanted(NULL), "only .cu is hipified");
	struct build_plan p = { .hipified = STRVEC_INIT };
	strvec_pushf(&p.hipified, "k/relu.cu");
	char *a = hipify_compiled_name(&p, "k/relu.cu"), *b = hipify_compiled_name(&p, "k/other.cu");
	is_str(a, "k/relu.hip", "a hipified source is compiled as its .hip copy");
	is_str(b, "k/other.cu", "one not hipified as it is");
	free(a);
	free(b);
	strvec_release(&p.hipified);
}

/* One unit's text: its registrations, module flag and other use. */
static void use_of(const char *text, size_t *regs, int *module, const char **why)
{
	static struct namespace_use u;
	compile_namespace_use(text, strlen(text), &u);
	*regs = u.registrations;
	*module = u.registers_module;
	*why = u.why;
}

/* Which mentions of TORCH_EXTENSION_NAME make a unit take the namespace
 * itself: comments and literals do not count, whitespace is allowed, any
 * other use (stringified, PYBIND11_MODULE, a macro of its own, STABLE_*)
 * does. */
static void test_namespace_use(void)
{
	size_t regs;
	int module;
	const char *why;
	use_of("// under TORCH_EXTENSION_NAME\n#include \"registration.h\"\n"
	       "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) { ops.def(\"f(Tensor x) -> ()\"); }\n"
	       "TORCH_LIBRARY_IMPL_EXPAND( TORCH_EXTENSION_NAME , CPU, ops) {}\n"
	       "/* TORCH_EXTENSION_NAME\n TORCH_EXTENSION_NAME */\nREGISTER_EXTENSION(\n\tTORCH_EXTENSION_NAME\n)\n",
	       &regs, &module, &why);
	ok(regs == 3 && module && !*why, "registrations only (comments, whitespace): runtime, with the module (%s)", why);
	use_of("TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {}\n"
	       "const char *s = \"TORCH_EXTENSION_NAME\"; char c = '\"'; const char *r = R\"x(TORCH_EXTENSION_NAME)\")x\";\n"
	       "// a comment \\\n TORCH_EXTENSION_NAME continued\n", &regs, &module, &why);
	ok(regs == 1 && !module && !*why, "in string literals, a raw string and a continued comment: not a use (%s)", why);
	use_of("TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {}\nconst char *n = KHUB_TEXT(TORCH_EXTENSION_NAME);\n",
	       &regs, &module, &why);
	ok(*why && strstr(why, "line 2:"), "stringified for a schema lookup: the namespace itself (%s)", why);
	use_of("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n", &regs, &module, &why);
	ok(*why != 0, "PYBIND11_MODULE: the namespace itself (%s)", why);
	use_of("#define MY_NS TORCH_EXTENSION_NAME\nTORCH_LIBRARY_EXPAND(MY_NS, ops) {}\n", &regs, &module, &why);
	ok(*why != 0, "a macro of its own: the namespace itself (%s)", why);
	use_of("STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {}\n", &regs, &module, &why);
	ok(*why != 0, "STABLE_*: the namespace itself (%s)", why);
	use_of("TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME##_x, ops) {}\n", &regs, &module, &why);
	ok(*why != 0, "part of a longer argument: the namespace itself (%s)", why);
	use_of("#define REGISTER_EXTENSION(N) int x\nREGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n", &regs, &module, &why);
	ok(*why != 0, "REGISTER_EXTENSION defined by the unit: the namespace itself (%s)", why);
	use_of("int TORCH_EXTENSION_NAMES; // TORCH_EXTENSION_NAME\n", &regs, &module, &why);
	ok(regs == 0 && !*why, "a longer identifier is not a mention");
	/* a prefix and its literal where the token array grows (256, 512, ...
	 * tokens): the prefix is read after the array moved (t0204 in a
	 * clean-clone run: heap-use-after-free under ASan) */
	for (size_t before = 250; before <= 260; before++) {
		struct strbuf text = STRBUF_INIT;
		for (size_t i = 0; i < before; i++)
			strbuf_adds(&text, "a ");
		strbuf_adds(&text, "u8\"x\" L'y' R\"(z)\"\nTORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {}\n");
		use_of(text.buf, &regs, &module, &why);
		strbuf_release(&text);
		if (regs != 1 || *why) {
			ok(0, "prefixed literals where the token array grows (%zu tokens before): %s", before, why);
			return;
		}
	}
	ok(1, "prefixed literals where the token array grows: one registration, no other use");
}

int main(void)
{
	test_hipify_names();
	test_capabilities_left_out();
	test_compile_backends();
	test_nvcc_threads();
	test_build_cache();
	test_build_cache_shared();
	test_namespace_use();
	char *s;
	s = select_joined(13, 0, NULL, 0);
	is_str(s, "7.5;8.0;8.6;8.7;8.9;9.0;10.0;11.0;12.0;12.1+PTX", "nvcc 13.0 defaults");
	free(s);
	s = select_joined(12, 8, NULL, 0);
	is_str(s, "7.0;7.2;7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1;12.0+PTX", "nvcc 12.8 defaults");
	free(s);
	s = select_joined(12, 6, NULL, 0);
	is_str(s, "7.0;7.2;7.5;8.0;8.6;8.7;8.9;9.0+PTX", "nvcc 12.6 defaults");
	free(s);

	const char *sm80[] = { "8.0" };
	s = select_joined(13, 0, sm80, 1);
	is_str(s, "8.0", "8.0 serves every 8.x default, nothing else");
	free(s);
	const char *two[] = { "8.0", "9.0" };
	s = select_joined(13, 0, two, 2);
	is_str(s, "8.0;9.0", "8.0 and 9.0");
	free(s);
	const char *hopper[] = { "9.0a" };
	s = select_joined(13, 0, hopper, 1);
	is_str(s, "9.0a", "9.0a matches only 9.0");
	free(s);
	const char *ptx[] = { "8.0+PTX" };
	s = select_joined(13, 0, ptx, 1);
	is_str(s, "8.0+PTX", "a PTX arch crosses majors (serves 9.0 and later too)");
	free(s);
	const char *future[] = { "99999.0" };
	s = select_joined(13, 0, future, 1);
	is_str(s, "", "a capability above every default: nothing (the build refuses it)");
	free(s);
	return done_testing();
}
