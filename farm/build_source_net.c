/* build_source_net.c -- the connections of external git source fetches:
 * every TCP connection libgit2 opens (http, https under its TLS, git://,
 * a redirect's new host) goes through the stream registered here. On a
 * thread inside source_net_begin/end, each resolved address is checked
 * (no loopback, link-local, private, multicast... unless build_source_allow
 * names it) and the connection has a connect timeout, a low-speed limit and
 * the fetch's overall deadline. Other threads (mirror syncs) connect as
 * libgit2 would, without checks. */
#include "farm/farm.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <git2/sys/stream.h>

static struct {
	struct net_range *ranges;	/* build_source_allow's addresses */
	size_t nranges;
	char **hosts;			/* build_source_allow's host names */
	size_t nhosts;
	struct source_net_limits limits;
} net;

/* The calling thread's fetch: its deadline (0 = no fetch) and why its
 * last connection failed. */
static __thread uint64_t fetch_deadline;
static __thread char fetch_failure[256];

/* 1 when addr is in a refused range of its family (common/net_range.c). */
static int is_refused(int family, const unsigned char *addr)
{
	return net_address_reserved(family, addr);
}

static int allowed_range(int family, const unsigned char *addr)
{
	for (size_t i = 0; i < net.nranges; i++)
		if (net_range_contains(&net.ranges[i], family, addr))
			return 1;
	return 0;
}

/* The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4):
 * 1 with it in v4, else 0. */
static int embedded_v4(const unsigned char *a, unsigned char v4[4])
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const unsigned char zero[12] = { 0 };
	static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b };
	if (memcmp(a, mapped, 12) == 0 || memcmp(a, zero, 12) == 0 || memcmp(a, nat64, 12) == 0) {
		memcpy(v4, a + 12, 4);
		return 1;
	}
	if (a[0] == 0x20 && a[1] == 0x02) {
		memcpy(v4, a + 2, 4);
		return 1;
	}
	return 0;
}

