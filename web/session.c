/* session.c -- the web UI's sessions: a server-side session whose random
 * id travels only in an HttpOnly, SameSite=Lax cookie (Secure when
 * public_url is https), ends at its expiry, at sign-out, or when its token
 * is revoked or expires; form bodies; CSRF tokens bound to the session (or,
 * on the sign-in form, to a short-lived sign-in cookie); a session's
 * one-time message (post, redirect, get), encrypted under its id. It
 * builds no page: the sign-in pages are web/pages_session.c. */
#include "web/web_internal.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SESSION_COOKIE "khub_session"
#define LOGIN_COOKIE "khub_login"

/* The value of cookie `name` when it is 64 lowercase hex characters. */
static int cookie_hex(struct request *req, const char *name, char out[65])
{
	const char *v = MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, name);
	out[0] = '\0';
	if (!v || !is_lower_hex(v, 64))
		return -1;
	memcpy(out, v, 65);
	return 0;
}

void web_identify(struct request *req)
{
	char id[65], hash[65];
	memset(&req->principal, 0, sizeof(req->principal));
	if (cookie_hex(req, SESSION_COOKIE, id) < 0)
		return;
	sha256_hex(id, 64, hash);
	int rc = db_web_session_lookup(hash, &req->principal);
	if (rc < 0) {
		memset(&req->principal, 0, sizeof(req->principal));
		if (rc == KHUB_EDB)
			req->auth_unavailable = 1;
	}
}

/* HMAC-SHA256(secret, purpose ":" value) as hex: a CSRF token that needs no
 * storage and means nothing without the cookie it is bound to. */
static void bound_token(const char *purpose, const char *value, char out[65])
{
	unsigned char mac[32];
	unsigned int mac_len = sizeof(mac);
	char *msg = xasprintf("%s:%s", purpose, value);
	HMAC(EVP_sha256(), api_ctx.url_secret, sizeof(api_ctx.url_secret), (const unsigned char *)msg, strlen(msg),
	     mac, &mac_len);
	free(msg);
	hex_encode(mac, 32, out);
}

void web_csrf_token(struct request *req, char out[65])
{
	char id[65];
	out[0] = '\0';
	if (req->principal.user_id && cookie_hex(req, SESSION_COOKIE, id) == 0)
		bound_token("csrf", id, out);
	else if (cookie_hex(req, LOGIN_COOKIE, id) == 0)
		bound_token("login", id, out);
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode a form value (+ is a space) into a new string; NULL when malformed
 * or when it holds a NUL byte. */
static char *form_decode(const char *s, size_t n)
{
	char *out = xmalloc(n + 1);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+') {
			out[o++] = ' ';
		} else if (s[i] == '%') {
			/* two hex digits must follow */
			int hi = i + 2 < n ? hex_value(s[i + 1]) : -1;
			int lo = hi >= 0 ? hex_value(s[i + 2]) : -1;
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				free(out);
				return NULL;
			}
			out[o++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
	return out;
}

const char *form_value(struct request *req, const char *key)
{
	const char *body = req->body.buf;
	size_t klen = strlen(key);
	if (!body)
		return NULL;
	const char *p = body, *end = body + req->body.len;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *field_end = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(field_end - p));
		if (eq && (size_t)(eq - p) == klen && memcmp(p, key, klen) == 0) {
			char *v = form_decode(eq + 1, (size_t)(field_end - eq - 1));
			return v ? request_own(req, v) : NULL;
		}
		p = field_end + 1;
	}
	return NULL;
}

int web_csrf_valid(struct request *req)
{
	char want[65];
	web_csrf_token(req, want);
	const char *got = form_value(req, "csrf");
	if (!want[0] || !got || strlen(got) != 64)
		return 0;
	return CRYPTO_memcmp(want, got, 64) == 0;
}

