/* acceptor.c -- khub's listening socket and the thread that accepts on it,
 * handing each connection to the HTTP loops (http_loop.c), which give it
 * to the loop holding the fewest. Left to themselves, loops racing for
 * accept() share badly: the one that happens to be awake takes most
 * connections, and the connections of a crowded loop wait longer (on 2
 * cores with 8 threads and 64 clients, one connection got 20 times the
 * answers of another, and the HEAD p99 doubled). */
#include "server/server.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int listen_fd = -1;
static pthread_t acceptor_thread;
static int acceptor_running;

static void *accept_loop(void *arg)
{
	(void)arg;
	log_set_request_id("accept");
	int told_full = 0;
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int fd = accept4(listen_fd, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				if (!told_full++)
					log_warn("accept: %s; waiting for connections to close", strerror(errno));
				usleep(10000);
				continue;
			}
			break;	/* the socket was shut down: the server stops */
		}
		told_full = 0;
		/* refused (a limit) or not, the loops own fd now */
		http_loops_add(fd, (struct sockaddr *)&peer, len);
	}
	return NULL;
}

int acceptor_listen(const struct sockaddr_storage *addr, socklen_t addr_len, int backlog, unsigned *port)
{
	int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (addr->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	struct sockaddr_storage bound;
	socklen_t bound_len = sizeof(bound);
	if (bind(fd, (const struct sockaddr *)addr, addr_len) < 0 || listen(fd, backlog) < 0 ||
	    getsockname(fd, (struct sockaddr *)&bound, &bound_len) < 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	*port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
						  : ((struct sockaddr_in *)&bound)->sin_port);
	listen_fd = fd;
	return 0;
}

void acceptor_start(void)
{
	if (pthread_create(&acceptor_thread, NULL, accept_loop, NULL) != 0)
		fatal("cannot start the accepting thread");
	acceptor_running = 1;
}

void acceptor_stop(void)
{
	if (listen_fd < 0)
		return;
	shutdown(listen_fd, SHUT_RDWR);	/* wakes accept() with an error */
	if (acceptor_running)
		pthread_join(acceptor_thread, NULL);
	acceptor_running = 0;
	close(listen_fd);
	listen_fd = -1;
}
