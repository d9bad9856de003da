/* test_kernel.c -- kernel/ on its own (linked without git, libpq or MHD):
 * the backend table, build/ paths, the metadata.json check and compliance
 * against a required build list. */
#include "kernel/kernel.h"
#include "tests/unit/tap.h"

#include <stdlib.h>

static void test_backends(void)
{
	const struct kernel_backend *b = kernel_backend_find("cuda");
	char tag[32];
	ok(b && strcmp(b->variant_prefix, "cu") == 0 && b->minor_compatible && b->archs_expected, "cuda row");
	kernel_backend_tag(b, 12, 8, tag, sizeof(tag));
	is_str(tag, "cu128", "cuda 12.8 is cu128");
	kernel_backend_tag(kernel_backend_find("xpu"), 2025, 3, tag, sizeof(tag));
	is_str(tag, "xpu20253", "xpu 2025.3 is xpu20253");
	kernel_backend_tag(kernel_backend_find("metal"), -1, -1, tag, sizeof(tag));
	is_str(tag, "metal", "metal has no version");
	ok(kernel_backend_by_noarch("npu") == kernel_backend_find("cann"), "torch-npu is cann");
	ok(kernel_backend_by_machine_word("mps") == kernel_backend_find("metal"), "MPS machines are metal");
	ok(kernel_backend_find("gpu") == NULL && kernel_backend_by_noarch("universal") == NULL, "unknown names");
	size_t n = 0, versioned = 0;
	for (const struct kernel_backend *r = kernel_backends; r->name; r++, n++)
		versioned += r->variant_prefix != NULL;
	ok(n == 8 && versioned == 4, "8 backends, 4 versioned");

	struct variant_name v;
	ok(variant_name_parse("torch-npu", &v, NULL) == 0 && strcmp(variant_implied_backend_type(&v), "cann") == 0,
	   "torch-npu implies backend.type cann");
	ok(variant_name_parse("torch-universal", &v, NULL) == 0 && variant_implied_backend_type(&v) == NULL,
	   "torch-universal implies nothing");
	ok(variant_name_parse("torch211-cxx11-rocm71-x86_64-linux", &v, NULL) == 0 &&
	   strcmp(variant_implied_backend_type(&v), "rocm") == 0, "rocm71 implies rocm");

	struct variant_env env;
	variant_env_init(&env);
	variant_env_set(&env, "rocm", "7.1.25424-abc", NULL);
	variant_env_finish(&env);
	variant_env_backend_tag(&env, tag, sizeof(tag));
	is_str(tag, "rocm71", "environment rocm 7.1 prints rocm71");
}

static void test_paths(void)
{
	struct build_path bp;
	ok(build_path_parse("build/torch-cpu/__init__.py", &bp) == 0 && bp.variant_len == 9 &&
	   strncmp(bp.variant, "torch-cpu", 9) == 0 && strcmp(bp.file, "__init__.py") == 0, "build/V/file");
	ok(build_path_parse("build/torch-cpu/layers/x.py", &bp) == 0 && strcmp(bp.file, "layers/x.py") == 0,
	   "a file deeper down");
	ok(build_path_parse("build/torch-cpu", &bp) == 0 && bp.file == NULL && bp.variant_len == 9,
	   "build/V itself");
	ok(build_path_parse("build/torch-cpu/", &bp) == 0 && strcmp(bp.file, "") == 0, "build/V/");
	ok(build_path_parse("build", &bp) < 0, "build is no variant");
	ok(build_path_parse("build/", &bp) < 0, "build/ is no variant");
	ok(build_path_parse("build//x", &bp) < 0, "an empty variant is none");
	ok(build_path_parse("builds/x/y", &bp) < 0 && build_path_parse("src/build/x/y", &bp) < 0,
	   "other paths");
}

static void check_json(const char *variant, const char *doc, struct variant_check *c)
{
	variant_check_init(c, variant);
	if (doc)
		variant_check_metadata(c, doc, strlen(doc));
}

