/* fuzz_forwarded.c -- fuzz the X-Forwarded-For and Forwarded parser
 * (http/client_addr.c): never crash or read past the header, and whatever
 * it answers is the peer or a canonical address that is no trusted proxy
 * (unless every entry was one). The input's first byte picks the header. */
#include <arpa/inet.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static struct trusted_proxies tp;
	static int ready;
	char why[256];
	if (!ready && trusted_proxies_parse("127.0.0.1, 10.0.0.0/8, ::1, fd00::/8", &tp, why, sizeof(why)) < 0)
		abort();
	ready = 1;
	if (size < 1 || size > 65536)
		return 0;
	int as_forwarded = data[0] & 1;
	char *header = malloc(size);
	memcpy(header, data + 1, size - 1);	/* exactly the bytes: ASan sees any overread */
	header[size - 1] = '\0';
	char out[CLIENT_ADDR_MAX];
	int from_header = client_addr_resolve(&tp, "127.0.0.1", as_forwarded ? NULL : header,
					      as_forwarded ? header : NULL, out);
	if (!from_header) {
		assert(strcmp(out, "127.0.0.1") == 0);
	} else {
		unsigned char bytes[16];
		int v6 = strchr(out, ':') != NULL;
		assert(inet_pton(v6 ? AF_INET6 : AF_INET, out, bytes) == 1);
		char again[CLIENT_ADDR_MAX];
		inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, again, sizeof(again));
		assert(strcmp(again, out) == 0);	/* canonical */
	}
	/* an untrusted peer is never replaced */
	assert(client_addr_resolve(&tp, "198.51.100.1", header, header, out) == 0 && strcmp(out, "198.51.100.1") == 0);
	free(header);
	return 0;
}
