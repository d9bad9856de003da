/* standin.c -- TEST STAND-IN, replaced by the real toolchain.c/build.c at
 * merge: toolchains_load/toolchain_probe/toolchain_for_variant reading the
 * variants a toolchain builds from an explicit "variants" key (default: the
 * two of Debian's torch 1.13), and a
 * build_main that compiles nothing. It lets the daemon run end to end
 * before the real build lands; it is not part of khub-worker's sources
 * (Makefile.am). The build writes a pure-Python <variant>/ (__init__.py with
 * relu, metadata.json with digest and provenance) and abi-report.json;
 * a file `standin.json` at the source's top may ask for {"sleep": seconds,
 * "exit": code, "lines": n} to exercise the daemon. */
#include "builder-worker/worker.h"
#include "common/common.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dup_key(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? xstrdup(s) : NULL;
}

int toolchains_load(const char *path, struct toolchain_set *out, char *why, size_t why_size)
{
	json_error_t err;
	json_t *root = json_load_file(path, 0, &err);
	json_t *list = root ? json_object_get(root, "toolchains") : NULL;
	memset(out, 0, sizeof(*out));
	if (!json_is_array(list)) {
		snprintf(why, why_size, "%s", root ? "no \"toolchains\" array" : err.text);
		json_decref(root);
		return KHUB_EINVAL;
	}
	out->items = xcalloc(json_array_size(list) + 1, sizeof(*out->items));
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e) {
		struct toolchain *tc = &out->items[out->count++];
		tc->name = dup_key(e, "name");
		tc->python = dup_key(e, "python");
		if (!tc->name || !tc->python) {
			snprintf(why, why_size, "toolchains[%zu]: \"name\" and \"python\" are required", i);
			json_decref(root);
			toolchains_release(out);
			return KHUB_EINVAL;
		}
		/* no "variants": what Debian's python3-torch would give */
		json_t *vs = json_object_get(e, "variants");
		tc->variants = xcalloc(json_array_size(vs) + 3, sizeof(char *));
		for (size_t k = 0; k < json_array_size(vs); k++)
			if (json_is_string(json_array_get(vs, k)))
				tc->variants[tc->nvariants++] = xstrdup(json_string_value(json_array_get(vs, k)));
		if (!vs) {
			tc->variants[tc->nvariants++] = xstrdup("torch113-cxx11-cpu-x86_64-linux");
			tc->variants[tc->nvariants++] = xstrdup("torch-cpu");
		}
	}
	json_decref(root);
	return KHUB_OK;
}

void toolchains_release(struct toolchain_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->count; i++) {
		struct toolchain *tc = &set->items[i];
		free(tc->name);
		free(tc->python);
		free(tc->torch_version);
		for (size_t k = 0; k < tc->nvariants; k++)
			free(tc->variants[k]);
		free(tc->variants);
	}
	free(set->items);
	memset(set, 0, sizeof(*set));
}

int toolchain_probe(struct toolchain *tc)
{
	tc->usable = tc->nvariants > 0 && access(tc->python, X_OK) == 0;
	if (!tc->usable)
		snprintf(tc->why, sizeof(tc->why), "stand-in: no \"variants\" or %s is not executable", tc->python);
	tc->torch_version = xstrdup("0.0-standin");
	return tc->usable ? KHUB_OK : KHUB_EINVAL;
}

