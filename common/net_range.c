/* net_range.c -- IP address ranges (an address or CIDR prefix) and whether
 * an address falls in one: the build farm's allow-list of private git
 * hosts and the HTTP layer's trusted proxies share it. */
#include "common.h"

#include <arpa/inet.h>
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
