/* sign.c -- Ed25519 keys (OpenSSL): key generation, signing a manifest's
 * sha256, and checking a signature against the trusted public keys. A key
 * id is the first hex characters of the sha256 of the raw public key. */
#include "sync/sync.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

struct sync_keyring {
	struct trusted_key {
		EVP_PKEY *key;
		char id[SYNC_KEY_ID_LEN + 1];
	} *keys;
	size_t count;
};

static int key_id_of(EVP_PKEY *key, char id[SYNC_KEY_ID_LEN + 1])
{
	unsigned char raw[32];
	size_t len = sizeof(raw);
	if (EVP_PKEY_get_raw_public_key(key, raw, &len) != 1 || len != 32)
		return KHUB_EINVAL;
	char hex[65];
	sha256_hex(raw, len, hex);
	memcpy(id, hex, SYNC_KEY_ID_LEN);
	id[SYNC_KEY_ID_LEN] = '\0';
	return 0;
}

int sync_keygen(const char *prefix, char key_id[SYNC_KEY_ID_LEN + 1], char *err, size_t errlen)
{
	EVP_PKEY *key = NULL;
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
	char *priv = xasprintf("%s.key", prefix), *pub = xasprintf("%s.pub", prefix);
	FILE *fp = NULL;
	int rc = KHUB_EIO, fd = -1;
	if (!ctx || EVP_PKEY_keygen_init(ctx) != 1 || EVP_PKEY_keygen(ctx, &key) != 1) {
		snprintf(err, errlen, "cannot generate an Ed25519 key");
		goto cleanup;
	}
	fd = open(priv, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || !(fp = fdopen(fd, "w"))) {
		snprintf(err, errlen, "cannot create %s: %s", priv, strerror(errno));
		goto cleanup;
	}
	fd = -1;
	if (PEM_write_PrivateKey(fp, key, NULL, NULL, 0, NULL, NULL) != 1 || fclose(fp) != 0) {
		fp = NULL;
		snprintf(err, errlen, "cannot write %s", priv);
		goto cleanup;
	}
	fp = fopen(pub, "wx");
	if (!fp || PEM_write_PUBKEY(fp, key) != 1 || fclose(fp) != 0) {
		fp = NULL;
		snprintf(err, errlen, "cannot write %s: %s", pub, strerror(errno));
		goto cleanup;
	}
	fp = NULL;
	rc = key_id_of(key, key_id);
cleanup:
	if (fd >= 0)
		close(fd);
	if (fp)
		fclose(fp);
	EVP_PKEY_free(key);
	EVP_PKEY_CTX_free(ctx);
	free(priv);
	free(pub);
	return rc;
}

int sync_sign(const char *key_path, const unsigned char digest[32], char **sig_json, char key_id[SYNC_KEY_ID_LEN + 1],
	      char *err, size_t errlen)
{
	FILE *fp = fopen(key_path, "r");
	EVP_PKEY *key = fp ? PEM_read_PrivateKey(fp, NULL, NULL, NULL) : NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char sig[64];
	size_t siglen = sizeof(sig);
	int rc = KHUB_EINVAL;
	if (fp)
		fclose(fp);
	if (!key || EVP_PKEY_get_base_id(key) != EVP_PKEY_ED25519) {
		snprintf(err, errlen, "%s is not an Ed25519 private key (khub sync keygen makes one)", key_path);
		goto cleanup;
	}
	if (EVP_DigestSignInit(md, NULL, NULL, NULL, key) != 1 || EVP_DigestSign(md, sig, &siglen, digest, 32) != 1 ||
	    key_id_of(key, key_id) < 0) {
		snprintf(err, errlen, "cannot sign with %s", key_path);
		goto cleanup;
	}
	char sighex[129], dhex[65];
	hex_encode(sig, siglen, sighex);
	hex_encode(digest, 32, dhex);
	*sig_json = xasprintf("{\"alg\": \"ed25519\", \"key_id\": \"%s\", \"manifest_sha256\": \"%s\", "
			      "\"signature\": \"%s\"}\n", key_id, dhex, sighex);
	rc = 0;
cleanup:
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	return rc;
}

static int ring_add_file(struct sync_keyring *ring, const char *path, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	EVP_PKEY *key = fp ? PEM_read_PUBKEY(fp, NULL, NULL, NULL) : NULL;
	if (fp)
		fclose(fp);
	if (!key || EVP_PKEY_get_base_id(key) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(key);
		snprintf(err, errlen, "trusted key %s is not an Ed25519 public key", path);
		return KHUB_EINVAL;
	}
	ring->keys = xrealloc(ring->keys, (ring->count + 1) * sizeof(*ring->keys));
	ring->keys[ring->count].key = key;
	key_id_of(key, ring->keys[ring->count].id);
	ring->count++;
	return 0;
}

