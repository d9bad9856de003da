/* report.c -- what abi-report.json says about a build beyond the ABI rules:
 * the torch the variant was compiled against and what that torch itself was
 * built for (a rocm_from_hipcc variant is compiled against a torch that is
 * not a ROCm build), the GPU archs compiled and left out, the AMD GPU code
 * objects found in each library's HIP fat binary, and how far the smoke
 * import went. */
#include "builder-worker/build_internal.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define BUNDLE_MAGIC_LEN 24

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void add_unique(json_t *list, const char *s, size_t len)
{
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v)
		if (strlen(json_string_value(v)) == len && !strncmp(json_string_value(v), s, len))
			return;
	json_array_append_new(list, json_stringn(s, len));
}

/* The AMD GPU targets of the clang offload bundles in data (a .hip_fatbin
 * section: one bundle per object file, each "__CLANG_OFFLOAD_BUNDLE__",
 * a count, then per entry offset, size, id length and id such as
 * "hipv4-amdgcn-amd-amdhsa--gfx90a"), into archs. */
static void bundle_targets(const unsigned char *data, size_t size, json_t *archs)
{
	size_t at = 0;
	while (at + BUNDLE_MAGIC_LEN + 8 <= size) {
		const unsigned char *m = memmem(data + at, size - at, BUNDLE_MAGIC, BUNDLE_MAGIC_LEN);
		if (!m)
			break;
		size_t pos = (size_t)(m - data) + BUNDLE_MAGIC_LEN;
		at = pos;
		if (pos + 8 > size)
			break;
		uint64_t n = le64(data + pos);
		pos += 8;
		for (uint64_t e = 0; e < n && e < 1024 && pos + 24 <= size; e++) {
			uint64_t idlen = le64(data + pos + 16);
			pos += 24;
			if (idlen > size - pos)
				break;
			const char *id = (const char *)data + pos;
			pos += idlen;
			const char *dash = NULL;
			for (size_t k = 0; k + 1 < idlen; k++)
				if (id[k] == '-' && id[k + 1] == '-')
					dash = id + k + 2;
			if (!strncmp(id, "hip", 3) && dash && dash < id + idlen) {
				size_t len = (size_t)(id + idlen - dash);	/* "gfx90a:xnack-": the arch alone */
				const char *colon = memchr(dash, ':', len);
				add_unique(archs, dash, colon ? (size_t)(colon - dash) : len);
			}
		}
	}
}

int report_offload_archs(const char *path, json_t *archs)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return KHUB_EIO;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KHUB_EIO;
	int rc = KHUB_EIO;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		goto cleanup;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".hip_fatbin") != 0 || sh.sh_type == SHT_NOBITS)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (d && d->d_buf)
			bundle_targets(d->d_buf, d->d_size, archs);
	}
	rc = 0;
cleanup:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}

int report_hip_archs(const struct build_plan *p, json_t *report, json_t **found)
{
	*found = json_array();
	size_t i;
	json_t *f;
	json_array_foreach(json_object_get(report, "files"), i, f) {
		char *path = xasprintf("%s/%s", p->stage, json_string_value(json_object_get(f, "path")));
		int r = report_offload_archs(path, *found);
		free(path);
		if (r < 0)
			return r;
	}
	char *list = json_dumps(*found, JSON_COMPACT);
	log_info("khub-worker build: HIP code objects in the libraries: %s", list ? list : "?");
	free(list);
	int rc = 0;
	for (i = 0; i < p->archs.count; i++) {
		int have = 0;
		size_t k;
		json_t *v;
		json_array_foreach(*found, k, v)
			have |= !strcmp(json_string_value(v), p->archs.items[i]);
		if (!have) {
			log_error("khub-worker: no %s code object in the HIP fat binaries of the libraries",
				p->archs.items[i]);
			rc = KHUB_EINVAL;
		}
	}
	return rc;
}

