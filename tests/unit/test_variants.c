/* test_variants.c -- build variant names and the loader's choice: the
 * grammar of kernels' parse_variant (round trips, rejects) and the
 * decisions of its _resolve_variant_for_system for the system setups the
 * kernels test suite checks (kernels/tests/test_variants.py). */
#include "kernel/kernel.h"
#include "tests/unit/tap.h"

#include <stdlib.h>

static void roundtrip(const char *name)
{
	struct variant_name v;
	char out[2 * VARIANT_NAME_MAX];
	int rc = variant_name_parse(name, &v, NULL);
	ok(rc == 0, "parses %s", name);
	if (rc == 0) {
		variant_name_format(&v, out, sizeof(out));
		is_str(out, name, "round trip %s", name);
	}
}

static void rejects(const char *name)
{
	struct variant_name v;
	const char *why = NULL;
	ok(variant_name_parse(name, &v, &why) < 0 && why, "rejects '%s' (%s)", name, why ? why : "-");
}

static void test_grammar(void)
{
	static const char *const systems[] = { "aarch64-linux", "x86_64-linux" };
	static const char *const backends[] = { "cpu", "cu126", "cu128", "cu130", "rocm63", "rocm64", "xpu20252" };
	static const char *const torches[] = { "torch25", "torch29", "torch210" };
	static const char *const abis[] = { "", "-cxx98", "-cxx11" };
	char name[128];
	/* the arch names kernels' own tests round-trip */
	for (size_t t = 0; t < 3; t++)
		for (size_t a = 0; a < 3; a++)
			for (size_t b = 0; b < 7; b++)
				for (size_t s = 0; s < 2; s++) {
					snprintf(name, sizeof(name), "%s%s-%s-%s", torches[t], abis[a], backends[b],
						 systems[s]);
					struct variant_name v;
					char out[2 * VARIANT_NAME_MAX];
					if (variant_name_parse(name, &v, NULL) < 0) {
						ok(0, "parses %s", name);
						continue;
					}
					variant_name_format(&v, out, sizeof(out));
					if (strcmp(out, name) != 0)
						is_str(out, name, "round trip");
				}
	ok(1, "126 torch arch names round-trip");
	roundtrip("torch211-cxx11-cu128-x86_64-linux");
	roundtrip("torch211-cpu-aarch64-darwin");
	roundtrip("torch212-metal-aarch64-darwin");
	roundtrip("torch211-cxx11-rocm71-x86_64-linux");
	roundtrip("torch211-cxx11-xpu20253-x86_64-linux");
	roundtrip("torch210-cu128-x86_64-linux");
	roundtrip("torch-stable-abi211-cu128-x86_64-linux");
	roundtrip("torch-stable-abi29-metal-aarch64-darwin");
	roundtrip("tvm-ffi01-cu128-x86_64-linux");
	roundtrip("tvm-ffi01-metal-aarch64-darwin");
	roundtrip("torch-cpu");
	roundtrip("torch-cuda");
	roundtrip("torch-metal");
	roundtrip("torch-rocm");
	roundtrip("torch-xpu");
	roundtrip("torch-npu");
	roundtrip("torch-neuron");
	roundtrip("torch-tpu");
	roundtrip("torch-universal");
	roundtrip("torch211-cxx11-neuron-x86_64-linux");
	roundtrip("torch211-cxx11-cann81-aarch64-linux");

	struct variant_name v;
	ok(variant_name_parse("torch211-cxx11-cu128-x86_64-linux", &v, NULL) == 0 && v.framework == VARIANT_TORCH &&
	   v.framework_major == 2 && v.framework_minor == 11 && v.cxx11_abi == 1 && strcmp(v.backend, "cuda") == 0 &&
	   v.backend_major == 12 && v.backend_minor == 8 && strcmp(v.arch, "x86_64") == 0 &&
	   strcmp(v.os, "linux") == 0, "torch211-cxx11-cu128-x86_64-linux parts");
	ok(variant_name_parse("torch211-cxx11-cu130-x86_64-linux", &v, NULL) == 0 && v.backend_major == 13 &&
	   v.backend_minor == 0, "cu130 is CUDA 13.0");
	ok(variant_name_parse("torch211-cxx11-xpu20253-x86_64-linux", &v, NULL) == 0 && v.backend_major == 2025 &&
	   v.backend_minor == 3 && strcmp(v.backend, "xpu") == 0, "xpu20253 is XPU 2025.3");
	ok(variant_name_parse("torch-stable-abi211-cu128-x86_64-linux", &v, NULL) == 0 &&
	   v.framework == VARIANT_TORCH_STABLE_ABI && v.framework_major == 2 && v.framework_minor == 11,
	   "stable ABI 2.11");
	ok(variant_name_parse("tvm-ffi01-cu128-x86_64-linux", &v, NULL) == 0 && v.framework == VARIANT_TVM_FFI &&
	   v.framework_major == 0 && v.framework_minor == 1, "tvm-ffi 0.1");
	ok(variant_name_parse("torch-universal", &v, NULL) == 0 && v.framework == VARIANT_TORCH_NOARCH &&
	   strcmp(v.backend, "universal") == 0 && !v.arch[0], "torch-universal is noarch");
	/* The loader accepts any noarch backend name; it simply never matches. */
	ok(variant_name_parse("torch-whatever-else", &v, NULL) == 0 && strcmp(v.backend, "whatever-else") == 0,
	   "noarch takes everything after torch-");
	ok(variant_name_parse("torch", &v, NULL) == 0 && v.framework == VARIANT_TORCH_NOARCH && !v.backend[0],
	   "bare torch is noarch with an empty backend, as in the loader (it never matches)");
	/* Non-canonical: parsed, but the loader downloads the canonical name. */
	char out[2 * VARIANT_NAME_MAX];
	ok(variant_name_parse("torch211-cxx11-cu0128-x86_64-linux", &v, NULL) == 0, "cu0128 parses");
	variant_name_format(&v, out, sizeof(out));
	is_str(out, "torch211-cxx11-cu128-x86_64-linux", "cu0128 formats as cu128");

	rejects("");
	rejects("relu");
	rejects("torch2-cxx11-cu128-x86_64-linux");
	rejects("torch211-cxx11-cu128-x86_64");
	rejects("torch211-cxx11-cu128-x86_64-linux-extra");
	rejects("torch211-cxx11-cuda-x86_64-linux");
	rejects("torch211-cxx11-cu1-x86_64-linux");
	rejects("torch211-cxx17-cu128-x86_64-linux");
	rejects("torch211-cxx11-gpu-x86_64-linux");
	rejects("torchx11-cxx11-cu128-x86_64-linux");
	rejects("torch-stable-abi-cu128-x86_64-linux");
	rejects("torch-stable-abi2-cu128-x86_64-linux");
	rejects("torch-stable-abi211-cu128-linux");
	rejects("tvm-ffi-cu128-x86_64-linux");
	rejects("tvm-ffi1-cu128-x86_64-linux");
	rejects("tvm-foo01-cu128-x86_64-linux");
	rejects("jax04-cu128-x86_64-linux");
	rejects("torch211-cxx11-rocm7-x86_64-linux");
	rejects("torch211-cxx11-cu128-x86_64-linux/x");
}

