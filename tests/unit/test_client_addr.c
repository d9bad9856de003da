/* test_client_addr.c -- the client's address behind trusted proxies:
 * X-Forwarded-For and Forwarded read from the right, forged entries to the
 * left of the client ignored, malformed headers giving the peer. */
#include "http/http.h"
#include "tap.h"

#include <stdlib.h>

static struct trusted_proxies tp;

/* The address client_addr_resolve gives (static buffer). */
static const char *resolve(const char *peer, const char *xff, const char *forwarded)
{
	static char out[CLIENT_ADDR_MAX];
	client_addr_resolve(&tp, peer, xff, forwarded, out);
	return out;
}

static void test_config_list(void)
{
	char why[256] = "";
	struct trusted_proxies t;
	ok(trusted_proxies_parse("", &t, why, sizeof(why)) == 0 && t.n == 0, "an empty list trusts none");
	ok(trusted_proxies_parse("10.0.0.1, 192.168.0.0/16 fd00::/8", &t, why, sizeof(why)) == 0 && t.n == 3,
	   "addresses and CIDR ranges, commas or spaces");
	ok(trusted_proxies_contains(&t, "192.168.7.9") && trusted_proxies_contains(&t, "fd12::1") &&
	   !trusted_proxies_contains(&t, "10.0.0.2"), "membership by range");
	trusted_proxies_release(&t);
	ok(trusted_proxies_parse("10.0.0.1,proxy.example", &t, why, sizeof(why)) == -1 && t.n == 0 &&
	   strstr(why, "proxy.example"), "a host name is refused, naming it: %s", why);
	ok(trusted_proxies_parse("10.0.0.0/33", &t, why, sizeof(why)) == -1, "a prefix too long is refused");
	ok(!trusted_proxies_contains(NULL, "127.0.0.1"), "no list: nothing trusted");
}

static void test_x_forwarded_for(void)
{
	is_str(resolve("127.0.0.1", "203.0.113.7", NULL), "203.0.113.7", "a trusted proxy's X-Forwarded-For names the client");
	is_str(resolve("198.51.100.2", "1.2.3.4", NULL), "198.51.100.2",
	       "a peer that is not a trusted proxy keeps its own address whatever it sends");
	is_str(resolve("127.0.0.1", "6.6.6.6, 203.0.113.7", NULL), "203.0.113.7",
	       "a forged entry to the left of the client is ignored");
	is_str(resolve("127.0.0.1", "6.6.6.6, 203.0.113.7, 10.1.2.3", NULL), "203.0.113.7",
	       "trusted hops on the right are skipped");
	is_str(resolve("127.0.0.1", "10.9.9.9, 10.1.2.3", NULL), "10.9.9.9", "all trusted: the left-most");
	is_str(resolve("127.0.0.1", " 203.0.113.7:5123 ", NULL), "203.0.113.7", "an IPv4 address with a port");
	is_str(resolve("127.0.0.1", "2001:db8::1", NULL), "2001:db8::1", "IPv6");
	is_str(resolve("127.0.0.1", "[2001:DB8::1]:443", NULL), "2001:db8::1", "bracketed IPv6 with a port, canonical");
	is_str(resolve("127.0.0.1", "::ffff:203.0.113.7", NULL), "203.0.113.7", "an IPv4-mapped address is IPv4");
	is_str(resolve("::ffff:127.0.0.1", "203.0.113.7", NULL), "203.0.113.7", "so is a mapped peer");
	is_str(resolve("127.0.0.1", "6.6.6.6", "for=203.0.113.7"), "6.6.6.6",
	       "X-Forwarded-For first when both are sent");
}

static void test_forwarded(void)
{
	is_str(resolve("127.0.0.1", NULL, "for=203.0.113.7;proto=https;by=127.0.0.1"), "203.0.113.7",
	       "Forwarded's for=");
	is_str(resolve("127.0.0.1", NULL, "for=6.6.6.6, For=\"[2001:db8:cafe::17]:4711\""), "2001:db8:cafe::17",
	       "the right-most element, a quoted bracketed IPv6 with a port, the name in any case");
	is_str(resolve("127.0.0.1", NULL, "proto=https;for=203.0.113.7 , for=10.0.0.5"), "203.0.113.7",
	       "for= anywhere in the element, trusted elements skipped");
	is_str(resolve("127.0.0.1", NULL, "for=unknown"), "127.0.0.1", "for=unknown: the peer");
	is_str(resolve("127.0.0.1", NULL, "for=_hidden"), "127.0.0.1", "an obfuscated node: the peer");
	is_str(resolve("127.0.0.1", NULL, "proto=https"), "127.0.0.1", "no for=: the peer");
	is_str(resolve("127.0.0.1", NULL, "for=\"[2001:db8::1]:x\""), "127.0.0.1", "a bad port: the peer");
	is_str(resolve("127.0.0.1", NULL, "for=[2001:db8::1"), "127.0.0.1", "an unclosed bracket: the peer");
}

static void test_malformed(void)
{
	is_str(resolve("127.0.0.1", "", NULL), "127.0.0.1", "an empty header: the peer");
	is_str(resolve("127.0.0.1", "garbage", NULL), "127.0.0.1", "garbage: the peer");
	is_str(resolve("127.0.0.1", "203.0.113.7,", NULL), "127.0.0.1", "an empty right-most entry: the peer");
	is_str(resolve("127.0.0.1", "203.0.113.7, garbage", NULL), "127.0.0.1",
	       "garbage where the proxy's entry should be: the peer");
	is_str(resolve("127.0.0.1", "garbage, 203.0.113.7", NULL), "203.0.113.7",
	       "garbage to the left of the client is never read");
	is_str(resolve("127.0.0.1", "1.2.3.4.5", NULL), "127.0.0.1", "five octets");
	is_str(resolve("127.0.0.1", "203.0.113.7:99999999", NULL), "127.0.0.1", "a port too long");
	is_str(resolve("127.0.0.1", "[1.2.3.4]", NULL), "127.0.0.1", "IPv4 in brackets");
	is_str(resolve("", "203.0.113.7", NULL), "", "no peer address: nothing believed");

	/* a huge list: read from the right, at most FORWARDED_HOPS_MAX entries */
	struct strbuf sb = STRBUF_INIT;
	for (int i = 0; i < 20000; i++)
		strbuf_adds(&sb, "garbage, ");
	strbuf_adds(&sb, "203.0.113.7");
	is_str(resolve("127.0.0.1", sb.buf, NULL), "203.0.113.7", "20000 entries: the right-most untrusted one");
	strbuf_reset(&sb);
	strbuf_adds(&sb, "203.0.113.7");
	for (int i = 0; i < FORWARDED_HOPS_MAX; i++)
		strbuf_addf(&sb, ", 10.0.0.%d", i + 1);
	is_str(resolve("127.0.0.1", sb.buf, NULL), "127.0.0.1", "more than %d trusted hops: the peer",
	       FORWARDED_HOPS_MAX);
	strbuf_release(&sb);
	char *long_entry = xmalloc(5000);
	memset(long_entry, '1', 4999);
	long_entry[4999] = '\0';
	is_str(resolve("127.0.0.1", long_entry, NULL), "127.0.0.1", "one 5000-byte entry: the peer");
	free(long_entry);
}

int main(void)
{
	char why[256];
	test_config_list();
	if (trusted_proxies_parse("127.0.0.1, 10.0.0.0/8", &tp, why, sizeof(why)) < 0)
		return 1;
	test_x_forwarded_for();
	test_forwarded();
	test_malformed();
	trusted_proxies_release(&tp);
	return done_testing();
}
