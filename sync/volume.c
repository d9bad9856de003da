/* volume.c -- bundle byte streams: tar + zstd (or plain tar) through
 * libarchive, written to one file or split into volumes (path.001,
 * path.002, ... plus path.index listing each volume's size and sha256) by a
 * writer thread while the exporting thread reads and compresses, and read
 * back as one stream; the progress bar on a terminal. */
#include "sync/sync.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#define CHUNK (1u << 20)

/* ---- progress ---------------------------------------------------------------- */

static void progress_print(struct sync_progress *p)
{
	double pct = p->total ? 100.0 * (double)p->done / (double)p->total : 100.0;
	fprintf(stderr, "%s%s %5.1f%% %.1f / %.1f MiB%s", p->on == SYNC_PROGRESS_LINES ? "" : "\r\033[K", p->what,
		pct > 100 ? 100 : pct, (double)p->done / 1048576.0, (double)p->total / 1048576.0,
		p->on == SYNC_PROGRESS_LINES ? "\n" : "");
	fflush(stderr);
}

/* Lines (a log, not a terminal): one per tenth of the way. */
static int progress_line_due(struct sync_progress *p)
{
	int step = p->total ? (int)(10 * (p->done > p->total ? p->total : p->done) / p->total) : 10;
	if (step <= p->step)
		return 0;
	p->step = step;
	return 1;
}

void sync_progress_add(struct sync_progress *p, uint64_t n)
{
	if (!p)
		return;
	p->done += n;
	if (!p->on)
		return;
	if (p->on == SYNC_PROGRESS_LINES) {
		if (progress_line_due(p) && p->step < 10)
			progress_print(p);
		return;
	}
	uint64_t now = monotonic_usec();
	if (now - p->last_us >= 200000) {
		p->last_us = now;
		progress_print(p);
	}
}

void sync_progress_end(struct sync_progress *p)
{
	if (!p || !p->on)
		return;
	p->done = p->total > p->done ? p->total : p->done;
	progress_print(p);
	if (p->on != SYNC_PROGRESS_LINES)
		fputc('\n', stderr);
}

/* ---- writing ------------------------------------------------------------------- */

struct volume_info {
	uint64_t size;
	char sha256[65];
};

/* What writing and reading a bundle share: the volume file open now (-1
 * between volumes), the SHA-256 of what passed through it, a chunk buffer. */
struct volume_io {
	int fd;
	EVP_MD_CTX *sha;
	char *buf;
};

static void volume_io_init(struct volume_io *io)
{
	io->fd = -1;
	io->sha = EVP_MD_CTX_new();
	io->buf = xmalloc(CHUNK);
}

static void volume_io_release(struct volume_io *io)
{
	if (io->fd >= 0)
		close(io->fd);
	EVP_MD_CTX_free(io->sha);
	free(io->buf);
}

#define OUT_BUFFERS 4		/* chunks between the exporting and the writing thread */

/* The exporting thread fills ring[(head + queued) % OUT_BUFFERS] while the
 * writer thread writes ring[head]: reading the objects, compressing and
 * writing (and hashing and fsyncing volumes) overlap. */
struct out_ring {
	pthread_t writer;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	char *buf[OUT_BUFFERS];
	size_t len[OUT_BUFFERS];
	unsigned head, queued;		/* under lock */
	int closing;			/* under lock: no more chunks come */
};

struct sync_out {
	struct archive *ar;
	struct volume_io io;
	struct out_ring ring;
	char *path;
	uint64_t volume_size;
	unsigned nvol;
	uint64_t cur;			/* bytes in the current volume */
	struct volume_info *vols;
	int failed;			/* an errno; set by the writer under ring.lock */
};

static char *volume_name(const char *path, unsigned n)
{
	return xasprintf("%s.%03u", path, n);
}

static int finish_volume(struct sync_out *o)
{
	if (o->io.fd < 0)
		return 0;
	int rc = fsync(o->io.fd) == 0 && close(o->io.fd) == 0 ? 0 : -1;
	o->io.fd = -1;
	if (o->volume_size) {
		o->vols = xrealloc(o->vols, o->nvol * sizeof(*o->vols));
		o->vols[o->nvol - 1].size = o->cur;
		sha256_final_hex(o->io.sha, o->vols[o->nvol - 1].sha256);
	}
	return rc;
}

