/* test_cpus.c -- the cgroup CPU quota parser and the usable CPU count. */
#include "common/common.h"
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

static char root[64];

static void put(const char *rel, const char *text)
{
	char *path = xasprintf("%s/%s", root, rel);
	char *dir = xstrdup(path);
	*strrchr(dir, '/') = '\0';
	if (mkdir_p(dir, 0755) < 0)
		abort();
	FILE *fp = fopen(path, "w");
	if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0)
		abort();
	free(dir);
	free(path);
}

/* cgroup_cpu_quota over a fake /sys/fs/cgroup under root. */
static long quota_of(const char *proc_cgroup_text, char *why, size_t why_len)
{
	put("proc-cgroup", proc_cgroup_text);
	char *proc = xasprintf("%s/proc-cgroup", root);
	why[0] = '\0';
	long cpus = cgroup_cpu_quota(proc, root, why, why_len);
	free(proc);
	return cpus;
}

static void test_cgroup_tree(void)
{
	char why[128];
	snprintf(root, sizeof(root), "/tmp/khub-test-cpus.XXXXXX");
	if (!mkdtemp(root))
		abort();
	put("a/b/cpu.max", "max 100000\n");
	put("a/cpu.max", "250000 100000\n");
	ok(quota_of("0::/a/b\n", why, sizeof(why)) == 3, "v2: a parent's cpu.max binds the child");
	is_str(why, "cgroup cpu.max 250000/100000", "v2: the binding file and quota");
	put("a/b/cpu.max", "100000 100000\n");
	ok(quota_of("0::/a/b\n", why, sizeof(why)) == 1, "v2: the smaller quota wins");
	put("a/b/cpu.max", "garbage\n");
	ok(quota_of("0::/a/b\n", why, sizeof(why)) == 3, "v2: a garbage cpu.max is no quota");
	ok(quota_of("0::/\n", why, sizeof(why)) == 0 && !why[0], "v2 root cgroup: no quota");
	ok(quota_of("0::/elsewhere\n", why, sizeof(why)) == 0, "v2: no cpu.max files: no quota");
	put("unified/h/cpu.max", "50000 100000\n");
	ok(quota_of("1:name=systemd:/h\n0::/h\n", why, sizeof(why)) == 1, "hybrid: v2 under unified/");
	put("cpu,cpuacct/c/cpu.cfs_quota_us", "200000\n");
	put("cpu,cpuacct/c/cpu.cfs_period_us", "100000\n");
	ok(quota_of("4:memory:/x\n3:cpu,cpuacct:/c\n0::/\n", why, sizeof(why)) == 2, "v1: cpu,cpuacct quota");
	is_str(why, "cgroup cpu.cfs_quota_us/cfs_period_us 200000/100000", "v1: the files and quota");
	put("cpu/d/cpu.cfs_quota_us", "-1\n");
	put("cpu/d/cpu.cfs_period_us", "100000\n");
	ok(quota_of("2:cpu:/d\n", why, sizeof(why)) == 0, "v1: quota -1 is no quota");
	ok(quota_of("2:cpuacct:/c\n", why, sizeof(why)) == 0, "v1: cpuacct alone is not the cpu controller");
	ok(quota_of("garbage\n::\n0::relative\n", why, sizeof(why)) == 0, "garbage /proc/self/cgroup: no quota");
	ok(cgroup_cpu_quota("/nonexistent/cgroup", root, why, sizeof(why)) == 0, "no /proc/self/cgroup: no quota");
	char *cmd = xasprintf("rm -rf '%s'", root);
	ok(system(cmd) == 0, "fake tree removed");
	free(cmd);
}

int main(void)
{
	char shown[64] = "";
	ok(cpu_quota_parse("max 100000\n", shown, sizeof(shown)) == 0, "cpu.max 'max 100000': no quota");
	ok(cpu_quota_parse("-1 100000", NULL, 0) == 0, "v1 quota -1: no quota");
	ok(cpu_quota_parse("100000 100000\n", shown, sizeof(shown)) == 1, "100000/100000: 1 CPU");
	is_str(shown, "100000/100000", "the quota as shown");
	ok(cpu_quota_parse("150000 100000", NULL, 0) == 2, "150000/100000 rounds up to 2 CPUs");
	ok(cpu_quota_parse("50000 100000", NULL, 0) == 1, "50000/100000: at least 1 CPU");
	ok(cpu_quota_parse("1 1000000", NULL, 0) == 1, "a tiny quota: 1 CPU");
	ok(cpu_quota_parse("400000 100000", NULL, 0) == 4, "400000/100000: 4 CPUs");
	static const char *const garbage[] = {
		"", "\n", "max", "max ", "maxi 100000", "100000", "100000 ", "0 100000", "100000 0",
		"-5 100000", "-1", "abc def", "100000 100000 junk", " 100000 100000", "+100000 100000",
		"100000  100000", "99999999999999999999 100000", "100000 -100000", "max 100000 x", "1e5 100000",
	};
	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
		ok(cpu_quota_parse(garbage[i], NULL, 0) == -1, "garbage #%zu refused", i);

	test_cgroup_tree();

	char why[256];
	long cpus = usable_cpus(why, sizeof(why));
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	ok(cpus >= 1 && cpus <= online, "usable_cpus %ld within 1..%ld online", cpus, online);
	ok(strncmp(why, "1 CPU:", 6) == 0 || strstr(why, " CPUs: "), "reason names the count: %s", why);
	ok(strstr(why, "sched_getaffinity") != NULL, "reason names the affinity mask");
	ok(usable_cpus(NULL, 0) == cpus, "no reason wanted: same count");
	return done_testing();
}
