/* kernel.h -- what a kernel is, with no I/O: build variant names (parse,
 * format, the loader's choice), the backend table, build/<variant>/ paths,
 * the metadata.json check and compliance against the required build list.
 * Needs only common/ and jansson (no git, no database, no HTTP), so the
 * build worker, the unit tests and the fuzz targets link it alone
 * (libkhubkernel.a). */
#ifndef KHUB_KERNEL_H
#define KHUB_KERNEL_H

#include "common/common.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* ---- backends (kernel/backend.c) ------------------------------------------ */

/* One row per compute backend the kernels loader knows (backends.py). The
 * single place where a backend's naming rules live. */
struct kernel_backend {
	const char *name;		/* metadata backend.type, variant_name.backend: cuda */
	const char *title;		/* in the loader's messages: CUDA */
	const char *variant_prefix;	/* versioned: cu, rocm, xpu, cann (+MAJOR MINOR digits);
					 * NULL: the variant names it as itself (cpu, metal) */
	const char *noarch;		/* torch-<noarch> Python-only variant: npu for cann */
	const char *machine_words[3];	/* first word of benchmarks' machineInfo.backend ("CUDA 12.8", "MPS") */
	int benchmark_keyed;		/* benchmarks filter by the version tag too (cu128, rocm71) */
	int archs_expected;		/* metadata.json should list backend.archs (GPU archs) */
	int minor_compatible;		/* a system x.y takes variants of x.z with z <= y (CUDA) */
	int macos_min_major;		/* arch variants need at least this macOS (Metal: 26); 0 none */
	int hipify_cuda;		/* its builds hipify CUDA sources first (ROCm, as kernel-builder) */
};

/* The table, versioned backends first, in the order the query keys of
 * GET .../variants are read (cuda, rocm, xpu, cann); ends with a NULL name. */
extern const struct kernel_backend kernel_backends[];

/* The row named name (cuda, cpu...), else NULL. */
const struct kernel_backend *kernel_backend_find(const char *name);
/* The row whose torch-<noarch> name is noarch (npu -> cann), else NULL. */
const struct kernel_backend *kernel_backend_by_noarch(const char *noarch);
/* The row a benchmark's machineInfo.backend word names (lowercase: mps ->
 * metal, npu -> cann), else NULL. */
const struct kernel_backend *kernel_backend_by_machine_word(const char *word);
/* A backend's variant tag: cu128, rocm71, xpu20253 for a version, else its
 * name (cpu). major < 0 means no version. */
void kernel_backend_tag(const struct kernel_backend *b, long major, long minor, char *out, size_t size);

/* ---- build variant names (kernel/variant.c) ------------------------------ */

/* Names of build/<variant>/ directories, parsed and chosen the way the
 * `kernels` loader does (kernels/src/kernels/variants.py). */
#define VARIANT_NAME_MAX 255
#define VARIANT_REASON_MAX 256

enum variant_framework { VARIANT_TORCH, VARIANT_TORCH_STABLE_ABI, VARIANT_TVM_FFI, VARIANT_TORCH_NOARCH };

/* The noarch variant every system takes (torch-universal). */
#define VARIANT_NOARCH_UNIVERSAL "universal"

struct variant_name {
	enum variant_framework framework;
	long framework_major, framework_minor;	/* torch211 = 2.11; -1 for noarch */
	int cxx11_abi;				/* 1 cxx11, 0 cxx98, -1 no tag */
	char backend[64];	/* cuda, rocm, xpu, cann, cpu, metal, neuron, tpu; noarch: after "torch-" */
	char backend_tag[64];	/* cu128, rocm71, cpu (normalised); noarch: as backend */
	long backend_major, backend_minor;	/* -1 when the backend has no version */
	char arch[64], os[64];	/* "" for noarch */
};

/* Parse a variant name; KHUB_EINVAL (and *why, static) for a name the loader
 * skips as invalid. */
