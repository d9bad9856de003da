/* common.h -- small libraries shared by every module: logging, a growable
 * string buffer, hex and time helpers. Nothing here knows about HTTP, git or
 * the database, so any module may include it. */
#ifndef KHUB_COMMON_H
#define KHUB_COMMON_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <sys/types.h>

#include <openssl/types.h>

/* ---- logging (common/log.c) ------------------------------------------- */

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

extern enum log_level log_threshold;

/* Parse "error", "warn", "info" or "debug"; returns -1 on anything else. */
int log_level_parse(const char *name);
void log_set_output(FILE *fp);
/* The request id printed on every line logged by this thread; NULL clears. The
 * string is copied. */
void log_set_request_id(const char *request_id);
const char *log_request_id(void);
void log_write(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* log_format = json: every line one JSON object ({"time", "level",
 * "request_id" when set, "msg"}); 0 = text lines (the default). */
void log_set_json(int on);
int log_is_json(void);
/* A JSON line whose members after time, level and request_id are fields:
 * JSON object members, already escaped ("\"a\":1,\"b\":\"x\""). Only
 * for JSON output (log_is_json). */
void log_write_fields(enum log_level level, const char *fields);
/* Where a child process's stderr should go: with JSON logs, a pipe whose
 * lines are logged as JSON lines ("source":"child stderr", level warn) by a
 * thread of this process (made on the first call); with text logs -1
 * (inherit stderr). Valid for the life of the process. */
int log_child_stderr_fd(void);

#define log_error(...) do { if (log_threshold >= LOG_LEVEL_ERROR) log_write(LOG_LEVEL_ERROR, __VA_ARGS__); } while (0)
#define log_warn(...)  do { if (log_threshold >= LOG_LEVEL_WARN)  log_write(LOG_LEVEL_WARN, __VA_ARGS__); } while (0)
#define log_info(...)  do { if (log_threshold >= LOG_LEVEL_INFO)  log_write(LOG_LEVEL_INFO, __VA_ARGS__); } while (0)
#define log_debug(...) do { if (log_threshold >= LOG_LEVEL_DEBUG) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__); } while (0)

/* Print to stderr and exit(1); only for start-up failures. */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- growable string buffer (common/strbuf.c) --------------------------- */

struct strbuf {
	char *buf;	/* always NUL-terminated once anything was added */
	size_t len;
	size_t alloc;
};

#define STRBUF_INIT { NULL, 0, 0 }

void strbuf_init(struct strbuf *sb);
void strbuf_grow(struct strbuf *sb, size_t extra);
void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_adds(struct strbuf *sb, const char *s);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
void strbuf_add_int(struct strbuf *sb, int64_t v);	/* decimal, no printf */
/* Append s with every byte outside [A-Za-z0-9-._~] (and '/' when keep_slash)
 * percent-encoded. */
void strbuf_add_urlencoded(struct strbuf *sb, const char *s, int keep_slash);
/* Append s as a quoted JSON string: quote, backslash and control bytes
 * escaped, a byte that is not well-formed UTF-8 (see utf8_decode) written
 * as \ufffd: the result always parses, whatever s holds. khub's one JSON
 * string quoter: answers, log lines and files alike. */
void strbuf_add_json_quoted(struct strbuf *sb, const char *s);
/* khub's one UTF-8 decoder: the code point of the sequence at s (n bytes
 * left) in *cp (may be NULL) and its length, 1 to 4; -1 when it is not
 * well-formed UTF-8: a stray continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, or cut short (by n or a non-continuation). */
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
void strbuf_reset(struct strbuf *sb);
/* Hand the buffer to the caller, who frees it; sb is left empty. Never NULL. */
char *strbuf_detach(struct strbuf *sb, size_t *len);
void strbuf_release(struct strbuf *sb);

/* A NULL-terminated list of strings the vector owns (argv, envp, warnings). */
struct strvec {
	char **items;
	size_t count;
};
#define STRVEC_INIT { NULL, 0 }
void strvec_pushf(struct strvec *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strvec_vpushf(struct strvec *v, const char *fmt, va_list ap);
void strvec_release(struct strvec *v);

/* ---- helpers (common/util.c) ------------------------------------------- */

/* Allocation that never returns NULL (aborts on out-of-memory). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Free n strings and then the array holding them (NULL when n is 0). */
void free_strings(char **v, size_t n);

/* Lowercase hex of len bytes into out (2*len+1 bytes). */
void hex_encode(const unsigned char *in, size_t len, char *out);
/* Decode 2*len hex chars; 0 or -1 on a bad digit. */
int hex_decode(const char *hex, unsigned char *out, size_t len);
/* 1 when s is exactly n lowercase hex characters. */
int is_lower_hex(const char *s, size_t n);

/* Standard base64 (with padding) of len bytes; the caller frees. */
char *base64_encode(const void *data, size_t len);
/* Decode strict standard base64 (no blanks); the caller frees; NULL when
 * it is not base64. */
unsigned char *base64_decode_strict(const char *text, size_t len, size_t *out_len);

/* SHA-256 of a buffer as 64 hex chars + NUL. */
void sha256_hex(const void *data, size_t len, char out[65]);
/* Finish a SHA-256 that ctx was fed (EVP_DigestInit_ex with EVP_sha256())
 * into 64 hex chars + NUL; ctx must be initialised again before reuse. */
void sha256_final_hex(EVP_MD_CTX *ctx, char out[65]);

/* Decode %HH escapes in place; returns -1 on a malformed escape or a
 * decoded NUL byte. '+' is left alone (paths, not forms). */
int percent_decode_inplace(char *s);

/* "2026-11-22T10:29:33.000Z" */
void format_iso8601(time_t t, char out[32]);
/* Monotonic clock in microseconds. */
uint64_t monotonic_usec(void);
/* The same clock to the kernel's tick (1 to 10 ms), read without the
 * timer: for TTLs and deadlines checked on every request. */
uint64_t monotonic_coarse_usec(void);
/* The time usec from now on clock (CLOCK_MONOTONIC, CLOCK_REALTIME): a
 * deadline for pthread_cond_timedwait and friends. */
struct timespec clock_after_usec(clockid_t clock, uint64_t usec);
/* A doubly linked list whose nodes live inside the items (dlist_item gets
 * the item back); it owns nothing. */
struct dlist_node {
	struct dlist_node *prev, *next;
};
struct dlist {
	struct dlist_node *first, *last;
};
#define dlist_item(node, type, member) ((type *)(void *)((char *)(node) - offsetof(type, member)))
void dlist_append(struct dlist *l, struct dlist_node *n);
void dlist_unlink(struct dlist *l, struct dlist_node *n);

/* A background thread of the server that waits on wake under lock until
 * stopping is set. */
struct bg_thread {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	int stopping, running;
};
#define BG_THREAD_INIT { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER }
/* Run fn(NULL) on t's thread; fatal ("cannot start the <what>") when it
 * cannot be created. */
void bg_thread_start(struct bg_thread *t, void *(*fn)(void *), const char *what);
/* If t runs: set stopping, wake the thread and join it. */
void bg_thread_stop(struct bg_thread *t);

/* Create every missing directory of path (mode 0755); 0 or -1 with errno. */
int mkdir_p(const char *path, unsigned mode);
/* fsync a directory, or a file, by path; 0 or -1 with errno. */
int fsync_dir(const char *path);
int fsync_file(const char *path);
/* Read a whole small file (limit bytes at most); caller frees; NULL on error. */
char *read_file_limited(const char *path, size_t limit, size_t *len);
/* Write all len bytes of data to fd, again after EINTR: 0, or -1 with errno
 * (EIO when write wrote nothing). */
int write_all(int fd, const void *data, size_t len);
/* Read fd (a child's pipe) into out until end of file or the
 * monotonic_usec() deadline, keeping at most limit bytes (0: no limit):
 * 0 at end of file, 1 when the deadline came first, -1 on a read error. */
int read_until_deadline(int fd, uint64_t deadline, size_t limit, struct strbuf *out);
/* The same, but stops once out holds limit bytes or more (returns 2): a
 * child flooding its output is cut off, not drained. */
int read_until_deadline_or_limit(int fd, uint64_t deadline, size_t limit, struct strbuf *out);
/* Walk the tree below root depth first, names in byte order: visit(rel, path,
 * name, ctx) for every entry but . and .., with rel its path below root
 * ("sub/x.so"), path root/rel and name its last part. visit returns 0 to go
 * on, DIR_WALK_ENTER to walk into the entry (a directory), or a negative
 * KHUB_E* that ends the walk and is returned. KHUB_EIO when a directory
 * cannot be opened. */
#define DIR_WALK_ENTER 1
int dir_walk(const char *root, int (*visit)(const char *rel, const char *path, const char *name, void *ctx), void *ctx);

/* rm -rf path: every entry below it, then path itself; symbolic links are
 * removed, never followed; directories a build left without write or
 * search permission are given u+rwx first. Missing path: 0. 0, or KHUB_EIO
 * when anything could not be removed (the rest still is). */
int tree_remove(const char *path);


/* ---- IP address ranges (common/net_range.c) ---------------------------- */

/* An address or a CIDR range: family (AF_INET, AF_INET6), the address's
 * bytes (IPv4 in the first 4) and the prefix's bits. */
struct net_range {
	int family;
	unsigned char addr[16];
	unsigned bits;
};
/* "192.0.2.1", "10.0.0.0/8", "2001:db8::/32" into r: 0, or -1 when text
 * is none of these. */
int net_range_parse(const char *text, struct net_range *r);
/* 1 when addr (4 or 16 bytes of family) is in r, else 0. */
int net_range_contains(const struct net_range *r, int family, const unsigned char *addr);
/* 1 when addr (4 or 16 bytes of family) is in a special-purpose range
 * (loopback, private, link-local, multicast, reserved; IPv6 forms that
 * carry an IPv4 address), which outgoing connections refuse by default. */
int net_address_reserved(int family, const unsigned char *addr);

/* ---- request metrics and Prometheus text (common/metrics.c) ----------- */

/* The keys requests are counted under (route patterns), copied; once per
 * process, before the first reqstats_record. */
void reqstats_init(const char *const *keys, size_t n);
/* Count one request under key (its index in reqstats_init's list; others
 * are ignored): status (0 when none was sent), body bytes sent, duration.
 * No lock: the figures are the calling thread's own. */
void reqstats_record(size_t key, int status, uint64_t bytes, uint64_t usec);
/* khub_http_requests_total{route,status}, khub_http_response_bytes_total
 * {route} and the histogram khub_http_request_duration_seconds{route},
 * summed over every thread, for keys that counted a request. */
void reqstats_write(struct strbuf *sb);
/* A label value with backslash, quote and newline escaped. */
void prom_label_value(struct strbuf *sb, const char *v);
/* "# HELP name help" and "# TYPE name type". */
void prom_family(struct strbuf *sb, const char *name, const char *type, const char *help);
/* "name value" (name may carry its labels). */
void prom_sample(struct strbuf *sb, const char *name, double value);

/* ---- text from builds, safe to show (common/terminal_text.c) ----------- */

/* Append text to out with nothing a terminal or a page would act on: ANSI
 * CSI and OSC sequences dropped, \r\n kept as \n and a lone \r made a line
 * end, every other C0 control, DEL, C1 control (U+0080 to U+009F) and byte
 * that is not well-formed UTF-8 written as the four characters \xNN; \n,
 * \t and printable UTF-8 kept. */
void terminal_text_sanitize(const char *text, size_t n, struct strbuf *out);
/* Append text to out as one line: every C0 control (\n, \r, \t and ESC
 * included), DEL, C1 control and byte that is not well-formed UTF-8 written
 * as \xNN; printable UTF-8 kept. log_write passes every text line through
 * it, so no logged field (a request target, a user agent, a build.toml key)
 * can end a line or drive the reader's terminal. terminal_text_needs_escape: 1 when
 * it would change text. */
void terminal_text_escape_line(const char *text, size_t n, struct strbuf *out);
int terminal_text_needs_escape(const char *text, size_t n);

/* ---- string-keyed hash map (common/hashmap.c); not locked ------------- */

struct hashmap_entry {
	struct hashmap_entry *next;
	char *key;
	void *value;
	uint64_t hash;
};

struct hashmap {
	struct hashmap_entry **buckets;
	size_t nbuckets;
	size_t count;
};

void hashmap_init(struct hashmap *map);
/* The value stored under key, or NULL. */
void *hashmap_get(const struct hashmap *map, const char *key);
/* Store value under key (the key is copied); returns the value it replaced
 * (the caller frees it) or NULL. */
void *hashmap_put(struct hashmap *map, const char *key, void *value);
/* Remove key; returns its value (the caller frees it) or NULL. */
void *hashmap_remove(struct hashmap *map, const char *key);
/* Free the table; free_value (may be NULL) is called on every value. */
void hashmap_release(struct hashmap *map, void (*free_value)(void *));
uint64_t hash_string(const char *s);

/* ---- streaming JSON (common/json_stream.c) ------------------------------ */

/* Parses a sequence of JSON objects (NDJSON, or one document) fed in chunks
 * of any size, without holding any value whole unless asked to: the
 * consumer chooses per string whether to receive it in pieces (for
 * arbitrarily large base64 payloads) or collected (bounded). Keys are
 * reported as a path from the top-level object. */

#define JSON_STREAM_MAX_DEPTH 8
#define JSON_STREAM_MAX_KEY 256

enum json_scalar { JSON_STREAM_STRING, JSON_STREAM_NUMBER, JSON_STREAM_TRUE, JSON_STREAM_FALSE,
		   JSON_STREAM_NULL };
enum json_string_mode { JSON_STRING_COLLECT, JSON_STRING_STREAM };

struct json_stream_handler {
	void *ctx;
	/* A top-level object starts / ends (one NDJSON line). */
	int (*object_begin)(void *ctx);
	int (*object_end)(void *ctx);
	/* A string value at path (keys[0..depth-1]) starts: stream or collect? */
	enum json_string_mode (*string_mode)(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth);
	/* Pieces of a streamed string (unescaped bytes), then its end. */
	int (*string_chunk)(void *ctx, const char *data, size_t len);
	int (*string_end)(void *ctx);
	/* A collected string, number or literal at path (NUL-terminated text;
	 * strings may contain NUL only if escaped as \u0000, which is refused). */
	int (*scalar)(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth, enum json_scalar kind,
		      const char *text, size_t len);
};

struct json_stream;

/* collect_limit bounds collected strings and numbers. NULL never. */
struct json_stream *json_stream_new(const struct json_stream_handler *handler, size_t collect_limit);
void json_stream_free(struct json_stream *js);
/* Feed bytes; 0, or -1 on a syntax error or a callback failure (then
 * json_stream_error says why and the stream refuses further input). */
int json_stream_feed(struct json_stream *js, const char *data, size_t len);
/* The input ended; -1 if it stopped inside a value. */
int json_stream_finish(struct json_stream *js);
const char *json_stream_error(const struct json_stream *js);
/* Line (1-based) of the byte being parsed, for error messages. */
size_t json_stream_line(const struct json_stream *js);

/* ---- one error type for every module ------------------------------------ */

enum khub_err {
	KHUB_OK = 0,
	KHUB_ENOTFOUND = -1,	/* repo, revision, path, object or account absent */
	KHUB_EINVAL = -2,	/* bad input: the caller answers 400 */
	KHUB_EEXIST = -3,	/* already there */
	KHUB_ECONFLICT = -4,	/* compare-and-swap lost (parentCommit, ref moved) */
	KHUB_EIO = -5,		/* disk or git failure */
	KHUB_EDB = -6,		/* database failure */
	KHUB_ETOOBIG = -7,	/* over a configured limit */
	KHUB_EPERM = -8,	/* not allowed */
	KHUB_ENOTDIR = -9,	/* path names a file where a directory was wanted */
	KHUB_ENOSPC = -10,	/* disk full (or over quota): the caller answers 507 */
	KHUB_EBUSY = -11,	/* held by another live writer: 503 with Retry-After */
};

/* ---- starting programs (common/spawn.c) -------------------------------- */

struct spawn_opts {
	char *const *argv;	/* argv[0]: the program's path (no PATH search after fork) */
	char *const *envp;	/* NULL: this process's environment */
	int fd_in, fd_out, fd_err;	/* become 0, 1, 2 in the child; -1 = inherited */
	const char *dir;	/* NULL: this process's directory */
	int drop_privileges;	/* run as uid/gid, without supplementary groups */
	uid_t uid;
	gid_t gid;
	int no_new_privs;	/* PR_SET_NO_NEW_PRIVS: no setuid program regains privileges */
	int new_process_group;	/* setpgid(0, 0): the caller can signal the whole group */
	int die_with_parent;	/* SIGKILL the child when the forking thread dies */
	int reset_signals;	/* no blocked signal, SIGPIPE/SIGTERM/SIGINT default */
	const struct spawn_rlimit *rlimits;	/* set in the child before exec (both soft and hard) */
	size_t nrlimits;
	/* Descriptors the program is given past 0-2 (bwrap's --seccomp FD):
	 * keep_fds[i] becomes SPAWN_FIRST_KEPT_FD + i in the child, so the
	 * command line names those numbers; at most SPAWN_MAX_KEPT_FDS. */
	const int *keep_fds;
	size_t nkeep_fds;
};

#define SPAWN_FIRST_KEPT_FD 3
#define SPAWN_MAX_KEPT_FDS 8

/* One resource limit for spawn_opts (RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE...). */
struct spawn_rlimit {
	int resource;
	unsigned long long value;
};

/* Start opts->argv[0] in a child; 0 and *pid, or -1 (errno) when fork
 * failed. The program gets descriptors 0-2 and opts->keep_fds, nothing
 * else: the child closes every other one before exec (close_range, else
 * each one /proc/self/fd lists), whatever close-on-exec flags they have, so
 * no socket, pipe or file of the parent's other threads reaches it.
 * Between fork and exec the child only calls async-signal-safe
 * functions (setgroups, setgid, setuid, setpgid, setrlimit, dup2, fcntl, chdir, prctl,
 * sigaction, sigprocmask, open, getdents64, close_range, close, execve, _exit),
 * so it is safe from a process with many threads; exit status 126 means the
 * child could not be set up, 127 that the program could not be run. */
int spawn_process(const struct spawn_opts *opts, pid_t *pid);
/* Mark every descriptor of this process from `first` on close-on-exec:
 * those it inherited and those a library opened without the flag (libcurl
 * 7.88's wakeup socketpair). spawn_process closes them in its child all the
 * same; this keeps them from any exec that does not go through it. */
void fds_set_cloexec_from(int first);
/* The path of program `name` in the ':'-separated dirs of path (a name with
 * a '/' is returned as is); NULL when none is executable. Caller frees. */
char *spawn_find_program(const char *name, const char *path);

const char *khub_strerror(int err);
/* KHUB_ENOSPC for a full disk or quota (ENOSPC, EDQUOT), else KHUB_EIO. */
int khub_err_from_errno(int errnum);
/* ---- Ed25519 keys and signatures (common/ed25519.c) ----------------------- */

/* The hub's one signer: sync bundles and build provenance sign with it.
 * Functions return 0 or a negative enum khub_err; err gets a message. */
#define ED25519_KEY_ID_LEN 16	/* hex characters of a key id */
#define ED25519_SIG_LEN 64
/* PREFIX.key (PEM PKCS#8, mode 0600) and PREFIX.pub (PEM); fills key_id.
 * KHUB_EEXIST when PREFIX.key is there already (never overwritten). */
int ed25519_keygen(const char *prefix, char key_id[ED25519_KEY_ID_LEN + 1], char *err, size_t errlen);
/* Sign len bytes of msg (pure Ed25519, no prehash) with the private key
 * file key_path; key_id gets the key's id. */
int ed25519_sign(const char *key_path, const void *msg, size_t len, unsigned char sig[ED25519_SIG_LEN],
		 char key_id[ED25519_KEY_ID_LEN + 1], char *err, size_t errlen);
/* The public key in a PEM file (the caller frees it with EVP_PKEY_free),
 * or NULL with err. */
EVP_PKEY *ed25519_public_load(const char *path, char *err, size_t errlen);
/* The public key of a private key file (the caller frees it), or NULL
 * with err. */
EVP_PKEY *ed25519_public_of_private(const char *key_path, char *err, size_t errlen);
/* The public half of a private key file as PEM text (the caller frees),
 * or NULL with err. */
char *ed25519_public_pem(const char *key_path, char key_id[ED25519_KEY_ID_LEN + 1], char *err, size_t errlen);
int ed25519_key_id(EVP_PKEY *key, char id[ED25519_KEY_ID_LEN + 1]);
/* 1 when sig is key's signature of msg, else 0. */
int ed25519_verify(EVP_PKEY *key, const void *msg, size_t len, const unsigned char sig[ED25519_SIG_LEN]);

/* ---- CPUs this process may use (common/cpus.c) --------------------------- */

/* The CPUs this process may run on: the online CPUs narrowed by its
 * affinity mask (sched_getaffinity) and by the CPU quota of its cgroup and
 * the cgroup's ancestors (v2 cpu.max, v1 cpu.cfs_quota_us/cfs_period_us),
 * a quota rounding up to whole CPUs; at least 1. Everything sized per CPU
 * uses this. When why is not NULL it gets the reason, e.g. "2 CPUs:
 * sched_getaffinity allows 2 of 16, no cgroup CPU quota". */
long usable_cpus(char *why, size_t why_len);
/* Parse a cgroup CPU quota, "QUOTA PERIOD" in microseconds ("max" or "-1"
 * for no quota): the CPUs it grants rounded up (>= 1), 0 for no quota, -1
 * for anything else. shown (may be NULL) gets "QUOTA/PERIOD". */
long cpu_quota_parse(const char *text, char *shown, size_t shown_len);
/* The smallest CPU quota (cpu_quota_parse) on the cgroup that PROC_CGROUP
 * (a /proc/PID/cgroup) names and its ancestors, under SYSFS_ROOT
 * (/sys/fs/cgroup: v2 there or in unified/, v1 in cpu/ or cpu,cpuacct/);
 * 0 when none. why gets "cgroup cpu.max QUOTA/PERIOD" or the v1 files. */
long cgroup_cpu_quota(const char *proc_cgroup, const char *sysfs_root, char *why, size_t why_len);

#endif
