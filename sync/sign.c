/* sign.c -- a bundle's manifest.sig: the manifest's sha256 signed with the
 * hub's signer (common/ed25519.c), and checked against the trusted public
 * keys (sync_trusted_keys). */
#include "sync/sync.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <openssl/evp.h>

struct sync_keyring {
	struct trusted_key {
		EVP_PKEY *key;
		char id[SYNC_KEY_ID_LEN + 1];
	} *keys;
	size_t count;
};

int sync_sign(const char *key_path, const unsigned char digest[32], char **sig_json, char key_id[SYNC_KEY_ID_LEN + 1],
	      char *err, size_t errlen)
{
	unsigned char sig[ED25519_SIG_LEN];
	int rc = ed25519_sign(key_path, digest, 32, sig, key_id, err, errlen);
	if (rc < 0)
		return rc;
	char sighex[2 * ED25519_SIG_LEN + 1], dhex[65];
	hex_encode(sig, sizeof(sig), sighex);
	hex_encode(digest, 32, dhex);
	*sig_json = xasprintf("{\"alg\": \"ed25519\", \"key_id\": \"%s\", \"manifest_sha256\": \"%s\", "
			      "\"signature\": \"%s\"}\n", key_id, dhex, sighex);
	return 0;
}

static int ring_add_file(struct sync_keyring *ring, const char *path, char *err, size_t errlen)
{
	char why[256];
	EVP_PKEY *key = ed25519_public_load(path, why, sizeof(why));
	if (!key) {
		snprintf(err, errlen, "trusted key %s is not an Ed25519 public key", path);
		return KHUB_EINVAL;
	}
	ring->keys = xrealloc(ring->keys, (ring->count + 1) * sizeof(*ring->keys));
	ring->keys[ring->count].key = key;
	ed25519_key_id(key, ring->keys[ring->count].id);
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
		if (ed25519_verify(ring->keys[i].key, digest, 32, sig)) {
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
