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

#define PYTHON_ABI "3.9"

extern const char embedded_stable_abi[];

/* The manylinux targets (PEP 600, auditwheel's policies for x86_64 and
 * aarch64): the newest version of each system library's symbols a target
 * allows; other names of these dependencies only when listed in extra. */
#define ABI_DEPS 6
struct abi_manylinux {
	const char *name;	/* "manylinux_2_28" */
	const char *glibc;	/* "2.28": the GLIBC maximum */
	struct {
		const char *dep, *max, *extra[3];
	} policy[ABI_DEPS];
};

#define CXXABI_EXTRA { "FLOAT128", "TM_1", NULL }
#define MANYLINUX_ROW(glibc_, tag, glibcxx, cxxabi, gcc)                                                  \
	{ "manylinux_" tag, glibc_,                                                                       \
	  { { "GLIBC", glibc_, { NULL } }, { "GLIBCXX", glibcxx, { NULL } }, { "CXXABI", cxxabi, CXXABI_EXTRA }, \
	    { "GCC", gcc, { NULL } }, { "LIBATOMIC", "1.2", { NULL } }, { "ZLIB", "1.2.9", { NULL } } } }

static const struct abi_manylinux manylinux_targets[] = {
	MANYLINUX_ROW("2.17", "2_17", "3.4.19", "1.3.7", "4.8.0"),
	MANYLINUX_ROW("2.24", "2_24", "3.4.22", "1.3.10", "6.0.0"),
	MANYLINUX_ROW("2.27", "2_27", "3.4.24", "1.3.11", "7.0.0"),
	MANYLINUX_ROW("2.28", "2_28", "3.4.24", "1.3.11", "7.0.0"),
	MANYLINUX_ROW("2.31", "2_31", "3.4.28", "1.3.12", "7.0.0"),
	MANYLINUX_ROW("2.34", "2_34", "3.4.29", "1.3.13", "7.0.0"),
	MANYLINUX_ROW("2.35", "2_35", "3.4.30", "1.3.13", "12.0.0"),
};

#define MANYLINUX_DEFAULT (&manylinux_targets[3])	/* manylinux_2_28 */

const struct abi_manylinux *abi_manylinux_find(const char *name)
{
	if (!name || !*name)
		return MANYLINUX_DEFAULT;
	if (!strncmp(name, "manylinux_", 10))
		name += 10;
	for (size_t i = 0; i < sizeof(manylinux_targets) / sizeof(*manylinux_targets); i++)
		if (!strcmp(manylinux_targets[i].name + 10, name))
			return &manylinux_targets[i];
	return NULL;
}

const char *abi_manylinux_name(const struct abi_manylinux *t)
{
	return t->name;
}

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

static int check_file(const struct abi_manylinux *t, const char *path, const char *display,
		      const char *torch_stable_abi, json_t **entry_out, struct strbuf *text);

int abi_check_file_for(const char *path, const char *display, const char *torch_stable_abi, json_t **entry_out,
		       struct strbuf *text)
{
	return check_file(MANYLINUX_DEFAULT, path, display, torch_stable_abi, entry_out, text);
}

/* The dynamic sections of one ELF file, and its version needs by index. */
struct elf_view {
	Elf *elf;
	Elf_Scn *dynsym, *versym, *verneed, *dynamic;
	GElf_Shdr dynsym_sh, verneed_sh, dynamic_sh;
	struct verneed_entry *vn;	/* owned */
	size_t nvn;
};

/* What one file breaks, by rule (JSON arrays of violations, owned). */
struct abi_findings {
	json_t *needed;		/* every DT_NEEDED, allowed or not */
	json_t *needed_bad, *manylinux, *python, *non_abi3, *torch_cxx;
	json_t *glibc;		/* "symbol@GLIBC_2.32" of every symbol glibc versions */
};

/* The sections elf_view reads: 0, or -1 when a header cannot be read. */
static int elf_find_sections(struct elf_view *v)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(v->elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			return -1;
		if (sh.sh_type == SHT_DYNSYM)
			v->dynsym = scn, v->dynsym_sh = sh;
		else if (sh.sh_type == SHT_GNU_versym)
			v->versym = scn;
		else if (sh.sh_type == SHT_GNU_verneed)
			v->verneed = scn, v->verneed_sh = sh;
		else if (sh.sh_type == SHT_DYNAMIC)
			v->dynamic = scn, v->dynamic_sh = sh;
	}
	return 0;
}

