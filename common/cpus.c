/* cpus.c -- how many CPUs this process may use: the online CPUs narrowed by
 * its affinity mask (taskset, systemd CPUAffinity=, a container's cpuset)
 * and by a cgroup CPU quota (cgroup v2 cpu.max, v1 cfs_quota_us), so that
 * everything sized per CPU follows what the process really gets. */
#include "common/common.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A strictly positive decimal (digits first: no sign or space); *end after it. */
static int parse_positive(const char *s, const char **end, long long *out)
{
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	char *e;
	long long v = strtoll(s, &e, 10);
	if (errno || v <= 0)
		return -1;
	*end = e;
	*out = v;
	return 0;
}

long cpu_quota_parse(const char *text, char *shown, size_t shown_len)
{
	const char *p = text;
	long long quota, period;
	if (strncmp(p, "max", 3) == 0 || strncmp(p, "-1", 2) == 0) {
		p += p[0] == 'm' ? 3 : 2;
		if (*p != ' ' || parse_positive(p + 1, &p, &period) < 0)
			return -1;
		return strspn(p, " \n") == strlen(p) ? 0 : -1;
	}
	if (parse_positive(p, &p, &quota) < 0 || *p != ' ' || parse_positive(p + 1, &p, &period) < 0 ||
	    strspn(p, " \n") != strlen(p))
		return -1;
	long long cpus = quota / period + (quota % period != 0);
	if (shown && shown_len)
		snprintf(shown, shown_len, "%lld/%lld", quota, period);
	return cpus > INT_MAX ? INT_MAX : (long)cpus;
}

/* The first line of the small file DIR/NAME, or -1. */
static int read_line(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -1;
	FILE *fp = fopen(path, "re");
	if (!fp)
		return -1;
	char *got = fgets(buf, (int)len, fp);
	fclose(fp);
	return got ? 0 : -1;
}

/* The quota set on one cgroup directory: >0 CPUs, 0 none, -1 unreadable. */
static long quota_in_dir(const char *dir, int v2, char *shown, size_t shown_len)
{
	char text[128];
	if (v2) {
		if (read_line(dir, "cpu.max", text, sizeof(text)) < 0)
			return -1;
		return cpu_quota_parse(text, shown, shown_len);
	}
	char quota[64], period[64];
	if (read_line(dir, "cpu.cfs_quota_us", quota, sizeof(quota)) < 0 ||
	    read_line(dir, "cpu.cfs_period_us", period, sizeof(period)) < 0)
		return -1;
	quota[strcspn(quota, "\n")] = '\0';
	snprintf(text, sizeof(text), "%s %s", quota, period);
	return cpu_quota_parse(text, shown, shown_len);
}

/* The smallest quota on dir and its ancestors up to root (a parent's limit
 * binds its children too); 0 when none. Writes "cgroup cpu.max Q/P" to why. */
static long quota_up_from(const char *root, const char *own, int v2, char *why, size_t why_len)
{
	char dir[PATH_MAX], shown[64];
	long best = 0;
	if (snprintf(dir, sizeof(dir), "%s%s", root, strcmp(own, "/") == 0 ? "" : own) >= (int)sizeof(dir))
		return 0;
	for (;;) {
		long cpus = quota_in_dir(dir, v2, shown, sizeof(shown));
		if (cpus > 0 && (best == 0 || cpus < best)) {
			best = cpus;
			snprintf(why, why_len, "cgroup %s %s", v2 ? "cpu.max" : "cpu.cfs_quota_us/cfs_period_us",
				 shown);
		}
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < strlen(root))
			break;
		*slash = '\0';
	}
	return best;
}

long cgroup_cpu_quota(const char *proc_cgroup, const char *sysfs_root, char *why, size_t why_len)
{
	FILE *fp = fopen(proc_cgroup, "re");
	if (!fp)
		return 0;
	char line[PATH_MAX + 64], roots[2][PATH_MAX];
	long cpus = 0;
	while (!cpus && fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = '\0';
		char *controllers = strchr(line, ':');
		char *own = controllers ? strchr(controllers + 1, ':') : NULL;
		if (!own || own[1] != '/')
			continue;
		*own++ = '\0';
		*controllers++ = '\0';	/* line: the hierarchy id */
		int v2 = strcmp(line, "0") == 0 && !*controllers;
		char list[256];
		snprintf(list, sizeof(list), ",%s,", controllers);
		if (!v2 && !strstr(list, ",cpu,"))
			continue;
		/* v2 alone or beside v1 (hybrid); v1's cpu controller alone or with cpuacct */
		if (snprintf(roots[0], PATH_MAX, "%s%s", sysfs_root, v2 ? "" : "/cpu") >= PATH_MAX ||
		    snprintf(roots[1], PATH_MAX, "%s%s", sysfs_root, v2 ? "/unified" : "/cpu,cpuacct") >= PATH_MAX)
			break;
		for (size_t i = 0; !cpus && i < 2; i++)
			cpus = quota_up_from(roots[i], own, v2, why, why_len);
	}
	fclose(fp);
	return cpus;
}

/* CPUs in this thread's affinity mask, growing the mask for big machines. */
static long affinity_count(void)
{
	for (int n = 1024; n <= 1 << 18; n *= 2) {
		cpu_set_t *set = CPU_ALLOC((size_t)n);
		if (!set)
			return -1;
		size_t size = CPU_ALLOC_SIZE((size_t)n);
		CPU_ZERO_S(size, set);
		int rc = sched_getaffinity(0, size, set);
		long count = rc == 0 ? CPU_COUNT_S(size, set) : -1;
		CPU_FREE(set);
		if (rc == 0)
			return count;
		if (errno != EINVAL)
			return -1;
	}
	return -1;
}

long usable_cpus(char *why, size_t why_len)
{
	char affinity[96], quota_why[128] = "";
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	long allowed = affinity_count();
	long cpus = allowed > 0 ? allowed : online > 0 ? online : 1;
	if (allowed > 0)
		snprintf(affinity, sizeof(affinity), "sched_getaffinity allows %ld of %ld", allowed, online);
	else
		snprintf(affinity, sizeof(affinity), "sched_getaffinity failed, %ld online", cpus);
	long quota = cgroup_cpu_quota("/proc/self/cgroup", "/sys/fs/cgroup", quota_why, sizeof(quota_why));	/* "cgroup FILE Q/P" */
	long count = quota > 0 && quota < cpus ? quota : cpus;
	const char *s = count == 1 ? "" : "s";
	if (!why || !why_len)
		return count;
	if (quota > 0 && quota < cpus)
		snprintf(why, why_len, "%ld CPU%s: %s (%s)", count, s, quota_why, affinity);
	else if (quota > 0)
		snprintf(why, why_len, "%ld CPU%s: %s (%s allows %ld)", count, s, affinity, quota_why, quota);
	else
		snprintf(why, why_len, "%ld CPU%s: %s, no cgroup CPU quota", count, s, affinity);
	return count;
}
