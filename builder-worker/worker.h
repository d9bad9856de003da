/* worker.h -- khub-worker's internal API: toolchains and their probe, one
 * sandboxed build of one variant, and the claim loop that drives builds for
 * a khub server. khub-worker links common/ and kernel/ only (never
 * storage/, api/ or server/): it talks to khub over HTTP (docs/build-farm.md). */
#ifndef KHUB_WORKER_H
#define KHUB_WORKER_H

#include <stddef.h>
#include <sys/types.h>

/* ---- toolchains (toolchain.c) ------------------------------------------------------ */

/* One entry of toolchains.json, plus what probing it found. */
struct toolchain {
	char *name;
	char *python;			/* the interpreter with torch: fixes the variant */
	char *cxx, *nvcc, *hipcc;	/* NULL when absent */
	char *cmake, *ninja;		/* NULL when absent */
	char **env;			/* "KEY=VALUE" strings, nenv of them */
	size_t nenv;
	char *root;			/* an unpacked root file system the toolchain's programs
					 * run in (its /usr, /lib*, /opt... as /), paths inside
					 * it; NULL: the host's (docs/build-farm.md) */
	char *hipify;			/* "torch" (torch.utils.hipify of its Python) or a
					 * hipify-perl program: a ROCm variant's CUDA (.cu)
					 * sources are hipified first (hipify.c); NULL: none */
	int rocm_from_hipcc;		/* build ROCm variants with hipcc against a torch
					 * that is not a ROCm build (ROCm version from
					 * `hipcc --version`); see docs/worker-build.md */

	/* Filled by toolchain_probe. */
	int usable;			/* 1 when it can build the variants below */
	char why[256];			/* why not, when !usable */
	char *torch_version;		/* "1.13.1" */
	char *cuda_version, *rocm_version;	/* "13.0" / "7.1", NULL for a CPU torch; with
						 * rocm_from_hipcc, hipcc's HIP version */
	const char *torch_build;	/* what the torch itself was built for: "cpu", "cuda", "rocm" */
	int cxx11_abi;
	char **variants;		/* the variant names it can produce, nvariants of them */
	size_t nvariants;

	/* Also from toolchains.json and the probe, for the build (build.c). */
	int allow_no_sandbox;		/* build without network isolation when none can be made */
	char *python_version, *machine;	/* "3.11.2", "x86_64" */
	char *python_include;		/* Python.h's directory */
	char **torch_includes;		/* torch.utils.cpp_extension.include_paths() */
	size_t ntorch_includes;
	char *torch_lib;		/* libtorch*.so's directory */
	char *cxx_version, *nvcc_version, *hipcc_version;	/* first line of --version, NULL absent */
	char *hipify_version;		/* the hipify tool and its version, NULL without one */
	int nvcc_major, nvcc_minor;	/* from "release X.Y"; -1 unknown */
	int has_kernels;		/* the Python can import kernels (smoke import through it) */
	char *root_digest;		/* with root: "sha256:..." of what toolchain_root_digest covers */
	int benchmarks;			/* "benchmarks": true: it runs farm benchmarks on device */
	char *device, *driver;		/* torch.cuda.get_device_name(0) or "cpu"; the NVIDIA
					 * driver's version ("" none) */
};

/* The device model of a benchmark toolchain without a GPU (the probe's
 * answer; a job's "device"): a device model, not a backend's name. */
#define BENCHMARK_DEVICE_CPU "cpu"

struct toolchain_set {
	struct toolchain *items;
	size_t count;
};

/* Read toolchains.json into *out (the caller releases it with
 * toolchains_release); KHUB_EINVAL with a message naming the entry and key
 * in why. */
int toolchains_load(const char *path, struct toolchain_set *out, char *why, size_t why_size);
void toolchains_release(struct toolchain_set *set);	/* accepts NULL */