/* Version index -> name, from .gnu.version_r. */
static void elf_read_verneed(struct elf_view *v)
{
	Elf_Data *d = v->verneed ? elf_getdata(v->verneed, NULL) : NULL;
	size_t off = 0;
	for (size_t i = 0; d && i < v->verneed_sh.sh_info; i++) {
		GElf_Verneed need;
		if (!gelf_getverneed(d, (int)off, &need))
			break;
		size_t aoff = off + need.vn_aux;
		for (size_t j = 0; j < need.vn_cnt; j++) {
			GElf_Vernaux aux;
			if (!gelf_getvernaux(d, (int)aoff, &aux))
				break;
			const char *name = elf_strptr(v->elf, v->verneed_sh.sh_link, aux.vna_name);
			v->vn = xrealloc(v->vn, (v->nvn + 1) * sizeof(*v->vn));
			v->vn[v->nvn].index = aux.vna_other & 0x7fff;
			v->vn[v->nvn].version = xstrdup(name ? name : "");
			v->nvn++;
			if (!aux.vna_next)
				break;
			aoff += aux.vna_next;
		}
		if (!need.vn_next)
			break;
		off += need.vn_next;
	}
}

/* DT_NEEDED entries against the allowlist. */
static void check_needed(const struct elf_view *v, struct abi_findings *f)
{
	Elf_Data *d = v->dynamic ? elf_getdata(v->dynamic, NULL) : NULL;
	size_t count = v->dynamic_sh.sh_entsize ? v->dynamic_sh.sh_size / v->dynamic_sh.sh_entsize : 0;
	for (size_t i = 0; d && i < count; i++) {
		GElf_Dyn dyn;
		if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_NEEDED)
			continue;
		const char *lib = elf_strptr(v->elf, v->dynamic_sh.sh_link, dyn.d_un.d_val);
		if (!lib)
			continue;
		json_array_append_new(f->needed, json_string(lib));
		int allowed = 0;
		for (size_t k = 0; needed_allowed[k] && !allowed; k++)
			allowed = fnmatch(needed_allowed[k], lib, 0) == 0;
		if (!allowed)
			add_violation(f->needed_bad, ABI_NEEDED, lib, NULL);
	}
}

/* A symbol versioned GLIBC_2.34 (say) against the manylinux policy. */
static void check_manylinux(const struct abi_manylinux *t, json_t *manylinux, const char *name, const char *version)
{
	const char *us = strchr(version, '_');
	size_t deplen = us ? (size_t)(us - version) : 0;
	for (size_t p = 0; us && p < ABI_DEPS; p++) {
		if (strlen(t->policy[p].dep) != deplen || strncmp(t->policy[p].dep, version, deplen) != 0)
			continue;
		const char *ver = us + 1;
		int ok = is_numeric_version(ver) && version_cmp(ver, t->policy[p].max) <= 0;
		for (size_t e = 0; !ok && t->policy[p].extra[e]; e++)
			ok = strcmp(t->policy[p].extra[e], ver) == 0;
		if (!ok)
			add_violation(manylinux, ABI_MANYLINUX, name, version);
	}
}

/* One undefined symbol against every symbol rule. */
static void check_symbol(const struct abi_manylinux *t, const char *name, const char *version,
			 const char *torch_stable_abi, struct abi_findings *f)
{
	if (version)
		check_manylinux(t, f->manylinux, name, version);
	if (version && !strncmp(version, "GLIBC_", 6) && is_numeric_version(version + 6))
		json_array_append_new(f->glibc, json_sprintf("%s@%s", name, version));
	if (torch_stable_abi && is_torch_cxx_symbol(name))
		add_violation(f->torch_cxx, ABI_TORCH_STABLE, name, NULL);
	if (!strncmp(name, "Py", 2) || !strncmp(name, "_Py", 3)) {
		char added[16];
		if (!stable_abi_added(name, added, sizeof(added)))
			add_violation(f->non_abi3, ABI_NON_ABI3, name, NULL);
		else if (version_cmp(added, PYTHON_ABI) > 0)
			add_violation(f->python, ABI_PYTHON, name, added);
	}
}