/* ---- resolution ------------------------------------------------------------ */

struct setup {
	const char *label;
	const char *env[8][2];	/* key, value; NULL key ends */
	const char *best;	/* NULL: nothing loads */
};

static const char *resolve_best(const char *const *names, size_t n, const struct setup *s, char *reason_of,
				const char *reason_for)
{
	struct variant_name *v = calloc(n, sizeof(*v));
	struct variant_decision *d = calloc(n, sizeof(*d));
	struct variant_env env;
	const char *best = NULL;
	variant_env_init(&env);
	for (size_t i = 0; i < 8 && s->env[i][0]; i++)
		if (variant_env_set(&env, s->env[i][0], s->env[i][1], NULL) < 0)
			printf("# bad env %s=%s\n", s->env[i][0], s->env[i][1]);
	variant_env_finish(&env);
	for (size_t i = 0; i < n; i++)
		if (variant_name_parse(names[i], &v[i], NULL) < 0)
			printf("# cannot parse %s\n", names[i]);
	variant_resolve(v, names, n, &env, d);
	if (n && d[0].accepted)
		best = names[d[0].index];
	/* accepted ones come first */
	int seen_rejected = 0, ordered = 1;
	for (size_t i = 0; i < n; i++) {
		if (!d[i].accepted)
			seen_rejected = 1;
		else if (seen_rejected)
			ordered = 0;
		if (reason_for && strcmp(names[d[i].index], reason_for) == 0)
			snprintf(reason_of, VARIANT_REASON_MAX, "%s", d[i].reason);
	}
	ok(ordered, "%s: accepted before rejected", s->label);
	free(v);
	free(d);
	return best;
}

