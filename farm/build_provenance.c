/* build_provenance.c -- a farm build's signed provenance (docs/build-farm.md,
 * "Provenance"): an in-toto Statement v1 whose subjects are the published
 * files of build/<variant>/ with their sha256, and whose predicate is SLSA
 * provenance v1 (source, build.toml, variant; the hub, the worker, its
 * sandbox and toolchain, the times), in a DSSE envelope signed with the
 * hub's Ed25519 key (common/ed25519.c, the signer of sync bundles too).
 * Also the offline check of a downloaded variant against one
 * (khub verify-build). */
#include "farm/farm.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <openssl/evp.h>

#include "config.h"

#define STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define PAYLOAD_TYPE "application/vnd.in-toto+json"
#define BUILD_TYPE "https://khub.dev/build-farm/v1"

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The sha256 of a file's bytes: 0 or -1 (errno). */
static int file_sha256(const char *path, char hex[65])
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return -1;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char buf[65536];
	size_t n;
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while ((n = fread(buf, 1, sizeof(buf), fp)) > 0)
		EVP_DigestUpdate(ctx, buf, n);
	int failed = ferror(fp);
	fclose(fp);
	sha256_final_hex(ctx, hex);
	EVP_MD_CTX_free(ctx);
	if (failed)
		errno = EIO;
	return failed ? -1 : 0;
}

/* DSSE's pre-authentication encoding of the payload: what is signed. */
static char *dsse_pae(const char *payload, size_t len, size_t *pae_len)
{
	struct strbuf b = STRBUF_INIT;
	strbuf_addf(&b, "DSSEv1 %zu %s %zu ", strlen(PAYLOAD_TYPE), PAYLOAD_TYPE, len);
	strbuf_add(&b, payload, len);
	return strbuf_detach(&b, pae_len);
}

/* The subjects, by name (sorted): each file's sha256. */
static json_t *subjects_json(const struct build_provenance_file *files, size_t n)
{
	json_t *byname = json_object(), *list = json_array();
	for (size_t i = 0; i < n; i++) {	/* a later file of the same name replaces an earlier */
		char hex[65];
		sha256_hex(files[i].data, files[i].len, hex);
		json_object_set_new(byname, files[i].name, json_string(hex));
	}
	const char **names = xcalloc(json_object_size(byname) + 1, sizeof(*names));
	size_t k = 0;
	const char *name;
	json_t *v;
	json_object_foreach(byname, name, v)
		names[k++] = name;
	qsort(names, k, sizeof(*names), compare_names);
	for (size_t i = 0; i < k; i++)
		json_array_append_new(list, json_pack("{s:s, s:{s:O}}", "name", names[i], "digest", "sha256",
						      json_object_get(byname, names[i])));
	free(names);
	json_decref(byname);
	return list;
}

/* buildDefinition: what was built (the source, its build.toml, the variant). */
static json_t *build_definition(const struct build_provenance_input *in)
{
	char *repo = xasprintf("%s/kernels/%s/%s", in->hub, in->ns, in->name);
	json_t *source = json_pack("{s:s, s:s}", "repository", repo, "commit", in->commit);
	if (in->source_url)
		json_object_set_new(source, "url", json_string(in->source_url));
	if (in->source_revision)
		json_object_set_new(source, "revision", json_string(in->source_revision));
	json_t *deps = json_array();
	char *uri = xasprintf("git+%s@%s", in->source_url ? in->source_url : repo, in->commit);
	json_array_append_new(deps, json_pack("{s:s, s:{s:s}}", "uri", uri, "digest", "gitCommit", in->commit));
	if (in->build_toml_sha256[0])
		json_array_append_new(deps, json_pack("{s:s, s:{s:s}}", "name", "build.toml", "digest", "sha256",
						      in->build_toml_sha256));
	json_t *def = json_pack("{s:s, s:{s:o, s:s, s:{s:s?}}, s:{s:I}, s:o}", "buildType", BUILD_TYPE,
				"externalParameters", "source", source, "variant", in->variant, "buildToml", "sha256",
				in->build_toml_sha256[0] ? in->build_toml_sha256 : NULL, "internalParameters", "buildId",
				(json_int_t)in->id, "resolvedDependencies", deps);
	free(uri);
	free(repo);
	return def;
}

/* runDetails: who built it (the hub; the worker with its sandbox and
 * toolchain as its metadata.json reports them) and when. */
