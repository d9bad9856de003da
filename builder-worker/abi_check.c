/* abi_check.c -- the ABI rules of kernel-builder's check-abi, read with
 * libelf from .dynsym and .gnu.version_r (so a stripped library is checked
 * too): undefined symbols must need at most the manylinux_2_28 versions,
 * Python symbols must be in the stable ABI as of 3.9, and DT_NEEDED may
 * name only torch, the CUDA/ROCm runtimes torch ships, and the manylinux
 * system libraries. A torch stable ABI build (check-abi --torch-stable-abi)
 * may not import C++ symbols of c10::, at:: or torch:: (torch::stable::
 * aside). The report text uses check-abi's wording. */
#include "builder-worker/build_internal.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANYLINUX "manylinux_2_28"
#define PYTHON_ABI "3.9"

extern const char embedded_stable_abi[];

/* manylinux_2_28 maxima (x86_64 and aarch64); other names of these
 * dependencies are allowed only when listed in extra. */
static const struct {
	const char *dep, *max, *extra[3];
} manylinux_policy[] = {
	{ "GLIBC", "2.28", { NULL } },
	{ "GLIBCXX", "3.4.24", { NULL } },
	{ "CXXABI", "1.3.11", { "FLOAT128", "TM_1", NULL } },
	{ "GCC", "7.0.0", { NULL } },
	{ "LIBATOMIC", "1.2", { NULL } },
	{ "ZLIB", "1.2.9", { NULL } },
};

/* DT_NEEDED a kernel may have (fnmatch patterns). */
static const char *const needed_allowed[] = {
	/* torch */
	"libtorch.so*", "libtorch_*.so*", "libc10.so*", "libc10_*.so*", "libshm.so*",
	/* CUDA libraries torch ships or loads */
	"libcuda.so*", "libcudart.so*", "libcublas.so*", "libcublasLt.so*", "libcudnn*.so*", "libcufft*.so*",
	"libcurand.so*", "libcusparse*.so*", "libcusolver*.so*", "libnvrtc*.so*", "libnvToolsExt.so*",
	"libnvJitLink.so*", "libnccl.so*", "libcupti.so*",
	/* ROCm libraries torch ships */
	"libamdhip64.so*", "libhiprtc.so*", "librocblas.so*", "libhipblas*.so*", "libMIOpen.so*", "librccl.so*",
	"libroctx64.so*", "libhsa-runtime64.so*", "libhipsparse.so*", "libhipfft.so*", "libhiprand.so*",
	/* manylinux system libraries */
	"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1", "libgcc_s.so.1",
	"libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
	NULL
};

/* "3.4.24" vs "3.4.9": numeric, part by part. */
static int version_cmp(const char *a, const char *b)
{
	while (*a || *b) {
		char *ea, *eb;
		long x = strtol(a, &ea, 10), y = strtol(b, &eb, 10);
		if (x != y)
			return x < y ? -1 : 1;
		a = *ea == '.' ? ea + 1 : ea;
		b = *eb == '.' ? eb + 1 : eb;
		if (ea == a && eb == b && !*a && !*b)
			break;
		if ((*a && (*a < '0' || *a > '9')) || (*b && (*b < '0' || *b > '9')))
			return strcmp(a, b);
	}
	return 0;
}

static int is_numeric_version(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if ((*s < '0' || *s > '9') && *s != '.')
			return 0;
	return 1;
}

/* The stable ABI table: added version of a name, or NULL. */
static const char *stable_abi_added(const char *name, char *buf, size_t size)
{
	size_t n = strlen(name);
	const char *p = embedded_stable_abi;
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (*p != '#' && len > n && p[n] == ' ' && strncmp(p, name, n) == 0) {
			snprintf(buf, size, "%.*s", (int)(len - n - 1), p + n + 1);
			return buf;
		}
		p += len + (eol ? 1 : 0);
	}
	return NULL;
}

static void add_violation(json_t *list, enum abi_violation_kind kind, const char *symbol, const char *version)
{
	static const char *const names[] = { "manylinux", "python-abi", "non-abi3", "needed", "torch-stable-abi" };
	json_array_append_new(list, json_pack("{s:s,s:s,s:o}", "kind", names[kind], "symbol", symbol, "version",
					      version ? json_string(version) : json_null()));
}

