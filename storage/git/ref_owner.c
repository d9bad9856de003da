/* ref_owner.c -- who is inside a ref update of a repo, so that a ref's
 * .lock file left by a killed writer is cleared at once and one a live
 * writer holds is waited for (KHUB_EBUSY: 503 with Retry-After), never
 * answered 500. libgit2 writes the ref's new value into the .lock file
 * itself, so the owner is recorded beside it: {gitdir}/khub-ref-owner,
 * flock()ed for the whole update (the kernel, or the NFS server once the
 * dead node's lease ends, releases it with its process) and holding
 * "HOST PID START REF" (START: the process's start time in clock ticks
 * since boot, so a reused pid is told apart). */
#include "storage/git/repo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OWNER_FILE "khub-ref-owner"
#define TAKE_TRIES 20			/* of 5 ms: git's own core.filesRefLockTimeout is 100 ms */
#define BARE_LOCK_STALE_S 5		/* git holds a ref's lock for milliseconds */

/* A process's start time (field 22 of /proc/PID/stat); 0 when it is gone. */
static unsigned long long process_start(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *fp = fopen(path, "re");
	size_t n = fp ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;
	if (fp)
		fclose(fp);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');	/* the command name may hold spaces */
	unsigned long long start = 0;
	for (int field = 2; p && *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (p && sscanf(p, "%llu", &start) != 1)
		start = 0;
	return start;
}

/* "HOST PID START REF\n" of this process about ref_name (the caller frees). */
static char *owner_record(const char *ref_name)
{
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	return xasprintf("%s %ld %llu %s\n", host[0] ? host : "-", (long)getpid(), process_start(getpid()), ref_name);
}

int ref_owner_take(git_repository *repo, const char *ref_name, struct ref_owner *o)
{
	memset(o, 0, sizeof(*o));
	o->ref_name = ref_name;
	char *path = xasprintf("%s" OWNER_FILE, git_repository_path(repo));
	o->lock_path = xasprintf("%s%s.lock", git_repository_path(repo), ref_name);
	o->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	int rc = o->fd < 0 ? KHUB_EIO : KHUB_EBUSY;
	for (int i = 0; o->fd >= 0 && i < TAKE_TRIES && rc == KHUB_EBUSY; i++) {
		if (flock(o->fd, LOCK_EX | LOCK_NB) == 0)
			rc = 0;
		else if (errno != EWOULDBLOCK && errno != EINTR)
			rc = KHUB_EIO;
		else
			nanosleep(&(struct timespec){ 0, 5 * 1000 * 1000 }, NULL);
	}
	if (rc == 0) {
		ssize_t n = pread(o->fd, o->prev, sizeof(o->prev) - 1, 0);
		o->prev[n > 0 ? n : 0] = '\0';
		char *mine = owner_record(ref_name);
		size_t len = strlen(mine);
		if (ftruncate(o->fd, 0) < 0 || pwrite(o->fd, mine, len, 0) != (ssize_t)len)
			rc = KHUB_EIO;
		free(mine);
	}
	if (rc == KHUB_EIO)
		log_error("cannot take %s: %s", path, strerror(errno));
	else if (rc == KHUB_EBUSY)
		log_warn("%s: another writer is inside a ref update", path);
	free(path);
	if (rc < 0)
		ref_owner_release(o);
	return rc;
}

/* Is the previous owner's record about our ref, and its process alive on
 * this host? (Another host's live writer holds the flock, which we hold.) */
static int prev_owner(const struct ref_owner *o, int *alive)
{
	char host[256] = "", prev_host[256], ref[1024];
	long pid;
	unsigned long long start;
	*alive = 0;
	if (sscanf(o->prev, "%255s %ld %llu %1023s", prev_host, &pid, &start, ref) != 4 ||
	    strcmp(ref, o->ref_name) != 0)
		return 0;
	gethostname(host, sizeof(host) - 1);
	/* on NFS flock() is a per-process lock: a thread of a live process
	 * may have recorded it */
	*alive = strcmp(prev_host, host) == 0 && pid > 0 && process_start(pid) == start;
	return 1;
}

int ref_owner_clear_stale(const struct ref_owner *o)
{
	struct stat st;
	int alive, ours = prev_owner(o, &alive);
	if (lstat(o->lock_path, &st) < 0)
		return errno == ENOENT ? 0 : KHUB_EIO;	/* gone meanwhile: try again */
	if (ours && alive)
		return KHUB_EBUSY;
	/* not ours: a git process's (a push), whose lock lives milliseconds */
	if (!ours && time(NULL) - st.st_mtime <= BARE_LOCK_STALE_S)
		return KHUB_EBUSY;
	if (unlink(o->lock_path) < 0 && errno != ENOENT) {
		log_error("cannot remove the stale lock %s: %s", o->lock_path, strerror(errno));
		return KHUB_EIO;
	}
	log_warn("removed %s, left by %s", o->lock_path,
		 ours ? "a khub process that died inside its update" : "a writer that stopped (no owner, older than 5 s)");
	return 0;
}

void ref_owner_release(struct ref_owner *o)
{
	if (o->fd >= 0) {
		if (ftruncate(o->fd, 0) < 0)
			log_warn("cannot clear %s's owner record", o->lock_path);
		close(o->fd);	/* and the flock with it */
	}
	o->fd = -1;
	free(o->lock_path);
	o->lock_path = NULL;
}
