/* job.c -- one claimed build, from the source tar to the published output:
 * `khub-worker build` runs in its own process group with a clean
 * environment, its output streams to the job's log while the lease is kept
 * alive, and the outcome goes back to khub (output, fail or release). */
#include "builder-worker/daemon_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOG_CHUNK (64 * 1024)			/* one POST .../log at most */
#define LOG_PENDING_LIMIT (8 * 1024 * 1024)	/* held while khub does not take it */
#define LOG_TAIL_LIMIT (64 * 1024 * 1024)	/* the most of a log's tail held, whatever khub's cap */
#define SOURCE_LIMIT_DEFAULT_MB 4096
#define REPORT_RETRY_SECONDS 300		/* output/fail/release retried this long */
#define BENCHMARK_PAYLOADS "payloads.json"	/* a benchmark job's farm runs, in out/ */
#define BENCHMARK_PAYLOADS_MAX (16 * 1024 * 1024)

enum job_end { END_EXITED, END_CANCELED, END_LOST, END_RELEASED, END_WALL };

struct job {
	const struct daemon_config *cfg;
	long build_uid, build_gid;	/* its slot's (build_users_slot): no other build at once has them */
	struct hub_client *hc;
	char *id, *repo, *commit, *variant;
	char *manylinux;	/* the claim's abi_manylinux ("2_28"), NULL when it has none */
	int benchmark;		/* a benchmark job (kind "benchmark"): measured on device, never published */
	char *device;
	json_t *limits;
	int heartbeat_seconds, attempt, max_attempts;
	char *scratch;
	int64_t source_epoch;	/* the commit's time (the source tar's mtimes): SOURCE_DATE_EPOCH */
	/* the log stream */
	struct strbuf pending;
	uint64_t sent, dropped;
	int log_off;
	uint64_t last_flush_us;
	/* the claim's log_cap: the first log_head bytes are sent as they come;
	 * past them only the last log_tail bytes are kept, held here and sent
	 * (tail=1) at the end, so khub never stores what its cap drops */
	int64_t log_head;	/* -1: no cap said (an older khub): every byte sent */
	size_t log_tail;
	struct strbuf tail_hold;	/* the log's last bytes past the head, up to `produced` */
	uint64_t produced;
	int tail_sent;
	int output_done;	/* the build's output has ended: nothing is held back */
	char tail[512];		/* the last bytes of output, for the error message */
	size_t tail_len;
	/* the lease */
	uint64_t next_heartbeat_us;
	enum job_end end;
};

static uint64_t now_us(void)
{
	return monotonic_usec();
}

static char *job_path(const struct job *j, const char *what)
{
	return xasprintf("/api/builds/%s/%s", j->id, what);
}

/* ---- log stream ---------------------------------------------------------------------- */

/* Build code never sees the worker's token; should it print it all the
 * same, no log leaves the worker with it. */
#define TOKEN_MARK "[worker token]"

/* Replace every occurrence of token in sb from byte `from` on. */
static void scrub_token(struct strbuf *sb, size_t from, const char *token)
{
	size_t tlen = strlen(token);
	if (!tlen || sb->len < tlen || !memmem(sb->buf + from, sb->len - from, token, tlen))
		return;
	struct strbuf out = STRBUF_INIT;
	strbuf_add(&out, sb->buf, from);
	const char *p = sb->buf + from, *end = sb->buf + sb->len, *hit;
	while ((hit = memmem(p, (size_t)(end - p), token, tlen))) {
		strbuf_add(&out, p, (size_t)(hit - p));
		strbuf_adds(&out, TOKEN_MARK);
		p = hit + tlen;
	}
	strbuf_add(&out, p, (size_t)(end - p));
	strbuf_release(sb);
	*sb = out;
}

/* How many bytes at the end of buf[0..len) could begin the token (held
 * back until the next bytes say whether they do). */
static size_t token_prefix_at_end(const char *buf, size_t len, const char *token)
{
	size_t tlen = strlen(token);
	for (size_t k = tlen > len + 1 ? len : tlen - 1; k > 0; k--)
		if (!memcmp(buf + len - k, token, k))
			return k;
	return 0;
}

/* A line of text (the error message) with the token, whole or cut at
 * either end (4 bytes or more), replaced. */
static void scrub_line(char *line, size_t size, const char *token)
{
	struct strbuf sb = STRBUF_INIT;
	size_t tlen = strlen(token), len = strlen(line), start = 0;
	strbuf_adds(&sb, line);
	for (size_t k = tlen - 1; k >= 4 && k < tlen && !start; k--)
		if (len >= k && !memcmp(line, token + tlen - k, k))
			start = k;	/* the line begins with the end of the token */
	struct strbuf out = STRBUF_INIT;
	if (start)
		strbuf_adds(&out, TOKEN_MARK);
	strbuf_add(&out, sb.buf + start, sb.len - start);
	scrub_token(&out, 0, token);
	size_t held = token_prefix_at_end(out.buf, out.len, token);
	if (held >= 4) {
		out.len -= held;
		out.buf[out.len] = 0;
		strbuf_adds(&out, TOKEN_MARK);
	}
	snprintf(line, size, "%s", out.buf ? out.buf : "");
	strbuf_release(&sb);
	strbuf_release(&out);
}

