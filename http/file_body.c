/* file_body.c -- answers whose body is a range of a file (an LFS object, a
 * build's source tar), sent by libmicrohttpd with sendfile, in 2 MiB calls
 * instead of its 128 KiB.
 *
 * libmicrohttpd (0.9.75 to 1.0.1) sends a file body at most 128 KiB per
 * sendfile call and per turn of the event loop unless it runs a thread per
 * connection (then 2 MiB); the chunk is a compile-time constant. A 100 MiB
 * LFS download was 800 calls against nginx's 50 (sendfile_max_chunk 2m),
 * and on 2 dedicated cores that per-call cost left khub at 0.81-0.93 of
 * nginx's throughput. khub defines sendfile64, the symbol libmicrohttpd
 * calls, so the dynamic linker binds libmicrohttpd's call here; a call for
 * exactly 128 KiB (libmicrohttpd's "more follows") on a body registered by
 * http_file_response is widened to up to 2 MiB, always leaving the last
 * 128 KiB to libmicrohttpd's own final call: that call flushes the socket
 * (TCP_CORK off), and libmicrohttpd counts whatever a call sent against the
 * body's length. Every other call passes through unchanged. */
#include "http/http.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define LIBRARY_CHUNK ((size_t)128 * 1024)	/* libmicrohttpd's MHD_SENFILE_CHUNK_ */
#define WIDE_CHUNK ((size_t)2 * 1024 * 1024)	/* nginx's sendfile_max_chunk, libmicrohttpd's per-thread one */

/* A registered body: the file (device and inode, so that a descriptor
 * number reused by another file never matches) and where its range ends. */
struct file_body {
	dev_t dev;
	ino_t ino;
	uint64_t end;
};

static pthread_mutex_t bodies_lock = PTHREAD_MUTEX_INITIALIZER;
static struct file_body *bodies;	/* indexed by descriptor number */
static size_t bodies_len;

static void body_register(int fd, uint64_t end)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return;	/* unregistered: sent in libmicrohttpd's chunks */
	pthread_mutex_lock(&bodies_lock);
	if ((size_t)fd >= bodies_len) {
		size_t len = bodies_len ? bodies_len : 256;
		while (len <= (size_t)fd)
			len *= 2;
		bodies = xrealloc(bodies, len * sizeof(*bodies));
		memset(bodies + bodies_len, 0, (len - bodies_len) * sizeof(*bodies));
		bodies_len = len;
	}
	bodies[fd] = (struct file_body){ .dev = st.st_dev, .ino = st.st_ino, .end = end };
	pthread_mutex_unlock(&bodies_lock);
}

/* Where the body registered for fd ends, 0 when none is (or fd now names
 * another file). */
static uint64_t body_end(int fd)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return 0;
	uint64_t end = 0;
	pthread_mutex_lock(&bodies_lock);
	if ((size_t)fd < bodies_len && bodies[fd].end && bodies[fd].dev == st.st_dev && bodies[fd].ino == st.st_ino)
		end = bodies[fd].end;
	pthread_mutex_unlock(&bodies_lock);
	return end;
}

struct MHD_Response *http_file_response(int fd, uint64_t offset, uint64_t count)
{
	struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(count, fd, offset);
	if (resp)
		body_register(fd, offset + count);
	return resp;
}

/* The size a call asks for: count, or wider for a registered body with
 * more than two library chunks to go. */
static size_t call_size(int in_fd, const off64_t *offset, size_t count)
{
	if (count != LIBRARY_CHUNK || !offset || *offset < 0)
		return count;
	uint64_t end = body_end(in_fd);
	if (end <= (uint64_t)*offset)
		return count;
	uint64_t left = end - (uint64_t)*offset;
	if (left <= 2 * LIBRARY_CHUNK)
		return count;
	uint64_t wide = left - LIBRARY_CHUNK;
	return wide < WIDE_CHUNK ? (size_t)wide : WIDE_CHUNK;
}

ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count);

ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	return syscall(SYS_sendfile, out_fd, in_fd, offset, call_size(in_fd, offset, count));
}