static void test_resolution(void)
{
	/* kernels/tests/test_variants.py RESOLVE_VARIANTS */
	static const char *const set[] = {
		"torch210-cxx11-cu128-x86_64-linux", "torch210-cxx11-cu126-x86_64-linux",
		"torch210-cxx11-cu130-x86_64-linux", "torch210-cxx11-rocm70-x86_64-linux",
		"torch210-cxx11-cpu-x86_64-linux", "torch210-cpu-aarch64-darwin", "torch210-metal-aarch64-darwin",
		"torch-cuda", "torch-cpu",
	};
	static const struct setup setups[] = {
		{ "CUDA 12.8 exact", { { "cuda", "12.8" }, { "torch", "2.10" } }, "torch210-cxx11-cu128-x86_64-linux" },
		{ "CUDA 12.9 takes cu128", { { "cuda", "12.9" }, { "torch", "2.10" } },
		  "torch210-cxx11-cu128-x86_64-linux" },
		{ "CUDA 12.5 falls back to torch-cuda", { { "cuda", "12.5" }, { "torch", "2.10" } }, "torch-cuda" },
		{ "CUDA 11.8 (other major) falls back", { { "cuda", "11.8" }, { "torch", "2.10" } }, "torch-cuda" },
		{ "ROCm 7.0", { { "rocm", "7.0" }, { "torch", "2.10" } }, "torch210-cxx11-rocm70-x86_64-linux" },
		{ "CPU linux", { { "torch", "2.10" } }, "torch210-cxx11-cpu-x86_64-linux" },
		{ "CPU darwin", { { "torch", "2.10" }, { "arch", "aarch64" }, { "os", "darwin" } },
		  "torch210-cpu-aarch64-darwin" },
		{ "Metal darwin 26.0", { { "backend", "metal" }, { "torch", "2.10" }, { "arch", "arm64" }, { "os", "darwin" },
					  { "macos", "26.0" } }, "torch210-metal-aarch64-darwin" },
		{ "CUDA on aarch64 falls back", { { "cuda", "12.8" }, { "torch", "2.10" }, { "arch", "aarch64" } },
		  "torch-cuda" },
		{ "ROCm 7.0 with torch 2.9: nothing", { { "rocm", "7.0" }, { "torch", "2.9" } }, NULL },
		{ "CUDA 12.8 backend=cpu", { { "cuda", "12.8" }, { "backend", "cpu" }, { "torch", "2.10" } },
		  "torch210-cxx11-cpu-x86_64-linux" },
		{ "no torch: noarch only", { { "cuda", "12.8" } }, "torch-cuda" },
		{ "free-threaded: noarch only", { { "cuda", "12.8" }, { "torch", "2.10" }, { "free_threaded", "true" } },
		  "torch-cuda" },
		{ "cxx98 torch: tagged cxx11 rejected", { { "cuda", "12.8" }, { "torch", "2.10" }, { "cxx11", "false" } },
		  "torch-cuda" },
	};
	size_t n = sizeof(set) / sizeof(set[0]);
	for (size_t i = 0; i < sizeof(setups) / sizeof(setups[0]); i++) {
		const char *best = resolve_best(set, n, &setups[i], NULL, NULL);
		is_str(best, setups[i].best, "%s", setups[i].label);
	}

	char reason[VARIANT_REASON_MAX] = "";
	static const char *const metal[] = { "torch210-cpu-aarch64-darwin", "torch210-metal-aarch64-darwin",
					     "torch-metal" };
	struct setup old_macos = { "Metal macOS 15.7", { { "backend", "metal" }, { "torch", "2.10" },
							  { "arch", "aarch64" }, { "os", "darwin" }, { "macos", "15.7" } },
				   "torch-metal" };
	is_str(resolve_best(metal, 3, &old_macos, reason, "torch210-metal-aarch64-darwin"), "torch-metal",
	       "Metal arch variants need macOS 26");
	is_str(reason, "Metal kernels require macOS 26.0 or later, system macOS version is 15.7", "macOS reason");
	struct setup no_macos = { "Metal macOS unknown", { { "backend", "metal" }, { "torch", "2.10" },
							    { "arch", "aarch64" }, { "os", "darwin" } }, "torch-metal" };
	is_str(resolve_best(metal, 3, &no_macos, reason, "torch210-metal-aarch64-darwin"), "torch-metal",
	       "unknown macOS: Metal noarch");
	is_str(reason, "Metal kernels require macOS 26.0 or later, system macOS version is None", "None reason");

	static const char *const universal[] = { "torch210-cxx11-cu128-x86_64-linux", "torch-universal" };
	struct setup rocm = { "universal on ROCm", { { "rocm", "7.0" }, { "torch", "2.9" } }, NULL };
	is_str(resolve_best(universal, 2, &rocm, NULL, NULL), "torch-universal", "universal takes any backend");
	struct setup cuda = { "arch before universal", { { "cuda", "12.8" }, { "torch", "2.10" } }, NULL };
	is_str(resolve_best(universal, 2, &cuda, NULL, NULL), "torch210-cxx11-cu128-x86_64-linux",
	       "universal is the last resort");
	static const char *const noarch[] = { "torch-universal", "torch-cuda" };
	is_str(resolve_best(noarch, 2, &cuda, NULL, NULL), "torch-cuda", "torch-cuda before torch-universal");

	static const char *const stable[] = { "torch-stable-abi211-cu128-x86_64-linux",
					      "torch210-cxx11-cu128-x86_64-linux", "torch-cuda" };
	struct setup t211 = { "stable 2.11", { { "cuda", "12.8" }, { "torch", "2.11" } }, NULL };
	struct setup t212 = { "stable 2.12", { { "cuda", "12.8" }, { "torch", "2.12" } }, NULL };
	struct setup t210 = { "stable 2.10", { { "cuda", "12.8" }, { "torch", "2.10" } }, NULL };
	is_str(resolve_best(stable, 3, &t211, NULL, NULL), "torch-stable-abi211-cu128-x86_64-linux",
	       "stable ABI 2.11 on torch 2.11");
	is_str(resolve_best(stable, 3, &t212, NULL, NULL), "torch-stable-abi211-cu128-x86_64-linux",
	       "stable ABI 2.11 on torch 2.12");
	is_str(resolve_best(stable, 3, &t210, reason, "torch-stable-abi211-cu128-x86_64-linux"),
	       "torch210-cxx11-cu128-x86_64-linux", "stable ABI 2.11 too new for torch 2.10");
	is_str(reason, "Torch stable ABI version (2.11) is too new for environment Torch version (2.10)",
	       "stable ABI reason");
	static const char *const stables[] = { "torch-stable-abi29-cu128-x86_64-linux",
					       "torch-stable-abi211-cu128-x86_64-linux" };
	is_str(resolve_best(stables, 2, &t212, NULL, NULL), "torch-stable-abi211-cu128-x86_64-linux",
	       "newest stable ABI first");
	static const char *const tagless[] = { "torch210-cxx11-cu128-x86_64-linux", "torch210-cu128-x86_64-linux" };
	is_str(resolve_best(tagless, 2, &t210, NULL, NULL), "torch210-cu128-x86_64-linux", "tagless before cxx11");
	static const char *const over_torch[] = { "torch-stable-abi211-cu128-x86_64-linux",
						  "torch211-cxx11-cu128-x86_64-linux" };
	is_str(resolve_best(over_torch, 2, &t211, NULL, NULL), "torch-stable-abi211-cu128-x86_64-linux",
	       "stable ABI before torch arch");

	/* the example: torch 2.11 + CUDA 12.8 on x86_64-linux */
	static const char *const seeds[] = { "torch-cuda", "torch-cpu", "torch211-cxx11-cu126-x86_64-linux",
					     "torch211-cxx11-cu128-x86_64-linux", "torch211-cxx11-cu130-x86_64-linux",
					     "torch212-cxx11-cu128-x86_64-linux", "tvm-ffi01-cu128-x86_64-linux" };
	is_str(resolve_best(seeds, 7, &t211, reason, "torch211-cxx11-cu130-x86_64-linux"),
	       "torch211-cxx11-cu128-x86_64-linux", "torch 2.11 + CUDA 12.8 picks cu128 over torch-cuda");
	is_str(reason, "CUDA version (13.0) is not compatible with system CUDA version (12.8)", "CUDA reason");
	resolve_best(seeds, 7, &t211, reason, "torch212-cxx11-cu128-x86_64-linux");
	is_str(reason, "Torch version (2.12) does not match environment Torch version (2.11)", "torch reason");
	resolve_best(seeds, 7, &t211, reason, "torch-cpu");
	is_str(reason, "backend (cpu) does not match system backend (cuda) and is not universal", "noarch reason");
	resolve_best(seeds, 7, &t211, reason, "tvm-ffi01-cu128-x86_64-linux");
	is_str(reason, "tvm-ffi version (0.1) does not match environment tvm-ffi version (None)", "tvm-ffi reason");
	struct setup arm = { "aarch64", { { "cuda", "12.8" }, { "torch", "2.11" }, { "arch", "aarch64" } }, NULL };
	resolve_best(seeds, 7, &arm, reason, "torch211-cxx11-cu128-x86_64-linux");
	is_str(reason, "CPU (x86_64) does not match system CPU (aarch64)", "CPU reason");
	struct setup rocm71 = { "rocm", { { "rocm", "7.1" }, { "torch", "2.11" } }, NULL };
	static const char *const r[] = { "torch211-cxx11-rocm71-x86_64-linux", "torch211-cxx11-rocm72-x86_64-linux",
					 "torch-rocm" };
	is_str(resolve_best(r, 3, &rocm71, reason, "torch211-cxx11-rocm72-x86_64-linux"),
	       "torch211-cxx11-rocm71-x86_64-linux", "ROCm 7.1 takes rocm71 only");
	is_str(reason, "backend (rocm72) does not match selected backend (rocm71)", "ROCm reason");
	struct setup tvm = { "tvm", { { "cuda", "12.8" }, { "tvm_ffi", "0.1" } }, NULL };
	is_str(resolve_best(seeds, 7, &tvm, NULL, NULL), "tvm-ffi01-cu128-x86_64-linux", "tvm-ffi before torch-cuda");
}