static void log_take(struct job *j, const char *data, size_t len)
{
	if (j->pending.len + len > LOG_PENDING_LIMIT) {
		j->dropped += len;
		return;
	}
	if (j->dropped) {
		strbuf_addf(&j->pending, "\n[khub-worker: %llu bytes of output dropped: khub did not take the log]\n",
			    (unsigned long long)j->dropped);
		j->dropped = 0;
	}
	size_t tlen = strlen(j->cfg->token);
	size_t from = j->pending.len >= tlen ? j->pending.len - tlen + 1 : 0;	/* a token across two reads */
	strbuf_add(&j->pending, data, len);
	scrub_token(&j->pending, from, j->cfg->token);
	for (size_t i = 0; i < len; i++) {
		if (j->tail_len == sizeof(j->tail)) {
			memmove(j->tail, j->tail + sizeof(j->tail) / 2, sizeof(j->tail) / 2);
			j->tail_len = sizeof(j->tail) / 2;
		}
		j->tail[j->tail_len++] = data[i];
	}
}

/* POST buf[0, n) at offset `at` of the attempt's log (tail: the log's last
 * bytes): 1 taken; 0 not now (send it again later); -1 refused (the log is
 * off, or *length says where khub's log ends). */
static int log_post(struct job *j, uint64_t at, const char *buf, size_t n, int tail, json_int_t *length)
{
	/* offsets count from this attempt's first byte; khub keeps each
	 * attempt's log apart (a chunk of another attempt is refused) */
	char *path = xasprintf("/api/builds/%s/log?offset=%llu&attempt=%d%s", j->id, (unsigned long long)at,
			       j->attempt, tail ? "&tail=1" : "");
	struct hub_reply r = { 0 };
	hub_call(j->hc, "POST", path, buf, n, "text/plain; charset=utf-8", 30, &r);
	free(path);
	json_t *body = hub_reply_json(&r);
	*length = body ? json_integer_value(json_object_get(body, "length")) : -1;
	json_decref(body);
	int rc = r.status == 200 ? 1 : -1;
	if (r.status == 409 && *length >= 0) {
		log_warn("build #%s: log offset %llu is beyond khub's %lld; continuing from there", j->id,
			 (unsigned long long)at, (long long)*length);
	} else if (r.status != 200 && hub_reply_retryable(&r)) {
		log_warn("build #%s: log chunk at %llu not taken (%s); will send it again", j->id,
			 (unsigned long long)at, hub_reply_error(&r));
		rc = 0;
	} else if (r.status != 200) {
		log_warn("build #%s: khub refused the log (%s); no more log for this build", j->id,
			 hub_reply_error(&r));
		j->log_off = 1;
		*length = -1;
	}
	hub_reply_release(&r);
	return rc;
}

/* The first n bytes of sb gone. */
static void drop_front(struct strbuf *sb, size_t n)
{
	memmove(sb->buf, sb->buf + n, sb->len - n);
	sb->len -= n;
	sb->buf[sb->len] = '\0';
}

/* Past the head: the next n pending bytes join the held tail (its last
 * log_tail bytes kept, trimmed now and then). */
static void log_hold(struct job *j, size_t n)
{
	strbuf_add(&j->tail_hold, j->pending.buf, n);
	j->produced += n;
	drop_front(&j->pending, n);
	if (j->tail_hold.len > 2 * j->log_tail)
		drop_front(&j->tail_hold, j->tail_hold.len - j->log_tail);
}

/* Past the head: while the build runs, tell khub how long the log is (an
 * empty chunk at its end: live readers see it grow); at its end, send the
 * held tail. */
static void log_flush_tail(struct job *j)
{
	json_int_t length;
	if (!j->output_done) {
		if (j->produced > j->sent && log_post(j, j->produced, "", 0, 0, &length) == 1)
			j->sent = j->produced;
		return;
	}
	if (j->tail_hold.len > j->log_tail)
		drop_front(&j->tail_hold, j->tail_hold.len - j->log_tail);
	while (j->tail_hold.len && !j->log_off) {
		size_t n = j->tail_hold.len > LOG_CHUNK ? LOG_CHUNK : j->tail_hold.len;
		int rc = log_post(j, j->produced - j->tail_hold.len, j->tail_hold.buf, n, 1, &length);
		if (rc == 0)
			return;	/* sent again at the next flush */
		if (rc < 0)
			break;	/* not khub's any more: no use sending the rest */
		drop_front(&j->tail_hold, n);
	}
	j->tail_hold.len = 0;
	j->tail_sent = 1;	/* what comes after goes on from its end */
	j->sent = j->produced;
}

/* Send what is pending, in chunks; a chunk that fails on the way is sent
 * again with the same offset next time (khub ignores a repeated chunk).
 * Past the log's head the bytes are held instead (log_flush_tail). */