/* Every undefined dynamic symbol, with its version. */
static void check_symbols(const struct abi_manylinux *t, const struct elf_view *v, const char *torch_stable_abi,
			  struct abi_findings *f)
{
	Elf_Data *syms = v->dynsym ? elf_getdata(v->dynsym, NULL) : NULL;
	Elf_Data *vers = v->versym ? elf_getdata(v->versym, NULL) : NULL;
	size_t count = v->dynsym_sh.sh_entsize ? v->dynsym_sh.sh_size / v->dynsym_sh.sh_entsize : 0;
	for (size_t i = 1; syms && i < count; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(syms, (int)i, &sym) || sym.st_shndx != SHN_UNDEF)
			continue;
		const char *name = elf_strptr(v->elf, v->dynsym_sh.sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		GElf_Versym ver = 0;
		const char *version = NULL;
		if (vers && gelf_getversym(vers, (int)i, &ver))
			for (size_t k = 0; k < v->nvn; k++)
				if (v->vn[k].index == (unsigned)(ver & 0x7fff))
					version = v->vn[k].version;
		check_symbol(t, name, version, torch_stable_abi, f);
	}
}

/* One section of the text: its title, then one line per symbol. */
static void text_section(struct strbuf *text, const char *title, json_t *list, int with_version)
{
	size_t i;
	json_t *v;
	if (!json_array_size(list))
		return;
	strbuf_addf(text, "\n⛔ %s:\n\n", title);
	json_array_foreach(list, i, v) {
		const char *sym = json_string_value(json_object_get(v, "symbol"));
		if (with_version)
			strbuf_addf(text, "%s: %s\n", sym, json_string_value(json_object_get(v, "version")));
		else
			strbuf_addf(text, "%s\n", sym);
	}
}

/* The report's text for one file, as kernel-builder's check prints it. */
static void abi_text(struct strbuf *text, const struct abi_manylinux *t, const char *display,
		     const char *torch_stable_abi, const struct abi_findings *f)
{
	size_t i;
	json_t *v;
	strbuf_addf(text, "🐍 Checking for compatibility with %s and Python ABI version %s: %s\n", t->name, PYTHON_ABI,
		    display);
	if (json_array_size(f->manylinux)) {
		strbuf_addf(text, "\n⛔ Symbols incompatible with `%s` found:\n\n", t->name);
		json_array_foreach(f->manylinux, i, v) {
			const char *full = json_string_value(json_object_get(v, "version"));
			const char *us = strchr(full, '_');
			strbuf_addf(text, "%s_%.*s: %s\n", json_string_value(json_object_get(v, "symbol")),
				    (int)(us - full), full, us + 1);
		}
	}
	char title[160];
	snprintf(title, sizeof(title), "Symbols >= Python ABI %s found", PYTHON_ABI);
	text_section(text, title, f->python, 1);
	text_section(text, "Non-ABI3 symbols found", f->non_abi3, 0);
	snprintf(title, sizeof(title), "Symbols outside the Torch stable ABI %s found (c10::, at::, torch::)",
		 torch_stable_abi ? torch_stable_abi : "");
	text_section(text, title, f->torch_cxx, 0);
	text_section(text, "Dynamic dependencies outside torch, its CUDA/ROCm runtime and the manylinux libraries found",
		     f->needed_bad, 0);
}

