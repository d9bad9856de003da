/* client_addr.c -- the client's address of a request: the TCP peer, or,
 * when the peer is one of the proxies the operator trusts
 * (trusted_proxies), the address that proxy forwarded in X-Forwarded-For
 * or Forwarded (RFC 7239). The parser reads a list from the right (the
 * entries a trusted proxy appended) and stops at the first address that is
 * not a trusted proxy: whatever a client wrote to the left of it is never
 * believed. Anything it cannot read gives the peer. */
#include "http/http.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* An address read from a header or the peer. */
struct ip {
	int family;
	unsigned char bytes[16];
};

/* "::ffff:a.b.c.d" is the IPv4 address a.b.c.d (a dual-stack socket's
 * peer, or a proxy that writes it so): one form for matching and logs. */
static void ip_unmap(struct ip *ip)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (ip->family == AF_INET6 && memcmp(ip->bytes, mapped, 12) == 0) {
		memmove(ip->bytes, ip->bytes + 12, 4);
		ip->family = AF_INET;
	}
}

/* 1 when s[0..n) is ":" and 1 to 5 digits (a port), or empty. */
static int is_port_suffix(const char *s, size_t n)
{
	if (n == 0)
		return 1;
	if (s[0] != ':' || n < 2 || n > 6)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* One node as a proxy writes it: "192.0.2.1", "192.0.2.1:80",
 * "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:80", each possibly in
 * double quotes (Forwarded). 0 with *ip, or -1 ("unknown", "_hidden",
 * garbage). */
static int node_parse(const char *s, size_t n, struct ip *ip)
{
	char text[INET6_ADDRSTRLEN + 1];
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
		s++;
		n -= 2;
	}
	if (n == 0 || n > 64)
		return -1;
	size_t addr_len = n;
	const char *addr = s;
	if (s[0] == '[') {
		const char *close = memchr(s, ']', n);
		if (!close || !is_port_suffix(close + 1, (size_t)(s + n - close - 1)))
			return -1;
		addr = s + 1;
		addr_len = (size_t)(close - addr);
		ip->family = AF_INET6;
	} else {
		const char *colon = memchr(s, ':', n);
		int one_colon = colon && !memchr(colon + 1, ':', (size_t)(s + n - colon - 1));
		if (one_colon) {	/* IPv4 with a port */
			if (!is_port_suffix(colon, (size_t)(s + n - colon)))
				return -1;
			addr_len = (size_t)(colon - s);
		}
		ip->family = colon && !one_colon ? AF_INET6 : AF_INET;
	}
	if (addr_len == 0 || addr_len >= sizeof(text))
		return -1;
	memcpy(text, addr, addr_len);
	text[addr_len] = '\0';
	if (inet_pton(ip->family, text, ip->bytes) != 1)
		return -1;
	ip_unmap(ip);
	return 0;
}

/* The for= value of one Forwarded element ("for=1.2.3.4;proto=https"):
 * 0 with *ip, or -1 when it has none or it is not an address. */
static int forwarded_element_parse(const char *s, size_t n, struct ip *ip)
{
	const char *end = s + n;
	while (s < end) {
		const char *semi = memchr(s, ';', (size_t)(end - s));
		const char *pair_end = semi ? semi : end;
		while (s < pair_end && (*s == ' ' || *s == '\t'))
			s++;
		if (pair_end - s > 4 && strncasecmp(s, "for=", 4) == 0) {
			const char *v = s + 4, *v_end = pair_end;
			while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t'))
				v_end--;
			return node_parse(v, (size_t)(v_end - v), ip);
		}
		s = semi ? semi + 1 : end;
	}
	return -1;
}

static int trusted(const struct trusted_proxies *tp, const struct ip *ip)
{
	for (size_t i = 0; i < tp->n; i++)
		if (net_range_contains(&tp->ranges[i], ip->family, ip->bytes))
			return 1;
	return 0;
}

int trusted_proxies_contains(const struct trusted_proxies *tp, const char *addr)
{
	struct ip ip;
	return tp && tp->n && node_parse(addr, strlen(addr), &ip) == 0 && trusted(tp, &ip);
}

/* The entry of list that ends at *end (its comma or the list's end),
 * without the spaces around it; *end moves to the comma before it, or to
 * SIZE_MAX when it was the first entry. */
