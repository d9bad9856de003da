/* cmd_verify_build.c -- khub verify-build: a downloaded build variant
 * checked offline against its signed provenance (farm/build_provenance.c);
 * opens no database and reaches no hub. */
#include "server/server.h"
#include "farm/farm.h"
#include "sync/sync.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <openssl/evp.h>

#define PROVENANCE_MAX (64u << 20)

enum { VERIFY_OK = 0, VERIFY_MISMATCH = 1, VERIFY_USAGE = 2, VERIFY_BAD_SIGNATURE = 3 };

const char cmd_verify_build_usage[] =
	"usage: khub verify-build VARIANT_DIR --provenance FILE [--key PUBKEY]\n"
	"  Check a downloaded build variant (build/<variant>/ of kernels download, hf download or a\n"
	"  clone) offline against its provenance (GET /api/builds/ID/provenance): the DSSE signature\n"
	"  under the hub's public key (PUBKEY: a PEM file, GET /api/signing-key; default: the public\n"
	"  half of this hub's signing_key), then every file of VARIANT_DIR listed with its sha256,\n"
	"  none missing and none extra. See docs/build-farm.md, Provenance.\n"
	"exit status: 0 verified; 1 the directory does not match the provenance; 2 usage, or an input\n"
	"  that cannot be read; 3 the provenance is not validly signed by the key (altered, or signed\n"
	"  by another key) or is not SLSA provenance.\n";

static void report_problem(void *arg, const char *fmt, ...)
{
	(void)arg;
	va_list ap;
	va_start(ap, fmt);
	fputs("khub verify-build: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* The key to verify with: --key's file, else the public half of the hub's
 * own signing key. NULL after a message. */
static EVP_PKEY *verify_key(const char *path)
{
	char err[512];
	EVP_PKEY *key;
	if (path) {
		key = ed25519_public_load(path, err, sizeof(err));
	} else {
		char *own = config.signing_key[0] ? xstrdup(config.signing_key)
						  : xasprintf("%s/signing.key", config.data_dir);
		key = ed25519_public_of_private(own, err, sizeof(err));
		if (!key)
			snprintf(err + strlen(err), sizeof(err) - strlen(err), "; pass the hub's public key with --key "
				 "(GET /api/signing-key)");
		free(own);
	}
	if (!key)
		fprintf(stderr, "khub verify-build: %s\n", err);
	return key;
}

/* What the verified statement says it is, on one line. */
static void print_verified(json_t *st, const char *dir, size_t files, EVP_PKEY *key)
{
	json_t *def = json_object_get(json_object_get(st, "predicate"), "buildDefinition");
	json_t *ext = json_object_get(def, "externalParameters"), *source = json_object_get(ext, "source");
	json_int_t id = json_integer_value(json_object_get(json_object_get(def, "internalParameters"), "buildId"));
	const char *repo = json_string_value(json_object_get(source, "repository"));
	const char *commit = json_string_value(json_object_get(source, "commit"));
	const char *variant = json_string_value(json_object_get(ext, "variant"));
	char kid[ED25519_KEY_ID_LEN + 1] = "";
	ed25519_key_id(key, kid);
	printf("verified: the %zu files of %s are build #%lld of %s at %s (variant %s), signed by key %s\n", files, dir,
	       (long long)id, repo ? repo : "?", commit ? commit : "?", variant ? variant : "?", kid);
}

int cmd_verify_build(int argc, char **argv)
{
	const char *dir = NULL, *prov = NULL, *keyfile = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--provenance") == 0 && i + 1 < argc)
			prov = argv[++i];
		else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
			keyfile = argv[++i];
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else
			dir = prov = NULL, i = argc;
	}
	struct stat st;
	if (!dir || !prov) {
		fputs(cmd_verify_build_usage, stderr);
		return VERIFY_USAGE;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "khub verify-build: %s is not a directory\n", dir);
		return VERIFY_USAGE;
	}
	char err[512];
	size_t len = 0;
	char *text = sync_read_file(prov, PROVENANCE_MAX, &len, err, sizeof(err));
	EVP_PKEY *key = text ? verify_key(keyfile) : NULL;
	json_t *statement = NULL;
	int rc = VERIFY_USAGE;
	if (!text)
		fprintf(stderr, "khub verify-build: %s\n", err);
	if (!key)
		goto cleanup;
	if (build_provenance_open(text, len, key, &statement, err, sizeof(err)) < 0) {
		fprintf(stderr, "khub verify-build: %s: %s\n", prov, err);
		rc = VERIFY_BAD_SIGNATURE;
		goto cleanup;
	}
	struct build_provenance_check c = { report_problem, NULL, 0, 0 };
	if (build_provenance_check_dir(statement, dir, &c) < 0) {
		fprintf(stderr, "khub verify-build: cannot read %s\n", dir);
		goto cleanup;
	}
	if (c.problems) {
		fprintf(stderr, "khub verify-build: %s does NOT match its provenance (%zu problem%s)\n", dir, c.problems,
			c.problems == 1 ? "" : "s");
		rc = VERIFY_MISMATCH;
		goto cleanup;
	}
	print_verified(statement, dir, c.files, key);
	rc = VERIFY_OK;
cleanup:
	json_decref(statement);
	EVP_PKEY_free(key);
	free(text);
	return rc;
}