static int check_file(const struct abi_manylinux *t, const char *path, const char *display,
		      const char *torch_stable_abi, json_t **entry_out, struct strbuf *text)
{
	*entry_out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return KHUB_EIO;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KHUB_EIO;
	struct elf_view v;
	memset(&v, 0, sizeof(v));
	v.elf = elf_begin(fd, ELF_C_READ, NULL);
	struct abi_findings f = { json_array(), json_array(), json_array(), json_array(),
				  json_array(), json_array(), json_array() };
	int rc = KHUB_EIO;
	if (!v.elf || elf_kind(v.elf) != ELF_K_ELF || elf_find_sections(&v) < 0)
		goto cleanup;
	elf_read_verneed(&v);
	check_needed(&v, &f);
	check_symbols(t, &v, torch_stable_abi, &f);
	json_t *rules[] = { f.manylinux, f.python, f.non_abi3, f.torch_cxx };
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		sort_violations(rules[i]);
	abi_text(text, t, display, torch_stable_abi, &f);
	json_t *all = json_array();
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		json_array_extend(all, rules[i]);
	json_array_extend(all, f.needed_bad);
	if (json_array_size(all) == 0)
		strbuf_adds(text, "✅ No compatibility issues found\n");
	*entry_out = json_pack("{s:s,s:O,s:o,s:O}", "path", display, "needed", f.needed, "violations", all, "glibc",
			       f.glibc);
	rc = 0;
cleanup:
	for (size_t k = 0; k < v.nvn; k++)
		free(v.vn[k].version);
	free(v.vn);
	json_decref(f.needed);
	json_decref(f.needed_bad);
	json_decref(f.manylinux);
	json_decref(f.python);
	json_decref(f.non_abi3);
	json_decref(f.torch_cxx);
	json_decref(f.glibc);
	if (v.elf)
		elf_end(v.elf);
	close(fd);
	return rc;
}

static int ends_with_so(const char *name)
{
	size_t n = strlen(name);
	return (n > 3 && !strcmp(name + n - 3, ".so")) || strstr(name, ".so.") != NULL;
}

struct check_walk {
	const struct abi_manylinux *target;
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
	int rc = check_file(w->target, path, rel, w->torch_stable_abi, &entry, w->text);
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
	return abi_check_dir_target(dir, torch_stable_abi, MANYLINUX_DEFAULT, report);
}

static int cmp_string(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The report's "glibc": every "symbol@GLIBC_x" of the files (sorted,
 * once each), the newest version among them, the target's maximum and
 * whether it passes; a line of text for each symbol over it. */
static json_t *glibc_summary(const struct abi_manylinux *t, json_t *files, struct strbuf *text)
{
	size_t i, k, n = 0;
	json_t *f, *v;
	json_array_foreach(files, i, f)
		n += json_array_size(json_object_get(f, "glibc"));
	const char **all = xcalloc(n + 1, sizeof(*all));
	n = 0;
	json_array_foreach(files, i, f)
		json_array_foreach(json_object_get(f, "glibc"), k, v)
			all[n++] = json_string_value(v);
	qsort(all, n, sizeof(*all), cmp_string);
	json_t *needs = json_array();
	const char *newest = NULL;
	for (i = 0; i < n; i++) {
		if (i && !strcmp(all[i], all[i - 1]))
			continue;
		json_array_append_new(needs, json_string(all[i]));
		const char *ver = strstr(all[i], "@GLIBC_") + 7;
		if (!newest || version_cmp(ver, newest) > 0)
			newest = ver;
	}
	int passes = !newest || version_cmp(newest, t->glibc) <= 0;
	json_t *g = json_pack("{s:s,s:s,s:s?,s:b,s:o}", "target", t->name, "target_glibc", t->glibc, "newest", newest,
			      "passes", passes, "needs", needs);
	strbuf_addf(text, "\nglibc: the newest version needed is %s%s; %s allows GLIBC_%s: %s\n",
		    newest ? "GLIBC_" : "none", newest ? newest : "", t->name, t->glibc, passes ? "passes" : "fails");
	json_array_foreach(needs, i, v) {
		const char *ver = strstr(json_string_value(v), "@GLIBC_") + 7;
		if (version_cmp(ver, t->glibc) > 0)
			strbuf_addf(text, "  needs %s\n", json_string_value(v));
	}
	free(all);
	return g;
}

int abi_check_dir_target(const char *dir, const char *torch_stable_abi, const struct abi_manylinux *target,
			 json_t **report)
{
	*report = NULL;
	json_t *files = json_array();
	struct strbuf text = STRBUF_INIT;
	strbuf_adds(&text, "");
	struct check_walk w = { target, files, &text, torch_stable_abi };
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
	json_t *glibc = glibc_summary(target, files, &text);
	if (!ok)
		strbuf_adds(&text, "\nABI compatibility issues found\n");
	*report = json_pack("{s:b,s:s,s:s,s:s?,s:o,s:s,s:o}", "ok", ok, "manylinux", target->name, "python_abi",
			    PYTHON_ABI, "torch_stable_abi", torch_stable_abi, "glibc", glibc, "text", text.buf, "files",
			    files);
	strbuf_release(&text);
	return 0;
}