static void log_flush(struct job *j)
{
	j->last_flush_us = now_us();
	size_t held = j->output_done ? 0 : token_prefix_at_end(j->pending.buf, j->pending.len, j->cfg->token);
	int capped = j->log_head >= 0 && !j->tail_sent;
	while (j->pending.len > held && !j->log_off) {
		size_t n = j->pending.len - held > LOG_CHUNK ? LOG_CHUNK : j->pending.len - held;
		if (capped && j->sent >= (uint64_t)j->log_head) {
			log_hold(j, n);
			continue;
		}
		if (capped && j->sent + n > (uint64_t)j->log_head)
			n = (size_t)((uint64_t)j->log_head - j->sent);	/* the head's last bytes */
		json_int_t length;
		int rc = log_post(j, j->sent, j->pending.buf, n, j->tail_sent, &length);
		if (rc == 0)
			return;
		if (rc > 0) {
			j->sent += n;
			j->produced = j->sent;
			drop_front(&j->pending, n);
		} else if (length >= 0) {
			j->sent = j->produced = (uint64_t)length;
		}
	}
	if (capped && j->sent >= (uint64_t)j->log_head && !j->log_off)
		log_flush_tail(j);
}

/* A line of the worker's own in the build's log. */
static void log_note(struct job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_note(struct job *j, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	strbuf_adds(&sb, "[khub-worker] ");
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	strbuf_adds(&sb, "\n");
	log_take(j, sb.buf, sb.len);
	strbuf_release(&sb);
}

/* The last non-empty line of the build's output, at most 200 bytes. */
static void last_line(const struct job *j, char *out, size_t size)
{
	size_t end = j->tail_len;
	while (end && (j->tail[end - 1] == '\n' || j->tail[end - 1] == '\r' || j->tail[end - 1] == ' '))
		end--;
	size_t start = end;
	while (start && j->tail[start - 1] != '\n')
		start--;
	size_t n = end - start > 200 ? 200 : end - start;
	snprintf(out, size, "%.*s", (int)n, j->tail + start);
	scrub_line(out, size, j->cfg->token);
}

/* ---- lease ----------------------------------------------------------------------------- */

/* Renew the lease; sets j->end to END_CANCELED / END_LOST when the build
 * must stop. 1 when it must. */
static int heartbeat(struct job *j)
{
	char *path = job_path(j, "heartbeat");
	struct hub_reply r = { 0 };
	int stop = 0;
	hub_call(j->hc, "POST", path, "{}", 2, NULL, 20, &r);
	free(path);
	if (r.status == 200) {
		json_t *body = hub_reply_json(&r);
		if (body && json_is_true(json_object_get(body, "cancel"))) {
			log_info("build #%s: canceled on khub; stopping it", j->id);
			j->end = END_CANCELED;
			stop = 1;
		}
		json_decref(body);
		j->next_heartbeat_us = now_us() + (uint64_t)j->heartbeat_seconds * 1000000;
	} else if (r.status == 409 || r.status == 404 || r.status == 410) {
		log_warn("build #%s: the lease is no longer this worker's (%s); stopping it", j->id,
			 hub_reply_error(&r));
		j->end = END_LOST;
		stop = 1;
	} else {
		log_warn("build #%s: heartbeat failed (%s); trying again", j->id, hub_reply_error(&r));
		uint64_t again = (uint64_t)(j->heartbeat_seconds < 5 ? j->heartbeat_seconds : 5) * 1000000;
		j->next_heartbeat_us = now_us() + again;
	}
	hub_reply_release(&r);
	return stop;
}

/* ---- reporting --------------------------------------------------------------------------- */

/* A report call (output, fail, release) retried on transport errors and
 * 5xx; the final reply is left in r. */
static void report(struct job *j, const char *method, const char *what, const char *json, const char *file,
		   struct hub_reply *r)
{
	char *path = job_path(j, what);
	uint64_t give_up = now_us() + (uint64_t)REPORT_RETRY_SECONDS * 1000000;
	unsigned delay = 1;
	for (;;) {
		if (file)
			hub_upload(j->hc, path, file, r);
		else
			hub_call(j->hc, method, path, json, strlen(json), NULL, 60, r);
		if (!hub_reply_retryable(r) || now_us() > give_up)
			break;
		log_warn("build #%s: %s %s failed (%s); again in %u s", j->id, method, path, hub_reply_error(r), delay);
		sleep(delay);
		delay = delay < 30 ? delay * 2 : 30;
		/* keep the lease while khub is away */
		if (now_us() >= j->next_heartbeat_us && heartbeat(j) && j->end == END_LOST)
			break;
	}
	free(path);
}

static void report_fail(struct job *j, const char *error, int retry, json_t *abi_report)
{
	json_t *body = json_pack("{s:s, s:b, s:O?}", "error", error, "retry", retry, "abi_report", abi_report);
	char *text = json_dumps(body, JSON_COMPACT);
	struct hub_reply r = { 0 };
	report(j, "POST", "fail", text, NULL, &r);
	json_t *answer = hub_reply_json(&r);
	const char *state = answer ? json_string_value(json_object_get(answer, "state")) : NULL;
	if (r.status == 200)
		log_info("failed build #%s %s %s@%.12s: %s (now %s)", j->id, j->variant, j->repo, j->commit, error,
			 state ? state : "?");
	else
		log_error("build #%s: reporting the failure failed (%s)", j->id, hub_reply_error(&r));
	json_decref(answer);
	hub_reply_release(&r);
	free(text);
	json_decref(body);
}

static void report_release(struct job *j)
{
	struct hub_reply r = { 0 };
	report(j, "POST", "release", "{}", NULL, &r);
	if (r.status == 200)
		log_info("released build #%s %s %s@%.12s (worker stopping)", j->id, j->variant, j->repo, j->commit);
	else
		log_error("build #%s: release failed (%s); its lease will expire", j->id, hub_reply_error(&r));
	hub_reply_release(&r);
}

static void report_output(struct job *j)
{
	char why[512];
	char *outdir = xasprintf("%s/out", j->scratch);
	char *tar = xasprintf("%s/output.tar", j->scratch);
	const char *names[] = { j->variant, "abi-report.json", "README.md" };
	int err = tar_pack(outdir, names, 3, j->source_epoch, tar, why, sizeof(why));
	if (err != KHUB_OK) {
		log_note(j, "packing the output failed: %s", why);
		log_flush(j);
		report_fail(j, why, err != KHUB_EINVAL, NULL);
		goto cleanup;
	}
	struct hub_reply r = { 0 };
	report(j, "PUT", "output", NULL, tar, &r);
	json_t *answer = hub_reply_json(&r);
	const char *s = answer ? json_string_value(json_object_get(answer, "branch")) : NULL;
	const char *c = answer ? json_string_value(json_object_get(answer, "commit")) : NULL;
	const char *note = answer ? json_string_value(json_object_get(answer, "note")) : NULL;
	if (r.status == 200)
		log_info("published build #%s %s %s@%.12s on %s (%.12s)%s%s", j->id, j->variant, j->repo, j->commit,
			 s ? s : "?", c ? c : "?", note ? ": " : "", note ? note : "");
	else if (r.status == 422)
		log_info("failed build #%s %s %s@%.12s: khub refused the output (%s)", j->id, j->variant, j->repo,
			 j->commit, hub_reply_error(&r));
	else
		log_error("build #%s: the output upload failed (%s)", j->id, hub_reply_error(&r));
	json_decref(answer);
	hub_reply_release(&r);
cleanup:
	free(outdir);
	free(tar);
}

/* ---- the build process ------------------------------------------------------------------- */

static void push_limit(struct strvec *argv, json_t *limits, const char *key, const char *flag)
{
	json_t *v = json_object_get(limits, key);
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		strvec_pushf(argv, "%s", flag);
		strvec_pushf(argv, "%lld", (long long)json_integer_value(v));
	}
}

