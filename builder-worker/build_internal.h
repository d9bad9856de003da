/* build_internal.h -- the pieces of one `khub-worker build` (build.c drives
 * them): the sandbox every untrusted command runs in, Path B compilation,
 * packaging of the variant directory, and the ABI check. Not used by the
 * daemon, which runs `khub-worker build` as a subprocess. */
#ifndef KHUB_WORKER_BUILD_INTERNAL_H
#define KHUB_WORKER_BUILD_INTERNAL_H

#include "builder-worker/worker.h"
#include "common/common.h"
#include "kernel/kernel.h"

#include <jansson.h>
#include <stdint.h>

/* ---- sandbox (sandbox.c, sandbox_seccomp.c) ----------------------------------------- */

enum sandbox_mode {
	SANDBOX_BWRAP,		/* bubblewrap: user, pid, net, ipc, mount namespaces; a filesystem of its own */
	SANDBOX_NONE		/* only when the toolchain sets allow_no_sandbox (loud in every log) */
};

#define SANDBOX_INNER_UID 1000		/* the uid build code sees in its user namespace */

/* How a build may be isolated, from the command line and the toolchain. */
struct sandbox_options {
	int allow_no_sandbox;		/* the toolchain's allow_no_sandbox */
	int bwrap_only;			/* --sandbox bwrap: no fallback, not even an allowed one */
	long build_uid, build_gid;	/* the uid the commands run as when the worker is root */
	long max_processes;		/* RLIMIT_NPROC of the commands' uid; 0: none */
	const char *root;		/* the toolchain's root file system shown as /; NULL: the host's */
};

/* A directory of the scratch the commands see, read-write or read-only. */
struct sandbox_bind {
	char *path;		/* owned */
	char *at;		/* owned: where the commands see it (path itself, or a fixed name) */
	int writable;
};

struct sandbox {
	enum sandbox_mode mode;
	char *tool;		/* bwrap (owned); NULL for SANDBOX_NONE */
	int disable_userns;	/* this bwrap has --disable-userns (0.8+; the seccomp filter refuses them anyway) */
	char *scratch;		/* the build's scratch directory (owned); only its binds are seen */
	char *root;		/* owned: the directory whose /usr, /lib*, /opt... the commands see; NULL: the host's */
	struct sandbox_bind *binds;	/* owned; the only parts of the worker's disk a command can write */
	size_t nbinds;
	struct strvec ro_dirs;	/* the toolchain's directories outside /usr, bound read-only */
	struct strvec hide;	/* paths overlaid with nothing inside the sandbox */
	struct strvec env;	/* KEY=VALUE: the whole environment of the commands */
	int drop;		/* the worker is root: commands run as uid/gid */
	uid_t uid;
	gid_t gid;
	long max_processes;	/* RLIMIT_NPROC; 0 = none */
	long cpu_seconds, memory_mb, disk_mb;	/* per process (disk_mb: also the whole scratch); 0 = no limit */
	uint64_t deadline_usec;	/* monotonic_usec() limit for the whole build; 0 = none */
	int disk_hit;		/* a command was killed for filling the scratch over disk_mb */
	char *cache_dir;	/* the build cache (owned; NULL: none): its growth counts in disk_mb */
	unsigned long long cache_start;	/* its bytes when the build began */
	int log_fd;		/* stderr of every command (and stdout unless redirected) */
	struct sandbox_bind *devices;	/* owned: device nodes passed through (a GPU benchmark's); none for builds */
	size_t ndevices;
};

/* Outcomes of sandbox_run besides an exit status. */
#define SANDBOX_TIMED_OUT (-100)	/* the wall-clock deadline (or a stop signal) */
#define SANDBOX_CPU_LIMIT (-101)	/* failed after using up the CPU-time limit */
#define SANDBOX_DISK_LIMIT (-102)	/* killed: the scratch grew over disk_mb */
/* The exit status of `khub-worker build --exec-measured` for that. */
#define SANDBOX_EXIT_CPU_LIMIT 152