static int cmp_violation(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	return strcmp(json_string_value(json_object_get(x, "symbol")), json_string_value(json_object_get(y, "symbol")));
}

/* Sort a JSON array of violations by symbol (check-abi prints sets). */
static void sort_violations(json_t *list)
{
	size_t n = json_array_size(list);
	if (n < 2)
		return;
	json_t **items = xcalloc(n, sizeof(*items));
	for (size_t i = 0; i < n; i++)
		items[i] = json_incref(json_array_get(list, i));
	qsort(items, n, sizeof(*items), cmp_violation);
	json_array_clear(list);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, items[i]);
	free(items);
}

/* A mangled C++ name (_ZN..., or the typeinfo/vtable of one) in namespace
 * c10, at or torch but not torch::stable: outside the torch stable ABI. */
static int is_torch_cxx_symbol(const char *name)
{
	if (strncmp(name, "_Z", 2) != 0)
		return 0;
	const char *p = name + 2;
	if (p[0] == 'T' && (p[1] == 'I' || p[1] == 'V' || p[1] == 'S'))
		p += 2;
	if (*p++ != 'N')
		return 0;
	p += strspn(p, "rVKRO");
	if (!strncmp(p, "3c10", 4) || !strncmp(p, "2at", 3))
		return 1;
	return !strncmp(p, "5torch", 6) && strncmp(p + 6, "6stable", 7) != 0;
}

struct verneed_entry {
	unsigned index;
	char *version;	/* GLIBC_2.32 */
};

int abi_check_file(const char *path, const char *display, json_t **entry_out, struct strbuf *text)
{
	return abi_check_file_for(path, display, NULL, entry_out, text);
}

