/* backup_generations.c -- scheduled backups as generations: each one a
 * complete, verified `khub backup` into backup_dir/<UTC time>/, the newest
 * backup_keep kept; older ones go only after a new one is made and
 * verified, so a failing backup never costs the last good one. */
#include "server/server.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* 1 for a generation's name: YYYYMMDDTHHMMSSZ, or that with -N. */
static int is_generation(const char *name)
{
	size_t n = strlen(name);
	if (n < 16 || name[8] != 'T' || name[15] != 'Z' || (n > 16 && name[16] != '-'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (i != 8 && i != 15 && i != 16 && (name[i] < '0' || name[i] > '9'))
			return 0;
	return n != 17;
}

static int newest_first(const void *a, const void *b)
{
	return strcmp(*(char *const *)b, *(char *const *)a);
}

/* The generations' names, newest first (owned; *n of them), or NULL. */
static char **list_generations(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d)) != NULL) {
		if (!is_generation(e->d_name))
			continue;
		names = xrealloc(names, (*n + 1) * sizeof(*names));
		names[(*n)++] = xstrdup(e->d_name);
	}
	closedir(d);
	if (*n)
		qsort(names, *n, sizeof(*names), newest_first);
	return names;
}

/* Keep the newest `keep` complete generations; remove what is older. */
static void prune_generations(const char *dir, long keep)
{
	size_t n = 0;
	char **names = list_generations(dir, &n);
	long complete = 0;
	for (size_t i = 0; i < n; i++) {
		char *path = xasprintf("%s/%s", dir, names[i]), *m = xasprintf("%s/manifest.json", path);
		if (complete >= keep) {
			if (tree_remove(path) == 0)
				log_info("jobs: backup: removed the old generation %s (backup_keep = %ld)", path, keep);
			else
				log_warn("jobs: backup: cannot remove the old generation %s", path);
		} else if (access(m, F_OK) == 0) {
			complete++;
		}
		free(m);
		free(path);
		free(names[i]);
	}
	free(names);
}

/* A new generation's path below dir (not there yet; owned). */
static char *new_generation(const char *dir)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	char *path = xasprintf("%s/%s", dir, stamp);
	for (int i = 1; access(path, F_OK) == 0; i++) {
		free(path);
		path = xasprintf("%s/%s-%d", dir, stamp, i);
	}
	return path;
}

int jobs_backup_generation(const char *dir, long keep, int (*run)(const char *const *args), char *detail,
			   size_t len)
{
	if (!dir || !*dir) {
		snprintf(detail, len, "backup_dir is not set");
		return KHUB_EINVAL;
	}
	if (mkdir_p(dir, 0700) < 0) {
		snprintf(detail, len, "cannot create backup_dir %s: %s", dir, strerror(errno));
		return KHUB_EIO;
	}
	char *gen = new_generation(dir);
	int rc = 0, status = run((const char *const[]){ "backup", gen, NULL });
	if (status != 0) {
		snprintf(detail, len, "khub backup %s exited with status %d", gen, status);
		rc = KHUB_EIO;
	} else if ((status = run((const char *const[]){ "backup", "--verify", gen, NULL })) != 0) {
		snprintf(detail, len, "khub backup --verify %s exited with status %d", gen, status);
		rc = KHUB_EIO;
	}
	if (rc < 0 && tree_remove(gen) < 0)	/* no backup; a good older one stays */
		log_warn("jobs: backup: cannot remove the failed generation %s", gen);
	if (rc == 0) {
		log_info("jobs: backup: %s made and verified", gen);
		prune_generations(dir, keep);
	}
	free(gen);
	return rc;
}