static json_t *run_details(const struct build_provenance_input *in, const char *finished)
{
	json_t *md = json_loadb(in->metadata ? in->metadata : "", in->metadata_len, 0, NULL);
	json_t *khub = json_object_get(md, "khub");
	json_t *toolchain = json_object_get(khub, "toolchain");
	const char *sandbox = json_string_value(json_object_get(khub, "sandbox"));
	const char *rootfs = json_string_value(json_object_get(khub, "rootfs-sha256"));
	char *uri = xasprintf("khub-worker:%s", in->worker);
	json_t *worker = json_pack("{s:s, s:s, s:{s:s?, s:O?}}", "uri", uri, "name", in->worker, "annotations",
				   "sandbox", sandbox, "toolchain", json_is_object(toolchain) ? toolchain : NULL);
	json_t *deps = json_pack("[o]", worker);
	if (rootfs && strlen(rootfs) == 64 && is_lower_hex(rootfs, 64))
		json_array_append_new(deps, json_pack("{s:s, s:{s:s}}", "name", "rootfs", "digest", "sha256", rootfs));
	char *invocation = xasprintf("%s/api/builds/%" PRId64, in->hub, in->id);
	json_t *run = json_pack("{s:{s:s, s:{s:s}, s:o}, s:{s:s, s:s?, s:s}}", "builder", "id", in->hub,
				"version", "khub", PACKAGE_VERSION, "builderDependencies", deps, "metadata",
				"invocationId", invocation, "startedOn", in->started, "finishedOn", finished);
	free(invocation);
	free(uri);
	json_decref(md);
	return run;
}

char *build_provenance_statement(const struct build_provenance_input *in)
{
	char finished[32];
	format_iso8601(time(NULL), finished);
	json_t *st = json_pack("{s:s, s:o, s:s, s:{s:o, s:o}}", "_type", STATEMENT_TYPE, "subject",
			       subjects_json(in->files, in->nfiles), "predicateType", BUILD_PROVENANCE_PREDICATE,
			       "predicate", "buildDefinition", build_definition(in), "runDetails",
			       run_details(in, finished));
	char *text = json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(st);
	return text;
}

int build_provenance_sign(const char *key_path, const char *statement, char **envelope, char sha256[65],
			  char key_id[ED25519_KEY_ID_LEN + 1], char *err, size_t errlen)
{
	size_t len = strlen(statement), pae_len = 0;
	char *pae = dsse_pae(statement, len, &pae_len);
	unsigned char sig[ED25519_SIG_LEN];
	int rc = ed25519_sign(key_path, pae, pae_len, sig, key_id, err, errlen);
	free(pae);
	if (rc < 0)
		return rc;
	char *payload = base64_encode(statement, len), *sig64 = base64_encode(sig, sizeof(sig));
	json_t *env = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "payloadType", PAYLOAD_TYPE, "payload", payload,
				"signatures", "keyid", key_id, "sig", sig64);
	char *text = json_dumps(env, JSON_COMPACT);
	json_decref(env);
	free(payload);
	free(sig64);
	*envelope = xasprintf("%s\n", text);
	free(text);
	sha256_hex(*envelope, strlen(*envelope), sha256);
	return 0;
}

/* The signatures of env: 0 when one of them verifies under key, else
 * KHUB_EPERM with err naming the key ids. */
static int envelope_signature_check(json_t *env, const char *payload, size_t len, EVP_PKEY *key, char *err,
				    size_t errlen)
{
	char id[ED25519_KEY_ID_LEN + 1] = "", ids[256] = "";
	size_t pae_len = 0, i;
	char *pae = dsse_pae(payload, len, &pae_len);
	json_t *s;
	int good = 0;
	ed25519_key_id(key, id);
	json_array_foreach(json_object_get(env, "signatures"), i, s) {
		const char *sig64 = json_string_value(json_object_get(s, "sig"));
		const char *kid = json_string_value(json_object_get(s, "keyid"));
		size_t n = 0;
		unsigned char *sig = sig64 ? base64_decode_strict(sig64, strlen(sig64), &n) : NULL;
		good |= sig && n == ED25519_SIG_LEN && ed25519_verify(key, pae, pae_len, sig);
		free(sig);
		if (kid && strlen(ids) + strlen(kid) + 3 < sizeof(ids))
			snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s%s", ids[0] ? ", " : "", kid);
	}
	free(pae);
	if (good)
		return 0;
	snprintf(err, errlen, "the provenance's signature does not verify under key %s (signed by key %s): it was "
		 "altered, or another key signed it", id, ids[0] ? ids : "none named");
	return KHUB_EPERM;
}