/* Run the toolchain's Python and compilers to learn what it builds; sets
 * usable/why and the probe fields. 0, or a KHUB_E* error (tc->why says).
 * With cache_dir (may be NULL) the Python's report is kept there, keyed by
 * the entry, its environment and the interpreter's file, and reused while
 * none of them nor torch's version.py changed (no torch import). */
int toolchain_probe(struct toolchain *tc, const char *cache_dir);

/* The first usable toolchain that produces variant, or NULL (borrowed). */
const struct toolchain *toolchain_for_variant(const struct toolchain_set *set, const char *variant);
/* The first usable toolchain that runs benchmarks ("benchmarks": true) on
 * the device model named (as probed), or NULL (borrowed). */
const struct toolchain *toolchain_for_benchmarks(const struct toolchain_set *set, const char *device);
/* 1 when a benchmark toolchain's probed device is an NVIDIA GPU (a CUDA
 * torch that found one), whose device nodes its sandbox passes through. */
int toolchain_device_is_nvidia_gpu(const struct toolchain *tc);

/* ---- command lines (options.c) ------------------------------------------------------ */

#include <stdio.h>

enum worker_option_kind {
	WOPT_STRING,	/* const char *: the argument (borrowed from argv) */
	WOPT_LIST,	/* struct strvec: every occurrence appended */
	WOPT_LONG,	/* long, from min to max */
	WOPT_INT,	/* int, from min to max */
	WOPT_FLAG,	/* int set to 1; no argument */
	WOPT_CALL,	/* parse(argument, field) */
	WOPT_HELP,	/* --help: the parse returns WORKER_OPTIONS_HELP */
};

/* One option of a subcommand: --name [ARG], where its value goes in the
 * subcommand's options struct, its bounds, its line of --help. */
struct worker_option {
	const char *name;		/* without the leading "--"; NULL ends a table */
	const char *arg;		/* the argument in --help (FILE, N); NULL: takes none */
	enum worker_option_kind kind;
	size_t offset;			/* offsetof(the options struct, its field) */
	long min, max;			/* WOPT_LONG, WOPT_INT */
	int (*parse)(const char *arg, void *field);	/* WOPT_CALL: 0, or -1 after saying why on stderr */
	int required;			/* a usage error when left out */
	const char *help;
};

struct worker_command {
	const char *synopsis;		/* --help's first line(s) */
	const struct worker_option *options;
	const char *epilogue;		/* after the options; may be NULL */
};

#define WORKER_OPTIONS_HELP 1		/* --help was given */
#define WORKER_OPTIONS_BAD_VALUE (-1)	/* a value out of bounds or malformed (said on stderr) */
#define WORKER_OPTIONS_USAGE (-2)	/* unknown option, stray argument, a required one missing */

/* Parse argv (argv[0] the subcommand) by cmd's table into opts: 0,
 * WORKER_OPTIONS_HELP, or a negative WORKER_OPTIONS_* after getopt or the
 * row's check said what is wrong (the caller prints the usage or not). */
int worker_options_parse(const struct worker_command *cmd, int argc, char **argv, void *opts);
/* The --help text: synopsis, one line per option, epilogue. */
void worker_options_usage(const struct worker_command *cmd, FILE *fp);

/* A command-line number for flag (as "--name") between lo and hi: 0 and
 * *out, or -1 after saying on stderr what the flag wants. */
int worker_parse_number(const char *s, const char *flag, long lo, long hi, long *out);
/* --build-user UID[:GID] (GID: UID when left out; neither 0): 0, or -1
 * after saying so on stderr. */
int worker_parse_build_user(const char *s, long *uid, long *gid);
/* WOPT_CALL for --build-user: field is a long uid followed by a long gid. */
int worker_option_build_user(const char *arg, void *field);

/* The daemon's build uids, --build-user UID[-LAST][:GID]: slot i (the i-th
 * build at once) builds as UID+i, so that no build shares its uid's
 * process limit (RLIMIT_NPROC counts all of a uid's processes) with
 * another. gid 0: the first uid's number is every slot's group (their
 * builds share a repo's cache); else GID is. */