/* Choose the isolation: bubblewrap with every namespace, else, only when
 * o->allow_no_sandbox (and not o->bwrap_only), none. 0, or KHUB_EPERM with
 * why. Takes a copy of scratch; fills sb->ro_dirs from ro_dirs (borrowed).
 * When the worker is root the commands run as o->build_uid. */
int sandbox_init(struct sandbox *sb, const char *scratch, const struct sandbox_options *o,
		 const struct strvec *ro_dirs, char *why, size_t why_size);
void sandbox_release(struct sandbox *sb);
const char *sandbox_mode_name(enum sandbox_mode mode);
/* Let the commands see path (inside the scratch) read-write or read-only;
 * a second call for the same path changes its mode. */
void sandbox_bind(struct sandbox *sb, const char *path, int writable);
/* Pass an NVIDIA GPU through (a benchmark job on a CUDA device, never a
 * build): the device nodes of dev_dir ("/dev"; a test gives its own)
 * named nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidiaN and the folder
 * nvidia-caps, each that is there, bound at /dev/NAME with device access;
 * nothing else of /dev beyond what builds get. How many were found. */
size_t sandbox_pass_nvidia_gpu(struct sandbox *sb, const char *dev_dir);
/* The command line sandbox_start runs for argv in dir (bwrap's options
 * first in SANDBOX_BWRAP mode; argv[0] as given), appended to args. */
void sandbox_command_line(const struct sandbox *sb, char *const *argv, const char *dir, struct strvec *args);
/* path seen by the commands at `at` as well (a fixed name: compilers that
 * hash their input's full path, as nvcc does for its internal symbols,
 * give the same bytes whatever the scratch is called). */
void sandbox_bind_at(struct sandbox *sb, const char *path, const char *at, int writable);
/* Hand path (a tree inside the scratch) to the build uid (lchown; only
 * when the worker is root). 0 or KHUB_EIO. */
int sandbox_give(struct sandbox *sb, const char *path);
/* The same, and every entry readable and writable by the build group as by
 * its owner (in the same walk, root or not): a tree the builds at once of
 * a daemon's slots (uids of one group) share, the build cache. */
int sandbox_give_shared(struct sandbox *sb, const char *path);
/* Take path back from build code before the worker uses it: remove every
 * entry that is not a regular file or a directory (links, fifos...), give
 * the rest to the worker's uid and the build's gid, 0750/0640 (build code
 * reads, only the worker writes). 0 or KHUB_EIO. */
int sandbox_take_back(struct sandbox *sb, const char *path);
/* Run a probe inside the sandbox and describe what isolation it gives
 * into text (one line); 0 when it is the whole of it (always 0 for
 * SANDBOX_NONE, whose text says what is missing), else KHUB_EPERM. */
int sandbox_describe(struct sandbox *sb, char *text, size_t size);
/* A seccomp filter (BPF) refusing mount, ptrace, unshare, bpf... with
 * EPERM, in a new memfd without close-on-exec at offset 0 (caller closes),
 * or -1. */
int sandbox_seccomp_fd(void);

/* Run argv (argv[0] searched in the sandbox's PATH) in the sandbox, with
 * cwd dir (inside scratch), stdout to out_fd (-1: the log): its own process
 * group, rlimits, killed with its group at the deadline or when the scratch
 * grows over disk_mb. Returns the exit status (128+signal when killed),
 * SANDBOX_TIMED_OUT, SANDBOX_DISK_LIMIT, or a negative KHUB_E* when it could
 * not be started. */
int sandbox_run(struct sandbox *sb, char *const *argv, const char *dir, int out_fd);

/* `khub-worker build --exec-measured CPU -- PROG ARGS` (inside the
 * sandbox): run PROG, return its status (128+signal), or
 * SANDBOX_EXIT_CPU_LIMIT when it failed having used the CPU limit. */
int sandbox_exec_measured(long cpu_seconds, char **argv);

