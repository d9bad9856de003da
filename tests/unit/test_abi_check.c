/* test_abi_check.c -- khub-worker's ABI check on tiny shared libraries
 * compiled here with the system C compiler: a clean one, one needing a
 * GLIBC 2.32 symbol, one using Python symbols newer than 3.9 or outside the
 * stable ABI, one with a DT_NEEDED outside the allowlist, and a stripped one;
 * one importing torch C++ symbols, under the torch stable ABI rule;
 * then the targets read from a library's .hip_fatbin section (report.c). */
#include "builder-worker/build_internal.h"
#include "tests/unit/tap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/khub-abi-test-XXXXXX";

/* Compile src into dir/name.so with extra flags; 0 on success. */
static int build_so(const char *name, const char *src, const char *flags)
{
	char *c = xasprintf("%s/%s.c", dir, name);
	FILE *f = fopen(c, "w");
	if (!f)
		return -1;
	fputs(src, f);
	fclose(f);
	char *cmd = xasprintf("cc -shared -fPIC -O1 -o %s/%s.so %s %s 2>&1", dir, name, c, flags);
	int rc = system(cmd);
	free(cmd);
	free(c);
	return rc;
}

/* Violations of kind in entry, as "symbol@version" joined by spaces. */
static char *violations(json_t *entry, const char *kind)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "");
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(entry, "violations"), i, v) {
		if (strcmp(json_string_value(json_object_get(v, "kind")), kind) != 0)
			continue;
		const char *ver = json_string_value(json_object_get(v, "version"));
		strbuf_addf(&sb, "%s%s%s%s", sb.len ? " " : "", json_string_value(json_object_get(v, "symbol")),
			    ver ? "@" : "", ver ? ver : "");
	}
	return strbuf_detach(&sb, NULL);
}

static json_t *check(const char *name, struct strbuf *text)
{
	char *path = xasprintf("%s/%s.so", dir, name);
	json_t *entry = NULL;
	strbuf_reset(text);
	int rc = abi_check_file(path, name, &entry, text);
	free(path);
	return rc == 0 ? entry : NULL;
}