struct build_users {
	long uid, last, gid;
};
/* 0, or -1 after saying so on stderr. */
int worker_parse_build_users(const char *s, struct build_users *u);
/* WOPT_CALL for the daemon's --build-user: field is a struct build_users. */
int worker_option_build_users(const char *arg, void *field);
/* The uid and gid slot builds as (slot <= u->last - u->uid). */
void build_users_slot(const struct build_users *u, int slot, long *uid, long *gid);

/* ---- one build (build.c and friends) ----------------------------------------------- */

/* Exit codes of `khub-worker build`. */
enum build_outcome {
	BUILD_OK = 0,		/* OUT has <variant>/ and abi-report.json (which may list violations) */
	BUILD_FAILED = 1,	/* compile, link or smoke import failed: the log says why */
	BUILD_BAD_SOURCE = 2,	/* build.toml or the source layout is invalid: the log names the key */
	BUILD_TIMED_OUT = 3,	/* a limit was hit (wall clock, CPU time, memory, disk) */
	BUILD_INTERNAL = 4,	/* the worker itself failed (disk, sandbox set-up) */
	BUILD_BAD_JOB = 5,	/* the variant is not one this kernel is built as (a noarch variant of
				 * compiled sources, a stable ABI mismatch, tvm-ffi): never retried */
	BUILD_LACKS_TOOL = 6,	/* the toolchain lacks a tool this source needs (hipify for a ROCm
				 * build of CUDA sources): retried, on a worker whose toolchain has it */
	BUILD_USAGE = 64
};

/* `khub-worker build ...`: one variant from a source directory into OUT
 * (docs/build-farm.md), logging to stdout/stderr; returns an enum
 * build_outcome. Untrusted code (CMake, compilers, the smoke import) runs
 * in a sandbox without network and without the worker's environment. */
int build_main(int argc, char **argv);

/* `khub-worker benchmark ...`: a kernel's benchmarks/benchmark*.py run
 * against a built variant in the builds' sandbox, the payloads `kernels
 * benchmark` uploads written to --output (benchmark.c); an enum
 * build_outcome (BUILD_FAILED: a script failed, its error on stderr). */
int benchmark_main(int argc, char **argv);


#define SANDBOX_BUILD_UID_DEFAULT 65534	/* nobody/nogroup: who builds when the worker is root */
/* A root daemon's first build uid when --concurrency is over 1 and no
 * --build-user is given (slot i: this + i, all in group this): in the range
 * 1879048192-2147352575 that systemd's UID table leaves unused (above the
 * container ranges, below the foreign range), so no account, service or
 * container shares it; the sandbox writes its own passwd, none is needed. */
#define SANDBOX_BUILD_UIDS_DEFAULT 2000000000L
#define SANDBOX_MAX_PROCESSES_DEFAULT 512	/* --max-processes */
#define BUILD_CACHE_MAX_MB_DEFAULT 2048	/* --cache-max-mb, --build-cache-mb */

/* What isolation tc's builds get here (`--check`): sets up a sandbox on a
 * throw-away scratch as a build would and probes it; one line into text.
 * 0 when it is the whole sandbox, else KHUB_EPERM (text says what is
 * missing or why there is none) (build.c). */
int build_describe_sandbox(const struct toolchain *tc, long build_uid, long build_gid, long max_processes,
			   char *text, size_t size);

/* 1 when uid:gid can search every directory above path and has the
 * permissions want (4 read, 2 write, 1 search; 0: none) on it, by the mode
 * bits (sandbox.c; the daemon checks its work directory with it). */
int sandbox_reachable(const char *path, uid_t uid, gid_t gid, int want);

/* ---- the daemon (daemon.c) ---------------------------------------------------------- */

/* `khub-worker --url ...`: register, claim, build, heartbeat, stream logs,
 * publish, until SIGTERM/SIGINT (then finish or release the jobs held). */
int daemon_main(int argc, char **argv);

#endif