int variant_name_parse(const char *s, struct variant_name *out, const char **why);
/* The name the loader derives from the parsed parts (it downloads
 * build/<that>/): differs from the directory for non-canonical names such
 * as cu0128. */
void variant_name_format(const struct variant_name *v, char *out, size_t size);
const char *variant_framework_name(enum variant_framework fw);	/* "torch-stable-abi" */
/* Fill *v for a torch arch variant: torch major.minor, cxx11 (1, 0, -1 no
 * tag), the backend by name (cpu, cuda, rocm, xpu...) with its version
 * (-1 for none), arch (x86_64) and os (linux). variant_name_format then
 * gives torch113-cxx11-cpu-x86_64-linux. */
void variant_name_set_torch(struct variant_name *v, long torch_major, long torch_minor, int cxx11,
			    const char *backend, long backend_major, long backend_minor, const char *arch,
			    const char *os);
/* The metadata backend.type a parsed name implies, or NULL when any goes
 * (torch-universal, an unknown noarch backend is taken as is). */
const char *variant_implied_backend_type(const struct variant_name *v);

/* A client environment, as the loader detects it. */
struct variant_env {
	char backend[16];		/* cpu, cuda, rocm, xpu, cann, metal, neuron, tpu */
	long backend_major, backend_minor;	/* cuda 12.8, rocm 7.1, xpu 2025.3; -1 none */
	char backend_version_text[32];
	char cpu[64], os[64];		/* x86_64 linux; aarch64 darwin */
	long torch_major, torch_minor;	/* -1: no torch */
	int cxx11_abi;			/* -1 unknown (not Linux) */
	long tvm_ffi_major, tvm_ffi_minor;
	long macos_major, macos_minor;	/* -1 unknown */
	char macos_text[32];
	int free_threaded;		/* free-threaded Python < 3.15 */
};

/* Defaults: CPU backend, x86_64 linux, no torch, C++11 ABI. */
void variant_env_init(struct variant_env *env);
/* Set one key (torch, a versioned backend's name: cuda, rocm, xpu, cann;
 * backend, arch, os, cxx11, macos, tvm_ffi, free_threaded) from its text;
 * KHUB_EINVAL with *why. */
int variant_env_set(struct variant_env *env, const char *key, const char *value, const char **why);
/* Apply the loader's normalisations (arm64 on darwin = aarch64, ...). */
void variant_env_finish(struct variant_env *env);
/* The environment's backend as the loader prints it: cu128, rocm71, cpu. */
void variant_env_backend_tag(const struct variant_env *env, char *out, size_t size);
/* A client environment given as keys (torch, cuda|rocm|xpu|cann, backend,
 * arch, os, cxx11, macos, tvm_ffi, free_threaded: the keys of GET
 * .../variants) read through get (NULL: not given) into *env, with the
 * loader's choice of backend (kernel/environment.c): 0, or KHUB_EINVAL
 * with why. */
typedef const char *(*environment_getter)(void *ctx, const char *key);
int kernel_environment_parse(environment_getter get, void *ctx, struct variant_env *env, char *why, size_t why_size);

struct variant_decision {
	size_t index;		/* into the variants given */
	int accepted;
	char reason[VARIANT_REASON_MAX];	/* the loader's words when rejected */
};

/* Decide every variant for env and order the decisions as the loader does:
 * accepted first, best first (ties by name). names[i] is variants[i]'s
 * directory name; out has n slots. */
void variant_resolve(const struct variant_name *variants, const char *const *names, size_t n,
		     const struct variant_env *env, struct variant_decision *out);

/* ---- what to build for an environment (kernel/build_target.c) ------------ */

/* The arch variant (torch<MM>-cxx11-<backend tag>-<cpu>-<os>) a build must
 * produce for env (after variant_env_finish) to load it: the loader takes
 * it (variant_resolve accepts it). KHUB_EINVAL with the reason in why when
 * env can load no compiled variant or names too little (no torch version, a
 * CUDA backend without its version, a free-threaded Python, Metal before
 * macOS 26). */
