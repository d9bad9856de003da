/* variant.c -- kernel build variant names (build/<variant>/) and the
 * loader's choice among them, written to agree with huggingface/kernels
 * (kernels/src/kernels/variants.py: parse_variant, _check_variants,
 * _sort_variants; backends.py: parse_backend). Backend rules come from the
 * table of kernel/backend.c. */
#include "kernel/kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Numbers in names are at most this many digits (khub's limit: the loader
 * takes any length, no real name comes near it). */
#define NUMBER_DIGITS_MAX 9

static int set_why(const char **why, const char *msg)
{
	if (why)
		*why = msg;
	return KHUB_EINVAL;
}

static int all_digits(const char *s, size_t n)
{
	if (n == 0 || n > NUMBER_DIGITS_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

static long digits_value(const char *s, size_t n)
{
	long v = 0;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

/* PREFIX and digits, split into a major and a minor version. MINOR_LAST:
 * PREFIX(\d+)(\d), the last digit is the minor version (cu128 = 12.8,
 * cu130 = 13.0, xpu20253 = 2025.3). MAJOR_FIRST: PREFIX(\d)(\d+), one digit
 * of major version (torch211 = 2.11, torch-stable-abi29 = 2.9; tvm-ffi is
 * the same split). */
enum version_split { MINOR_LAST, MAJOR_FIRST };

static int parse_version_digits(const char *s, const char *prefix, enum version_split split, long *major,
				long *minor)
{
	size_t plen = strlen(prefix);
	if (strncmp(s, prefix, plen) != 0)
		return -1;
	const char *d = s + plen;
	size_t n = strlen(d);
	if (n < 2 || !all_digits(d, n) || (split == MAJOR_FIRST && n > NUMBER_DIGITS_MAX + 1))
		return -1;
	size_t nmajor = split == MINOR_LAST ? n - 1 : 1;
	*major = digits_value(d, nmajor);
	*minor = digits_value(d + nmajor, n - nmajor);
	return 0;
}

static int copy_part(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	if (n >= size)
		return -1;
	memcpy(dst, src, n + 1);
	return 0;
}

/* backends.py parse_backend: the unversioned backends by name (cpu,
 * metal, neuron, tpu), the others by prefix and version (cu128, rocm71,
 * xpu20253, cann81). */
static int parse_backend(const char *s, struct variant_name *v, const char **why)
{
	const struct kernel_backend *b;
	v->backend_major = v->backend_minor = -1;
	for (b = kernel_backends; b->name; b++) {
		if (!b->variant_prefix && strcmp(s, b->name) == 0) {
			snprintf(v->backend, sizeof(v->backend), "%s", b->name);
			kernel_backend_tag(b, -1, -1, v->backend_tag, sizeof(v->backend_tag));
			return 0;
		}
	}
	for (b = kernel_backends; b->name; b++) {
		if (!b->variant_prefix || strncmp(s, b->variant_prefix, strlen(b->variant_prefix)) != 0)
			continue;
		if (parse_version_digits(s, b->variant_prefix, MINOR_LAST, &v->backend_major, &v->backend_minor) < 0)
			return set_why(why, "invalid backend version (want e.g. cu128, rocm71, xpu20253, cann81)");
		snprintf(v->backend, sizeof(v->backend), "%s", b->name);
		kernel_backend_tag(b, v->backend_major, v->backend_minor, v->backend_tag, sizeof(v->backend_tag));
		return 0;
	}
	return set_why(why, "unknown backend (want cpu, metal, neuron, tpu, cuNNN, rocmNN, xpuNNNNN or cannNN)");
}

/* variants.py Arch.parse: exactly backend-platform-os. */
static int parse_arch(char **parts, size_t n, struct variant_name *v, const char **why)
{
	if (n != 3)
		return set_why(why, "an arch variant ends in exactly BACKEND-CPU-OS");
	if (parse_backend(parts[0], v, why) < 0)
		return KHUB_EINVAL;
	if (copy_part(v->arch, sizeof(v->arch), parts[1]) < 0 || copy_part(v->os, sizeof(v->os), parts[2]) < 0)
		return set_why(why, "CPU or OS part too long");
	return 0;
}

const char *variant_framework_name(enum variant_framework fw)
{
	switch (fw) {
	case VARIANT_TORCH: return "torch";
	case VARIANT_TORCH_STABLE_ABI: return "torch-stable-abi";
	case VARIANT_TVM_FFI: return "tvm-ffi";
	case VARIANT_TORCH_NOARCH: return "torch-noarch";
	}
	return "?";
}

const char *variant_implied_backend_type(const struct variant_name *v)
{
	if (v->framework != VARIANT_TORCH_NOARCH)
		return v->backend;
	if (strcmp(v->backend, VARIANT_NOARCH_UNIVERSAL) == 0)
		return NULL;
	const struct kernel_backend *b = kernel_backend_by_noarch(v->backend);
	return b ? b->name : v->backend;
}

int variant_name_parse(const char *s, struct variant_name *out, const char **why)
{
	char copy[VARIANT_NAME_MAX + 1];
	char *parts[VARIANT_NAME_MAX];
	size_t n = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->framework_major = out->framework_minor = -1;
	out->backend_major = out->backend_minor = -1;
	out->cxx11_abi = -1;
	if (copy_part(copy, sizeof(copy), s) < 0)
		return set_why(why, "name too long");
	if (strchr(s, '/'))
		return set_why(why, "a variant is one directory name");
	for (char *p = copy;; ) {
		parts[n++] = p;
		char *dash = strchr(p, '-');
		if (!dash)
			break;
		*dash = '\0';
		p = dash + 1;
	}

	if (strncmp(s, "torch-stable-abi", 16) == 0) {
		out->framework = VARIANT_TORCH_STABLE_ABI;
		if (n < 3 || strncmp(parts[2], "abi", 3) != 0 ||
		    parse_version_digits(parts[2], "abi", MAJOR_FIRST, &out->framework_major, &out->framework_minor) < 0)
			return set_why(why, "invalid Torch stable ABI version (want e.g. torch-stable-abi211)");
		return parse_arch(parts + 3, n - 3, out, why);
	}
	if (strcmp(parts[0], "torch") == 0) {
		/* noarch: everything after "torch-" is the backend name */
		out->framework = VARIANT_TORCH_NOARCH;
		const char *rest = strchr(s, '-') ? strchr(s, '-') + 1 : "";
		if (copy_part(out->backend, sizeof(out->backend), rest) < 0 ||
		    copy_part(out->backend_tag, sizeof(out->backend_tag), rest) < 0)
			return set_why(why, "backend name too long");
		return 0;
	}
	if (strncmp(parts[0], "torch", 5) == 0) {
		out->framework = VARIANT_TORCH;
		if (parse_version_digits(parts[0], "torch", MAJOR_FIRST, &out->framework_major, &out->framework_minor) < 0)
			return set_why(why, "invalid Torch version (want e.g. torch211)");
		size_t first = 1;
		if (n >= 2 && (strcmp(parts[1], "cxx11") == 0 || strcmp(parts[1], "cxx98") == 0)) {
			out->cxx11_abi = strcmp(parts[1], "cxx11") == 0;
			first = 2;
		}
		return parse_arch(parts + first, n - first, out, why);
	}
	if (strcmp(parts[0], "tvm") == 0 && n >= 2 && strncmp(parts[1], "ffi", 3) == 0) {
		out->framework = VARIANT_TVM_FFI;
		rc = parse_version_digits(parts[1], "ffi", MAJOR_FIRST, &out->framework_major, &out->framework_minor);
		if (rc < 0)
			return set_why(why, "invalid tvm-ffi version (want e.g. tvm-ffi01)");
		return parse_arch(parts + 2, n - 2, out, why);
	}
	return set_why(why, "unknown framework (want torchNN, torch-stable-abiNN, tvm-ffiNN or torch-BACKEND)");
}

void variant_name_set_torch(struct variant_name *v, long torch_major, long torch_minor, int cxx11,
			    const char *backend, long backend_major, long backend_minor, const char *arch,
			    const char *os)
{
	memset(v, 0, sizeof(*v));
	v->framework = VARIANT_TORCH;
	v->framework_major = torch_major;
	v->framework_minor = torch_minor;
	v->cxx11_abi = cxx11;
	snprintf(v->backend, sizeof(v->backend), "%s", backend);
	const struct kernel_backend *b = kernel_backend_find(backend);
	v->backend_major = b && b->variant_prefix ? backend_major : -1;
	v->backend_minor = b && b->variant_prefix ? backend_minor : -1;
	if (b)
		kernel_backend_tag(b, v->backend_major, v->backend_minor, v->backend_tag, sizeof(v->backend_tag));
	else
		snprintf(v->backend_tag, sizeof(v->backend_tag), "%s", backend);
	snprintf(v->arch, sizeof(v->arch), "%s", arch);
	snprintf(v->os, sizeof(v->os), "%s", os);
}

void variant_name_format(const struct variant_name *v, char *out, size_t size)
{
	switch (v->framework) {
	case VARIANT_TORCH_NOARCH:
		snprintf(out, size, "torch-%s", v->backend);
		return;
	case VARIANT_TORCH:
		snprintf(out, size, "torch%ld%ld%s-%s-%s-%s", v->framework_major, v->framework_minor,
			 v->cxx11_abi < 0 ? "" : v->cxx11_abi ? "-cxx11" : "-cxx98", v->backend_tag, v->arch, v->os);
		return;
	case VARIANT_TORCH_STABLE_ABI:
		snprintf(out, size, "torch-stable-abi%ld%ld-%s-%s-%s", v->framework_major, v->framework_minor,
			 v->backend_tag, v->arch, v->os);
		return;
	case VARIANT_TVM_FFI:
		snprintf(out, size, "tvm-ffi%ld%ld-%s-%s-%s", v->framework_major, v->framework_minor, v->backend_tag,
			 v->arch, v->os);
		return;
	}
	snprintf(out, size, "?");
}

/* ---- the loader's choice ------------------------------------------------ */

static const char *py_bool(int b)
{
	return b < 0 ? "None" : b ? "True" : "False";
}

static void fmt_version(char *out, size_t size, long major, long minor)
{
	if (major < 0)
		snprintf(out, size, "None");
	else
		snprintf(out, size, "%ld.%ld", major, minor);
}

/* The backend's variant_str as the loader prints it (cu128, rocm71, cpu). */
void variant_env_backend_tag(const struct variant_env *env, char *out, size_t size)
{
	const struct kernel_backend *b = kernel_backend_find(env->backend);
	if (b)
		kernel_backend_tag(b, env->backend_major, env->backend_minor, out, size);
	else
		snprintf(out, size, "%s", env->backend);
}

static int version_cmp(long amaj, long amin, long bmaj, long bmin)
{
	if (amaj != bmaj)
		return amaj < bmaj ? -1 : 1;
	return amin < bmin ? -1 : amin > bmin;
}

/* _check_variants for one variant: 1 accepted, 0 rejected (reason set). */
static int check_variant(const struct variant_name *v, const struct variant_env *env, char *reason, size_t size)
{
	char a[48], b[48];
	const struct kernel_backend *system = kernel_backend_find(env->backend);
	if (v->framework == VARIANT_TORCH_NOARCH) {
		const char *sys = system ? system->noarch : env->backend;
		if (strcmp(v->backend, sys) != 0 && strcmp(v->backend, VARIANT_NOARCH_UNIVERSAL) != 0) {
			snprintf(reason, size, "backend (%s) does not match system backend (%s) and is not universal",
				 v->backend, sys);
			return 0;
		}
		return 1;
	}
	if (env->free_threaded) {
		snprintf(reason, size, "arch kernel not supported on free-threaded Python <3.15");
		return 0;
	}
	if (strcmp(v->arch, env->cpu) != 0) {
		snprintf(reason, size, "CPU (%s) does not match system CPU (%s)", v->arch, env->cpu);
		return 0;
	}
	if (strcmp(v->os, env->os) != 0) {
		snprintf(reason, size, "OS (%s) does not match system OS (%s)", v->os, env->os);
		return 0;
	}
	fmt_version(a, sizeof(a), v->framework_major, v->framework_minor);
	if (v->framework == VARIANT_TORCH) {
		fmt_version(b, sizeof(b), env->torch_major, env->torch_minor);
		if (env->torch_major < 0 ||
		    version_cmp(v->framework_major, v->framework_minor, env->torch_major, env->torch_minor) != 0) {
			snprintf(reason, size, "Torch version (%s) does not match environment Torch version (%s)", a, b);
			return 0;
		}
		if (v->cxx11_abi >= 0 && v->cxx11_abi != env->cxx11_abi) {
			snprintf(reason, size, "Torch CXX11 ABI (%s) does not match environment Torch CXX11 ABI (%s)",
				 py_bool(v->cxx11_abi), py_bool(env->cxx11_abi));
			return 0;
		}
	} else if (v->framework == VARIANT_TORCH_STABLE_ABI) {
		fmt_version(b, sizeof(b), env->torch_major, env->torch_minor);
		if (env->torch_major < 0 ||
		    version_cmp(v->framework_major, v->framework_minor, env->torch_major, env->torch_minor) > 0) {
			snprintf(reason, size, "Torch stable ABI version (%s) is too new for environment Torch version (%s)",
				 a, b);
			return 0;
		}
	} else if (v->framework == VARIANT_TVM_FFI) {
		fmt_version(b, sizeof(b), env->tvm_ffi_major, env->tvm_ffi_minor);
		if (env->tvm_ffi_major < 0 ||
		    version_cmp(v->framework_major, v->framework_minor, env->tvm_ffi_major, env->tvm_ffi_minor) != 0) {
			snprintf(reason, size, "tvm-ffi version (%s) does not match environment tvm-ffi version (%s)", a, b);
			return 0;
		}
	}
	/* A system CUDA x.y takes the variants of CUDA x.z with z <= y; any
	 * other backend must match exactly, version included. */
	if (system && system->minor_compatible && strcmp(v->backend, system->name) == 0) {
		if (v->backend_major != env->backend_major || v->backend_minor > env->backend_minor) {
			fmt_version(a, sizeof(a), v->backend_major, v->backend_minor);
			snprintf(reason, size, "%s version (%s) is not compatible with system %s version (%s)",
				 system->title, a, system->title, env->backend_version_text);
			return 0;
		}
		return 1;
	}
	variant_env_backend_tag(env, b, sizeof(b));
	if (strcmp(v->backend_tag, b) != 0) {
		snprintf(reason, size, "backend (%s) does not match selected backend (%s)", v->backend_tag, b);
		return 0;
	}
	const struct kernel_backend *own = kernel_backend_find(v->backend);
	if (own && own->macos_min_major > 0 &&
	    (env->macos_major < 0 || version_cmp(env->macos_major, env->macos_minor, own->macos_min_major, 0) < 0)) {
		snprintf(reason, size, "%s kernels require macOS %d.0 or later, system macOS version is %s", own->title,
			 own->macos_min_major, env->macos_major < 0 ? "None" : env->macos_text);
		return 0;
	}
	return 1;
}

/* _sort_variants' key: (rejected, framework order, ABI order x2, backend
 * order); lower sorts first. */
static void sort_key(const struct variant_name *v, int accepted, long key[5])
{
	key[0] = accepted ? 0 : 1;
	if (v->framework == VARIANT_TORCH_NOARCH) {
		key[1] = 2, key[2] = 0, key[3] = 0;
		key[4] = strcmp(v->backend, VARIANT_NOARCH_UNIVERSAL) == 0;
		return;
	}
	if (v->framework == VARIANT_TORCH_STABLE_ABI)
		key[1] = 0, key[2] = -v->framework_major, key[3] = -v->framework_minor;
	else if (v->framework == VARIANT_TORCH)
		key[1] = 1, key[2] = 0, key[3] = v->cxx11_abi >= 0;	/* tagless first */
	else
		key[1] = 2, key[2] = 0, key[3] = 0;
	const struct kernel_backend *b = kernel_backend_find(v->backend);
	key[4] = b && b->variant_prefix ? -v->backend_minor : 0;
}

struct sort_item {
	const struct variant_name *v;
	const char *name;
	long key[5];
};

static int compare_items(const void *pa, const void *pb)
{
	const struct sort_item *a = pa, *b = pb;
	for (int i = 0; i < 5; i++)
		if (a->key[i] != b->key[i])
			return a->key[i] < b->key[i] ? -1 : 1;
	/* The loader keeps set order among equals; khub orders them by name. */
	return strcmp(a->name, b->name);
}

void variant_resolve(const struct variant_name *variants, const char *const *names, size_t n,
		     const struct variant_env *env, struct variant_decision *out)
{
	struct sort_item *items = xcalloc(n ? n : 1, sizeof(*items));
	char (*reasons)[VARIANT_REASON_MAX] = xcalloc(n ? n : 1, VARIANT_REASON_MAX);
	int *accepted = xcalloc(n ? n : 1, sizeof(int));
	for (size_t i = 0; i < n; i++) {
		accepted[i] = check_variant(&variants[i], env, reasons[i], VARIANT_REASON_MAX);
		items[i].v = &variants[i];
		items[i].name = names[i];
		sort_key(&variants[i], accepted[i], items[i].key);
	}
	qsort(items, n, sizeof(*items), compare_items);
	for (size_t i = 0; i < n; i++) {
		size_t k = (size_t)(items[i].v - variants);
		out[i].index = k;
		out[i].accepted = accepted[k];
		snprintf(out[i].reason, sizeof(out[i].reason), "%s", accepted[k] ? "" : reasons[k]);
	}
	free(accepted);
	free(reasons);
	free(items);
}

/* "2.11", "2.11.0", "2.11.0+cu128", "12.8": major.minor, the rest ignored
 * (the loader strips patch and local parts). */
static int parse_dotted(const char *s, long *major, long *minor, int need_minor)
{
	const char *p = s;
	size_t n = strspn(p, "0123456789");
	if (!all_digits(p, n))
		return -1;
	*major = digits_value(p, n);
	*minor = 0;
	p += n;
	if (*p != '.')
		return need_minor || (*p && *p != '+') ? -1 : 0;
	p++;
	n = strspn(p, "0123456789");
	if (!all_digits(p, n))
		return -1;
	*minor = digits_value(p, n);
	p += n;
	while (*p == '.' && all_digits(p + 1, strspn(p + 1, "0123456789")))
		p += 1 + strspn(p + 1, "0123456789");
	if (*p && *p != '+' && *p != '-')
		return -1;
	return 0;
}

void variant_env_init(struct variant_env *env)
{
	memset(env, 0, sizeof(*env));
	snprintf(env->backend, sizeof(env->backend), "cpu");
	env->backend_major = env->backend_minor = -1;
	snprintf(env->cpu, sizeof(env->cpu), "x86_64");
	snprintf(env->os, sizeof(env->os), "linux");
	env->torch_major = env->torch_minor = -1;
	env->cxx11_abi = 1;
	env->tvm_ffi_major = env->tvm_ffi_minor = -1;
	env->macos_major = env->macos_minor = -1;
}

int variant_env_set(struct variant_env *env, const char *key, const char *value, const char **why)
{
	long major, minor;
	if (strcmp(key, "torch") == 0 || strcmp(key, "tvm_ffi") == 0) {
		if (parse_dotted(value, &major, &minor, 1) < 0)
			return set_why(why, "a version is MAJOR.MINOR, e.g. 2.11");
		if (key[0] == 't' && key[1] == 'o')
			env->torch_major = major, env->torch_minor = minor;
		else
			env->tvm_ffi_major = major, env->tvm_ffi_minor = minor;
		return 0;
	}
	const struct kernel_backend *b = kernel_backend_find(key);
	if (b && b->variant_prefix) {
		/* rocm: torch.version.hip "7.1.25424-..." keeps major.minor */
		if (parse_dotted(value, &major, &minor, 1) < 0)
			return set_why(why, "a backend version is MAJOR.MINOR, e.g. 12.8, 7.1, 2025.3");
		snprintf(env->backend, sizeof(env->backend), "%s", key);
		env->backend_major = major, env->backend_minor = minor;
		/* The loader prints the CUDA version as torch.version.cuda has it. */
		size_t n = strcspn(value, "+-");
		snprintf(env->backend_version_text, sizeof(env->backend_version_text), "%.*s",
			 (int)(n < sizeof(env->backend_version_text) - 1 ? n : sizeof(env->backend_version_text) - 1),
			 value);
		return 0;
	}
	if (strcmp(key, "backend") == 0) {
		b = kernel_backend_find(value);
		if (b && !b->variant_prefix) {
			snprintf(env->backend, sizeof(env->backend), "%s", value);
			env->backend_major = env->backend_minor = -1;
			env->backend_version_text[0] = '\0';
			return 0;
		}
		return set_why(why, "backend= is cpu, metal, neuron or tpu (give cuda=, rocm=, xpu= or cann= with "
				    "a version for the others)");
	}
	if (strcmp(key, "arch") == 0 || strcmp(key, "os") == 0) {
		char *dst = key[0] == 'a' ? env->cpu : env->os;
		size_t size = key[0] == 'a' ? sizeof(env->cpu) : sizeof(env->os);
		if (!value[0] || copy_part(dst, size, value) < 0 || strchr(value, '-'))
			return set_why(why, "arch= and os= are one word each, e.g. arch=x86_64&os=linux");
		if (key[0] == 'o')
			for (char *p = dst; *p; p++)
				if (*p >= 'A' && *p <= 'Z')
					*p = (char)(*p - 'A' + 'a');	/* platform.system().lower() */
		return 0;
	}
	if (strcmp(key, "cxx11") == 0) {
		if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
			env->cxx11_abi = 1;
		else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
			env->cxx11_abi = 0;
		else
			return set_why(why, "cxx11= is true or false");
		return 0;
	}
	if (strcmp(key, "macos") == 0) {
		if (parse_dotted(value, &major, &minor, 0) < 0)
			return set_why(why, "macos= is a macOS version, e.g. 26.0");
		env->macos_major = major, env->macos_minor = minor;
		snprintf(env->macos_text, sizeof(env->macos_text), "%.*s", (int)sizeof(env->macos_text) - 1, value);
		return 0;
	}
	if (strcmp(key, "free_threaded") == 0) {
		env->free_threaded = strcmp(value, "true") == 0 || strcmp(value, "1") == 0;
		return 0;
	}
	return set_why(why, "unknown environment key");
}

void variant_env_finish(struct variant_env *env)
{
	/* resolve_variants: arm64 is aarch64 on macOS, AMD64 is x86_64 on
	 * Windows; torch's C++ ABI flag only counts on Linux. */
	if (strcmp(env->os, "darwin") == 0 && strcmp(env->cpu, "arm64") == 0)
		snprintf(env->cpu, sizeof(env->cpu), "aarch64");
	if (strcmp(env->os, "windows") == 0 && strcmp(env->cpu, "AMD64") == 0)
		snprintf(env->cpu, sizeof(env->cpu), "x86_64");
	if (strcmp(env->os, "linux") != 0 || env->torch_major < 0)
		env->cxx11_abi = -1;
	if (env->backend_major >= 0 && !env->backend_version_text[0])
		snprintf(env->backend_version_text, sizeof(env->backend_version_text), "%ld.%ld", env->backend_major,
			 env->backend_minor);
}