/* sandbox_run in two halves, for several commands at once: start one
 * (0 and *pid, 127 when the program is not found, or a negative KHUB_E*),
 * then wait for any of pids[0..n) (entries <= 0 are skipped): the finished
 * one's index and result as sandbox_run's, its entry set to 0. At the
 * deadline (or over the disk limit) every group is killed and
 * SANDBOX_TIMED_OUT (SANDBOX_DISK_LIMIT) returned. */
int sandbox_start(struct sandbox *sb, char *const *argv, const char *dir, int out_fd, pid_t *pid);
int sandbox_wait_any(struct sandbox *sb, pid_t *pids, size_t n, size_t *index);
/* Kill and reap the process groups of pids[0..n) still running. */
void sandbox_kill_all(pid_t *pids, size_t n);

/* Run a trusted program outside the sandbox (the toolchain probe), with env
 * only, capturing stdout (at most 1 MiB) into *out (caller frees); stderr
 * to err_fd (-1: discarded). Returns the exit status, SANDBOX_TIMED_OUT
 * after timeout_s, or a negative KHUB_E*. */
int run_capture(char *const *argv, char *const *env, int timeout_s, char **out, int err_fd);

/* argv[0] found in PATH-like path as the commands see it: inside root
 * (root NULL: the host's), the path returned is the one seen there (the
 * caller frees), or NULL. */
char *sandbox_find_program(const char *root, const char *name, const char *path);

/* path (absolute, inside root) with the links of its last part resolved
 * inside root, as a command there sees it; the caller frees it. */
char *sandbox_root_resolve(const char *root, const char *path);

/* run_capture, with root (not NULL) shown as / to the program: bubblewrap
 * with no network, a fresh /tmp, only root's system directories and /etc
 * (the toolchain probe of a toolchain with a root). argv[0] is searched in
 * env's PATH inside root; 127 when it is not there, or when there is no
 * bubblewrap to make the view. */
int run_capture_in_root(const char *root, char *const *argv, char *const *env, int timeout_s, char **out, int err_fd);

/* ---- toolchains (toolchain.c) ------------------------------------------------------ */

/* The environment of a toolchain's programs into env: PATH (system dirs
 * unless the toolchain sets it), HOME=home, TMPDIR=/tmp, LC_ALL, then the
 * toolchain's env. Nothing of the worker's own environment. */
void toolchain_environment(const struct toolchain *tc, const char *home, struct strvec *env);
/* The PATH of a toolchain_environment (its PATH=, else the system's). */
const char *toolchain_env_path(const struct strvec *env);
/* tc's programs (python, cxx, nvcc, hipcc, cmake, ninja, a hipify program;
 * NULL when absent) into out. */
#define TOOLCHAIN_PROGRAMS 7
void toolchain_programs(const struct toolchain *tc, const char *out[TOOLCHAIN_PROGRAMS]);
/* The directories a probed toolchain needs that the sandbox does not show
 * already (/usr, /lib*, /bin): the prefixes of its programs, the absolute
 * paths of its env, its torch and Python headers, into dirs. KHUB_EPERM
 * with why when one lies where a build may never look (/root, /home, /var,
 * /tmp, /etc, /run...). */
int toolchain_sandbox_dirs(const struct toolchain *tc, struct strvec *dirs, char *why, size_t why_size);

/* With tc->root: 0 when bubblewrap can show it as /, else KHUB_EPERM with
 * tc->why (toolchain_root.c). 0 without a root. */
int toolchain_root_check(struct toolchain *tc);
/* tc->root_digest ("sha256:" + hex) of the root's os-release, package
 * database and tc's programs (toolchain_root.c): 0, or KHUB_EIO with tc->why. */
int toolchain_root_digest(struct toolchain *tc);

/* ---- the backends compiled here (compile.c) ---------------------------------------- */

struct build_plan;

/* What compiling a backend's arch variant takes: one row per backend this
 * worker builds, named as kernel/'s backend table names it. The only place
 * a backend's compiler, flags, archs and libraries are chosen. */
