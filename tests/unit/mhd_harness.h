/* mhd_harness.h -- a real libmicrohttpd daemon on a loopback port (the
 * kernel picks a free one) whose requests go to one test handler, and a
 * blocking HTTP/1.0 client run on its own thread, for unit tests of the
 * HTTP layer (http/) that park connections. */
#ifndef KHUB_MHD_HARNESS_H
#define KHUB_MHD_HARNESS_H

#include "http/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* The test's handler: req->log_path is the URL path. */
typedef enum MHD_Result (*harness_handler)(struct request *req);
static harness_handler harness_fn;
static struct MHD_Daemon *harness_daemon;
static unsigned short harness_port;
static atomic_int harness_ended;	/* requests whose connection completed */

static enum MHD_Result harness_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				      const char *version, const char *upload_data, size_t *upload_data_size,
				      void **con_cls)
{
	(void)cls, (void)method, (void)version, (void)upload_data, (void)upload_data_size;
	struct request *req = *con_cls;
	if (!req) {
		req = calloc(1, sizeof(*req));
		req->conn = conn;
		snprintf(req->request_id, sizeof(req->request_id), "unit");
		req->log_path = strdup(url);
		*con_cls = req;
		return MHD_YES;
	}
	req->parked = 0;
	return harness_fn(req);
}

static void harness_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			      enum MHD_RequestTerminationCode toe)
{
	(void)cls, (void)conn, (void)toe;
	struct request *req = *con_cls;
	if (req) {
		free(req->log_path);
		free(req);
	}
	*con_cls = NULL;
	atomic_fetch_add(&harness_ended, 1);
}

/* Start the daemon on 127.0.0.1; 0, or -1. */
static int harness_start(harness_handler fn)
{
	harness_fn = fn;
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = 0 };
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	harness_daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME |
					  MHD_USE_ERROR_LOG, 0, NULL, NULL, harness_access, NULL,
					  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
					  MHD_OPTION_NOTIFY_COMPLETED, harness_completed, NULL, MHD_OPTION_END);
	if (!harness_daemon)
		return -1;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(harness_daemon, MHD_DAEMON_INFO_BIND_PORT);
	harness_port = info ? info->port : 0;
	return harness_port ? 0 : -1;
}

static void harness_stop(void)
{
	if (harness_daemon)
		MHD_stop_daemon(harness_daemon);
	harness_daemon = NULL;
}

/* One GET on its own thread; status 0 when the exchange failed. */
struct harness_call {
	char path[128];
	pthread_t thread;
	atomic_int done;
	int status;
	char reply[2048];		/* headers and body */
	const char *body;		/* into reply */
};

static void harness_exchange(struct harness_call *c)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(harness_port) };
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct timeval limit = { .tv_sec = 120 };	/* a lost wake fails the test, never hangs it */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		goto cleanup;
	char ask[256];
	int n = snprintf(ask, sizeof(ask), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", c->path);
	if (write(fd, ask, (size_t)n) != n)
		goto cleanup;
	size_t len = 0;
	ssize_t got;
	while (len < sizeof(c->reply) - 1 && (got = read(fd, c->reply + len, sizeof(c->reply) - 1 - len)) > 0)
		len += (size_t)got;
	c->reply[len] = '\0';
	sscanf(c->reply, "HTTP/1.%*d %d", &c->status);
	char *end = strstr(c->reply, "\r\n\r\n");
	c->body = end ? end + 4 : "";
cleanup:
	close(fd);
}

static void *harness_call_thread(void *arg)
{
	struct harness_call *c = arg;
	harness_exchange(c);
	atomic_store(&c->done, 1);
	return NULL;
}

static void harness_call_start(struct harness_call *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->path, sizeof(c->path), "%s", path);
	c->body = "";
	pthread_create(&c->thread, NULL, harness_call_thread, c);
}

static void harness_call_join(struct harness_call *c)
{
	pthread_join(c->thread, NULL);
}

/* Poll cond every 5 ms for at most 60 s (the machine may be loaded). */
#define harness_wait_for(cond) do { \
	for (int w_ = 0; !(cond) && w_ < 12000; w_++) \
		usleep(5000); \
} while (0)

#endif