/* `khub-worker benchmark` of a benchmark job: the source's benchmarks/
 * against the published build/<variant>/, the payloads to out/. */
static void push_benchmark_args(const struct job *j, const struct toolchain *tc, struct strvec *argv)
{
	const struct daemon_config *cfg = j->cfg;
	strvec_pushf(argv, "%s", cfg->self_exe);
	strvec_pushf(argv, "benchmark");
	const char *const options[][2] = {
		{ "--toolchains", cfg->toolchains_path }, { "--toolchain", tc->name }, { "--commit", j->commit },
		{ "--device", j->device },
	};
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		strvec_pushf(argv, "%s", options[i][0]);
		strvec_pushf(argv, "%s", options[i][1]);
	}
	strvec_pushf(argv, "--source");
	strvec_pushf(argv, "%s/src", j->scratch);
	strvec_pushf(argv, "--variant-dir");
	strvec_pushf(argv, "%s/variant/build/%s", j->scratch, j->variant);
	strvec_pushf(argv, "--output");
	strvec_pushf(argv, "%s/out/" BENCHMARK_PAYLOADS, j->scratch);
	strvec_pushf(argv, "--build-user");
	strvec_pushf(argv, "%ld:%ld", j->build_uid, j->build_gid);
	strvec_pushf(argv, "--max-processes");
	strvec_pushf(argv, "%ld", cfg->max_processes);
}