struct compile_backend {
	const char *name;		/* its kernel_backends[] row (kernel/backend.c) */
	const char *compiler_key;	/* its GPU compiler's toolchains.json key: nvcc; NULL: C++ only */
	size_t compiler, version;	/* with compiler_key: offsetof(struct toolchain, nvcc / cuda_version) */
	const char *version_title;	/* what torch calls its version: CUDA, HIP */
	const char *defines[3];		/* for every translation unit */
	void (*toolchain_defines)(const struct toolchain *tc, struct strvec *args);	/* by compiler version */
	const char *gpu_sources[2];	/* the suffixes its GPU compiler takes */
	void (*gpu_command)(struct build_plan *p, const char *rel, json_t *kernel, struct strvec *args);
	const char *flags_key;		/* [kernel.*]'s extra flags for that compiler: cuda-flags */
	const char *archs_key;		/* [kernel.*]'s archs: cuda-capabilities; NULL: no GPU archs */
	const char *noarch_archs_key;	/* [torch-noarch]'s: cuda_capabilities */
	void (*select_archs)(struct build_plan *p, const char *const *caps, size_t ncaps);	/* into p->archs */
	int probe_archs;		/* keep only the archs the compiler can compile for (one empty compile each) */
	int offload_report;		/* the report lists the HIP code objects found in the libraries */
	int from_hipcc;			/* a rocm_from_hipcc toolchain builds it against a torch of another build */
	int (*gpu_threads)(const struct build_plan *p, size_t compiles);	/* threads of one GPU compile; NULL: 1 */
	int discard_locals;		/* link with --discard-all (nvcc's FILE symbols name a temp file) */
	const char *toolkit_lib;	/* the library directory under the compiler's root: lib64 */
	const char *torch_libs[2];	/* torch's own for the backend, linked when the torch is its build */
	const char *runtime_lib;	/* cudart */
};

/* The row of kernel/'s backend kb (or of the backend named name), or NULL
 * when this worker compiles no arch variant of it (borrowed, static). */
const struct compile_backend *compile_backend_for(const struct kernel_backend *kb);
const struct compile_backend *compile_backend_find(const char *name);
/* The row of what tc's torch was built for (its CUDA or HIP version; else the CPU row). */
const struct compile_backend *compile_backend_of_torch(const struct toolchain *tc);
/* tc's compiler for b (nvcc), and the version of b tc's torch has; NULL for none. */
const char *compile_backend_compiler(const struct compile_backend *b, const struct toolchain *tc);
const char *compile_backend_version(const struct compile_backend *b, const struct toolchain *tc);

/* ---- the build cache (cache.c) ------------------------------------------------------- */

/* Where build code sees its cache (bind-mounted read-write). */
#define BUILD_CACHE_AT "/khub/ccache"

/* One build's ccache: which directory, its bound, and what it did. */
struct build_cache {
	char *dir;		/* <root>/<sha256 of repo and toolchain> (owned); NULL: no cache */
	char *program;		/* ccache's path (owned) */
	char *stats_log;	/* where ccache logs each compile's counters (owned) */
	long max_mb;		/* ccache's max_size */
	long hits, misses, uncached;	/* compiles served from it, compiled and stored, not cacheable */
	char why_off[160];	/* why there is none, when dir is NULL ("" when none was asked) */
};

/* The cache directory of repo built with toolchain under root:
 * root/<sha256 hex of "repo\ntoolchain">: one per repo and toolchain,
 * never shared between repos (caller frees). */
char *build_cache_dir(const char *root, const char *repo, const char *toolchain);
/* Set the cache up for this build: the directory made (02770, the build
 * uid's and its group's, every file group-writable: the builds at once of
 * one repo and toolchain share it), bound at BUILD_CACHE_AT read-write,
 * ccache's environment (its bound, umask 007, no hash of the scratch's
 * name) in sb->env. Without ccache the build goes on uncached (c->dir
 * NULL, c->why_off says why). 0 or KHUB_EIO. */