static void test_metadata(void)
{
	struct variant_check c;
	check_json("torch211-cxx11-cu128-x86_64-linux", NULL, &c);
	ok(c.name_valid && c.metadata_status == VARIANT_METADATA_MISSING && c.metadata == NULL, "missing metadata");
	variant_check_release(&c);

	check_json("torch211-cxx11-cu128-x86_64-linux",
		   "{\"id\":\"_relu_cuda_abc\",\"name\":\"relu\",\"version\":1,\"license\":\"Apache-2.0\","
		   "\"backend\":{\"type\":\"cuda\",\"archs\":[\"8.0\"]},\"python-depends\":[]}", &c);
	ok(c.metadata_status == VARIANT_METADATA_OK && c.warnings.count == 0, "complete metadata is ok, no warning");
	ok(c.kernel_id && strcmp(c.kernel_id, "_relu_cuda_abc") == 0 && c.has_kernel_version &&
	   c.kernel_version == 1 && strcmp(c.backend_type, "cuda") == 0 && json_is_array(c.backend_archs),
	   "fields read");
	variant_check_release(&c);

	check_json("torch211-cxx11-cu128-x86_64-linux",
		   "{\"id\":\"_relu\",\"name\":\"relu\",\"version\":1,\"license\":\"MIT\",\"backend\":{\"type\":\"rocm\"}}",
		   &c);
	ok(c.metadata_status == VARIANT_METADATA_OK && c.warnings.count == 3, "three warnings");
	ok(c.warnings.count == 3 && strstr(c.warnings.items[0], "backend.archs is not given") &&
	   strstr(c.warnings.items[1], "python-depends") &&
	   strcmp(c.warnings.items[2], "backend.type is rocm but the variant name says cuda") == 0, "… the right ones");
	variant_check_release(&c);

	check_json("torch-npu", "{\"id\":\"_x\",\"name\":\"x1\",\"version\":0,\"license\":\"MIT\","
		   "\"backend\":{\"type\":\"cann\"},\"python-depends\":[]}", &c);
	ok(c.metadata_status == VARIANT_METADATA_OK && c.warnings.count == 0, "torch-npu with backend cann: no warning");
	variant_check_release(&c);

	check_json("torch-cpu", "{\"id\":\"1x\",\"name\":\"relu\"}", &c);
	ok(c.metadata_status == VARIANT_METADATA_INVALID &&
	   strcmp(c.metadata_error, "\"id\" must be a valid Python module name") == 0, "bad id");
	variant_check_release(&c);

	check_json("torch-cpu", "{\"id\":\"x\",\"name\":\"relu\",\"version\":1,\"license\":\"MIT\","
		   "\"backend\":{\"type\":\"gpu\"}}", &c);
	ok(c.metadata_status == VARIANT_METADATA_INVALID && strstr(c.metadata_error, "must be one of"),
	   "unknown backend.type");
	variant_check_release(&c);

	check_json("torch-cpu", "[1]", &c);
	ok(c.metadata_status == VARIANT_METADATA_INVALID && json_is_array(c.metadata) &&
	   strcmp(c.metadata_error, "metadata.json is not a JSON object") == 0, "not an object");
	variant_check_release(&c);

	check_json("torch-cpu", "{\"a\":1,\"a\":2}", &c);
	ok(c.metadata_status == VARIANT_METADATA_INVALID && c.metadata == NULL &&
	   strncmp(c.metadata_error, "metadata.json is not valid JSON: ", 33) == 0, "duplicate keys are invalid");
	variant_check_release(&c);

	check_json("torch211-cxx11-cu0128-x86_64-linux", NULL, &c);
	ok(c.name_valid && c.warnings.count == 1 &&
	   strcmp(c.warnings.items[0], "non-canonical name: the loader looks for build/torch211-cxx11-cu128-x86_64-linux/ "
		  "instead") == 0, "non-canonical name warns");
	variant_check_release(&c);

	check_json("cuda-build", NULL, &c);
	ok(!c.name_valid && c.name_error, "invalid name");
	variant_check_unreadable(&c, "metadata.json is stored as an LFS object");
	ok(c.metadata_status == VARIANT_METADATA_INVALID, "unreadable metadata is invalid");
	variant_check_release(&c);
	variant_check_release(NULL);
}