static int next_volume(struct sync_out *o)
{
	if (finish_volume(o) < 0)
		return -1;
	o->nvol++;
	/* one file: written as path.partial, renamed when complete */
	char *name = o->volume_size ? volume_name(o->path, o->nvol) : xasprintf("%s.partial", o->path);
	o->io.fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	free(name);
	o->cur = 0;
	if (o->volume_size)
		EVP_DigestInit_ex(o->io.sha, EVP_sha256(), NULL);
	return o->io.fd < 0 ? -1 : 0;
}

/* Write len bytes to the volumes (the writer thread). */
static int write_volumes(struct sync_out *o, const char *p, size_t left)
{
	while (left > 0) {
		if (o->io.fd < 0 || (o->volume_size && o->cur >= o->volume_size)) {
			if (next_volume(o) < 0)
				return -1;
		}
		size_t n = left;
		if (o->volume_size && n > o->volume_size - o->cur)
			n = (size_t)(o->volume_size - o->cur);
		if (write_all(o->io.fd, p, n) < 0)
			return -1;
		if (o->volume_size)
			EVP_DigestUpdate(o->io.sha, p, n);
		o->cur += n;
		p += n;
		left -= n;
	}
	return 0;
}

static void *writer_main(void *arg)
{
	struct sync_out *o = arg;
	struct out_ring *r = &o->ring;
	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->queued && !r->closing)
			pthread_cond_wait(&r->changed, &r->lock);
		if (!r->queued)
			break;
		unsigned slot = r->head;
		int failed = o->failed;
		pthread_mutex_unlock(&r->lock);
		errno = 0;
		int rc = failed ? 0 : write_volumes(o, r->buf[slot], r->len[slot]);
		pthread_mutex_lock(&r->lock);
		if (rc < 0 && !o->failed)
			o->failed = errno ? errno : EIO;
		r->head = (r->head + 1) % OUT_BUFFERS;
		r->queued--;
		pthread_cond_broadcast(&r->changed);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* Hand the chunk being filled to the writer and wait for a free one. */
static int ring_push(struct sync_out *o)
{
	struct out_ring *r = &o->ring;
	pthread_mutex_lock(&r->lock);
	r->queued++;
	pthread_cond_broadcast(&r->changed);
	while (r->queued == OUT_BUFFERS && !o->failed)
		pthread_cond_wait(&r->changed, &r->lock);
	int failed = o->failed;
	r->len[(r->head + r->queued) % OUT_BUFFERS] = 0;
	pthread_mutex_unlock(&r->lock);
	return failed ? -1 : 0;
}

/* Queue what is left and wait for the writer to end (every path out of a
 * sync_out goes through here once the writer started). */
static void ring_stop(struct sync_out *o)
{
	struct out_ring *r = &o->ring;
	if (!r->started)
		return;
	pthread_mutex_lock(&r->lock);
	if (r->len[(r->head + r->queued) % OUT_BUFFERS] && r->queued < OUT_BUFFERS)
		r->queued++;
	r->closing = 1;
	pthread_cond_broadcast(&r->changed);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->writer, NULL);
	r->started = 0;
}

static int out_failed(struct sync_out *o)
{
	pthread_mutex_lock(&o->ring.lock);
	int failed = o->failed;
	pthread_mutex_unlock(&o->ring.lock);
	return failed;
}

/* libarchive's output: into the chunk being filled (only this thread
 * touches it), handed over when full. Once the writer failed, the rest is
 * dropped, not refused: an error here would leave libarchive in its fatal
 * state, where freeing it leaks its output buffer; the sync_out_ calls
 * report the failure instead. */
static la_ssize_t out_write(struct archive *a, void *arg, const void *data, size_t len)
{
	(void)a;
	struct sync_out *o = arg;
	struct out_ring *r = &o->ring;
	const char *p = data;
	size_t left = len;
	while (left > 0) {
		pthread_mutex_lock(&r->lock);
		unsigned slot = (r->head + r->queued) % OUT_BUFFERS;
		int failed = o->failed;
		pthread_mutex_unlock(&r->lock);
		if (failed)
			return (la_ssize_t)len;
		size_t n = CHUNK - r->len[slot] < left ? CHUNK - r->len[slot] : left;
		memcpy(r->buf[slot] + r->len[slot], p, n);
		r->len[slot] += n;
		p += n;
		left -= n;
		if (r->len[slot] == CHUNK && ring_push(o) < 0)
			return (la_ssize_t)len;
	}
	return (la_ssize_t)len;
}