int variant_build_target(const struct variant_env *env, struct variant_name *out, char *why, size_t why_size);

/* ---- toolkits (kernel/toolkit.c) ----------------------------------------- */

/* "2.11" -> 2, 11 ("2" -> 2, 0); -1 when s is no version. */
int kernel_version_of(const char *s, long *major, long *minor);
/* -1, 0 or 1 as a.b is below, at or above c.d. */
int kernel_version_cmp(long amaj, long amin, long bmaj, long bmin);
/* 1 when the variant's toolkit can build the kernel the build planner's
 * JSON describes (torch and toolkit minver/maxver, the capabilities its
 * kernels name); else 0 with why. */
int kernel_toolkit_judge(json_t *plan, const struct variant_name *v, char *why, size_t size);
/* For a variant the plan takes: each capability its toolkit's kernels name
 * that this toolkit does not build, appended to out as {"capability",
 * "reason"} ("capability 5.0 left out: CUDA 13.0 cannot build it (oldest
 * it builds: 7.5)"), once per capability. */
void kernel_toolkit_left_out(json_t *plan, const struct variant_name *v, json_t *out);
/* 1 when v is a torch<MM>-… variant whose torch build.toml's torch.minver
 * or maxver excludes. */
int kernel_torch_outside_bounds(json_t *plan, const struct variant_name *v);
/* build.toml's torch bounds as ">=2.12,<=2.12" into out ("" when none). */
void kernel_torch_bounds_text(json_t *plan, char *out, size_t size);

/* ---- paths under build/ (kernel/build_path.c) ----------------------------- */

#define BUILD_DIR "build"
#define BUILD_METADATA_FILE "metadata.json"

/* A repo path under build/<variant>: both pointers point into the path. */
struct build_path {
	const char *variant;	/* not NUL-terminated after variant_len */
	size_t variant_len;	/* > 0 */
	const char *file;	/* after build/<variant>/; NULL for build/<variant> itself */
};

/* 0 when path is build/<variant> or build/<variant>/<file> (variant not
 * empty), KHUB_EINVAL otherwise. Whether build/<x> is a directory (a
 * variant) or a file (none) only the caller knows. */
int build_path_parse(const char *path, struct build_path *out);

/* ---- metadata.json (kernel/metadata.c) ------------------------------------ */

/* metadata.json larger than this is not read (real ones are < 2 KiB). */
#define METADATA_MAX_BYTES (256 * 1024)

enum variant_metadata_status { VARIANT_METADATA_OK, VARIANT_METADATA_MISSING, VARIANT_METADATA_INVALID };

const char *variant_metadata_status_name(enum variant_metadata_status s);	/* ok, missing, invalid */

/* One build/<variant>/ judged as the loader and the kernel requirements
 * (kernel-requirements: id, name, version, license, backend) would. */
struct variant_check {
	int name_valid;
	const char *name_error;		/* static; NULL when the name is valid */
	struct variant_name parsed;	/* when name_valid */
	enum variant_metadata_status metadata_status;
	char metadata_error[320];	/* "" when ok */
	json_t *metadata;		/* owned: the document when it is JSON; NULL when missing or not */
	/* Read from the document when of the right type (borrowed from metadata). */
	const char *kernel_id, *kernel_name, *license, *backend_type;
	int has_kernel_version;
	json_int_t kernel_version;
	json_t *backend_archs, *python_depends;
	struct strvec warnings;		/* owned */
};

/* Judge the name (a non-canonical one warns); the metadata starts missing. */
void variant_check_init(struct variant_check *c, const char *name);
/* Judge the metadata.json bytes of the variant. */
void variant_check_metadata(struct variant_check *c, const char *text, size_t len);
/* The metadata.json is there but cannot be read (why: static or copied). */
void variant_check_unreadable(struct variant_check *c, const char *why);
void variant_check_release(struct variant_check *c);	/* accepts NULL */

/* ---- compliance (kernel/compliance.c) ------------------------------------- */

/* The required build variants (data/build-variants.json): per system
 * (x86_64-linux) and backend, the variant names a compliant kernel has. */
