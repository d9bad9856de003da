/* test_worker_archs.c -- khub-worker's CUDA arch selection: the defaults of
 * each nvcc version, and the contract's loose intersection of a kernel's
 * cuda-capabilities with them; the compile-backend table against kernel/'s
 * backend table; nvcc's --threads; the build cache's directory per repo and
 * toolchain and its count of ccache's stats log; the op namespace placed
 * in an object compiled with its placeholder. */
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

/* cc -c of a unit naming the op namespace (as a symbol and a string),
 * with NAME defined as name, into dir/out.o, with flags. 0 when compiled. */
static int compile_named(const char *dir, const char *out, const char *name, const char *flags)
{
	char *c = xasprintf("%s/unit.c", dir);
	FILE *f = fopen(c, "w");
	if (f) {
		fputs("#define STR2(x) #x\n#define STR(x) STR2(x)\n#define CAT2(a, b) a##b\n#define CAT(a, b) CAT2(a, b)\n"
		      "const char *ops_name = STR(NAME);\nint CAT(PyInit_, NAME)(void) { return 1; }\n"
		      "const char *edge = \"abb\";\n", f);
		fclose(f);
	}
	char *cmd = xasprintf("cd %s && cc -O2 -fPIC -DNAME=%s %s -c unit.c -o %s 2>&1", dir, name, flags, out);
	int rc = f ? system(cmd) : -1;
	free(cmd);
	free(c);
	return rc;
}

static int same_file_bytes(const char *a, const char *b)
{
	size_t na = 0, nb = 0;
	char *x = read_file_limited(a, 1 << 24, &na), *y = read_file_limited(b, 1 << 24, &nb);
	int same = x && y && na == nb && memcmp(x, y, na) == 0;
	free(x);
	free(y);
	return same;
}

/* The op namespace placed in an object compiled with its placeholder:
 * the bytes of an object compiled with the namespace itself; a symbolic
 * link, a second name, LTO IR, compressed sections, a file that is not
 * ELF are refused untouched; the patched file is a new one (an open copy,
 * as ccache's, keeps the old bytes). */
static void test_object_replace(void)
{
	char dir[] = "/tmp/khub-objpatch-XXXXXX";
	const char *ph = "_relu_cpu_kHnsPH0", *ns = "_relu_cpu_1234abc", *why = NULL;
	size_t count = 0;
	struct stat before, after;
	if (!mkdtemp(dir) || compile_named(dir, "p.o", ph, "") || compile_named(dir, "n.o", ns, "")) {
		ok(0, "compiled the test unit with cc");
		return;
	}
	char *p = xasprintf("%s/p.o", dir), *n = xasprintf("%s/n.o", dir), *sym = xasprintf("%s/link.o", dir);
	char *hard = xasprintf("%s/hard.o", dir), *lto = xasprintf("%s/lto.o", dir), *gz = xasprintf("%s/gz.o", dir);
	ok(!same_file_bytes(p, n), "compiled with the placeholder, the object differs");
	int old = open(p, O_RDONLY);
	stat(p, &before);
	ok(symlink(p, sym) == 0 && compile_object_replace(sym, ph, ns, &count, &why) == KHUB_EINVAL && why,
	   "a symbolic link is refused (%s)", why ? why : "");
	ok(link(p, hard) == 0 && compile_object_replace(p, ph, ns, &count, &why) == KHUB_EINVAL,
	   "a file with a second name is refused (%s)", why ? why : "");
	unlink(hard);
	ok(compile_object_replace(p, ph, ns, &count, &why) == 0, "the placeholder replaced");
	ok(count >= 2, "in the symbol and the string (%zu places)", count);
	ok(same_file_bytes(p, n), "the object's bytes are those of a compile with the namespace itself");
	stat(p, &after);
	static char old_bytes[1 << 16];
	ssize_t got = old >= 0 ? pread(old, old_bytes, sizeof(old_bytes), 0) : -1;
	ok(after.st_ino != before.st_ino && (after.st_mode & 0777) == (before.st_mode & 0777),
	   "written to a new file renamed over it, the mode kept");
	ok(got > 0 && memmem(old_bytes, (size_t)got, ph, strlen(ph)), "the old file, still open (a cache's copy), keeps its bytes");
	if (old >= 0)
		close(old);
	ok(compile_object_replace(p, ph, ns, &count, &why) == 0, "patching again: nothing to replace");
	ok(count == 0, "… 0 places, nothing written");
	ok(compile_object_replace(p, "ab", "aa", &count, &why) == KHUB_EINVAL, "a replacement that makes the text anew: refused");
	ok(compile_object_replace(n, "ab", "aa", &count, &why) != 0 && same_file_bytes(p, n), "… the file untouched");
	if (compile_named(dir, "lto.o", ph, "-flto") == 0) {
		ok(compile_object_replace(lto, ph, ns, &count, &why) == KHUB_EINVAL, "an object with LTO IR: refused (%s)",
		       why ? why : "");
	}
	if (compile_named(dir, "gz.o", ph, "-g -gz=zlib") == 0)
		ok(compile_object_replace(gz, ph, ns, &count, &why) == KHUB_EINVAL, "compressed debug sections: refused (%s)",
		       why ? why : "");
	char *c = xasprintf("%s/unit.c", dir);
	ok(compile_object_replace(c, "NAME", "EMAN", &count, &why) == KHUB_EINVAL, "not ELF: refused (%s)", why ? why : "");
	char *rm = xasprintf("rm -rf %s", dir);
	if (system(rm) != 0)
		printf("# could not remove %s\n", dir);
	free(rm);
	free(c);
	free(p);
	free(n);
	free(sym);
	free(hard);
	free(lto);
	free(gz);
}

int main(void)
{
	test_hipify_names();
	test_capabilities_left_out();
	test_compile_backends();
	test_nvcc_threads();
	test_build_cache();
	test_object_replace();
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