int build_cache_prepare(struct build_cache *c, struct sandbox *sb, const char *home);
/* Count the compiles of ccache's stats log text (hits, misses, uncached). */
void build_cache_count(struct build_cache *c, const char *text);
/* Read the stats log (never through a link) into the counts, logged. */
void build_cache_read_stats(struct build_cache *c);
/* After the build: a cache over its bound (build code may write anything
 * there) is emptied, logged. */
void build_cache_bound(struct build_cache *c);
/* The report's "cache" object (a new reference). */
json_t *build_cache_json(const struct build_cache *c);
void build_cache_release(struct build_cache *c);

/* ---- build plan shared by compile.c and package.c ---------------------------------- */

struct build_plan {
	const struct toolchain *tc;
	json_t *config;		/* build.toml as validated by build_toml.py (owned) */
	const char *variant;
	struct variant_name parsed;	/* the variant */
	const char *backend;	/* cpu, cuda, rocm... (the variant's) */
	const struct compile_backend *cb;	/* its row (a toolchain lists variants of those only) */
	long torch_major, torch_minor;	/* the toolchain's torch, compiled against */
	char stable_abi[16];	/* a torch-stable-abi variant: the target ("2.11"); else "" */
	int noarch;		/* a torch-<backend> or torch-universal variant */
	char *module;		/* name with - as _ (owned) */
	char *ops_name;		/* _<module>_<backend>_<uid> (owned) */
	struct strvec namespace_units;	/* units whose text names TORCH_EXTENSION_NAME (compile.c, read once) */
	struct strvec runtime_units;	/* C++ units that register under khub_op_namespace (compile.c) */
	int runtime_module;	/* one of them has REGISTER_EXTENSION: PyInit_ goes to the namespace file */
	const char *scratch;	/* the build's scratch directory (borrowed) */
	char *src;		/* scratch copy of the source (owned) */
	char *obj;		/* scratch object directory (owned) */
	char *stage;		/* scratch/stage/<variant>: the package being made (owned) */
	struct strvec archs;	/* compiled archs for backend.archs (sorted, unique) */
	struct strvec archs_left_out;	/* ROCm archs asked for that hipcc cannot compile */
	struct strvec hipified;		/* the CUDA sources hipified (hipify.c), as build.toml names them */
	struct strvec hipified_headers;	/* the project headers they include, translated too */
	json_t *capabilities_left_out;	/* [{"capability", "reason"}] the toolkit cannot build (owned) */
	struct sandbox *sb;
	int jobs;		/* compiler processes at once */
	int gpu_threads;	/* threads of each GPU compile (nvcc --threads); 0: not given */
	int namespace_everywhere;	/* a header names TORCH_EXTENSION_NAME: every unit gets it (compile.c) */
	struct build_cache cache;	/* ccache, when dir is set */
};

/* ---- compile (compile.c) ------------------------------------------------------------ */

/* What the scratch directory is called in everything a build writes
 * (-ffile-prefix-map): the same bytes whatever the scratch's name. */
#define BUILD_PREFIX_MAP_TO "/khub/build"
/* Where the compilers see the source and object directories (and run). */
#define BUILD_FIXED_SRC BUILD_PREFIX_MAP_TO "/src"
#define BUILD_FIXED_OBJ BUILD_PREFIX_MAP_TO "/obj"

/* Log args on the build log and run them in the sandbox where compiles
 * run: BUILD_OK, BUILD_FAILED, BUILD_TIMED_OUT or BUILD_INTERNAL. */
int compile_run(struct build_plan *plan, struct strvec *args);

/* What a C++ unit's text does with TORCH_EXTENSION_NAME, comments and
 * string literals aside: how often it is the whole first argument of
 * TORCH_LIBRARY_EXPAND(, TORCH_LIBRARY_IMPL_EXPAND( or REGISTER_EXTENSION(,
 * whether one of those is REGISTER_EXTENSION, and the first other use (its
 * line and what it is; "" when none). A unit with registrations and no
 * other use registers under the runtime namespace (docs/worker-build.md). */
