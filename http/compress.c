/* compress.c -- gzip for answers built in memory: HTML, JSON, CSS,
 * JavaScript and plain text of at least GZIP_MIN_BYTES, when the client's
 * Accept-Encoding allows gzip. Never a file, an LFS object, a stream, git,
 * a range or an answer that names its bytes (an ETag: resolve's files):
 * those go out as stored (docs/web-ui.md, "Headers"). */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* Smaller bodies fit a packet or two either way. */
#define GZIP_MIN_BYTES 1024

/* The q-value of one Accept-Encoding element ("gzip;q=0.5"): 0 when it
 * says q=0 (or 0.0...), else 1. */
static int q_allows(const char *params, size_t len)
{
	const char *q = NULL;
	for (size_t i = 0; i + 1 < len; i++)
		if ((params[i] == 'q' || params[i] == 'Q') && params[i + 1] == '=')
			q = params + i + 2;
	if (!q)
		return 1;
	for (; q < params + len && *q != ' ' && *q != ';'; q++)
		if (*q != '0' && *q != '.')
			return 1;
	return 0;
}

int http_accepts_gzip(struct request *req)
{
	const char *v = request_header(req, "Accept-Encoding");
	int gzip = -1, star = -1;
	while (v && *v) {
		v += strspn(v, " \t,");
		size_t len = strcspn(v, ",");
		size_t tok = strcspn(v, " \t;,");
		if (tok == 4 && strncasecmp(v, "gzip", 4) == 0)
			gzip = q_allows(v + tok, len - tok);
		else if (tok == 1 && v[0] == '*')
			star = q_allows(v + tok, len - tok);
		v += len;
	}
	return gzip >= 0 ? gzip : star > 0;
}

int http_gzip(const void *data, size_t len, char **out, size_t *out_len)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	/* windowBits 15 + 16: a gzip header and trailer, not zlib's */
	if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	size_t room = deflateBound(&zs, (uLong)len);
	char *buf = xmalloc(room);
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)len;
	zs.next_out = (Bytef *)buf;
	zs.avail_out = (uInt)room;
	int rc = deflate(&zs, Z_FINISH);
	*out_len = zs.total_out;
	deflateEnd(&zs);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -1;
	}
	*out = buf;
	return 0;
}

static const char *header_of(const struct answer *a, const char *name)
{
	for (size_t i = 0; i < a->nheaders; i++)
		if (strcasecmp(a->headers[i].name, name) == 0)
			return a->headers[i].value;
	return NULL;
}

static int compressible_type(const char *type)
{
	static const char *const types[] = { "text/html", "text/css", "text/javascript", "application/javascript",
					     "application/json", "text/plain" };
	for (size_t i = 0; type && i < sizeof(types) / sizeof(types[0]); i++)
		if (strncasecmp(type, types[i], strlen(types[i])) == 0)
			return 1;
	return 0;
}

void answer_compress(struct request *req, struct answer *a)
{
	if (a->body != ANSWER_BUFFER || a->status != 200 || a->len < GZIP_MIN_BYTES || a->memo_key || a->identity ||
	    !compressible_type(header_of(a, "Content-Type")) || header_of(a, "ETag") ||
	    header_of(a, "Content-Range") || header_of(a, "Accept-Ranges") || header_of(a, "Content-Encoding"))
		return;
	answer_header(a, "Vary", "Accept-Encoding");
	char *gz;
	size_t gz_len;
	if (!http_accepts_gzip(req) || http_gzip(a->data, a->len, &gz, &gz_len) < 0)
		return;
	if (a->data_owner == ANSWER_DATA_TAKE)
		free((void *)a->data);
	answer_body_take(a, gz, gz_len);
	answer_header(a, "Content-Encoding", "gzip");
}