int build_provenance_open(const char *envelope, size_t len, EVP_PKEY *key, json_t **statement, char *err,
			  size_t errlen)
{
	json_error_t jerr;
	json_t *env = json_loadb(envelope, len, 0, &jerr), *st = NULL;
	const char *type = json_string_value(json_object_get(env, "payloadType"));
	const char *payload64 = json_string_value(json_object_get(env, "payload"));
	size_t plen = 0;
	unsigned char *payload = payload64 ? base64_decode_strict(payload64, strlen(payload64), &plen) : NULL;
	int rc = KHUB_EINVAL;
	if (!env || !type || strcmp(type, PAYLOAD_TYPE) != 0 || !payload) {
		snprintf(err, errlen, "not a DSSE envelope of an in-toto statement (payloadType %s, base64 payload)",
			 PAYLOAD_TYPE);
		goto cleanup;
	}
	if ((rc = envelope_signature_check(env, (const char *)payload, plen, key, err, errlen)) < 0)
		goto cleanup;
	rc = KHUB_EINVAL;
	st = json_loadb((const char *)payload, plen, 0, &jerr);
	const char *t = json_string_value(json_object_get(st, "_type"));
	const char *pt = json_string_value(json_object_get(st, "predicateType"));
	if (!t || strcmp(t, STATEMENT_TYPE) != 0 || !pt || strcmp(pt, BUILD_PROVENANCE_PREDICATE) != 0 ||
	    !json_is_array(json_object_get(st, "subject"))) {
		snprintf(err, errlen, "the signed payload is not an in-toto Statement v1 with SLSA provenance v1");
		goto cleanup;
	}
	*statement = json_incref(st);
	rc = 0;
cleanup:
	json_decref(st);
	json_decref(env);
	free(payload);
	return rc;
}

/* The problems of one file of the directory (name relative to it) against
 * the subjects (each one seen is marked in seen). */
static void check_one_file(const char *path, const char *name, json_t *subjects, json_t *seen,
			   struct build_provenance_check *c)
{
	json_t *want = json_object_get(subjects, name);
	char hex[65];
	if (!want) {
		c->report(c->arg, "extra file: %s (the provenance does not list it)", name);
		c->problems++;
		return;
	}
	json_object_set_new(seen, name, json_true());
	if (file_sha256(path, hex) < 0) {
		c->report(c->arg, "unreadable file: %s: %s", name, strerror(errno));
		c->problems++;
	} else if (strcmp(hex, json_string_value(want)) != 0) {
		c->report(c->arg, "changed file: %s (sha256 %s, the provenance says %s)", name, hex,
			  json_string_value(want));
		c->problems++;
	}
}

/* Walk dir (rel: its name below the top, "" at the top), following
 * symbolic links to files (a hub cache's snapshot) but not to directories. */
static int check_tree(const char *dir, const char *rel, json_t *subjects, json_t *seen,
		      struct build_provenance_check *c)
{
	struct dirent **names = NULL;
	int n = scandir(dir, &names, NULL, alphasort);
	if (n < 0)
		return KHUB_EIO;
	for (int i = 0; i < n; i++) {
		const char *d = names[i]->d_name;
		if (strcmp(d, ".") != 0 && strcmp(d, "..") != 0) {
			char *path = xasprintf("%s/%s", dir, d), *name = xasprintf("%s%s%s", rel, rel[0] ? "/" : "", d);
			struct stat st, lst;
			if (stat(path, &st) < 0 || lstat(path, &lst) < 0) {
				c->report(c->arg, "unreadable file: %s: %s", name, strerror(errno));
				c->problems++;
			} else if (S_ISDIR(st.st_mode) && !S_ISLNK(lst.st_mode)) {
				if (check_tree(path, name, subjects, seen, c) < 0) {
					c->report(c->arg, "unreadable directory: %s: %s", name, strerror(errno));
					c->problems++;
				}
			} else if (!S_ISREG(st.st_mode)) {
				c->report(c->arg, "extra file: %s (not a regular file)", name);
				c->problems++;
			} else {
				check_one_file(path, name, subjects, seen, c);
			}
			free(path);
			free(name);
		}
		free(names[i]);
	}
	free(names);
	return 0;
}

int build_provenance_check_dir(json_t *statement, const char *dir, struct build_provenance_check *c)
{
	json_t *subjects = json_object(), *seen = json_object(), *s;
	size_t i;
	c->problems = c->files = 0;
	json_array_foreach(json_object_get(statement, "subject"), i, s) {
		const char *name = json_string_value(json_object_get(s, "name"));
		const char *hex = json_string_value(json_object_get(json_object_get(s, "digest"), "sha256"));
		if (name && hex)
			json_object_set_new(subjects, name, json_string(hex));
	}
	int rc = check_tree(dir, "", subjects, seen, c);
	const char *name;
	json_object_foreach(subjects, name, s) {
		if (!json_object_get(seen, name)) {
			c->report(c->arg, "missing file: %s (the provenance lists it)", name);
			c->problems++;
		}
	}
	c->files = json_object_size(subjects);
	json_decref(subjects);
	json_decref(seen);
	return rc;
}
