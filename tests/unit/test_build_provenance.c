/* test_build_provenance.c -- a build's signed provenance without a hub:
 * the statement's subjects (a later file of a name replacing an earlier,
 * sorted), the DSSE envelope signed with a key made here and opened with
 * its public half, refused under another key or with one byte of the
 * payload changed; a folder compared with the subjects (changed, extra,
 * missing files counted); strict base64. */
#include "farm/farm.h"
#include "tap.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

static char last[512];
static void note(void *arg, const char *fmt, ...)
{
	(void)arg;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last, sizeof(last), fmt, ap);
	va_end(ap);
}

static void put(const char *dir, const char *name, const char *text)
{
	char *p = xasprintf("%s/%s", dir, name);
	FILE *fp = fopen(p, "w");
	fputs(text, fp);
	fclose(fp);
	free(p);
}

/* Problems of dir against the statement. */
static size_t problems(json_t *st, const char *dir)
{
	struct build_provenance_check c = { note, NULL, 0, 0 };
	last[0] = '\0';
	return build_provenance_check_dir(st, dir, &c) < 0 ? 999 : c.problems;
}

static void test_base64(void)
{
	size_t n = 0;
	char *e = base64_encode("DSSEv1", 6);
	is_str(e, "RFNTRXYx", "base64 of DSSEv1");
	unsigned char *d = base64_decode_strict(e, strlen(e), &n);
	ok(d && n == 6 && memcmp(d, "DSSEv1", 6) == 0, "decodes back to 6 bytes");
	free(d);
	free(e);
	d = base64_decode_strict("YQ==", 4, &n);
	ok(d && n == 1 && d[0] == 'a', "padding counted out");
	free(d);
	ok(!base64_decode_strict("YQ =", 4, &n), "a blank inside is refused");
	ok(!base64_decode_strict("Y=Q=", 4, &n), "padding inside is refused");
	ok(!base64_decode_strict("YQ=", 3, &n), "a length not a multiple of 4 is refused");
}

int main(void)
{
	char tmp[] = "/tmp/khub-provenance-XXXXXX";
	if (!mkdtemp(tmp))
		return 1;
	test_base64();
	char *prefix = xasprintf("%s/hub", tmp), *other = xasprintf("%s/other", tmp), err[512];
	char id[ED25519_KEY_ID_LEN + 1], oid[ED25519_KEY_ID_LEN + 1];
	ok(ed25519_keygen(prefix, id, err, sizeof(err)) == 0 && ed25519_keygen(other, oid, err, sizeof(err)) == 0,
	   "two keys made");
	ok(ed25519_keygen(prefix, id, err, sizeof(err)) == KHUB_EEXIST, "a key file is never overwritten");

	struct build_provenance_file files[] = {
		{ "metadata.json", "{\"old\":1}", 9 }, { "relu/__init__.py", "import torch\n", 13 },
		{ "metadata.json", "{\"version\":1}", 13 },
	};
	const char *mdtext = "{\"khub\":{\"sandbox\":\"bwrap\",\"toolchain\":{\"torch\":\"2.9.0\"}}}";
	struct build_provenance_input in = {
		.id = 7, .hub = "https://hub.example", .ns = "acme", .name = "relu",
		.commit = "0123456789abcdef0123456789abcdef01234567",
		.variant = "torch29-cxx11-cpu-x86_64-linux", .build_toml_sha256 = "", .worker = "w1",
		.started = "2026-11-28T10:00:00.000Z", .metadata = mdtext, .metadata_len = strlen(mdtext),
		.files = files, .nfiles = 3,
	};
	char *statement = build_provenance_statement(&in);
	json_t *parsed = json_loads(statement, 0, NULL);
	json_t *subj = json_object_get(parsed, "subject");
	ok(json_array_size(subj) == 2, "two subjects (metadata.json once)");
	json_t *rd = json_object_get(json_object_get(parsed, "predicate"), "runDetails");
	json_t *w = json_array_get(json_object_get(json_object_get(rd, "builder"), "builderDependencies"), 0);
	is_str(json_string_value(json_object_get(json_object_get(w, "annotations"), "sandbox")), "bwrap",
	       "the worker's sandbox kind from metadata.json");
	is_str(json_string_value(json_object_get(json_array_get(subj, 0), "name")), "metadata.json", "sorted by name");
	char hex[65];
	sha256_hex("{\"version\":1}", 13, hex);
	is_str(json_string_value(json_object_get(json_object_get(json_array_get(subj, 0), "digest"), "sha256")), hex,
	       "the later metadata.json's sha256");
	json_decref(parsed);

	char *keyfile = xasprintf("%s.key", prefix), *pubfile = xasprintf("%s.pub", prefix);
	char *opub = xasprintf("%s.pub", other), *envelope = NULL, sha[65], kid[ED25519_KEY_ID_LEN + 1];
	ok(build_provenance_sign(keyfile, statement, &envelope, sha, kid, err, sizeof(err)) == 0, "signed");
	is_str(kid, id, "by the hub key");
	EVP_PKEY *pub = ed25519_public_load(pubfile, err, sizeof(err)), *wrong = ed25519_public_load(opub, err, sizeof(err));
	json_t *st = NULL;
	ok(build_provenance_open(envelope, strlen(envelope), pub, &st, err, sizeof(err)) == 0 && st, "opens under its key");
	json_t *st2 = NULL;
	ok(build_provenance_open(envelope, strlen(envelope), wrong, &st2, err, sizeof(err)) == KHUB_EPERM && !st2,
	   "refused under another key: %s", err);
	json_t *env = json_loads(envelope, 0, NULL);
	char *payload = xstrdup(json_string_value(json_object_get(env, "payload")));
	payload[10] = payload[10] == 'A' ? 'B' : 'A';
	json_object_set_new(env, "payload", json_string(payload));
	char *altered = json_dumps(env, 0);
	ok(build_provenance_open(altered, strlen(altered), pub, &st2, err, sizeof(err)) == KHUB_EPERM,
	   "a changed payload does not verify");
	ok(build_provenance_open("{}", 2, pub, &st2, err, sizeof(err)) == KHUB_EINVAL, "not an envelope: EINVAL");

	char *dir = xasprintf("%s/variant", tmp), *sub = xasprintf("%s/variant/relu", tmp);
	mkdir(dir, 0755);
	mkdir(sub, 0755);
	put(dir, "metadata.json", "{\"version\":1}");
	put(dir, "relu/__init__.py", "import torch\n");
	ok(problems(st, dir) == 0, "the folder matches");
	put(dir, "relu/__init__.py", "import torcH\n");
	ok(problems(st, dir) == 1 && strstr(last, "changed file: relu/__init__.py"), "a changed file: %s", last);
	put(dir, "relu/__init__.py", "import torch\n");
	put(dir, "extra.so", "x");
	ok(problems(st, dir) == 1 && strstr(last, "extra file: extra.so"), "an extra file: %s", last);
	char *extra = xasprintf("%s/extra.so", dir), *md = xasprintf("%s/metadata.json", dir);
	unlink(extra);
	unlink(md);
	ok(problems(st, dir) == 1 && strstr(last, "missing file: metadata.json"), "a missing file: %s", last);

	json_decref(st);
	json_decref(env);
	EVP_PKEY_free(pub);
	EVP_PKEY_free(wrong);
	char *cmd = xasprintf("rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmp);
	free(cmd);
	free(extra), free(md), free(dir), free(sub), free(altered), free(payload), free(envelope), free(statement);
	free(keyfile), free(pubfile), free(opub), free(prefix), free(other);
	return done_testing();
}