static int ring_start(struct sync_out *o)
{
	struct out_ring *r = &o->ring;
	for (unsigned i = 0; i < OUT_BUFFERS; i++)
		r->buf[i] = xmalloc(CHUNK);
	r->started = pthread_create(&r->writer, NULL, writer_main, o) == 0;
	return r->started ? 0 : -1;
}

static void ring_release(struct out_ring *r)
{
	for (unsigned i = 0; i < OUT_BUFFERS; i++)
		free(r->buf[i]);
	pthread_cond_destroy(&r->changed);
	pthread_mutex_destroy(&r->lock);
}

/* spec: "none" (plain tar), "zstd" or "zstd:LEVEL" (1 to 19). */
static int set_compression(struct archive *ar, const char *spec)
{
	if (!spec || strcmp(spec, "zstd") == 0)
		spec = "zstd:3";
	if (strcmp(spec, "none") == 0)
		return archive_write_add_filter_none(ar) == ARCHIVE_OK ? 0 : -1;
	char *end = NULL;
	long level = strncmp(spec, "zstd:", 5) == 0 ? strtol(spec + 5, &end, 10) : 0;
	if (!end || *end || end == spec + 5 || level < 1 || level > 19)
		return KHUB_EINVAL;
	char text[8];
	snprintf(text, sizeof(text), "%ld", level);
	if (archive_write_add_filter_zstd(ar) != ARCHIVE_OK ||
	    archive_write_set_filter_option(ar, "zstd", "compression-level", text) != ARCHIVE_OK)
		return -1;
	/* compress on every core the machine has (ignored where unsupported) */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus > 1) {
		snprintf(text, sizeof(text), "%ld", cpus > 8 ? 8 : cpus);
		archive_write_set_filter_option(ar, "zstd", "threads", text);
	}
	return 0;
}

int sync_compression_check(const char *spec)
{
	struct archive *ar = archive_write_new();
	int rc = set_compression(ar, spec);
	archive_write_free(ar);
	return rc == KHUB_EINVAL ? KHUB_EINVAL : 0;
}

struct sync_out *sync_out_open(const char *path, uint64_t volume_size, const char *compression, char *err,
			       size_t errlen)
{
	struct sync_out *o = xcalloc(1, sizeof(*o));
	o->path = xstrdup(path);
	o->volume_size = volume_size;
	volume_io_init(&o->io);
	pthread_mutex_init(&o->ring.lock, NULL);
	pthread_cond_init(&o->ring.changed, NULL);
	if (volume_size) {	/* an index left by an earlier export would describe other volumes */
		char *index = xasprintf("%s.index", path);
		unlink(index);
		free(index);
	}
	o->ar = archive_write_new();
	int crc = set_compression(o->ar, compression);
	if (crc == KHUB_EINVAL) {
		snprintf(err, errlen, "compression %s: want none, zstd or zstd:LEVEL (1 to 19)", compression);
		sync_out_abort(o);
		return NULL;
	}
	if (crc < 0 || ring_start(o) < 0 || archive_write_set_format_pax_restricted(o->ar) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(o->ar, 1) != ARCHIVE_OK ||
	    archive_write_open2(o->ar, o, NULL, out_write, NULL, NULL) != ARCHIVE_OK) {
		snprintf(err, errlen, "cannot start the bundle %s: %s", path, archive_error_string(o->ar));
		sync_out_abort(o);
		return NULL;
	}
	return o;
}

static int entry_header(struct sync_out *o, const char *name, uint64_t size)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, time(NULL), 0);
	int rc = archive_write_header(o->ar, e) == ARCHIVE_OK ? 0 : KHUB_EIO;
	archive_entry_free(e);
	return rc;
}

int sync_out_bytes(struct sync_out *o, const char *name, const void *data, size_t len)
{
	if (entry_header(o, name, len) < 0 || (len && archive_write_data(o->ar, data, len) != (la_ssize_t)len) ||
	    out_failed(o))
		return KHUB_EIO;
	return 0;
}

int sync_out_fd(struct sync_out *o, const char *name, int fd, uint64_t size, struct sync_progress *p)
{
	if (entry_header(o, name, size) < 0)
		return KHUB_EIO;
	uint64_t left = size;
	while (left > 0) {
		ssize_t n = read(fd, o->io.buf, left < CHUNK ? (size_t)left : CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || archive_write_data(o->ar, o->io.buf, (size_t)n) != n || out_failed(o))
			return KHUB_EIO;
		left -= (uint64_t)n;
		sync_progress_add(p, (uint64_t)n);
	}
	return 0;
}