/* `khub-worker build` of a build job. */
static void push_build_args(const struct job *j, const struct toolchain *tc, struct strvec *argv)
{
	const struct daemon_config *cfg = j->cfg;
	char *src = xasprintf("%s/src", j->scratch), *out = xasprintf("%s/out", j->scratch);
	char epoch[24];
	snprintf(epoch, sizeof(epoch), "%lld", (long long)j->source_epoch);
	const char *const options[][2] = {
		{ "--toolchains", cfg->toolchains_path }, { "--toolchain", tc->name }, { "--source", src },
		{ "--out", out }, { "--variant", j->variant }, { "--build-id", j->id }, { "--repo", j->repo },
		{ "--commit", j->commit }, { "--worker", cfg->name }, { "--source-date-epoch", epoch },
	};
	static const char *const limits[][2] = {
		{ "wall_seconds", "--wall-seconds" }, { "cpu_seconds", "--cpu-seconds" },
		{ "memory_mb", "--memory-mb" }, { "disk_mb", "--disk-mb" },
	};
	strvec_pushf(argv, "%s", cfg->self_exe);
	strvec_pushf(argv, "build");
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		strvec_pushf(argv, "%s", options[i][0]);
		strvec_pushf(argv, "%s", options[i][1]);
	}
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		push_limit(argv, j->limits, limits[i][0], limits[i][1]);
	strvec_pushf(argv, "--sandbox");
	strvec_pushf(argv, "bwrap");
	strvec_pushf(argv, "--build-user");
	strvec_pushf(argv, "%ld:%ld", j->build_uid, j->build_gid);
	strvec_pushf(argv, "--max-processes");
	strvec_pushf(argv, "%ld", cfg->max_processes);
	strvec_pushf(argv, "--jobs");
	strvec_pushf(argv, "%ld", cfg->build_jobs);
	strvec_pushf(argv, "--probe-cache");	/* the daemon's probe of this toolchain */
	strvec_pushf(argv, "%s/toolchain-probe", cfg->scratch_root);
	if (!cfg->no_build_cache) {	/* one cache per repo and toolchain, kept across builds */
		strvec_pushf(argv, "--cache-root");
		strvec_pushf(argv, "%s/ccache", cfg->scratch_root);
		strvec_pushf(argv, "--cache-max-mb");
		strvec_pushf(argv, "%ld", cfg->build_cache_mb);
	}
	if (j->manylinux) {	/* the server's abi_manylinux (an older khub: the check's own default) */
		strvec_pushf(argv, "--manylinux");
		strvec_pushf(argv, "%s", j->manylinux);
	}
	free(src);
	free(out);
}