int sync_keyring_load(const char *list, struct sync_keyring **out, char *err, size_t errlen)
{
	struct sync_keyring *ring = xcalloc(1, sizeof(*ring));
	char *copy = xstrdup(list ? list : ""), *save = NULL;
	int rc = 0;
	for (char *item = strtok_r(copy, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save)) {
		while (*item == ' ')
			item++;
		if (!*item)
			continue;
		struct stat st;
		if (stat(item, &st) < 0) {
			snprintf(err, errlen, "trusted key %s: %s", item, strerror(errno));
			rc = KHUB_EINVAL;
		} else if (S_ISDIR(st.st_mode)) {
			struct dirent **names = NULL;
			int n = scandir(item, &names, NULL, alphasort);
			for (int i = 0; i < n; i++) {
				size_t len = strlen(names[i]->d_name);
				if (rc == 0 && len > 4 && strcmp(names[i]->d_name + len - 4, ".pub") == 0) {
					char *path = xasprintf("%s/%s", item, names[i]->d_name);
					rc = ring_add_file(ring, path, err, errlen);
					free(path);
				}
				free(names[i]);
			}
			free(names);
		} else {
			rc = ring_add_file(ring, item, err, errlen);
		}
	}
	free(copy);
	if (rc < 0) {
		sync_keyring_free(ring);
		return rc;
	}
	*out = ring;
	return 0;
}

void sync_keyring_free(struct sync_keyring *ring)
{
	if (!ring)
		return;
	for (size_t i = 0; i < ring->count; i++)
		EVP_PKEY_free(ring->keys[i].key);
	free(ring->keys);
	free(ring);
}

size_t sync_keyring_count(const struct sync_keyring *ring)
{
	return ring ? ring->count : 0;
}

int sync_signature_check(const struct sync_keyring *ring, const char *sig_text, size_t len,
			 const unsigned char digest[32], char key_id[SYNC_KEY_ID_LEN + 1], char *err, size_t errlen)
{
	json_t *doc = json_loadb(sig_text, len, 0, NULL);
	const char *alg = json_string_value(json_object_get(doc, "alg"));
	const char *id = json_string_value(json_object_get(doc, "key_id"));
	const char *hex = json_string_value(json_object_get(doc, "signature"));
	unsigned char sig[64];
	int rc = KHUB_EINVAL;
	if (!alg || strcmp(alg, "ed25519") != 0 || !id || strlen(id) != SYNC_KEY_ID_LEN || !hex ||
	    strlen(hex) != 128 || hex_decode(hex, sig, 64) < 0) {
		snprintf(err, errlen, "manifest.sig is malformed");
		goto cleanup;
	}
	snprintf(key_id, SYNC_KEY_ID_LEN + 1, "%s", id);
	rc = KHUB_EPERM;
	snprintf(err, errlen, "the bundle is signed by key %s, which this hub does not trust (sync_trusted_keys)", id);
	for (size_t i = 0; ring && i < ring->count; i++) {
		if (strcmp(ring->keys[i].id, id) != 0)
			continue;
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		int good = EVP_DigestVerifyInit(md, NULL, NULL, NULL, ring->keys[i].key) == 1 &&
			   EVP_DigestVerify(md, sig, 64, digest, 32) == 1;
		EVP_MD_CTX_free(md);
		if (good) {
			rc = 0;
			err[0] = '\0';
		} else {
			snprintf(err, errlen, "the manifest's signature by key %s does not verify: the manifest was altered",
				 id);
		}
		break;
	}
cleanup:
	json_decref(doc);
	return rc;
}

int sync_key_id_file(const char *path, char key_id[SYNC_KEY_ID_LEN + 1], char *err, size_t errlen)
{
	struct sync_keyring ring = { 0 };
	int rc = ring_add_file(&ring, path, err, errlen);
	if (rc == 0)
		memcpy(key_id, ring.keys[0].id, SYNC_KEY_ID_LEN + 1);
	for (size_t i = 0; i < ring.count; i++)
		EVP_PKEY_free(ring.keys[i].key);
	free(ring.keys);
	return rc;
}

int sync_scope_allows(const char *orgs, const char *ns)
{
	char *copy = xstrdup(orgs), *save = NULL;
	int ok = 0;
	for (char *t = strtok_r(copy, ",", &save); t && !ok; t = strtok_r(NULL, ",", &save))
		ok = fnmatch(t, ns, FNM_CASEFOLD) == 0;
	free(copy);
	return ok;
}