static void test_env(void)
{
	struct variant_env env;
	const char *why;
	variant_env_init(&env);
	ok(variant_env_set(&env, "torch", "2.11.0+cu128", NULL) == 0 && env.torch_major == 2 && env.torch_minor == 11,
	   "torch 2.11.0+cu128 is 2.11");
	ok(variant_env_set(&env, "rocm", "7.1.25424-abc", NULL) == 0 && env.backend_major == 7 &&
	   env.backend_minor == 1, "rocm hip version keeps major.minor");
	ok(variant_env_set(&env, "torch", "two", &why) < 0, "bad torch version refused");
	ok(variant_env_set(&env, "backend", "cuda", &why) < 0, "backend=cuda needs a version");
	ok(variant_env_set(&env, "arch", "x86-64", &why) < 0, "arch with a dash refused");
	variant_env_init(&env);
	variant_env_set(&env, "os", "Darwin", NULL);
	variant_env_set(&env, "arch", "arm64", NULL);
	variant_env_set(&env, "torch", "2.11", NULL);
	variant_env_finish(&env);
	ok(strcmp(env.os, "darwin") == 0 && strcmp(env.cpu, "aarch64") == 0 && env.cxx11_abi == -1,
	   "darwin: lowercase os, arm64 = aarch64, no C++ ABI");
}

