/* test_build_source_net.c -- which addresses an external git source may
 * reach (farm/build_source_net.c): loopback, private, link-local, CGNAT,
 * multicast, reserved and their IPv6 forms refused; public ones and the
 * allow-list's addresses, ranges and host names accepted. */
#include "farm/farm.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

/* 1 when addr (text) may be reached for host. */
static int allowed(const char *host, const char *addr)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	char why[256];
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, addr, &s6->sin6_addr);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &s4->sin_addr);
	}
	return source_net_address_allowed(host, (struct sockaddr *)&ss, why, sizeof(why));
}

static const struct {
	const char *addr;
	int allowed;
} cases[] = {
	{ "127.0.0.1", 0 }, { "127.255.0.9", 0 }, { "0.0.0.0", 0 }, { "0.1.2.3", 0 }, { "10.0.0.1", 0 },
	{ "172.16.0.1", 0 }, { "172.31.255.255", 0 }, { "192.168.1.1", 0 }, { "169.254.169.254", 0 },
	{ "100.64.0.1", 0 }, { "100.127.255.255", 0 }, { "224.0.0.1", 0 }, { "239.1.1.1", 0 }, { "240.0.0.1", 0 },
	{ "255.255.255.255", 0 }, { "198.18.0.1", 0 }, { "192.0.0.8", 0 },
	{ "::1", 0 }, { "::", 0 }, { "fe80::1", 0 }, { "fc00::1", 0 }, { "fd12:3456::1", 0 }, { "ff02::1", 0 },
	{ "::ffff:127.0.0.1", 0 }, { "::ffff:10.0.0.1", 0 }, { "::ffff:169.254.169.254", 0 }, { "::127.0.0.1", 0 },
	{ "64:ff9b::7f00:1", 0 }, { "2002:7f00:1::", 0 }, { "2001:db8::1", 0 }, { "fec0::1", 0 },
	{ "8.8.8.8", 1 }, { "140.82.112.3", 1 }, { "100.63.255.255", 1 }, { "100.128.0.0", 1 }, { "172.32.0.1", 1 },
	{ "11.0.0.1", 1 }, { "2606:4700::1111", 1 }, { "::ffff:8.8.8.8", 1 }, { "2a00:1450:4001::200e", 1 },
};

int main(void)
{
	struct source_net_limits limits = { 10, 1024, 30, 600 };
	char why[256];
	ok(source_net_configure("", &limits, why, sizeof(why)) == 0, "an empty allow-list");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ok(allowed("example.org", cases[i].addr) == cases[i].allowed, "%s: %s", cases[i].addr,
		   cases[i].allowed ? "reached" : "refused");

	ok(source_net_configure("10.1.0.0/16, 127.0.0.2 ,git.internal,fd00::/8", &limits, why, sizeof(why)) == 0,
	   "an allow-list of a range, an address, a host name and an IPv6 range");
	ok(allowed("x", "10.1.200.3"), "10.1.200.3 is in 10.1.0.0/16");
	ok(!allowed("x", "10.2.0.1"), "10.2.0.1 is not");
	ok(allowed("x", "127.0.0.2") && !allowed("x", "127.0.0.1"), "127.0.0.2 alone");
	ok(allowed("x", "::ffff:127.0.0.2"), "the IPv4-mapped form of an allowed address");
	ok(allowed("GIT.internal", "192.168.3.4"), "the allowed host name reaches its private address");
	ok(!allowed("other.internal", "192.168.3.4"), "another name does not");
	ok(allowed("x", "fd00::5") && !allowed("x", "fc00::5"), "fd00::/8 but not the rest of fc00::/7");

	const char *bad[] = { "10.0.0.0/33", "::1/129", "a b/c", "http://x", "1.2.3.4/", "host:22" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(source_net_configure(bad[i], &limits, why, sizeof(why)) < 0 && strstr(why, "build_source_allow"),
		   "'%s' refused: %s", bad[i], why);
	source_net_release();
	return done_testing();
}