struct namespace_use {
	size_t registrations;
	int registers_module;
	char why[160];
};
void compile_namespace_use(const char *text, size_t n, struct namespace_use *u);

/* ---- ROCm from CUDA sources (hipify.c) ----------------------------------------------- */

/* A hipify tool, chosen by a toolchain's "hipify" value. */
struct hipify_tool {
	const char *name;
	int python;	/* 1: torch.utils.hipify run by the toolchain's Python */
	/* The command translating in (a CUDA source) into out, both relative
	 * to the source directory, appended to args. */
	void (*command)(const struct toolchain *tc, const char *in, const char *out, struct strvec *args);
};
/* The tool "hipify": value names: "torch", else a hipify-perl program. */
const struct hipify_tool *hipify_tool_of(const char *value);
/* 1 when rel is a CUDA source a ROCm build hipifies (.cu). */
int hipify_wanted(const char *rel);
/* The file hipcc compiles for rel: its hipified copy (a new string) when
 * the build hipified it, else rel itself (a new string). */
char *hipify_compiled_name(const struct build_plan *plan, const char *rel);
/* A ROCm variant: translate its CUDA sources ([torch].src and its
 * [kernel.*] of backend rocm) with the toolchain's hipify tool, in the
 * sandbox, into .hip copies beside them in the scratch source; each is
 * logged and listed in plan->hipified. The project headers they include
 * (quoted, found in the scratch copy beside the including file, never
 * through a link or outside it; transitively, bounded) are translated into
 * <name>_hip<ext> beside them and listed in plan->hipified_headers, and the
 * translations' includes point at them. Without a hipify tool a CUDA
 * source ends the build with BUILD_LACKS_TOOL, saying so. BUILD_OK or
 * the failure. */
int hipify_sources(struct build_plan *plan);

/* Path B: compile [torch].src and the variant backend's [kernel.*] sources
 * (plan->jobs at a time), link stage/<ops>.abi3.so without RPATH. BUILD_OK, BUILD_FAILED or
 * BUILD_TIMED_OUT / BUILD_INTERNAL; the log says why. */
int compile_variant(struct build_plan *plan);

/* The CUDA archs to build for nvcc version major.minor and the kernel's
 * capabilities (NULL/0: the defaults), as the loose intersection of the
 * contract: each default takes the kernel's highest capability <= it with
 * its major. Appends "8.0", "9.0+PTX"... to out, unique. */
void cuda_archs_select(int nvcc_major, int nvcc_minor, const char *const *caps, size_t ncaps, struct strvec *out);
/* Each capability build.toml's kernels of v's backend ask for (their
 * archs_key) that v's toolkit cannot build, appended to out as
 * {"capability", "reason"}: the planner's reasons (kernel/toolkit.c). */
void compile_capabilities_left_out(json_t *config, const struct variant_name *v, const char *archs_key, json_t *out);
/* nvcc's --threads for one compile: the build's CPUs (jobs) shared among
 * the nvcc compiles that run at once, at most one per code target
 * (targets: its -gencode count), at least 1; 0 when nvcc major.minor is
 * older than 11.2 (no --threads). */
int nvcc_threads(int nvcc_major, int nvcc_minor, int jobs, size_t compiles, size_t targets);

/* ---- packaging (package.c) ----------------------------------------------------------- */

/* The registration.h the binding includes (macros of the kernel-builder
 * contract, our own text). */
extern const char registration_header[];

/* Write stage/_ops.py and copy torch-ext/<module>/ (py + pyext files). */
int package_python(struct build_plan *plan);
/* Remove __pycache__ and *.pyc under dir. */
void package_remove_bytecode(const char *dir);
/* metadata.json without digest, in plan->stage. prov: the khub provenance
 * object (borrowed). */
int package_metadata(struct build_plan *plan, const char *commit, json_t *khub_fields);
/* Add "digest" (sha256 base64 of every file but the top-level metadata.json
 * and metadata.json.sigstore) to stage/metadata.json. */