static void entry_before(const char *list, size_t *end, const char **entry, size_t *len)
{
	size_t start = *end;
	while (start > 0 && list[start - 1] != ',')
		start--;
	size_t stop = *end;
	*end = start > 0 ? start - 1 : SIZE_MAX;
	while (start < stop && (list[start] == ' ' || list[start] == '\t'))
		start++;
	while (stop > start && (list[stop - 1] == ' ' || list[stop - 1] == '\t'))
		stop--;
	*entry = list + start;
	*len = stop - start;
}

/* The right-most address of list not in tp (or its left-most entry when
 * all are trusted): 0 with *ip, or -1 (an entry that is no address, or
 * FORWARDED_HOPS_MAX trusted entries). */
static int list_client(const struct trusted_proxies *tp, const char *list, int is_forwarded, struct ip *ip)
{
	size_t end = strlen(list);
	for (int hops = 0; hops < FORWARDED_HOPS_MAX; hops++) {
		const char *entry;
		size_t len;
		entry_before(list, &end, &entry, &len);
		int rc = is_forwarded ? forwarded_element_parse(entry, len, ip) : node_parse(entry, len, ip);
		if (rc < 0)
			return -1;
		if (!trusted(tp, ip) || end == SIZE_MAX)
			return 0;
	}
	return -1;
}

int client_addr_resolve(const struct trusted_proxies *tp, const char *peer, const char *xff,
			const char *forwarded, char out[CLIENT_ADDR_MAX])
{
	snprintf(out, CLIENT_ADDR_MAX, "%s", peer);
	const char *list = xff ? xff : forwarded;
	struct ip ip;
	if (!list || !trusted_proxies_contains(tp, peer) || list_client(tp, list, !xff, &ip) < 0)
		return 0;
	inet_ntop(ip.family, ip.bytes, out, CLIENT_ADDR_MAX);
	return 1;
}

int trusted_proxies_parse(const char *list, struct trusted_proxies *tp, char *why, size_t why_size)
{
	memset(tp, 0, sizeof(*tp));
	char *copy = xstrdup(list ? list : ""), *save = NULL;
	int rc = 0;
	for (char *tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		struct net_range r;
		if (net_range_parse(tok, &r) < 0) {
			snprintf(why, why_size, "trusted_proxies: '%s' is not an address or a CIDR range", tok);
			trusted_proxies_release(tp);
			rc = -1;
			break;
		}
		tp->ranges = xrealloc(tp->ranges, (tp->n + 1) * sizeof(*tp->ranges));
		tp->ranges[tp->n++] = r;
	}
	free(copy);
	return rc;
}

void trusted_proxies_release(struct trusted_proxies *tp)
{
	if (!tp)
		return;
	free(tp->ranges);
	tp->ranges = NULL;
	tp->n = 0;
}

/* ---- a request's headers ---------------------------------------------------- */

/* Every line of both headers, in the order received, joined with ", ": a
 * proxy such as HAProxy adds its own line after the client's. */
struct forwarded_lines {
	struct strbuf xff, forwarded;
	int xff_lines, forwarded_lines;
};

static enum MHD_Result collect_forwarded(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct forwarded_lines *lines = cls;
	(void)kind;
	struct strbuf *sb = NULL;
	int *count = NULL;
	if (strcasecmp(key, "X-Forwarded-For") == 0) {
		sb = &lines->xff;
		count = &lines->xff_lines;
	} else if (strcasecmp(key, "Forwarded") == 0) {
		sb = &lines->forwarded;
		count = &lines->forwarded_lines;
	}
	if (sb) {
		if ((*count)++ > 0)
			strbuf_adds(sb, ", ");
		strbuf_adds(sb, value ? value : "");
	}
	return MHD_YES;
}

void request_set_client_addr(struct request *req)
{
	const struct trusted_proxies *tp = http_ctx.trusted_proxies;
	if (!trusted_proxies_contains(tp, req->peer_addr)) {
		memcpy(req->remote_addr, req->peer_addr, sizeof(req->remote_addr));
		return;
	}
	struct forwarded_lines lines = { STRBUF_INIT, STRBUF_INIT, 0, 0 };
	MHD_get_connection_values(req->conn, MHD_HEADER_KIND, collect_forwarded, &lines);
	client_addr_resolve(tp, req->peer_addr, lines.xff_lines ? (lines.xff.buf ? lines.xff.buf : "") : NULL,
			    lines.forwarded_lines ? (lines.forwarded.buf ? lines.forwarded.buf : "") : NULL,
			    req->remote_addr);
	strbuf_release(&lines.xff);
	strbuf_release(&lines.forwarded);
}