/* The worker names what a toolchain builds from its torch's facts; the
 * loader must parse the name back to the same parts. */
static void test_set_torch(void)
{
	struct variant_name v, back;
	char name[VARIANT_NAME_MAX + 1];
	const char *why = NULL;
	variant_name_set_torch(&v, 1, 13, 1, "cpu", -1, -1, "x86_64", "linux");
	variant_name_format(&v, name, sizeof(name));
	is_str(name, "torch113-cxx11-cpu-x86_64-linux", "Debian's torch 1.13 CPU");
	variant_name_set_torch(&v, 2, 12, 1, "cuda", 13, 0, "x86_64", "linux");
	variant_name_format(&v, name, sizeof(name));
	is_str(name, "torch212-cxx11-cu130-x86_64-linux", "torch 2.12 CUDA 13.0");
	ok(variant_name_parse(name, &back, &why) == 0 && back.backend_major == 13 && back.backend_minor == 0 &&
	   strcmp(back.backend, "cuda") == 0, "the CUDA name parses back to cuda 13.0");
	variant_name_set_torch(&v, 2, 13, 1, "rocm", 7, 1, "x86_64", "linux");
	variant_name_format(&v, name, sizeof(name));
	is_str(name, "torch213-cxx11-rocm71-x86_64-linux", "torch 2.13 ROCm 7.1");
	variant_name_set_torch(&v, 2, 11, 0, "cpu", 5, 5, "aarch64", "linux");
	variant_name_format(&v, name, sizeof(name));
	is_str(name, "torch211-cxx98-cpu-aarch64-linux", "a cpu backend ignores a version; cxx98 when not the C++11 ABI");
}

int main(void)
{
	test_set_torch();
	test_grammar();
	test_resolution();
	test_env();
	return done_testing();
}