int abi_check_file_for(const char *path, const char *display, const char *torch_stable_abi, json_t **entry_out,
		       struct strbuf *text)
{
	*entry_out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return KHUB_EIO;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KHUB_EIO;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	int rc = KHUB_EIO;
	struct verneed_entry *vn = NULL;
	size_t nvn = 0;
	json_t *needed = json_array(), *violations = json_array();
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		goto cleanup;
	Elf_Scn *scn = NULL, *dynsym = NULL, *versym = NULL, *verneed = NULL, *dynamic = NULL;
	GElf_Shdr sh, dynsym_sh, verneed_sh, dynamic_sh;
	memset(&dynsym_sh, 0, sizeof(dynsym_sh));
	memset(&verneed_sh, 0, sizeof(verneed_sh));
	memset(&dynamic_sh, 0, sizeof(dynamic_sh));
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			goto cleanup;
		if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn, dynsym_sh = sh;
		else if (sh.sh_type == SHT_GNU_versym)
			versym = scn;
		else if (sh.sh_type == SHT_GNU_verneed)
			verneed = scn, verneed_sh = sh;
		else if (sh.sh_type == SHT_DYNAMIC)
			dynamic = scn, dynamic_sh = sh;
	}
	/* Version index -> name, from .gnu.version_r. */
	if (verneed) {
		Elf_Data *d = elf_getdata(verneed, NULL);
		size_t off = 0;
		for (size_t i = 0; d && i < verneed_sh.sh_info; i++) {
			GElf_Verneed need;
			if (!gelf_getverneed(d, (int)off, &need))
				break;
			size_t aoff = off + need.vn_aux;
			for (size_t j = 0; j < need.vn_cnt; j++) {
				GElf_Vernaux aux;
				if (!gelf_getvernaux(d, (int)aoff, &aux))
					break;
				const char *name = elf_strptr(elf, verneed_sh.sh_link, aux.vna_name);
				vn = xrealloc(vn, (nvn + 1) * sizeof(*vn));
				vn[nvn].index = aux.vna_other & 0x7fff;
				vn[nvn].version = xstrdup(name ? name : "");
				nvn++;
				if (!aux.vna_next)
					break;
				aoff += aux.vna_next;
			}
			if (!need.vn_next)
				break;
			off += need.vn_next;
		}
	}
	if (dynamic) {
		Elf_Data *d = elf_getdata(dynamic, NULL);
		size_t count = dynamic_sh.sh_entsize ? dynamic_sh.sh_size / dynamic_sh.sh_entsize : 0;
		for (size_t i = 0; d && i < count; i++) {
			GElf_Dyn dyn;
			if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag != DT_NEEDED)
				continue;
			const char *lib = elf_strptr(elf, dynamic_sh.sh_link, dyn.d_un.d_val);
			if (!lib)
				continue;
			json_array_append_new(needed, json_string(lib));
			int allowed = 0;
			for (size_t k = 0; needed_allowed[k] && !allowed; k++)
				allowed = fnmatch(needed_allowed[k], lib, 0) == 0;
			if (!allowed)
				add_violation(violations, ABI_NEEDED, lib, NULL);
		}
	}
	json_t *manylinux = json_array(), *python = json_array(), *non_abi3 = json_array(), *torch_cxx = json_array();
	if (dynsym) {
		Elf_Data *syms = elf_getdata(dynsym, NULL);
		Elf_Data *vers = versym ? elf_getdata(versym, NULL) : NULL;
		size_t count = dynsym_sh.sh_entsize ? dynsym_sh.sh_size / dynsym_sh.sh_entsize : 0;
		for (size_t i = 1; syms && i < count; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(syms, (int)i, &sym) || sym.st_shndx != SHN_UNDEF)
				continue;
			const char *name = elf_strptr(elf, dynsym_sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			GElf_Versym v = 0;
			const char *version = NULL;
			if (vers && gelf_getversym(vers, (int)i, &v)) {
				for (size_t k = 0; k < nvn; k++)
					if (vn[k].index == (unsigned)(v & 0x7fff))
						version = vn[k].version;
			}
			if (version) {
				const char *us = strchr(version, '_');
				size_t deplen = us ? (size_t)(us - version) : 0;
				for (size_t p = 0; us && p < sizeof(manylinux_policy) / sizeof(*manylinux_policy); p++) {
					if (strlen(manylinux_policy[p].dep) != deplen ||
					    strncmp(manylinux_policy[p].dep, version, deplen) != 0)
						continue;
					const char *ver = us + 1;
					int ok = is_numeric_version(ver) && version_cmp(ver, manylinux_policy[p].max) <= 0;
					for (size_t e = 0; !ok && manylinux_policy[p].extra[e]; e++)
						ok = strcmp(manylinux_policy[p].extra[e], ver) == 0;
					if (!ok)
						add_violation(manylinux, ABI_MANYLINUX, name, version);
				}
			}
			if (torch_stable_abi && is_torch_cxx_symbol(name))
				add_violation(torch_cxx, ABI_TORCH_STABLE, name, NULL);
			if (!strncmp(name, "Py", 2) || !strncmp(name, "_Py", 3)) {
				char added[16];
				if (!stable_abi_added(name, added, sizeof(added)))
					add_violation(non_abi3, ABI_NON_ABI3, name, NULL);
				else if (version_cmp(added, PYTHON_ABI) > 0)
					add_violation(python, ABI_PYTHON, name, added);
			}
		}
	}
	sort_violations(manylinux);
	sort_violations(python);
	sort_violations(non_abi3);
	sort_violations(torch_cxx);
	strbuf_addf(text, "🐍 Checking for compatibility with %s and Python ABI version %s: %s\n", MANYLINUX, PYTHON_ABI,
		    display);
	size_t i;
	json_t *v;
	if (json_array_size(manylinux)) {
		strbuf_addf(text, "\n⛔ Symbols incompatible with `%s` found:\n\n", MANYLINUX);
		json_array_foreach(manylinux, i, v) {
			const char *full = json_string_value(json_object_get(v, "version"));
			const char *us = strchr(full, '_');
			strbuf_addf(text, "%s_%.*s: %s\n", json_string_value(json_object_get(v, "symbol")),
				    (int)(us - full), full, us + 1);
		}
	}
	if (json_array_size(python)) {
		strbuf_addf(text, "\n⛔ Symbols >= Python ABI %s found:\n\n", PYTHON_ABI);
		json_array_foreach(python, i, v)
			strbuf_addf(text, "%s: %s\n", json_string_value(json_object_get(v, "symbol")),
				    json_string_value(json_object_get(v, "version")));
	}
	if (json_array_size(non_abi3)) {
		strbuf_adds(text, "\n⛔ Non-ABI3 symbols found:\n\n");
		json_array_foreach(non_abi3, i, v)
			strbuf_addf(text, "%s\n", json_string_value(json_object_get(v, "symbol")));
	}
	if (json_array_size(torch_cxx)) {
		strbuf_addf(text, "\n⛔ Symbols outside the Torch stable ABI %s found (c10::, at::, torch::):\n\n",
			    torch_stable_abi);
		json_array_foreach(torch_cxx, i, v)
			strbuf_addf(text, "%s\n", json_string_value(json_object_get(v, "symbol")));
	}
	if (json_array_size(violations)) {
		strbuf_adds(text, "\n⛔ Dynamic dependencies outside torch, its CUDA/ROCm runtime and the manylinux libraries found:\n\n");
		json_array_foreach(violations, i, v)
			strbuf_addf(text, "%s\n", json_string_value(json_object_get(v, "symbol")));
	}
	json_t *all = json_array();
	json_array_extend(all, manylinux);
	json_array_extend(all, python);
	json_array_extend(all, non_abi3);
	json_array_extend(all, torch_cxx);
	json_array_extend(all, violations);
	if (json_array_size(all) == 0)
		strbuf_adds(text, "✅ No compatibility issues found\n");
	json_decref(manylinux);
	json_decref(python);
	json_decref(non_abi3);
	json_decref(torch_cxx);
	*entry_out = json_pack("{s:s,s:O,s:o}", "path", display, "needed", needed, "violations", all);
	rc = 0;