int main(void)
{
	if (!mkdtemp(dir)) {
		printf("1..0 # SKIP no temp dir\n");
		return 0;
	}
	struct strbuf text = STRBUF_INIT;
	char *s;

	ok(build_so("clean", "#include <string.h>\nvoid f(char *a, const char *b, unsigned long n) { memcpy(a, b, n); }\n"
		    "extern void *PyModule_Create2(void *, int);\nvoid *g(void *d) { return PyModule_Create2(d, 3); }\n"
		    "extern void _Py_Dealloc(void *);\nvoid h(void *o) { _Py_Dealloc(o); }\n", "") == 0,
	   "compiled clean.so");
	json_t *e = check("clean", &text);
	ok(e && json_array_size(json_object_get(e, "violations")) == 0, "clean.so: no violation (memcpy, PyModule_Create2, _Py_Dealloc)");
	ok(strstr(text.buf, "🐍 Checking for compatibility with manylinux_2_28 and Python ABI version 3.9: clean") != NULL &&
	   strstr(text.buf, "✅ No compatibility issues found") != NULL, "clean.so: check-abi's wording");
	json_decref(e);

	ok(build_so("glibc", "#include <sys/single_threaded.h>\nint f(void) { return __libc_single_threaded; }\n", "") == 0,
	   "compiled glibc.so");
	e = check("glibc", &text);
	s = violations(e, "manylinux");
	is_str(s, "__libc_single_threaded@GLIBC_2.32", "glibc.so: GLIBC_2.32 is above manylinux_2_28");
	ok(strstr(text.buf, "⛔ Symbols incompatible with `manylinux_2_28` found:") &&
	   strstr(text.buf, "__libc_single_threaded_GLIBC: 2.32"), "glibc.so: reported as <name>_<DEP>: <version>");
	free(s);
	json_decref(e);

	ok(build_so("python", "extern int PyModule_AddType(void *, void *);\nint f(void *m, void *t) { return PyModule_AddType(m, t); }\n"
		    "extern void *_PyObject_GetDictPtr(void *);\nvoid *g(void *o) { return _PyObject_GetDictPtr(o); }\n"
		    "extern int PyObject_GetBuffer(void *, void *, int);\nint h(void *o, void *b) { return PyObject_GetBuffer(o, b, 0); }\n",
		    "") == 0, "compiled python.so");
	e = check("python", &text);
	s = violations(e, "python-abi");
	is_str(s, "PyModule_AddType@3.10 PyObject_GetBuffer@3.11", "python.so: stable-ABI symbols added after 3.9");
	free(s);
	s = violations(e, "non-abi3");
	is_str(s, "_PyObject_GetDictPtr", "python.so: a symbol outside the stable ABI");
	free(s);
	ok(strstr(text.buf, "⛔ Symbols >= Python ABI 3.9 found:\n\nPyModule_AddType: 3.10\n") &&
	   strstr(text.buf, "⛔ Non-ABI3 symbols found:\n\n_PyObject_GetDictPtr\n"), "python.so: check-abi's wording");
	json_decref(e);

	ok(build_so("needed", "extern unsigned long crc32(unsigned long, const unsigned char *, unsigned);\nunsigned long f(void) { return crc32(0, 0, 0); }\n", "-l:libz.so.1") == 0,
	   "compiled needed.so (links libz)");
	e = check("needed", &text);
	s = violations(e, "needed");
	is_str(s, "libz.so.1", "needed.so: libz is outside the allowlist");
	free(s);
	json_decref(e);

	/* Stripped: .symtab is gone, .dynsym is what the loader uses. */
	char *strip = xasprintf("cp %s/glibc.so %s/stripped.so && strip %s/stripped.so", dir, dir, dir);
	ok(system(strip) == 0, "stripped a copy of glibc.so");
	free(strip);
	e = check("stripped", &text);
	s = violations(e, "manylinux");
	is_str(s, "__libc_single_threaded@GLIBC_2.32", "stripped.so: still found (read from .dynsym)");
	free(s);
	json_decref(e);

	json_t *report = NULL;
	ok(abi_check_dir(dir, &report) == 0 && !json_is_true(json_object_get(report, "ok")) &&
	   json_array_size(json_object_get(report, "files")) == 5, "the directory report: 5 files, not ok");
	json_decref(report);

	/* The torch stable ABI rule: undefined C++ symbols of c10::, at::,
	 * torch:: (not torch::stable::) under a stable ABI target only. */
	ok(build_so("stable",
		    "extern void c10_fail(void) __asm__(\"_ZN3c106detail14torchCheckFailEPKcS2_jS2_\");\n"
		    "extern void at_empty(void) __asm__(\"_ZN2at5emptyEv\");\n"
		    "extern void torch_lib(void) __asm__(\"_ZNK5torch7Library4_defEv\");\n"
		    "extern void stable_ok(void) __asm__(\"_ZN5torch6stable6detail4callEv\");\n"
		    "extern void shim(void) __asm__(\"aoti_torch_empty_strided\");\n"
		    "extern void std_ok(void) __asm__(\"_ZNSt6vectorIN3c104HalfESaIS1_EE9push_backEv\");\n"
		    "void f(void) { c10_fail(); at_empty(); torch_lib(); stable_ok(); shim(); std_ok(); }\n", "") == 0,
	   "compiled stable.so");
	char *stable_path = xasprintf("%s/stable.so", dir);
	strbuf_reset(&text);
	e = NULL;
	ok(abi_check_file_for(stable_path, "stable", "2.11", &e, &text) == 0, "stable.so checked for the stable ABI 2.11");
	s = violations(e, "torch-stable-abi");
	is_str(s, "_ZN2at5emptyEv _ZN3c106detail14torchCheckFailEPKcS2_jS2_ _ZNK5torch7Library4_defEv",
	       "stable.so: c10::, at::, torch:: are violations; torch::stable::, the C shim and std:: are not");
	free(s);
	ok(strstr(text.buf, "Symbols outside the Torch stable ABI 2.11 found") != NULL, "… in the report text");
	json_decref(e);
	strbuf_reset(&text);
	e = check("stable", &text);
	ok(e && json_array_size(json_object_get(e, "violations")) == 0, "stable.so without a stable ABI target: no violation");
	json_decref(e);
	free(stable_path);

	/* A .hip_fatbin section as hipcc leaves it in a library: one clang
	 * offload bundle per object file, a host entry and one per target. */
	static const char *const bundles[][3] = {
		{ "host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx1030:xnack-" },
		{ "host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx90a", NULL },
	};
	struct strbuf bytes = STRBUF_INIT;
	strbuf_adds(&bytes, "");
	for (size_t b = 0; b < 2; b++) {
		unsigned char buf[512];
		size_t n = 0, count = bundles[b][2] ? 3 : 2;
		memcpy(buf, "__CLANG_OFFLOAD_BUNDLE__", 24);
		n = 24;
		for (int k = 0; k < 8; k++)
			buf[n++] = k == 0 ? (unsigned char)count : 0;
		for (size_t x = 0; x < count; x++) {
			size_t len = strlen(bundles[b][x]);
			for (int k = 0; k < 16; k++)
				buf[n++] = 0;	/* offset and size of the code object */
			for (int k = 0; k < 8; k++)
				buf[n++] = k == 0 ? (unsigned char)len : 0;
			memcpy(buf + n, bundles[b][x], len);
			n += len;
		}
		for (size_t k = 0; k < n; k++)
			strbuf_addf(&bytes, "%u,", buf[k]);
		strbuf_adds(&bytes, "0,0,0,0,0,0,0,0,");	/* padding between bundles */
	}
	char *src = xasprintf("__attribute__((section(\".hip_fatbin\"), used)) static const unsigned char fb[] = {%s};\n"
			      "int f(void) { return 1; }\n", bytes.buf);
	strbuf_release(&bytes);
	ok(build_so("fatbin", src, "") == 0, "compiled fatbin.so with a .hip_fatbin section of two bundles");
	free(src);
	json_t *archs = json_array();
	char *fpath = xasprintf("%s/fatbin.so", dir);
	ok(report_offload_archs(fpath, archs) == 0, "report_offload_archs reads fatbin.so");
	char *found = json_dumps(archs, JSON_COMPACT);
	is_str(found, "[\"gfx90a\",\"gfx1030\"]", "the AMD GPU targets, once each, features cut, host entries left out");
	free(found);
	json_array_clear(archs);
	free(fpath);
	fpath = xasprintf("%s/glibc.so", dir);
	ok(report_offload_archs(fpath, archs) == 0 && json_array_size(archs) == 0, "a library without .hip_fatbin: no target");
	free(fpath);
	json_decref(archs);
	strbuf_release(&text);
	char *rm = xasprintf("rm -rf %s", dir);
	if (system(rm) != 0)
		printf("# could not remove %s\n", dir);
	free(rm);
	return done_testing();
}
