/* session.c -- signing in to the web UI with a token: a server-side session
 * whose random id travels only in an HttpOnly, SameSite=Lax cookie (Secure
 * when public_url is https), ends at its expiry, at sign-out, or when its
 * token is revoked or expires; form bodies; CSRF tokens bound to the session
 * (or, on the sign-in form, to a short-lived sign-in cookie). */
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

void page_csrf_field(struct page *pg)
{
	char csrf[65];
	web_csrf_token(pg->req, csrf);
	page_htmlf(pg, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", csrf);
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

/* The sign-in form; a fresh sign-in cookie binds its CSRF token. */
static enum MHD_Result login_form(struct request *req, int status, const char *problem)
{
	struct page pg;
	char id[65];
	char *cookie = NULL;
	if (cookie_hex(req, LOGIN_COOKIE, id) < 0) {
		random_hex(id);
		cookie = cookie_header(LOGIN_COOKIE, id, 3600, "Strict");
	}
	char csrf[65];
	bound_token("login", id, csrf);
	const char *next = request_query(req, "next");
	if (!next)
		next = form_value(req, "next");
	page_init(&pg, req, "Sign in");
	page_html(&pg, "<section class=\"narrow\"><h1>Sign in</h1>");
	if (problem) {
		page_html(&pg, "<p class=\"problem\" role=\"alert\">");
		page_text(&pg, problem);
		page_html(&pg, "</p>");
	}
	page_html(&pg, "<p>Paste an access token (<code>khub admin token create</code> makes one, or "
		       "<a href=\"/settings/tokens\">your tokens page</a> once signed in). The token is sent once, "
		       "in this form's body; the browser keeps only a session cookie.</p>"
		       "<form method=\"post\" action=\"/login\" class=\"stack\">");
	page_htmlf(&pg, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", csrf);
	page_html(&pg, "<input type=\"hidden\" name=\"next\" value=\"");
	page_text(&pg, web_local_path_ok(next) ? next : "/kernels");
	page_html(&pg, "\"><label for=\"token\">Access token</label>"
		       "<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" "
		       "required spellcheck=\"false\">"
		       "<button type=\"submit\">Sign in</button></form></section>");
	enum MHD_Result r = page_send_cookie(&pg, status, cookie);
	free(cookie);
	return r;
}

enum MHD_Result page_login(struct request *req)
{
	if (req->principal.user_id) {
		const char *next = request_query(req, "next");
		return web_redirect(req, next ? next : "/kernels", NULL);
	}
	return login_form(req, 200, NULL);
}

enum MHD_Result page_login_post(struct request *req)
{
	const char *token = form_value(req, "token");
	const char *next = form_value(req, "next");
	struct principal p;
	if (!token || !token[0] || strlen(token) > 512)
		return login_form(req, 400, "Give a token.");
	int rc = db_token_lookup(token, &p);
	if (rc == KHUB_EDB)
		return web_db_unavailable(req);
	if (rc < 0) {
		log_info("web sign-in refused: unknown, expired or revoked token");
		return login_form(req, 401, "That token is unknown, expired or revoked.");
	}
	if (p.worker_id || !p.user_id || !p.token_id) {	/* a session is bound to a user's token */
		log_info("web sign-in refused: a build worker's token (%s)", p.name);
		return login_form(req, 403, "That is a build worker's token: it cannot sign in. Sign in with a user "
					    "token (khub admin token create USER).");
	}
	char id[65], hash[65];
	random_hex(id);
	sha256_hex(id, 64, hash);
	if (db_web_session_create(hash, p.token_id, web_settings.session_seconds) < 0)
		return web_db_unavailable(req);
	req->principal = p;
	api_audit(req, "web.sign_in", p.name, NULL);
	char *cookie = cookie_header(SESSION_COOKIE, id, web_settings.session_seconds, "Lax");
	enum MHD_Result r = web_redirect(req, next && next[0] ? next : "/kernels", cookie);
	free(cookie);
	return r;
}

enum MHD_Result page_logout(struct request *req)
{
	char id[65], hash[65];
	if (cookie_hex(req, SESSION_COOKIE, id) == 0) {
		sha256_hex(id, 64, hash);
		if (db_web_session_delete(hash) < 0)
			return web_db_unavailable(req);
	}
	char *cookie = cookie_header(SESSION_COOKIE, "gone", 0, "Lax");
	enum MHD_Result r = web_redirect(req, "/kernels", cookie);
	free(cookie);
	return r;
}