static char *cookie_header(const char *name, const char *value, long max_age, const char *same_site)
{
	return xasprintf("%s=%s; Path=/; Max-Age=%ld; HttpOnly; SameSite=%s%s", name, value, max_age, same_site,
			 web_settings.secure_cookies ? "; Secure" : "");
}

static void random_hex(char out[65])
{
	unsigned char raw[32];
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		fatal("RAND_bytes failed");
	hex_encode(raw, sizeof(raw), out);
}

char *web_login_cookie(struct request *req, char csrf[65])
{
	char id[65];
	char *cookie = NULL;
	if (cookie_hex(req, LOGIN_COOKIE, id) < 0) {
		random_hex(id);
		cookie = cookie_header(LOGIN_COOKIE, id, 3600, "Strict");
	}
	bound_token("login", id, csrf);
	return cookie;
}

int web_session_start(const struct principal *p, char **set_cookie)
{
	char id[65], hash[65];
	*set_cookie = NULL;
	random_hex(id);
	sha256_hex(id, 64, hash);
	if (db_web_session_create(hash, p->token_id, web_settings.session_seconds) < 0)
		return KHUB_EDB;
	*set_cookie = cookie_header(SESSION_COOKIE, id, web_settings.session_seconds, "Lax");
	return 0;
}

int web_session_end(struct request *req, char **set_cookie)
{
	char id[65], hash[65];
	*set_cookie = NULL;
	if (cookie_hex(req, SESSION_COOKIE, id) == 0) {
		sha256_hex(id, 64, hash);
		if (db_web_session_delete(hash) < 0)
			return KHUB_EDB;
	}
	*set_cookie = cookie_header(SESSION_COOKIE, "gone", 0, "Lax");
	return 0;
}

#define FLASH_MAX 256

/* text XOR HMAC-SHA256(session id, nonce || block number): the database
 * stores only the session id's hash, so it cannot read the message. */
static void flash_crypt(const char id[65], const unsigned char nonce[16], unsigned char *buf, size_t len)
{
	unsigned char msg[17], block[32];
	unsigned int block_len = sizeof(block);
	memcpy(msg, nonce, 16);
	for (size_t off = 0; off < len; off += 32) {
		msg[16] = (unsigned char)(off / 32);
		HMAC(EVP_sha256(), id, 64, msg, sizeof(msg), block, &block_len);
		for (size_t i = 0; i < 32 && off + i < len; i++)
			buf[off + i] ^= block[i];
	}
}

int web_flash_set(struct request *req, const char *text)
{
	char id[65], hash[65];
	unsigned char buf[16 + FLASH_MAX];
	size_t len = strlen(text);
	if (len > FLASH_MAX || cookie_hex(req, SESSION_COOKIE, id) < 0)
		return KHUB_EINVAL;
	if (RAND_bytes(buf, 16) != 1)
		fatal("RAND_bytes failed");
	memcpy(buf + 16, text, len);
	flash_crypt(id, buf, buf + 16, len);
	char *hex = xmalloc(2 * (16 + len) + 1);
	hex_encode(buf, 16 + len, hex);
	sha256_hex(id, 64, hash);
	int rc = db_web_session_flash_set(hash, hex);
	free(hex);
	return rc;
}

int web_flash_take(struct request *req, char **out)
{
	char id[65], hash[65], *hex = NULL;
	unsigned char buf[16 + FLASH_MAX + 1];
	*out = NULL;
	if (cookie_hex(req, SESSION_COOKIE, id) < 0)
		return 0;
	sha256_hex(id, 64, hash);
	int rc = db_web_session_flash_take(hash, &hex);
	if (rc < 0 || !hex)
		return rc;
	size_t n = strlen(hex) / 2;
	if (n >= 16 && n <= 16 + FLASH_MAX && hex_decode(hex, buf, n) == 0) {
		flash_crypt(id, buf, buf + 16, n - 16);
		buf[n] = '\0';
		if (strlen((char *)buf + 16) == n - 16)
			*out = xstrdup((char *)buf + 16);
	}
	free(hex);
	return 0;
}
