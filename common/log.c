/* log.c -- leveled logging with a per-thread request id on every line. */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

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

void log_write(enum log_level level, const char *fmt, ...)
{
	char stamp[40], line[2048];
	struct timeval tv;
	struct tm tm;
	va_list ap;

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	FILE *fp = log_fp ? log_fp : stderr;
	if (thread_request_id[0])
		fprintf(fp, "%s.%03ldZ %-5s [%s] %s\n", stamp, (long)tv.tv_usec / 1000,
			level_names[level], thread_request_id, line);
	else
		fprintf(fp, "%s.%03ldZ %-5s %s\n", stamp, (long)tv.tv_usec / 1000,
			level_names[level], line);
	fflush(fp);
	pthread_mutex_unlock(&log_lock);
}

void fatal(const char *fmt, ...)
{
	va_list ap;
	fputs("khub: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}