static void test_compliance(void)
{
	static const char list_json[] =
		"{\"x86_64-linux\": {\"cuda\": [\"a-cu\", \"b-cu\"], \"cpu\": [\"a-cpu\"], \"cann\": [\"n\", 7]},"
		" \"aarch64-linux\": {\"cuda\": [\"c-cu\"]}}";
	struct required_variants list;
	char why[128];
	ok(required_variants_parse("[]", 2, &list, why, sizeof(why)) < 0, "a list is an object");
	ok(required_variants_parse(list_json, strlen(list_json), &list, why, sizeof(why)) == 0 && list.count == 4,
	   "4 groups");
	ok(list.count == 4 && list.groups[2].required == 2 && list.groups[2].variants.count == 1, "non-strings are counted, "
	   "not kept");

	struct variant_presence have[] = { { "a-cu", 1 }, { "b-cu", 0 }, { "a-cpu", 1 }, { "torch-npu", 1 } };
	struct compliance c;
	compliance_compute(&list, have, 4, &c);
	ok(c.ngroups == 4, "one result per group");
	const struct compliance_group *g = &c.groups[0];
	ok(strcmp(g->system, "x86_64-linux") == 0 && strcmp(g->backend, "cuda") == 0 && g->required == 2 &&
	   g->npresent == 1 && g->ninvalid == 1 && g->nmissing == 0 && !g->compliant &&
	   strcmp(g->invalid_metadata[0], "b-cu") == 0, "cuda: b-cu has broken metadata");
	ok(c.groups[1].compliant && c.groups[1].npresent == 1, "cpu x86_64-linux compliant");
	ok(!c.groups[2].compliant && c.groups[2].nmissing == 1, "cann: n missing");
	ok(!c.groups[3].compliant && strcmp(c.groups[3].missing[0], "c-cu") == 0, "aarch64 cuda: c-cu missing");
	ok(c.npython_accepted == 3 && strcmp(c.python_accepted[0], "torch-cuda") == 0 &&
	   strcmp(c.python_accepted[1], "torch-cpu") == 0 && strcmp(c.python_accepted[2], "torch-npu") == 0,
	   "Python-only: torch-cuda, torch-cpu, torch-npu (cann's noarch name), once each");
	ok(c.npython_present == 1 && strcmp(c.python_present[0], "torch-npu") == 0 && c.python_compliant,
	   "torch-npu present");
	ok(c.compliant, "compliant");
	compliance_release(&c);

	compliance_compute(&list, have, 0, &c);
	ok(!c.compliant && !c.python_compliant && c.groups[1].nmissing == 1, "nothing present: not compliant");
	compliance_release(&c);

	/* targeted: an arch variant of the group's backend on its system,
	 * whatever its torch; noarch and invalid names target nothing */
	struct variant_presence built[] = { { "torch29-cxx11-cu118-x86_64-linux", 1 }, { "torch-cuda", 1 },
					    { "not-a-variant", 1 } };
	compliance_compute(&list, built, 3, &c);
	ok(c.groups[0].targeted && !c.groups[0].compliant, "an old CUDA build targets cuda x86_64-linux");
	ok(!c.groups[1].targeted && !c.groups[2].targeted && !c.groups[3].targeted,
	   "nothing else is targeted (cpu, cann, cuda aarch64-linux)");
	ok(c.compliant && c.python_compliant, "compliant through torch-cuda");
	compliance_release(&c);
	compliance_release(NULL);
	required_variants_release(&list);
	required_variants_release(NULL);
}

int main(void)
{
	test_backends();
	test_paths();
	test_metadata();
	test_compliance();
	return done_testing();
}
