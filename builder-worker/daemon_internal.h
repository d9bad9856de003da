/* daemon_internal.h -- the parts of khub-worker's daemon shared between its
 * files: the HTTP client of the worker protocol (hub_client.c), the tar
 * unpacker and packer (worker_tar.c) and one claimed job (job.c). Nothing
 * here is used outside builder-worker/. */
#ifndef KHUB_DAEMON_INTERNAL_H
#define KHUB_DAEMON_INTERNAL_H

#include "common/common.h"
#include "builder-worker/worker.h"

#include <jansson.h>
#include <signal.h>

/* ---- HTTP client (hub_client.c) ------------------------------------------------------ */

/* One connection to khub for one thread (a libcurl easy handle); url and
 * token are borrowed and must outlive it. */
struct hub_client;

/* Call once before any thread starts (curl_global_init). */
int hub_global_init(void);
void hub_global_cleanup(void);

struct hub_client *hub_client_new(const char *url, const char *token);
void hub_client_free(struct hub_client *hc);	/* accepts NULL */

/* What one call got back. status is the HTTP status, or 0 when the
 * transport failed (then error says why). body holds the answer (bounded). */
struct hub_reply {
	long status;
	struct strbuf body;
	char error[256];
};
void hub_reply_release(struct hub_reply *r);

/* One request; no retry. body may be NULL (empty). content_type NULL means
 * application/json. timeout_s bounds the whole call (0: only a stall of
 * 60 s without progress ends it). 0 when an HTTP answer came (any status),
 * -1 on a transport failure (r->status 0, r->error). */
int hub_call(struct hub_client *hc, const char *method, const char *path, const void *body,
	     size_t body_len, const char *content_type, long timeout_s, struct hub_reply *r);
/* GET path into the file at dest (created), at most limit bytes; as hub_call,
 * the answer's body in r only when the status is not 200. */
int hub_download(struct hub_client *hc, const char *path, const char *dest, uint64_t limit,
		 struct hub_reply *r);
/* PUT the file src to path as application/x-tar. */
int hub_upload(struct hub_client *hc, const char *path, const char *src, struct hub_reply *r);

/* The reply's body as a JSON object, or NULL (caller decrefs). */
json_t *hub_reply_json(const struct hub_reply *r);
/* The "error" of a JSON answer, or the first bytes of the body (static per
 * reply: valid while r lives). */
const char *hub_reply_error(struct hub_reply *r);

/* Retry policy: 1 when a call that got r is worth repeating (transport
 * failure, 408, 429, 5xx). */
int hub_reply_retryable(const struct hub_reply *r);

/* ---- tar archives (worker_tar.c) ----------------------------------------------------- */

struct tar_limits {
	uint64_t max_bytes;	/* total size of the files */
	uint64_t max_entries;
};

/* Unpack the tar file at tar_path into the existing directory dest. Every
 * entry is checked first: a relative path without "..", "." or empty
 * components; regular files, directories and symbolic links whose target
 * stays inside dest; nothing else (hard links, devices, fifos). 0, or
 * KHUB_EINVAL (why says which entry), KHUB_ETOOBIG, KHUB_EIO. Whatever was
 * written before a refusal stays in dest (the caller removes dest).
 * newest_mtime (may be NULL) receives the newest member mtime (khub sets
 * every member's to the commit's time, as git archive does; 0 if none). */
int tar_unpack(const char *tar_path, const char *dest, const struct tar_limits *limits, int64_t *newest_mtime,
	       char *why, size_t why_size);

/* Write a tar at tar_path of the entries named in names (relative to dir;
 * a directory is taken whole); a missing name is skipped. Regular files and
 * directories only: a symbolic link or anything else is KHUB_EINVAL. The
 * same tree gives the same bytes: members in byte order, each with mtime,
 * owner 0:0, mode 0755 or 0644. */
int tar_pack(const char *dir, const char *const *names, size_t nnames, int64_t mtime, const char *tar_path,
	     char *why, size_t why_size);

/* ---- the daemon's shared state and one job (daemon.c, job.c) ----------------------------- */

struct daemon_config {
	const char *url;
	const char *token;
	const char *toolchains_path;
	const char *self_exe;		/* this program, to run `khub-worker build` */
	const char *scratch_root;	/* <work-dir>/<name> */
	const char *name;
	const struct toolchain_set *toolchains;
	int heartbeat_seconds, lease_seconds;
	int kill_grace_seconds;
	struct build_users build_users;	/* who builds when the worker is root (--build-user): slot i as uid + i */
	long max_processes;		/* the builds' RLIMIT_NPROC (--max-processes) */
	int no_build_cache;		/* --no-build-cache: compile without ccache */
	long build_cache_mb;		/* each (repo, toolchain) cache's size (--build-cache-mb) */
	long build_jobs;		/* compiler processes of one build: the CPUs / --concurrency */
	/* Raised by the signal thread: stop claiming / release running jobs. */
	volatile sig_atomic_t stopping, releasing;
};

/* Build the claimed job (a JSON object, borrowed) in the daemon's slot
 * (its build uid, build_users_slot) to the end: scratch dir,
 * source, `khub-worker build` in its own process group, log streaming,
 * heartbeats, then output or fail (or release when cfg->releasing); the
 * scratch dir is removed whatever happened. Returns when the job is no
 * longer this worker's: 0, or 1 when the worker proved misconfigured (no
 * scratch, no toolchain, `khub-worker build` refusing its arguments): the
 * job was given back, not failed, and the daemon must stop. */
int job_run(const struct daemon_config *cfg, int slot, json_t *job);

#endif