cleanup:
	for (size_t k = 0; k < nvn; k++)
		free(vn[k].version);
	free(vn);
	json_decref(needed);
	json_decref(violations);
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}

static int ends_with_so(const char *name)
{
	size_t n = strlen(name);
	return (n > 3 && !strcmp(name + n - 3, ".so")) || strstr(name, ".so.") != NULL;
}

struct check_walk {
	json_t *files;
	struct strbuf *text;
	const char *torch_stable_abi;
};

static int check_visit(const char *rel, const char *path, const char *name, void *arg)
{
	struct check_walk *w = arg;
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;
	if (S_ISDIR(st.st_mode))
		return DIR_WALK_ENTER;
	if (!S_ISREG(st.st_mode) || !ends_with_so(name))
		return 0;
	json_t *entry;
	int rc = abi_check_file_for(path, rel, w->torch_stable_abi, &entry, w->text);
	if (rc == 0)
		json_array_append_new(w->files, entry);
	return rc;
}

int abi_check_dir(const char *dir, json_t **report)
{
	return abi_check_dir_for(dir, NULL, report);
}

int abi_check_dir_for(const char *dir, const char *torch_stable_abi, json_t **report)
{
	*report = NULL;
	json_t *files = json_array();
	struct strbuf text = STRBUF_INIT;
	strbuf_adds(&text, "");
	struct check_walk w = { files, &text, torch_stable_abi };
	int rc = dir_walk(dir, check_visit, &w);
	if (rc < 0) {
		json_decref(files);
		strbuf_release(&text);
		return rc;
	}
	int ok = 1;
	size_t i;
	json_t *f;
	json_array_foreach(files, i, f)
		if (json_array_size(json_object_get(f, "violations")))
			ok = 0;
	if (!ok)
		strbuf_adds(&text, "\nABI compatibility issues found\n");
	*report = json_pack("{s:b,s:s,s:s,s:s?,s:s,s:o}", "ok", ok, "manylinux", MANYLINUX, "python_abi", PYTHON_ABI,
			    "torch_stable_abi", torch_stable_abi, "text", text.buf, "files", files);
	strbuf_release(&text);
	return 0;
}
