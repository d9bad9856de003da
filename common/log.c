/* log.c -- leveled logging with a per-thread request id on every line. */
#include "common.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

enum log_level log_threshold = LOG_LEVEL_INFO;
static FILE *log_fp;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread char thread_request_id[40];

/* A child of fork that logs (mirror/pull_refs.c runs libgit2 in one) must
 * not inherit the lock held by a thread that no longer exists there. */
static void log_fork_prepare(void)
{
	pthread_mutex_lock(&log_lock);
}

static void log_fork_done(void)
{
	pthread_mutex_unlock(&log_lock);
}

__attribute__((constructor)) static void log_register_fork_handlers(void)
{
	pthread_atfork(log_fork_prepare, log_fork_done, log_fork_done);
}

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int log_level_parse(const char *name)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcmp(name, level_names[i]) == 0)
			return (int)i;
	return -1;
}

void log_set_output(FILE *fp)
{
	log_fp = fp;
}

void log_set_request_id(const char *request_id)
{
	if (!request_id) {
		thread_request_id[0] = '\0';
		return;
	}
	size_t n = strnlen(request_id, sizeof(thread_request_id) - 1);	/* every request: no printf */
	memcpy(thread_request_id, request_id, n);
	thread_request_id[n] = '\0';
}

const char *log_request_id(void)
{
	return thread_request_id;
}

static int log_json;

void log_set_json(int on)
{
	log_json = on;
}

int log_is_json(void)
{
	return log_json;
}

/* "2026-11-22T10:29:33.123Z" (UTC, milliseconds) */
static void format_now(char out[40])
{
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	unsigned ms = (unsigned)(tv.tv_usec / 1000) % 1000;
	out[n++] = '.';
	out[n++] = (char)('0' + ms / 100);
	out[n++] = (char)('0' + ms / 10 % 10);
	out[n++] = (char)('0' + ms % 10);
	out[n++] = 'Z';
	out[n] = '\0';
}

/* One whole line, written at once under the lock. */
static void write_line(const char *line, size_t len)
{
	pthread_mutex_lock(&log_lock);
	FILE *fp = log_fp ? log_fp : stderr;
	fwrite(line, 1, len, fp);
	fflush(fp);
	pthread_mutex_unlock(&log_lock);
}

/* A JSON line: time, level, the request id when set, then members (the
 * text of JSON object members, already escaped). */
static void write_json_line(enum log_level level, const char *members)
{
	char now[40];
	struct strbuf sb = STRBUF_INIT;
	format_now(now);
	strbuf_addf(&sb, "{\"time\":\"%s\",\"level\":\"%s\"", now, level_names[level]);
	if (thread_request_id[0]) {
		strbuf_adds(&sb, ",\"request_id\":");
		strbuf_add_json_quoted(&sb, thread_request_id);
	}
	strbuf_adds(&sb, ",");
	strbuf_adds(&sb, members);
	strbuf_adds(&sb, "}\n");
	write_line(sb.buf, sb.len);
	strbuf_release(&sb);
}

void log_write_fields(enum log_level level, const char *fields)
{
	write_json_line(level, fields);
}

static void write_json_message(enum log_level level, const char *msg)
{
	struct strbuf members = STRBUF_INIT;
	strbuf_adds(&members, "\"msg\":");
	strbuf_add_json_quoted(&members, msg);
	write_json_line(level, members.buf);
	strbuf_release(&members);
}

void log_write(enum log_level level, const char *fmt, ...)
{
	char now[40], line[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_json) {
		write_json_message(level, line);
		return;
	}
	/* one event, one line: what a client sent (a request target, a
	 * header, a build.toml key) is escaped wherever it is formatted in */
	struct strbuf escaped = STRBUF_INIT;
	const char *text = line;
	size_t len = strlen(line);
	if (terminal_text_needs_escape(line, len)) {
		terminal_text_escape_line(line, len, &escaped);
		text = escaped.buf;
	}
	format_now(now);
	pthread_mutex_lock(&log_lock);
	FILE *fp = log_fp ? log_fp : stderr;
	if (thread_request_id[0])
		fprintf(fp, "%s %-5s [%s] %s\n", now, level_names[level], thread_request_id, text);
	else
		fprintf(fp, "%s %-5s %s\n", now, level_names[level], text);
	fflush(fp);
	pthread_mutex_unlock(&log_lock);
	strbuf_release(&escaped);
}

/* ---- children's stderr as JSON lines ------------------------------------- */

static int child_stderr_fd = -1;
static pthread_once_t child_stderr_once = PTHREAD_ONCE_INIT;

static void log_child_line(const char *line, size_t len)
{
	struct strbuf members = STRBUF_INIT, text = STRBUF_INIT;
	strbuf_add(&text, line, len);
	strbuf_adds(&members, "\"source\":\"child stderr\",\"msg\":");
	strbuf_add_json_quoted(&members, text.buf);
	write_json_line(LOG_LEVEL_WARN, members.buf);
	strbuf_release(&members);
	strbuf_release(&text);
}

/* Read the pipe for the life of the process; a line longer than the
 * buffer is logged in pieces. */
static void *child_stderr_reader(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[2048];
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		size_t start = 0;
		for (size_t i = 0; i < have; i++)
			if (buf[i] == '\n') {
				log_child_line(buf + start, i - start);
				start = i + 1;
			}
		if (start == 0 && have == sizeof(buf)) {
			log_child_line(buf, have);
			start = have;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
	}
	if (have)
		log_child_line(buf, have);
	return NULL;
}

static void child_stderr_start(void)
{
	int fds[2];
	pthread_t thread;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	if (pthread_create(&thread, NULL, child_stderr_reader, (void *)(intptr_t)fds[0]) != 0) {
		close(fds[0]);
		close(fds[1]);
		return;
	}
	pthread_detach(thread);
	child_stderr_fd = fds[1];
}

int log_child_stderr_fd(void)
{
	if (!log_json)
		return -1;
	pthread_once(&child_stderr_once, child_stderr_start);
	return child_stderr_fd;
}

void fatal(const char *fmt, ...)
{
	va_list ap;
	if (log_json) {
		char line[2048];
		va_start(ap, fmt);
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
		write_json_message(LOG_LEVEL_ERROR, line);
		exit(1);
	}
	fputs("khub: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}
