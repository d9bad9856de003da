/* lfs_scrub.c -- the scrub of the local LFS store (as Ceph's deep scrub
 * and ZFS's scrub): every object re-hashed at scrub_mb_per_s at most, a
 * pass when the scheduler says (server/jobs.c: schedule_scrub, one node at
 * a time); a damaged object is quarantined (lfs_verify.c), logged and
 * counted for /metrics.
 * It finds what leaves the file's metadata alone (bit rot), which the
 * check before serving cannot see. */
#include "storage/lfs/lfs.h"
#include "storage/lfs/lfs_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* lock, wake and stopping only: passes run on the scheduler's thread */
static struct bg_thread scrubber = BG_THREAD_INIT;
static struct lfs_verify *scrub_verify;
static uint64_t scrub_bytes_per_s;
static _Atomic uint64_t scrubbed_objects, scrubbed_bytes, scrubbed_damaged;
static _Atomic int64_t scrub_completed_at;

/* One pass: when it began and what it read, for the pace. */
struct pass {
	uint64_t started_usec, bytes;
	uint64_t objects, damaged;
	int stopped;
};

/* Sleep until the bytes read so far fit the rate; 1 when the server stops. */
static int pace_after(void *arg, uint64_t bytes)
{
	struct pass *p = arg;
	p->bytes += bytes;
	atomic_fetch_add(&scrubbed_bytes, bytes);
	uint64_t due = p->started_usec + p->bytes * 1000000 / scrub_bytes_per_s, now = monotonic_usec();
	pthread_mutex_lock(&scrubber.lock);
	if (due > now && !scrubber.stopping) {
		struct timespec ts = clock_after_usec(CLOCK_REALTIME, due - now);
		while (!scrubber.stopping && pthread_cond_timedwait(&scrubber.wake, &scrubber.lock, &ts) == 0)
			;
	}
	p->stopped = scrubber.stopping;
	pthread_mutex_unlock(&scrubber.lock);
	return p->stopped;
}

static int scrub_object(const char *rel, const char *path, const char *name, void *ctx)
{
	struct pass *p = ctx;
	struct stat st;
	(void)rel;
	if (p->stopped)
		return KHUB_ECONFLICT;
	if (lstat(path, &st) < 0)
		return 0;	/* removed meanwhile (gc, quarantine) */
	if (S_ISDIR(st.st_mode))
		return DIR_WALK_ENTER;
	if (!S_ISREG(st.st_mode) || !is_lower_hex(name, 64) || strlen(name) != 64)
		return 0;	/* khub fsck reports what is not an object */
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct lfs_pace pace = { pace_after, p };
	int rc = lfs_verify_rehash(scrub_verify, name, fd, &pace, NULL);
	close(fd);
	if (rc == KHUB_ECONFLICT)
		return rc;
	p->objects++;
	atomic_fetch_add(&scrubbed_objects, 1);
	if (rc == KHUB_EINVAL) {
		p->damaged++;
		atomic_fetch_add(&scrubbed_damaged, 1);
		log_error("lfs scrub: object %s was damaged; moved to quarantine/lfs", name);
	} else if (rc < 0) {
		log_warn("lfs scrub: cannot re-hash %s", path);
	}
	return 0;
}

int lfs_scrub_pass(void)
{
	struct pass p = { .started_usec = monotonic_usec() };
	struct stat st;
	if (!scrub_verify)
		return KHUB_EINVAL;
	pthread_mutex_lock(&scrubber.lock);
	p.stopped = scrubber.stopping;
	pthread_mutex_unlock(&scrubber.lock);
	if (p.stopped)
		return KHUB_ECONFLICT;
	const char *objects = lfs_verify_objects_dir(scrub_verify);
	log_info("lfs scrub: a pass begins (%llu MiB/s at most)", (unsigned long long)(scrub_bytes_per_s >> 20));
	int rc = stat(objects, &st) == 0 ? dir_walk(objects, scrub_object, &p) : 0;
	if (rc < 0) {
		log_info("lfs scrub: the pass ended early (%s) after %llu objects, %llu damaged",
			 p.stopped ? "shutdown" : "the walk failed", (unsigned long long)p.objects,
			 (unsigned long long)p.damaged);
		return p.stopped ? KHUB_ECONFLICT : KHUB_EIO;
	}
	atomic_store(&scrub_completed_at, (int64_t)time(NULL));
	log_info("lfs scrub: a pass ended: %llu objects, %llu bytes, %llu damaged", (unsigned long long)p.objects,
		 (unsigned long long)p.bytes, (unsigned long long)p.damaged);
	return 0;
}

int lfs_scrub_start(struct lfs_store *store, long mb_per_s)
{
	if (mb_per_s <= 0)
		return 0;
	if (!(scrub_verify = lfs_store_verifier(store))) {
		log_info("lfs scrub: off (the %s backend verifies what it reads)", lfs_store_backend(store));
		return 0;
	}
	scrub_bytes_per_s = (uint64_t)mb_per_s << 20;
	return 1;
}

/* Ends a pass under way (on the scheduler's thread) and any later one. */
void lfs_scrub_stop(void)
{
	pthread_mutex_lock(&scrubber.lock);
	scrubber.stopping = 1;
	pthread_cond_broadcast(&scrubber.wake);
	pthread_mutex_unlock(&scrubber.lock);
}

void lfs_integrity_stats(struct lfs_integrity_stats *out)
{
	lfs_verify_counts(&out->rehashed, &out->damaged_on_read);
	out->s3_damaged_on_read = lfs_s3_damaged_count();
	out->scrub_objects = atomic_load(&scrubbed_objects);
	out->scrub_bytes = atomic_load(&scrubbed_bytes);
	out->scrub_damaged = atomic_load(&scrubbed_damaged);
	out->scrub_completed_at = atomic_load(&scrub_completed_at);
}