struct required_group {
	char *system, *backend;		/* owned */
	size_t required;		/* entries in the list (strings or not) */
	struct strvec variants;		/* owned: the string entries */
};

struct required_variants {
	struct required_group *groups;
	size_t count;
};

/* Parse the list ({system: {backend: [names]}}) into out, which the caller
 * owns (release with required_variants_release); KHUB_EINVAL, with the
 * reason in why, when it is not a JSON object. */
int required_variants_parse(const char *text, size_t len, struct required_variants *out, char *why, size_t why_size);
void required_variants_release(struct required_variants *r);	/* accepts NULL */

/* What a revision has: a build/<variant>/ and whether its metadata is ok. */
struct variant_presence {
	const char *name;
	int metadata_ok;
};

struct compliance_group {
	const char *system, *backend;	/* borrowed from the required list */
	size_t required;
	const char **present, **missing, **invalid_metadata;	/* owned arrays of borrowed names */
	size_t npresent, nmissing, ninvalid;
	int compliant;			/* nothing missing or broken */
	/* the revision has a valid arch variant of this backend for this
	 * system (any torch): it aims at it, so what the group lacks is what
	 * stands between it and compliance there; a group not targeted is
	 * simply not built for, which makes nothing "missing" */
	int targeted;
};

struct compliance {
	int compliant;			/* some group, or the Python-only way */
	struct compliance_group *groups;
	size_t ngroups;
	/* Python-only kernels: torch-<noarch> of every backend of the list. */
	char **python_accepted;		/* owned */
	size_t npython_accepted;
	const char **python_present;	/* owned array, names borrowed from python_accepted */
	size_t npython_present;
	int python_compliant;
};

/* One revision's variants against the list. Release with compliance_release;
 * it borrows from list, which must outlive it. */
void compliance_compute(const struct required_variants *list, const struct variant_presence *have, size_t n,
			struct compliance *out);
void compliance_release(struct compliance *c);	/* accepts NULL */


/* ---- README cards (kernel/card.c) ----------------------------------------- */

#define CARD_FRONT_MATTER_MAX (64 * 1024)	/* front matter not closed by then: none */
#define CARD_TAGS_MAX 32
#define CARD_TAG_MAX 64				/* bytes of one tag */
#define CARD_VALUE_MAX 128			/* bytes of license, library_name */
#define CARD_DESCRIPTION_MAX 300		/* bytes of the description */
#define CARD_SEARCH_TEXT_MAX (64 * 1024)	/* bytes of the body kept for search */

/* A README.md as the Hub reads a model card. Every string is well-formed
 * UTF-8 without control characters, and owned. */
struct kernel_card {
	int has_front_matter;
	size_t body_offset;		/* where the Markdown body starts */
	char *license, *library_name;	/* NULL when the front matter has none */
	struct strvec tags;		/* at most CARD_TAGS_MAX, no repeats */
	char *description;		/* the body's first paragraph as text; NULL none */
	char *body_text;		/* the body's first CARD_SEARCH_TEXT_MAX bytes; NULL empty */
};

/* Read text[0..len) (any bytes) into *out; release with kernel_card_release. */
void kernel_card_parse(const char *text, size_t len, struct kernel_card *out);
void kernel_card_release(struct kernel_card *c);	/* accepts NULL */

/* ---- selections (kernel/select.c) ----------------------------------------- */

/* Shared by the mirror and air-gap bundles. 1 when s matches one of the
 * fnmatch globs. */
int select_glob_any(char *const *globs, size_t n, const char *s);
/* Is a full ref name (refs/heads/x, refs/tags/y) selected by short-name
 * globs ("main", "v*"), "tags" (every tag) or "all"? */
int select_ref(char *const *refs, size_t nrefs, const char *full);
/* Is a repo path wanted: 1 unless it lies in build/<variant>/ with a
 * variant name outside the globs. */
int select_variant_path(char *const *globs, size_t n, const char *path);

#endif