static void out_free(struct sync_out *o)
{
	ring_stop(o);
	ring_release(&o->ring);
	volume_io_release(&o->io);
	archive_write_free(o->ar);
	free(o->vols);
	free(o->path);
	free(o);
}

void sync_out_abort(struct sync_out *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->ring.lock);
	o->failed = o->failed ? o->failed : ECANCELED;	/* the writer writes nothing more */
	pthread_mutex_unlock(&o->ring.lock);
	/* closed, not failed: libarchive frees what it holds only on close;
	 * what the close writes is dropped (out_write) */
	if (o->ar)
		archive_write_close(o->ar);
	ring_stop(o);
	if (!o->volume_size) {
		char *partial = xasprintf("%s.partial", o->path);
		unlink(partial);
		free(partial);
	}
	out_free(o);
}

int sync_out_close(struct sync_out *o, unsigned *volumes, char *err, size_t errlen)
{
	int rc = 0;
	int closed = archive_write_close(o->ar) == ARCHIVE_OK;
	ring_stop(o);	/* everything written: the volumes are the writer's no more */
	if (!closed || o->failed) {
		snprintf(err, errlen, "cannot write the bundle %s: %s", o->path,
			 o->failed ? strerror(o->failed) : archive_error_string(o->ar));
		rc = KHUB_EIO;
	}
	if (rc == 0 && finish_volume(o) < 0) {
		snprintf(err, errlen, "cannot write the bundle %s: %s", o->path, strerror(errno));
		rc = KHUB_EIO;
	}
	if (rc == 0 && !o->volume_size) {
		char *partial = xasprintf("%s.partial", o->path);
		if (rename(partial, o->path) < 0) {
			snprintf(err, errlen, "cannot rename %s to %s: %s", partial, o->path, strerror(errno));
			rc = KHUB_EIO;
		}
		free(partial);
	} else if (rc < 0 && !o->volume_size) {
		char *partial = xasprintf("%s.partial", o->path);
		unlink(partial);
		free(partial);
	}
	if (rc == 0 && o->volume_size) {
		json_t *doc = json_object(), *vols = json_array();
		for (unsigned i = 0; i < o->nvol; i++) {
			char *name = volume_name(o->path, i + 1);
			const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
			json_array_append_new(vols, json_pack("{s:s, s:I, s:s}", "name", base, "size",
							      (json_int_t)o->vols[i].size, "sha256", o->vols[i].sha256));
			free(name);
		}
		json_object_set_new(doc, "volumes", vols);
		char *index = xasprintf("%s.index", o->path);
		if (json_dump_file(doc, index, JSON_INDENT(1)) < 0) {
			snprintf(err, errlen, "cannot write %s", index);
			rc = KHUB_EIO;
		}
		free(index);
		json_decref(doc);
	}
	if (volumes)
		*volumes = o->nvol;
	out_free(o);
	return rc;
}

/* ---- reading ------------------------------------------------------------------- */

struct sync_in {
	struct archive *ar;
	char *base;			/* the volumes' base name, or the one file */
	int volumes;			/* split into base.NNN */
	unsigned nindex;		/* volumes the index lists (0: no index) */
	struct volume_info *index;
	unsigned cur;
	struct volume_io io;
	uint64_t vol_bytes;
	uint64_t entry_off;		/* sync_in_block: the next offset in the entry */
	int skipping;			/* sync_in_skip: the reader may seek over bytes */
	int vol_unhashed;		/* bytes of this volume were skipped: its sha256 is not known */
	char error[512];
};

static int exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