void report_add_build(json_t *report, const struct build_plan *p, json_t *offload_archs)
{
	const struct toolchain *tc = p->tc;
	int gpu = !p->noarch && p->cb->archs_key;
	const char *tb = tc->torch_build ? tc->torch_build : "?";
	int foreign = gpu && tc->rocm_from_hipcc;	/* compiled against a torch of another build */
	char *smoke = xasprintf("%s in torch %s (a %s build%s)%s; no kernel was run%s",
				p->noarch ? "imported" : "loaded", tc->torch_version ? tc->torch_version : "?", tb,
				foreign ? ", not a ROCm one" : "", p->noarch ? "" : ", its ops registered",
				foreign ? " (that needs a ROCm torch and an AMD GPU)" : "");
	json_t *b = json_pack("{s:s,s:s,s:s?,s:s,s:s}", "variant", p->variant, "backend", p->backend, "torch",
			      tc->torch_version, "torch_build", tb, "smoke_import", smoke);
	free(smoke);
	json_object_set_new(b, "ops_check", json_string("passed: registrations name their op with add_op_namespace_prefix, "
							 "every op registered is in the build's namespace, every ops.<name> "
							 "the Python calls is registered"));
	if (p->stable_abi[0])
		json_object_set_new(b, "torch_stable_abi", json_string(p->stable_abi));
	json_object_set_new(b, "toolchain", json_pack("{s:s,s:s?,s:s?,s:s?}", "name", tc->name, "root", tc->root,
						      "root_digest", tc->root_digest, "cxx", tc->cxx_version));
	json_t *notes = json_array(), *v;
	size_t i;
	if (p->cb->from_hipcc && !p->noarch) {
		json_object_set_new(b, "rocm", json_string(tc->rocm_version ? tc->rocm_version : "?"));
		json_object_set_new(b, "rocm_from", json_string(tc->rocm_from_hipcc ? "hipcc" : "torch"));
		if (tc->rocm_from_hipcc)
			json_array_append_new(notes, json_sprintf(
				"compiled with hipcc (%s) against torch %s, a %s build, not a ROCm torch build "
				"(toolchain %s: rocm_from_hipcc); no kernel of it was run", tc->hipcc_version ? tc->hipcc_version : "?",
				tc->torch_version, tc->torch_build, tc->name));
	}
	if (gpu) {
		json_t *archs = json_array();
		for (i = 0; i < p->archs.count; i++)
			json_array_append_new(archs, json_string(p->archs.items[i]));
		json_object_set_new(b, "archs", archs);
	}
	if (p->archs_left_out.count) {
		json_t *left = json_array();
		struct strbuf s = STRBUF_INIT;
		for (i = 0; i < p->archs_left_out.count; i++) {
			json_array_append_new(left, json_string(p->archs_left_out.items[i]));
			strbuf_addf(&s, "%s%s", i ? ", " : "", p->archs_left_out.items[i]);
		}
		json_object_set_new(b, "archs_left_out", left);
		json_array_append_new(notes, json_sprintf("rocm-archs %s left out: %s cannot compile for them", s.buf,
							  tc->hipcc ? tc->hipcc : "hipcc"));
		strbuf_release(&s);
	}
	if (json_array_size(p->capabilities_left_out)) {
		json_object_set(b, "capabilities_left_out", p->capabilities_left_out);
		json_array_foreach(p->capabilities_left_out, i, v)
			json_array_append(notes, json_object_get(v, "reason"));
	}
	if (p->hipified.count) {
		json_t *files = json_array(), *headers = json_array();
		for (i = 0; i < p->hipified.count; i++)
			json_array_append_new(files, json_string(p->hipified.items[i]));
		for (i = 0; i < p->hipified_headers.count; i++)
			json_array_append_new(headers, json_string(p->hipified_headers.items[i]));
		json_object_set_new(b, "hipify", json_pack("{s:s,s:o,s:o}", "tool", tc->hipify_version, "sources", files,
							   "headers", headers));
		json_array_append_new(notes, json_sprintf("CUDA sources hipified with %s before hipcc compiled them",
							  tc->hipify_version));
	}
	if (offload_archs)
		json_object_set(b, "offload_archs", offload_archs);
	json_array_foreach(notes, i, v)
		log_info("khub-worker build: note: %s", json_string_value(v));
	json_object_set_new(b, "notes", notes);
	json_object_set_new(report, "build", b);
}