int package_digest(const char *stage);
/* Render source/CARD.md into out_path (README.md); 0 when written, 1 when
 * there is no CARD.md, or KHUB_EIO. */
int package_card(const struct build_plan *plan, const char *out_path, const char *repo);
/* Copy a directory tree (regular files and directories; symlinks are
 * skipped with a warning on the log; .git and __pycache__ are not copied). */
int copy_tree(const char *from, const char *to, int log_fd);
/* Copy one regular file (mode 0644). */
int copy_tree_file(const char *from, const char *to);
/* The digest "files" map (path -> sha256 base64, as metadata.json's) of
 * every file under dir, into files. */
int package_tree_digest(const char *dir, json_t *files);
/* Read fd to its end, handing each chunk to use (which returns 0 or a
 * KHUB_E* that stops the reading): 0, use's error, or KHUB_EIO. */
int read_chunks(int fd, int (*use)(const char *buf, size_t n, void *ctx), void *ctx);
/* Bytes allocated under path (du). */
unsigned long long tree_disk_usage(const char *path);

/* ---- ABI check (abi_check.c) ------------------------------------------------------- */

enum abi_violation_kind { ABI_MANYLINUX, ABI_PYTHON, ABI_NON_ABI3, ABI_NEEDED, ABI_TORCH_STABLE };

/* A manylinux target (PEP 600) and the symbol versions it allows. */
struct abi_manylinux;
/* The target named "2_31" or "manylinux_2_31" (NULL or "": manylinux_2_28),
 * or NULL when this worker does not know it (borrowed, static). */
const struct abi_manylinux *abi_manylinux_find(const char *name);
const char *abi_manylinux_name(const struct abi_manylinux *t);	/* "manylinux_2_31" */
/* abi_check_dir_for against target: the report's "manylinux" names it and
 * its "glibc" says what each symbol needs ("__libc_single_threaded@GLIBC_2.32"),
 * the newest of them and whether the target allows it. */
int abi_check_dir_target(const char *dir, const char *torch_stable_abi, const struct abi_manylinux *target,
			 json_t **report);
/* Check every *.so under dir (a variant directory): manylinux_2_28 symbol
 * versions, Python stable ABI 3.9, DT_NEEDED allowlist. *report receives
 * the abi-report.json document (owned by the caller); 0 (even with
 * violations: see report "ok"), or KHUB_EIO when a file cannot be read. */
int abi_check_dir(const char *dir, json_t **report);
/* The same, plus for a torch stable ABI build (torch_stable_abi: its target,
 * "2.11"; NULL for none) the rule that no C++ symbol of c10::, at:: or
 * torch:: (torch::stable:: aside) is imported. */
int abi_check_dir_for(const char *dir, const char *torch_stable_abi, json_t **report);
/* Check one ELF file into a report entry {path, needed, violations}. */
int abi_check_file(const char *path, const char *display, json_t **entry, struct strbuf *text);
int abi_check_file_for(const char *path, const char *display, const char *torch_stable_abi, json_t **entry,
		       struct strbuf *text);

/* ---- the report's build object (report.c) ----------------------------------------- */

/* Append to archs (a JSON array) the AMD GPU targets ("gfx90a") of the
 * clang offload bundles in path's .hip_fatbin section (none: nothing
 * added). 0, or KHUB_EIO when the file cannot be read as ELF. */
int report_offload_archs(const char *path, json_t *archs);
/* The targets of every library of the report (its "files", under
 * p->stage) into *found (a new array, the caller's), logged; KHUB_EINVAL
 * with a log line when an arch of p->archs has no code object, KHUB_EIO
 * when a library cannot be read. */
int report_hip_archs(const struct build_plan *p, json_t *report, json_t **found);
/* Set report["build"]: the variant, the torch it was compiled against and
 * what that torch was built for, ROCm's version and where it came from,
 * the archs compiled and left out, offload_archs (borrowed, may be NULL),
 * what the (passed) smoke import showed and notes for a reader (also
 * logged). */
void report_add_build(json_t *report, const struct build_plan *p, json_t *offload_archs);

#endif
