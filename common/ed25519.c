/* ed25519.c -- the hub's one signer (OpenSSL): Ed25519 key files, signing
 * bytes with a private key file, checking a signature with a public key.
 * Sync bundles (sync/sign.c) and build provenance (farm/build_provenance.c)
 * both sign through it. A key id is the first hex characters of the
 * sha256 of the raw public key. */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

int ed25519_key_id(EVP_PKEY *key, char id[ED25519_KEY_ID_LEN + 1])
{
	unsigned char raw[32];
	size_t len = sizeof(raw);
	if (!key || EVP_PKEY_get_raw_public_key(key, raw, &len) != 1 || len != 32)
		return KHUB_EINVAL;
	char hex[65];
	sha256_hex(raw, len, hex);
	memcpy(id, hex, ED25519_KEY_ID_LEN);
	id[ED25519_KEY_ID_LEN] = '\0';
	return 0;
}

/* PREFIX.key (PEM PKCS#8, mode 0600, never overwritten) of key. */
static int write_private(const char *path, EVP_PKEY *key, char *err, size_t errlen)
{
	FILE *fp = NULL;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || !(fp = fdopen(fd, "w"))) {
		int saved = errno;
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(saved));
		if (fd >= 0)
			close(fd);
		return saved == EEXIST ? KHUB_EEXIST : KHUB_EIO;
	}
	if (PEM_write_PrivateKey(fp, key, NULL, NULL, 0, NULL, NULL) != 1 || fflush(fp) != 0 || fsync(fd) != 0) {
		fclose(fp);
		snprintf(err, errlen, "cannot write %s", path);
		return KHUB_EIO;
	}
	return fclose(fp) == 0 ? 0 : (snprintf(err, errlen, "cannot write %s", path), KHUB_EIO);
}

int ed25519_keygen(const char *prefix, char key_id[ED25519_KEY_ID_LEN + 1], char *err, size_t errlen)
{
	EVP_PKEY *key = NULL;
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
	char *priv = xasprintf("%s.key", prefix), *pub = xasprintf("%s.pub", prefix);
	FILE *fp = NULL;
	int rc = KHUB_EIO;
	if (!ctx || EVP_PKEY_keygen_init(ctx) != 1 || EVP_PKEY_keygen(ctx, &key) != 1) {
		snprintf(err, errlen, "cannot generate an Ed25519 key");
		goto cleanup;
	}
	if ((rc = write_private(priv, key, err, errlen)) < 0)
		goto cleanup;
	rc = KHUB_EIO;
	fp = fopen(pub, "wx");
	if (!fp || PEM_write_PUBKEY(fp, key) != 1 || fclose(fp) != 0) {
		fp = NULL;
		snprintf(err, errlen, "cannot write %s: %s", pub, strerror(errno));
		goto cleanup;
	}
	fp = NULL;
	rc = ed25519_key_id(key, key_id);
cleanup:
	if (fp)
		fclose(fp);
	EVP_PKEY_free(key);
	EVP_PKEY_CTX_free(ctx);
	free(priv);
	free(pub);
	return rc;
}

/* The Ed25519 private key in a PEM file, or NULL with err. */
static EVP_PKEY *private_load(const char *path, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	EVP_PKEY *key = fp ? PEM_read_PrivateKey(fp, NULL, NULL, NULL) : NULL;
	if (fp)
		fclose(fp);
	if (!key || EVP_PKEY_get_base_id(key) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(key);
		snprintf(err, errlen, "%s is not an Ed25519 private key (khub sync keygen makes one)", path);
		return NULL;
	}
	return key;
}

int ed25519_sign(const char *key_path, const void *msg, size_t len, unsigned char sig[ED25519_SIG_LEN],
		 char key_id[ED25519_KEY_ID_LEN + 1], char *err, size_t errlen)
{
	EVP_PKEY *key = private_load(key_path, err, errlen);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t siglen = ED25519_SIG_LEN;
	int rc = KHUB_EINVAL;
	if (!key)
		goto cleanup;
	if (!md || EVP_DigestSignInit(md, NULL, NULL, NULL, key) != 1 ||
	    EVP_DigestSign(md, sig, &siglen, msg, len) != 1 || siglen != ED25519_SIG_LEN ||
	    ed25519_key_id(key, key_id) < 0) {
		snprintf(err, errlen, "cannot sign with %s", key_path);
		goto cleanup;
	}
	rc = 0;
cleanup:
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	return rc;
}

EVP_PKEY *ed25519_public_load(const char *path, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	EVP_PKEY *key = fp ? PEM_read_PUBKEY(fp, NULL, NULL, NULL) : NULL;
	int saved = errno;
	if (fp)
		fclose(fp);
	if (!key || EVP_PKEY_get_base_id(key) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(key);
		if (!fp)
			snprintf(err, errlen, "%s: %s", path, strerror(saved));
		else
			snprintf(err, errlen, "%s is not an Ed25519 public key (PEM)", path);
		return NULL;
	}
	return key;
}

EVP_PKEY *ed25519_public_of_private(const char *key_path, char *err, size_t errlen)
{
	EVP_PKEY *key = private_load(key_path, err, errlen), *pub = NULL;
	unsigned char raw[32];
	size_t len = sizeof(raw);
	if (key && EVP_PKEY_get_raw_public_key(key, raw, &len) == 1 && len == 32)
		pub = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, len);
	if (key && !pub)
		snprintf(err, errlen, "cannot take the public half of %s", key_path);
	EVP_PKEY_free(key);
	return pub;
}

char *ed25519_public_pem(const char *key_path, char key_id[ED25519_KEY_ID_LEN + 1], char *err, size_t errlen)
{
	EVP_PKEY *key = private_load(key_path, err, errlen);
	BIO *bio = key ? BIO_new(BIO_s_mem()) : NULL;
	char *data = NULL, *pem = NULL;
	long n;
	if (bio && PEM_write_bio_PUBKEY(bio, key) == 1 && (n = BIO_get_mem_data(bio, &data)) > 0 &&
	    ed25519_key_id(key, key_id) == 0)
		pem = xstrndup(data, (size_t)n);
	else if (key)
		snprintf(err, errlen, "cannot write the public half of %s", key_path);
	BIO_free(bio);
	EVP_PKEY_free(key);
	return pem;
}

int ed25519_verify(EVP_PKEY *key, const void *msg, size_t len, const unsigned char sig[ED25519_SIG_LEN])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int good = md && EVP_DigestVerifyInit(md, NULL, NULL, NULL, key) == 1 &&
		   EVP_DigestVerify(md, sig, ED25519_SIG_LEN, msg, len) == 1;
	EVP_MD_CTX_free(md);
	return good;
}