static int spawn_build(struct job *j, const struct toolchain *tc, int out_fd, pid_t *pid)
{
	struct strvec argv = STRVEC_INIT, envp = STRVEC_INIT;
	if (j->benchmark)
		push_benchmark_args(j, tc, &argv);
	else
		push_build_args(j, tc, &argv);
	/* built from nothing: the worker's token never reaches build code */
	const char *path = getenv("PATH");
	strvec_pushf(&envp, "PATH=%s", path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	strvec_pushf(&envp, "HOME=%s/home", j->scratch);
	strvec_pushf(&envp, "TMPDIR=%s/tmp", j->scratch);
	strvec_pushf(&envp, "LANG=C.UTF-8");
	/* sanitizer settings of a debug build (where reports go) */
	const char *pass[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS" };
	for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
		if (getenv(pass[i]))
			strvec_pushf(&envp, "%s=%s", pass[i], getenv(pass[i]));
	int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct spawn_opts o = { .argv = argv.items, .envp = envp.items, .fd_in = null_fd, .fd_out = out_fd,
				.fd_err = out_fd, .dir = j->scratch, .new_process_group = 1,
				.die_with_parent = 1, .reset_signals = 1 };
	int ret = spawn_process(&o, pid);
	if (null_fd >= 0)
		close(null_fd);
	strvec_release(&argv);
	strvec_release(&envp);
	return ret;
}

/* Run the build to its end, streaming its output and keeping the lease;
 * the exit status in *status. */
static int run_build(struct job *j, const struct toolchain *tc, int *status)
{
	int fds[2];
	pid_t pid;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	if (spawn_build(j, tc, fds[1], &pid) < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	close(fds[1]);
	json_int_t wall = json_integer_value(json_object_get(j->limits, "wall_seconds"));
	uint64_t wall_deadline = now_us() + (uint64_t)((wall > 0 ? wall : 3600) + 120) * 1000000;
	uint64_t term_at = 0, kill_at = 0, give_up_at = 0;
	const uint64_t grace = (uint64_t)j->cfg->kill_grace_seconds * 1000000;
	char buf[64 * 1024];
	int eof = 0;

	while (!eof) {
		uint64_t now = now_us();
		int stop = 0;
		if (!term_at) {
			if (j->cfg->releasing) {
				j->end = END_RELEASED;
				stop = 1;
			} else if (now >= wall_deadline) {
				j->end = END_WALL;
				stop = 1;
			} else if (now >= j->next_heartbeat_us) {
				stop = heartbeat(j);
			}
			if (stop) {
				kill(-pid, SIGTERM);
				term_at = now_us();
				kill_at = term_at + grace;
				give_up_at = kill_at + 10 * 1000000ULL;
			}
		} else if (kill_at && now >= kill_at) {
			kill(-pid, SIGKILL);
			kill_at = 0;
		} else if (!kill_at && now >= give_up_at) {
			break;	/* something outside the group holds the pipe */
		}
		if (j->pending.len && (j->pending.len >= LOG_CHUNK || now >= j->last_flush_us + 1000000))
			log_flush(j);
		/* sleep until output, the next flush, heartbeat or kill step: at most 1 s */
		int timeout = 1000;
		if (!term_at && j->next_heartbeat_us > now && (j->next_heartbeat_us - now) / 1000 < (uint64_t)timeout)
			timeout = (int)((j->next_heartbeat_us - now) / 1000) + 1;
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		int n = poll(&pfd, 1, timeout);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0) {
			ssize_t got = read(fds[0], buf, sizeof(buf));
			if (got > 0)
				log_take(j, buf, (size_t)got);
			else if (got == 0 || (errno != EINTR && errno != EAGAIN))
				eof = 1;
		}
	}
	close(fds[0]);
	j->output_done = 1;
	if (kill_at)	/* the group got TERM and closed its output: make sure of the rest */
		kill(-pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* Who a failed build is the fault of, and so what becomes of the job. */
enum failure_kind {
	FAIL_SOURCE,	/* the kernel's: failed for good, no retry */
	FAIL_TRANSIENT,	/* the worker's, maybe passing (disk, a crash): failed, retried (an attempt spent) */
	FAIL_WORKER	/* the worker is misconfigured: the job goes back untouched, the worker stops */
};

static const struct {
	int code;
	enum failure_kind kind;
	const char *text;
} outcomes[] = {
	{ BUILD_FAILED, FAIL_SOURCE, "build failed: compile, link or smoke import error" },
	{ BUILD_BAD_SOURCE, FAIL_SOURCE, "bad source: build.toml or the source layout is invalid" },
	{ BUILD_TIMED_OUT, FAIL_SOURCE, "build stopped: over a limit (wall clock, CPU time, memory or disk)" },
	{ BUILD_INTERNAL, FAIL_TRANSIENT, "worker internal error" },
	{ BUILD_BAD_JOB, FAIL_SOURCE, "bad job: the kernel is not built as this variant" },
	{ BUILD_LACKS_TOOL, FAIL_TRANSIENT, "this worker's toolchain lacks a tool the source needs (hipify)" },
	{ BUILD_USAGE, FAIL_WORKER, "worker misconfigured: `khub-worker build` refused its arguments or toolchains" },
};

static const char *outcome_text(int code, enum failure_kind *kind)
{
	for (size_t i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++)
		if (outcomes[i].code == code) {
			*kind = outcomes[i].kind;
			return outcomes[i].text;
		}
	*kind = FAIL_TRANSIENT;
	return "build exited with an unknown status";
}

/* The worker cannot build what it offered: give the job back as it was
 * (no attempt spent, not the author's failure) and have the daemon stop. */
static int give_back_misconfigured(struct job *j, const char *why)
{
	log_note(j, "%s; the job goes back to the queue and worker %s stops", why, j->cfg->name);
	log_flush(j);
	log_error("build #%s: %s: giving the job back; this worker stops (fix it and start it again)", j->id, why);
	report_release(j);
	return 1;
}

/* A benchmark job's payloads (out/payloads.json) each submitted as a farm
 * run: how many khub took. */
static int submit_payloads(struct job *j)
{
	char *path = xasprintf("%s/out/" BENCHMARK_PAYLOADS, j->scratch);
	size_t len = 0;
	char *text = read_file_limited(path, BENCHMARK_PAYLOADS_MAX, &len);
	json_t *list = text ? json_loadb(text, len, 0, NULL) : NULL, *payload;
	size_t i;
	int taken = 0;
	json_array_foreach(list, i, payload) {
		char *body = json_dumps(payload, JSON_COMPACT);
		struct hub_reply r = { 0 };
		report(j, "POST", "benchmark", body ? body : "null", NULL, &r);
		if (r.status == 200)
			taken++;
		else
			log_note(j, "khub refused the farm run of %s: %s",
				 json_string_value(json_object_get(payload, "benchmarkScriptPath")), hub_reply_error(&r));
		hub_reply_release(&r);
		free(body);
	}
	log_note(j, "%d farm run(s) submitted", taken);
	json_decref(list);
	free(text);
	free(path);
	return taken;
}

/* A benchmark job measured: its runs submitted, then POST …/measured. */
static void report_measured(struct job *j, int runs)
{
	char body[48];
	snprintf(body, sizeof(body), "{\"runs\": %d}", runs);
	log_flush(j);
	struct hub_reply r = { 0 };
	report(j, "POST", "measured", body, NULL, &r);
	if (r.status == 200)
		log_info("measured build #%s %s %s@%.12s on %s: %d farm run(s)", j->id, j->variant, j->repo, j->commit,
			 j->device, runs);
	else
		log_error("build #%s: ending the benchmark job failed (%s)", j->id, hub_reply_error(&r));
	hub_reply_release(&r);
}

/* 1 when the worker turned out misconfigured (the job was given back). */
static int finish(struct job *j, int status)
{
	char tail[256], error[512];
	last_line(j, tail, sizeof(tail));
	/* the scripts that ran are submitted, whether or not another failed */
	int runs = j->benchmark && WIFEXITED(status) && WEXITSTATUS(status) <= BUILD_FAILED ? submit_payloads(j) : 0;
	if (j->benchmark && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		report_measured(j, runs);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		log_note(j, "build finished; uploading the output");
		log_flush(j);
		report_output(j);
		return 0;
	}
	enum failure_kind kind = FAIL_TRANSIENT;
	if (WIFEXITED(status)) {
		const char *what = outcome_text(WEXITSTATUS(status), &kind);
		if (j->benchmark && WEXITSTATUS(status) == BUILD_FAILED)
			what = "benchmark failed: a benchmarks/ script failed";
		snprintf(error, sizeof(error), "%s (exit %d)%s%s", what, WEXITSTATUS(status), tail[0] ? ": " : "", tail);
	} else {
		snprintf(error, sizeof(error), "worker internal error: the build process died of signal %d",
			 WTERMSIG(status));
	}
	if (kind == FAIL_WORKER)
		return give_back_misconfigured(j, error);
	int retry = kind == FAIL_TRANSIENT;
	log_note(j, "%s", error);
	log_flush(j);
	char *abi_path = xasprintf("%s/out/abi-report.json", j->scratch);
	json_t *abi = json_load_file(abi_path, 0, NULL);
	free(abi_path);
	report_fail(j, error, retry, json_is_object(abi) ? abi : NULL);
	json_decref(abi);
	return 0;
}

/* ---- one job ----------------------------------------------------------------------------- */

static char *job_string(json_t *job, const char *key)
{
	json_t *v = json_object_get(job, key);
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	if (json_is_integer(v))
		return xasprintf("%lld", (long long)json_integer_value(v));
	return NULL;
}

/* Fetch and unpack the job's `what` tree (source: the commit's, into
 * <scratch>/src; variant: a benchmark job's published tree, into
 * <scratch>/variant); 0, or -1 after reporting. */
static int fetch_tree(struct job *j, const char *what)
{
	char *tar = xasprintf("%s/%s.tar", j->scratch, what);
	char *src = xasprintf("%s/%s", j->scratch, strcmp(what, "source") == 0 ? "src" : what);
	char *path = job_path(j, what);
	json_int_t disk_mb = json_integer_value(json_object_get(j->limits, "disk_mb"));
	uint64_t limit = (uint64_t)(disk_mb > 0 ? disk_mb : SOURCE_LIMIT_DEFAULT_MB) * 1024 * 1024;
	struct hub_reply r = { 0 };
	char why[512];
	int ret = -1;
	for (unsigned delay = 1;; delay = delay < 16 ? delay * 2 : 16) {
		unlink(tar);
		hub_download(j->hc, path, tar, limit, &r);
		if (!hub_reply_retryable(&r) || delay >= 16 || j->cfg->releasing)
			break;
		log_warn("build #%s: source download failed (%s); again in %u s", j->id, hub_reply_error(&r), delay);
		sleep(delay);
		if (now_us() >= j->next_heartbeat_us && heartbeat(j))
			goto cleanup;
	}
	if (r.status == 409 || r.status == 404) {
		log_warn("build #%s: source refused (%s): the job is no longer this worker's", j->id,
			 hub_reply_error(&r));
		j->end = END_LOST;
		goto cleanup;
	}
	if (r.status != 200) {
		snprintf(why, sizeof(why), "source download failed: %s", hub_reply_error(&r));
		log_note(j, "%s", why);
		log_flush(j);
		report_fail(j, why, 1, NULL);
		goto cleanup;
	}
	struct tar_limits lim = { .max_bytes = limit, .max_entries = 200000 };
	int err = tar_unpack(tar, src, &lim, &j->source_epoch, why, sizeof(why));
	if (err != KHUB_OK) {
		log_note(j, "%s", why);
		log_flush(j);
		report_fail(j, why, err == KHUB_EIO, NULL);
		goto cleanup;
	}
	ret = 0;
cleanup:
	unlink(tar);
	hub_reply_release(&r);
	free(path);
	free(src);
	free(tar);
	return ret;
}

/* The claimed job's fields into j (strings owned by j). */
static void job_init(struct job *j, const struct daemon_config *cfg, json_t *job)
{
	j->id = job_string(job, "id");
	j->repo = job_string(job, "repo");
	j->commit = job_string(job, "commit");
	j->variant = job_string(job, "variant");
	j->manylinux = json_is_string(json_object_get(job, "abi_manylinux")) ? job_string(job, "abi_manylinux") : NULL;
	j->benchmark = json_is_string(json_object_get(job, "kind")) &&
		       strcmp(json_string_value(json_object_get(job, "kind")), "benchmark") == 0;
	j->device = j->benchmark ? job_string(job, "device") : NULL;
	j->limits = json_object_get(job, "limits");
	json_int_t hb = json_integer_value(json_object_get(job, "heartbeat_seconds"));
	j->heartbeat_seconds = hb > 0 ? (int)hb : cfg->heartbeat_seconds;
	j->attempt = (int)json_integer_value(json_object_get(job, "attempt"));
	j->max_attempts = (int)json_integer_value(json_object_get(job, "max_attempts"));
	j->next_heartbeat_us = now_us() + (uint64_t)j->heartbeat_seconds * 1000000;
	j->last_flush_us = now_us();
	json_t *cap = json_object_get(job, "log_cap");
	json_int_t head = json_integer_value(json_object_get(cap, "head"));
	json_int_t tail = json_integer_value(json_object_get(cap, "tail"));
	j->log_head = json_is_object(cap) && head >= 0 && tail > 0 ? (int64_t)head : -1;
	j->log_tail = tail > LOG_TAIL_LIMIT ? LOG_TAIL_LIMIT : tail > 0 ? (size_t)tail : 0;
	j->hc = hub_client_new(cfg->url, cfg->token);
}

/* <scratch_root>/build-<id>-XXXXXX with src/, out/, tmp/ and home/: 0, or
 * -1 with why (the worker's own fault). The build uid (a root worker's
 * builds) reaches tmp/, where `khub-worker build` makes its own scratch;
 * nothing else here is anyone's but ours. */
static int job_make_scratch(struct job *j, char *why, size_t why_size)
{
	j->scratch = xasprintf("%s/build-%s-XXXXXX", j->cfg->scratch_root, j->id);
	if (!mkdtemp(j->scratch)) {
		snprintf(why, why_size, "worker misconfigured: scratch directory %s: %s", j->scratch, strerror(errno));
		free(j->scratch);
		j->scratch = NULL;
		return -1;
	}
	int root = geteuid() == 0;
	const char *subdirs[] = { "src", "out", "tmp", "home", "variant" };
	const mode_t modes[] = { 0700, 0700, root ? 0711 : 0700, 0700, 0700 };
	int bad = chmod(j->scratch, root ? 0711 : 0700) < 0;
	for (size_t i = 0; i < 5 && !bad; i++) {
		char *d = xasprintf("%s/%s", j->scratch, subdirs[i]);
		bad = mkdir(d, 0700) < 0 || chmod(d, modes[i]) < 0;
		free(d);
	}
	if (bad)
		snprintf(why, why_size, "worker misconfigured: cannot make the scratch directory");
	return bad ? -1 : 0;
}

/* How the build ended, told to khub and the log; 1 when the worker
 * proved misconfigured (finish's verdict). */
static int job_end(struct job *j, int status)
{
	switch (j->end) {
	case END_EXITED:
		return finish(j, status);
	case END_WALL:
		log_note(j, "the build ran past its wall-clock limit; killed");
		log_flush(j);
		report_fail(j, "build stopped: over its wall-clock limit (killed by the worker)", 0, NULL);
		break;
	case END_RELEASED:
		log_note(j, "the worker is stopping; build killed and given back to the queue");
		log_flush(j);
		report_release(j);
		break;
	case END_CANCELED:
		log_note(j, "canceled; build killed");
		log_flush(j);
		log_info("canceled build #%s %s %s@%.12s", j->id, j->variant, j->repo, j->commit);
		break;
	case END_LOST:
		log_info("dropped build #%s %s %s@%.12s (lease lost)", j->id, j->variant, j->repo, j->commit);
		break;
	}
	return 0;
}

int job_run(const struct daemon_config *cfg, int slot, json_t *job)
{
	struct job j = { .cfg = cfg, .pending = STRBUF_INIT, .tail_hold = STRBUF_INIT, .end = END_EXITED };
	int misconfigured = 0, status = 0;
	char why[512];
	job_init(&j, cfg, job);
	build_users_slot(&cfg->build_users, slot, &j.build_uid, &j.build_gid);
	if (!j.id || !j.repo || !j.commit || !j.variant || !j.hc || (j.benchmark && !j.device)) {
		log_error("claimed a job without id, repo, commit or variant; ignoring it (its lease will expire)");
		goto cleanup;
	}
	log_set_request_id(j.id);
	log_info("claimed build #%s %s %s@%.12s (attempt %d of %d)", j.id, j.variant, j.repo, j.commit, j.attempt,
		 j.max_attempts);
	const struct toolchain *tc = j.benchmark ? toolchain_for_benchmarks(cfg->toolchains, j.device)
					      : toolchain_for_variant(cfg->toolchains, j.variant);
	if (job_make_scratch(&j, why, sizeof(why)) < 0) {
		misconfigured = give_back_misconfigured(&j, why);
		goto cleanup;
	}
	if (!tc) {
		snprintf(why, sizeof(why), "worker misconfigured: no usable toolchain for %s", j.benchmark ? j.device : j.variant);
		misconfigured = give_back_misconfigured(&j, why);
		goto cleanup;
	}
	log_note(&j, "build %s of %s@%s on worker %s, toolchain %s (attempt %d of %d)", j.id, j.repo, j.commit,
		 cfg->name, tc->name, j.attempt, j.max_attempts);
	if (fetch_tree(&j, "source") < 0 || (j.benchmark && fetch_tree(&j, "variant") < 0))
		goto cleanup;
	if (run_build(&j, tc, &status) < 0) {
		snprintf(why, sizeof(why), "worker internal error: cannot start the build: %s", strerror(errno));
		report_fail(&j, why, 1, NULL);
		goto cleanup;
	}
	misconfigured = job_end(&j, status);
cleanup:
	if (j.scratch && tree_remove(j.scratch) < 0)
		log_warn("build #%s: could not remove %s: %s", j.id, j.scratch, strerror(errno));
	log_set_request_id(NULL);
	hub_client_free(j.hc);
	strbuf_release(&j.pending);
	strbuf_release(&j.tail_hold);
	free(j.scratch);
	free(j.id);
	free(j.repo);
	free(j.commit);
	free(j.variant);
	free(j.manylinux);
	free(j.device);
	return misconfigured;
}
