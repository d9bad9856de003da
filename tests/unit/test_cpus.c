/* test_cpus.c -- the cgroup CPU quota parser and the usable CPU count. */
#include "common/common.h"
#include "tap.h"

#include <unistd.h>

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

	char why[256];
	long cpus = usable_cpus(why, sizeof(why));
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	ok(cpus >= 1 && cpus <= online, "usable_cpus %ld within 1..%ld online", cpus, online);
	ok(strncmp(why, "1 CPU:", 6) == 0 || strstr(why, " CPUs: "), "reason names the count: %s", why);
	ok(strstr(why, "sched_getaffinity") != NULL, "reason names the affinity mask");
	ok(usable_cpus(NULL, 0) == cpus, "no reason wanted: same count");
	return done_testing();
}