int source_net_address_allowed(const char *host, const struct sockaddr *sa, char *why, size_t why_size)
{
	char text[INET6_ADDRSTRLEN] = "?";
	for (size_t i = 0; host && i < net.nhosts; i++)
		if (strcasecmp(net.hosts[i], host) == 0)
			return 1;
	if (sa->sa_family == AF_INET) {
		const unsigned char *a = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
		inet_ntop(AF_INET, a, text, sizeof(text));
		if (allowed_range(AF_INET, a) || !is_refused(AF_INET, a))
			return 1;
	} else if (sa->sa_family == AF_INET6) {
		const unsigned char *a = (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		unsigned char v4[4];
		inet_ntop(AF_INET6, a, text, sizeof(text));
		if (allowed_range(AF_INET6, a))
			return 1;
		int has_v4 = embedded_v4(a, v4);
		if (has_v4 && allowed_range(AF_INET, v4))
			return 1;
		/* an IPv6 form of a public IPv4 address is as good as that one,
		 * except the NAT64 and 6to4 relays, which are refused outright */
		int ok = !is_refused(AF_INET6, a) || (has_v4 && a[0] == 0 && a[1] == 0 && !is_refused(AF_INET, v4));
		if (ok)
			return 1;
	}
	snprintf(why, why_size, "%s resolves to %s, a loopback, private, link-local or reserved address "
		 "(build_source_allow does not name it)", host ? host : "the host", text);
	return 0;
}

void source_net_release(void)
{
	free(net.ranges);
	free_strings(net.hosts, net.nhosts);
	memset(&net, 0, sizeof(net));
}

/* One entry of the allow-list: an address, a CIDR range or a host name. */
static int allow_add(const char *entry)
{
	struct net_range r;
	if (net_range_parse(entry, &r) == 0) {
		net.ranges = xrealloc(net.ranges, (net.nranges + 1) * sizeof(*net.ranges));
		net.ranges[net.nranges++] = r;
		return 0;
	}
	if (strchr(entry, '/') || strchr(entry, ':') || strspn(entry, "abcdefghijklmnopqrstuvwxyz"
				"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != strlen(entry))
		return -1;
	net.hosts = xrealloc(net.hosts, (net.nhosts + 1) * sizeof(*net.hosts));
	net.hosts[net.nhosts++] = xstrdup(entry);
	return 0;
}

int source_net_configure(const char *allow, const struct source_net_limits *limits, char *why, size_t why_size)
{
	source_net_release();
	net.limits = *limits;
	char *copy = xstrdup(allow ? allow : ""), *save = NULL;
	int rc = 0;
	for (char *tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save))
		if (allow_add(tok) < 0) {
			snprintf(why, why_size, "build_source_allow: '%s' is not an address, a CIDR range or a host name",
				 tok);
			rc = -1;
			break;
		}
	free(copy);
	return rc;
}

/* ---- the stream ---------------------------------------------------------------- */

struct net_stream {
	git_stream parent;
	char *host, *port;
	int fd;
	int checked;			/* a fetch's connection: checks and limits */
	uint64_t window_start;		/* the low-speed window: since when */
	uint64_t window_bytes;		/* and how many bytes came in it */
};

static void set_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_failure(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fetch_failure, sizeof(fetch_failure), fmt, ap);
	va_end(ap);
	git_error_set_str(GIT_ERROR_NET, fetch_failure);
}

/* Milliseconds poll may wait now: the deadline's rest, capped at cap_ms
 * (-1: no cap); 0 when the deadline passed. Unchecked streams: cap_ms. */
static int wait_ms(const struct net_stream *st, long cap_ms)
{
	if (!st->checked)
		return (int)cap_ms;
	uint64_t now = monotonic_usec();
	if (now >= fetch_deadline)
		return 0;
	uint64_t left = (fetch_deadline - now) / 1000 + 1;
	if (cap_ms >= 0 && (uint64_t)cap_ms < left)
		left = (uint64_t)cap_ms;
	return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

/* Wait until fd is ready for events: 0, or -1 with the failure set. */
static int wait_ready(struct net_stream *st, short events, long cap_ms, const char *what)
{
	for (;;) {
		struct pollfd p = { st->fd, events, 0 };
		int ms = wait_ms(st, cap_ms);
		if (st->checked && ms == 0) {
			set_failure("%s: the fetch took longer than build_source_deadline_s (%ld s)", st->host,
				    net.limits.deadline_s);
			return -1;
		}
		int n = poll(&p, 1, ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			set_failure("%s: %s", st->host, strerror(errno));
			return -1;
		}
		if (cap_ms >= 0 && ms == (int)cap_ms) {
			set_failure("%s: %s", st->host, what);
			return -1;
		}
	}
}

/* Connect to one address with the connect timeout: the socket or -1. */
static int connect_one(struct net_stream *st, const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | (st->checked ? SOCK_NONBLOCK : 0),
			ai->ai_protocol);
	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (!st->checked || errno != EINPROGRESS) {
		set_failure("cannot connect to %s: %s", st->host, strerror(errno));
		close(fd);
		return -1;
	}
	st->fd = fd;
	int err = 0;
	socklen_t len = sizeof(err);
	if (wait_ready(st, POLLOUT, net.limits.connect_timeout_s * 1000L,
		       "no connection within build_source_connect_timeout_s") < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		if (err)
			set_failure("cannot connect to %s: %s", st->host, strerror(err));
		st->fd = -1;
		close(fd);
		return -1;
	}
	st->fd = -1;
	return fd;
}

static int stream_connect(git_stream *stream)
{
	struct net_stream *st = (struct net_stream *)stream;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc = getaddrinfo(st->host, st->port, &hints, &res);
	if (rc != 0) {
		set_failure("cannot resolve %s: %s", st->host, gai_strerror(rc));
		return -1;
	}
	fetch_failure[0] = '\0';
	for (struct addrinfo *ai = res; ai && st->fd < 0; ai = ai->ai_next) {
		char why[256];
		if (st->checked && !source_net_address_allowed(st->host, ai->ai_addr, why, sizeof(why))) {
			set_failure("%s", why);
			continue;
		}
		st->fd = connect_one(st, ai);
	}
	freeaddrinfo(res);
	if (st->fd < 0) {
		if (!fetch_failure[0])
			set_failure("cannot connect to %s", st->host);
		else
			git_error_set_str(GIT_ERROR_NET, fetch_failure);
		return -1;
	}
	st->window_start = monotonic_usec();
	return 0;
}

/* The low-speed limit: fewer than low_speed_bytes a second over a whole
 * window of low_speed_s seconds fails. 0, or -1 with the failure set. */
static int check_speed(struct net_stream *st, size_t got)
{
	uint64_t now = monotonic_usec(), window = (uint64_t)net.limits.low_speed_s * 1000000u;
	st->window_bytes += got;
	if (net.limits.low_speed_bytes <= 0 || now - st->window_start < window)
		return 0;
	if (st->window_bytes < (uint64_t)net.limits.low_speed_bytes * (uint64_t)net.limits.low_speed_s) {
		set_failure("%s: too slow: %llu bytes in %ld s (build_source_low_speed_bytes is %ld a second)",
			    st->host, (unsigned long long)st->window_bytes, net.limits.low_speed_s,
			    net.limits.low_speed_bytes);
		return -1;
	}
	st->window_start = now;
	st->window_bytes = 0;
	return 0;
}

/* Milliseconds to the end of the low-speed window (at least 1). */
static long window_left_ms(const struct net_stream *st)
{
	uint64_t end = st->window_start + (uint64_t)net.limits.low_speed_s * 1000000u, now = monotonic_usec();
	return now >= end ? 1 : (long)((end - now) / 1000) + 1;
}

static ssize_t stream_read(git_stream *stream, void *data, size_t len)
{
	struct net_stream *st = (struct net_stream *)stream;
	for (;;) {
		if (st->checked) {
			if (check_speed(st, 0) < 0)
				return -1;
			long cap = net.limits.low_speed_bytes > 0 ? window_left_ms(st) : -1;
			struct pollfd p = { st->fd, POLLIN, 0 };
			int ms = wait_ms(st, cap);
			if (ms == 0 && monotonic_usec() >= fetch_deadline)
				return wait_ready(st, POLLIN, -1, "");	/* says the deadline passed */
			int n = poll(&p, 1, ms);
			if (n < 0 && errno != EINTR) {
				set_failure("%s: %s", st->host, strerror(errno));
				return -1;
			}
			if (n <= 0)
				continue;
		}
		ssize_t n = recv(st->fd, data, len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			set_failure("%s: %s", st->host, strerror(errno));
			return -1;
		}
		if (st->checked && check_speed(st, (size_t)n) < 0)
			return -1;
		return n;
	}
}

static ssize_t stream_write(git_stream *stream, const char *data, size_t len, int flags)
{
	struct net_stream *st = (struct net_stream *)stream;
	(void)flags;
	size_t done = 0;
	while (done < len) {
		if (st->checked && wait_ready(st, POLLOUT, -1, "") < 0)
			return -1;
		ssize_t n = send(st->fd, data + done, len - done, MSG_NOSIGNAL);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			set_failure("%s: %s", st->host, strerror(errno));
			return -1;
		}
		done += (size_t)n;
	}
	return (ssize_t)len;
}

