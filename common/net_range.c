/* net_range.c -- IP address ranges (an address or CIDR prefix) and whether
 * an address falls in one: the build farm's allow-list of private git
 * hosts and the HTTP layer's trusted proxies share it; and the special-purpose
 * ranges outgoing connections refuse (build sources, webhooks). */
#include "common.h"

#include <arpa/inet.h>
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int net_range_parse(const char *text, struct net_range *r)
{
	char addr[64];
	const char *slash = strchr(text, '/');
	size_t n = slash ? (size_t)(slash - text) : strlen(text);
	if (n == 0 || n >= sizeof(addr))
		return -1;
	memcpy(addr, text, n);
	addr[n] = '\0';
	memset(r, 0, sizeof(*r));
	r->family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(r->family, addr, r->addr) != 1)
		return -1;
	unsigned max = r->family == AF_INET ? 32 : 128;
	r->bits = max;
	if (slash) {
		char *end;
		long bits = strtol(slash + 1, &end, 10);
		if (!slash[1] || *end || bits < 0 || bits > (long)max)
			return -1;
		r->bits = (unsigned)bits;
	}
	return 0;
}

int net_range_contains(const struct net_range *r, int family, const unsigned char *addr)
{
	if (r->family != family)
		return 0;
	unsigned full = r->bits / 8, rest = r->bits % 8;
	if (memcmp(r->addr, addr, full) != 0)
		return 0;
	return !rest || ((r->addr[full] ^ addr[full]) & (0xff00 >> rest) & 0xff) == 0;
}

/* Special-purpose ranges (RFC 6890 and friends): loopback, private,
 * link-local, shared, documentation, multicast, reserved, and IPv6 forms
 * that carry an IPv4 address. */
static const char *const refused_v4[] = {
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
	"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
};
static const char *const refused_v6[] = {
	"::/96", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32",
	"2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
};

#define REFUSED_V4 (sizeof(refused_v4) / sizeof(*refused_v4))
#define REFUSED_V6 (sizeof(refused_v6) / sizeof(*refused_v6))
static struct net_range refused[REFUSED_V4 + REFUSED_V6];	/* both tables, parsed once */
static pthread_once_t refused_once = PTHREAD_ONCE_INIT;

static void refused_parse(void)
{
	for (size_t i = 0; i < REFUSED_V4 + REFUSED_V6; i++) {
		int rc = net_range_parse(i < REFUSED_V4 ? refused_v4[i] : refused_v6[i - REFUSED_V4], &refused[i]);
		assert(rc == 0);
		(void)rc;
	}
}

int net_address_reserved(int family, const unsigned char *addr)
{
	pthread_once(&refused_once, refused_parse);
	for (size_t i = 0; i < REFUSED_V4 + REFUSED_V6; i++)
		if (net_range_contains(&refused[i], family, addr))
			return 1;
	return 0;
}