const struct toolchain *toolchain_for_variant(const struct toolchain_set *set, const char *variant)
{
	for (size_t i = 0; i < set->count; i++)
		for (size_t k = 0; set->items[i].usable && k < set->items[i].nvariants; k++)
			if (strcmp(set->items[i].variants[k], variant) == 0)
				return &set->items[i];
	return NULL;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

int build_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "toolchains", 1, NULL, 't' }, { "toolchain", 1, NULL, 'T' }, { "source", 1, NULL, 's' },
		{ "out", 1, NULL, 'o' }, { "variant", 1, NULL, 'v' }, { "build-id", 1, NULL, 'b' },
		{ "repo", 1, NULL, 'r' }, { "commit", 1, NULL, 'c' }, { "wall-seconds", 1, NULL, 'w' },
		{ "cpu-seconds", 1, NULL, 'C' }, { "memory-mb", 1, NULL, 'm' }, { "disk-mb", 1, NULL, 'd' },
		{ NULL, 0, NULL, 0 } };
	const char *source = NULL, *out = NULL, *variant = NULL, *repo = "local/relu", *commit = "0000000";
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': source = optarg; break;
		case 'o': out = optarg; break;
		case 'v': variant = optarg; break;
		case 'r': repo = optarg; break;
		case 'c': commit = optarg; break;
		case '?': return BUILD_USAGE;
		default: break;
		}
	}
	if (!source || !out || !variant)
		return BUILD_USAGE;
	printf("stand-in build of %s@%s, variant %s\n", repo, commit, variant);
	char *ctl = xasprintf("%s/standin.json", source);
	json_t *o = json_load_file(ctl, 0, NULL);
	free(ctl);
	json_int_t sleep_s = json_integer_value(json_object_get(o, "sleep"));
	json_int_t lines = json_integer_value(json_object_get(o, "lines"));
	json_t *code = json_object_get(o, "exit");
	for (json_int_t i = 0; i < lines; i++)
		printf("output line %lld of %lld\n", (long long)i + 1, (long long)lines);
	for (json_int_t i = 0; i < sleep_s; i++) {
		printf("working... %lld\n", (long long)i);
		fflush(stdout);
		sleep(1);
	}
	fflush(stdout);
	if (json_is_integer(code)) {
		int exit_code = (int)json_integer_value(code);
		fprintf(stderr, "stand-in: exiting with %d as asked\n", exit_code);
		json_decref(o);
		return exit_code;
	}
	json_decref(o);
	const char *slash = strchr(repo, '/');
	const char *name = slash ? slash + 1 : repo;
	char *dir = xasprintf("%s/%s", out, variant);
	char *init = xasprintf("%s/__init__.py", dir);
	const char *code_py = "import torch\n\n\ndef relu(x):\n    return torch.relu(x)\n";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char b64[128];
	EVP_Digest(code_py, strlen(code_py), md, &mdlen, EVP_sha256(), NULL);
	EVP_EncodeBlock((unsigned char *)b64, md, (int)mdlen);
	json_t *meta = json_pack("{s:s, s:s, s:i, s:s, s:[], s:{s:s}, s:{s:{s:s, s:b}}, s:{s:s, s:{s:s}}}",
				 "id", "_standin", "name", name, "version", 1, "license", "apache-2.0",
				 "python-depends", "backend", "type", "cpu", "provenance", "kernel", "commit", commit,
				 "dirty", 0, "digest", "algorithm", "sha256", "files", "__init__.py", b64);
	char *meta_path = xasprintf("%s/metadata.json", dir);
	char *abi_path = xasprintf("%s/abi-report.json", out);
	int ret = BUILD_OK;
	if (mkdir_p(dir, 0755) < 0 || write_text(init, code_py) < 0 ||
	    json_dump_file(meta, meta_path, JSON_COMPACT) < 0 ||
	    write_text(abi_path, "{\"ok\": true, \"manylinux\": \"manylinux_2_28\", \"python_abi\": \"3.9\", "
				 "\"text\": \"stand-in: nothing compiled\", \"files\": []}\n") < 0) {
		fprintf(stderr, "stand-in: writing %s: %s\n", dir, strerror(errno));
		ret = BUILD_INTERNAL;
	} else {
		printf("stand-in: wrote %s\n", dir);
	}
	json_decref(meta);
	free(meta_path);
	free(abi_path);
	free(init);
	free(dir);
	return ret;
}