static int open_volume(struct sync_in *in, unsigned n)
{
	char *name = in->volumes ? volume_name(in->base, n) : xstrdup(in->base);
	in->io.fd = open(name, O_RDONLY | O_CLOEXEC);
	if (in->io.fd < 0 && n > 1 && in->nindex == 0 && errno == ENOENT) {
		free(name);
		return 1;	/* no index: the end of the volumes */
	}
	if (in->io.fd < 0) {
		snprintf(in->error, sizeof(in->error), "%s %s: %s", in->volumes ? "missing volume" : "cannot open", name,
			 strerror(errno));
		free(name);
		return -1;
	}
	free(name);
	(void)posix_fadvise(in->io.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	in->cur = n;
	in->vol_bytes = 0;
	in->vol_unhashed = 0;
	EVP_DigestInit_ex(in->io.sha, EVP_sha256(), NULL);
	return 0;
}

/* The current volume is read to its end: check it against the index. */
static int close_volume(struct sync_in *in)
{
	close(in->io.fd);
	in->io.fd = -1;
	if (in->nindex == 0)
		return 0;
	char hex[65];
	sha256_final_hex(in->io.sha, hex);
	const struct volume_info *v = &in->index[in->cur - 1];
	if (v->size != in->vol_bytes || (!in->vol_unhashed && strcmp(v->sha256, hex) != 0)) {
		snprintf(in->error, sizeof(in->error), "volume %03u differs from the index (%s)", in->cur,
			 v->size != in->vol_bytes ? "size" : "sha256");
		return -1;
	}
	return 0;
}

static la_ssize_t in_read(struct archive *a, void *arg, const void **data)
{
	(void)a;
	struct sync_in *in = arg;
	for (;;) {
		if (in->io.fd < 0)
			return 0;
		ssize_t n = read(in->io.fd, in->io.buf, CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(in->error, sizeof(in->error), "cannot read the bundle: %s", strerror(errno));
			return -1;
		}
		if (n > 0) {
			in->vol_bytes += (uint64_t)n;
			if (in->nindex)	/* checked against the index at the volume's end */
				EVP_DigestUpdate(in->io.sha, in->io.buf, (size_t)n);
			*data = in->io.buf;
			return n;
		}
		if (close_volume(in) < 0)
			return -1;
		if (!in->volumes || (in->nindex && in->cur >= in->nindex))
			return 0;
		int rc = open_volume(in, in->cur + 1);
		if (rc != 0)
			return rc < 0 ? -1 : 0;
	}
}

/* libarchive's skip (only without a compression filter, only inside
 * sync_in_skip): seek within the current volume. */
static la_int64_t in_skip(struct archive *a, void *arg, la_int64_t request)
{
	(void)a;
	struct sync_in *in = arg;
	struct stat st;
	off_t at;
	if (!in->skipping || in->io.fd < 0 || request <= 0 || fstat(in->io.fd, &st) < 0 ||
	    (at = lseek(in->io.fd, 0, SEEK_CUR)) < 0 || at >= st.st_size)
		return 0;
	la_int64_t n = st.st_size - at < request ? st.st_size - at : request;
	if (lseek(in->io.fd, (off_t)n, SEEK_CUR) < 0)
		return 0;
	in->vol_bytes += (uint64_t)n;
	in->vol_unhashed = 1;
	return n;
}

static int load_index(struct sync_in *in, char *err, size_t errlen)
{
	char *path = xasprintf("%s.index", in->base);
	int rc = 0;
	if (!exists(path))
		goto cleanup;
	json_t *doc = json_load_file(path, 0, NULL);
	json_t *vols = json_object_get(doc, "volumes");
	size_t i;
	json_t *v;
	if (!json_is_array(vols) || json_array_size(vols) == 0 || json_array_size(vols) > 99999) {
		snprintf(err, errlen, "%s is malformed", path);
		rc = KHUB_EINVAL;
	}
	in->index = xcalloc(json_array_size(vols) + 1, sizeof(*in->index));
	json_array_foreach(vols, i, v) {
		const char *sha = json_string_value(json_object_get(v, "sha256"));
		json_t *size = json_object_get(v, "size");
		if (rc < 0 || !sha || !is_lower_hex(sha, 64) || !json_is_integer(size) || json_integer_value(size) < 0) {
			snprintf(err, errlen, "%s is malformed", path);
			rc = KHUB_EINVAL;
			break;
		}
		in->index[i].size = (uint64_t)json_integer_value(size);
		memcpy(in->index[i].sha256, sha, 65);
		char *name = volume_name(in->base, (unsigned)i + 1);
		struct stat st;
		if (stat(name, &st) < 0) {
			snprintf(err, errlen, "missing volume %s (the index lists %zu volumes)", name, json_array_size(vols));
			rc = KHUB_EINVAL;
		} else if ((uint64_t)st.st_size != in->index[i].size) {
			snprintf(err, errlen, "volume %s has %lld bytes, the index says %" PRIu64 " (truncated?)", name,
				 (long long)st.st_size, in->index[i].size);
			rc = KHUB_EINVAL;
		}
		free(name);
		if (rc < 0)
			break;
	}
	if (rc == 0)
		in->nindex = (unsigned)json_array_size(vols);
	json_decref(doc);
cleanup:
	free(path);
	return rc;
}

struct sync_in *sync_in_open(const char *path, char *err, size_t errlen)
{
	struct sync_in *in = xcalloc(1, sizeof(*in));
	volume_io_init(&in->io);
	size_t len = strlen(path);
	char *first = xasprintf("%s.001", path);
	if (len > 4 && strcmp(path + len - 4, ".001") == 0) {
		in->base = xstrndup(path, len - 4);
		in->volumes = 1;
	} else if (!exists(path) && exists(first)) {	/* a file of that name wins */
		in->base = xstrdup(path);
		in->volumes = 1;
	} else {
		in->base = xstrdup(path);
	}
	free(first);
	if (in->volumes && load_index(in, err, errlen) < 0)
		goto fail;
	if (open_volume(in, 1) != 0) {
		snprintf(err, errlen, "%s", in->error[0] ? in->error : "cannot open the bundle");
		goto fail;
	}
	in->ar = archive_read_new();
	archive_read_support_filter_zstd(in->ar);
	archive_read_support_format_tar(in->ar);
	archive_read_set_callback_data(in->ar, in);
	archive_read_set_read_callback(in->ar, in_read);
	archive_read_set_skip_callback(in->ar, in_skip);
	if (archive_read_open1(in->ar) != ARCHIVE_OK) {
		snprintf(err, errlen, "%s is not a bundle (tar + zstd): %s", path,
			 in->error[0] ? in->error : archive_error_string(in->ar));
		goto fail;
	}
	return in;
fail:
	sync_in_close(in);
	return NULL;
}

int sync_in_next(struct sync_in *in, const char **name, uint64_t *size)
{
	struct archive_entry *e;
	int rc = archive_read_next_header(in->ar, &e);
	if (rc == ARCHIVE_EOF)
		return 0;
	if (rc != ARCHIVE_OK) {
		if (!in->error[0])
			snprintf(in->error, sizeof(in->error), "the bundle is truncated or corrupt: %s",
				 archive_error_string(in->ar) ? archive_error_string(in->ar) : "unreadable");
		return KHUB_EIO;
	}
	*name = archive_entry_pathname(e);
	*size = archive_entry_size_is_set(e) ? (uint64_t)archive_entry_size(e) : 0;
	in->entry_off = 0;
	return 1;
}

long sync_in_read(struct sync_in *in, void *buf, size_t len)
{
	la_ssize_t n = archive_read_data(in->ar, buf, len);
	if (n < 0 && !in->error[0])
		snprintf(in->error, sizeof(in->error), "the bundle is truncated or corrupt: %s",
			 archive_error_string(in->ar) ? archive_error_string(in->ar) : "unreadable");
	return n < 0 ? KHUB_EIO : (long)n;
}

long sync_in_block(struct sync_in *in, const void **data)
{
	for (;;) {
		size_t size = 0;
		la_int64_t off = 0;
		int r = archive_read_data_block(in->ar, data, &size, &off);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r != ARCHIVE_OK) {
			if (!in->error[0])
				snprintf(in->error, sizeof(in->error), "the bundle is truncated or corrupt: %s",
					 archive_error_string(in->ar) ? archive_error_string(in->ar) : "unreadable");
			return KHUB_EIO;
		}
		if (off < 0 || (uint64_t)off != in->entry_off || size > (size_t)LONG_MAX) {
			snprintf(in->error, sizeof(in->error), "the bundle holds a sparse or out-of-order entry");
			return KHUB_EIO;
		}
		in->entry_off += size;
		if (size)
			return (long)size;
	}
}

int sync_in_skip(struct sync_in *in)
{
	in->skipping = 1;
	int r = archive_read_data_skip(in->ar);
	in->skipping = 0;
	if (r != ARCHIVE_OK && !in->error[0])
		snprintf(in->error, sizeof(in->error), "the bundle is truncated or corrupt: %s",
			 archive_error_string(in->ar) ? archive_error_string(in->ar) : "unreadable");
	return r == ARCHIVE_OK ? 0 : KHUB_EIO;
}

const char *sync_in_error(struct sync_in *in)
{
	return in->error[0] ? in->error : "the bundle is truncated or corrupt";
}

void sync_in_close(struct sync_in *in)
{
	if (!in)
		return;
	if (in->ar)
		archive_read_free(in->ar);
	volume_io_release(&in->io);
	free(in->index);
	free(in->base);
	free(in);
}