static int stream_close(git_stream *stream)
{
	struct net_stream *st = (struct net_stream *)stream;
	if (st->fd >= 0)
		close(st->fd);
	st->fd = -1;
	return 0;
}

static void stream_free(git_stream *stream)
{
	struct net_stream *st = (struct net_stream *)stream;
	stream_close(stream);
	free(st->host);
	free(st->port);
	free(st);
}

static int stream_init(git_stream **out, const char *host, const char *port)
{
	struct net_stream *st = xcalloc(1, sizeof(*st));
	st->parent.version = GIT_STREAM_VERSION;
	st->parent.connect = stream_connect;
	st->parent.read = stream_read;
	st->parent.write = stream_write;
	st->parent.close = stream_close;
	st->parent.free = stream_free;
	st->host = xstrdup(host);
	st->port = xstrdup(port);
	st->fd = -1;
	st->checked = fetch_deadline != 0;
	*out = &st->parent;
	return 0;
}

int source_net_register(void)
{
	static git_stream_registration reg = { GIT_STREAM_VERSION, stream_init, NULL };
	return git_stream_register(GIT_STREAM_STANDARD, &reg) < 0 ? KHUB_EIO : 0;
}

void source_net_begin(void)
{
	fetch_deadline = monotonic_usec() + (uint64_t)net.limits.deadline_s * 1000000u;
	fetch_failure[0] = '\0';
}

void source_net_end(void)
{
	fetch_deadline = 0;
}

const char *source_net_failure(void)
{
	return fetch_failure;
}
