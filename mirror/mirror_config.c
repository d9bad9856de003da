/* mirror_config.c -- the mirror configuration: upstreams and selections,
 * from a JSON file or the database. Example (without the space in "/ *"):
 *   {"upstreams": [{"name": "hf", "url": "https://huggingface.co",
 *                   "token_env": "HF_TOKEN", "rate": 10, "concurrency": 4}],
 *    "selections": [{"name": "community", "upstream": "hf", "type": "kernel",
 *                    "repos": ["kernels-community/ *"], "refs": ["main", "v*"],
 *                    "eager_variants": ["torch-*", "torch21*-cxx11-cu12*-x86_64-linux"],
 *                    "lazy": true, "interval": 600, "policy": "mirror",
 *                    "git_timeout": 600}]} */
#include "mirror/mirror.h"

#include <stdlib.h>
#include <string.h>

static char **string_list(json_t *array, size_t *n, const char *dflt)
{
	if (!json_is_array(array) || json_array_size(array) == 0) {
		if (!dflt) {
			*n = 0;
			return NULL;
		}
		char **list = xcalloc(1, sizeof(char *));
		list[0] = xstrdup(dflt);
		*n = 1;
		return list;
	}
	char **list = xcalloc(json_array_size(array), sizeof(char *));
	size_t i, k = 0;
	json_t *v;
	json_array_foreach(array, i, v)
		if (json_is_string(v))
			list[k++] = xstrdup(json_string_value(v));
	*n = k;
	return list;
}

static char *opt_string(json_t *obj, const char *key, const char *dflt)
{
	const char *v = json_string_value(json_object_get(obj, key));
	return v ? xstrdup(v) : dflt ? xstrdup(dflt) : NULL;
}

/* An integer member, or dflt when absent or not an integer. */
static long opt_integer(json_t *obj, const char *key, long dflt)
{
	json_t *v = json_object_get(obj, key);
	return json_is_integer(v) ? (long)json_integer_value(v) : dflt;
}

/* upstreams[i]: 0, or KHUB_EINVAL with err set. */
static int parse_upstream(json_t *u, size_t i, struct mirror_upstream *up, char *err, size_t errlen)
{
	up->name = opt_string(u, "name", NULL);
	up->url = opt_string(u, "url", NULL);
	if (!up->name || !up->url || strncmp(up->url, "http", 4) != 0) {
		snprintf(err, errlen, "upstreams[%zu] needs a name and an http(s) url", i);
		return KHUB_EINVAL;
	}
	size_t n = strlen(up->url);
	while (n > 0 && up->url[n - 1] == '/')
		up->url[--n] = '\0';
	up->token_env = opt_string(u, "token_env", NULL);
	up->token_file = opt_string(u, "token_file", NULL);
	json_t *rate = json_object_get(u, "rate");
	up->rate = json_is_number(rate) ? json_number_value(rate) : 0;
	up->concurrency = (int)opt_integer(u, "concurrency", 4);
	if (up->concurrency < 1 || up->concurrency > 64) {
		snprintf(err, errlen, "upstreams[%zu].concurrency must be 1..64", i);
		return KHUB_EINVAL;
	}
	up->max_retries = (int)opt_integer(u, "max_retries", 6);
	up->request_timeout = opt_integer(u, "request_timeout", 120);
	if (up->max_retries < 0 || up->request_timeout < 1) {
		snprintf(err, errlen, "upstreams[%zu]: max_retries >= 0 and request_timeout >= 1", i);
		return KHUB_EINVAL;
	}
	return 0;
}

/* What selections[i] pulls: its upstream, repo type and repos. */
static int parse_selection_source(const struct mirror_config *cfg, json_t *s, size_t i, struct mirror_selection *sel,
				  char *err, size_t errlen)
{
	sel->name = opt_string(s, "name", NULL);
	sel->upstream = opt_string(s, "upstream", cfg->nupstreams ? cfg->upstreams[0].name : NULL);
	if (!sel->name || !sel->upstream || !mirror_config_upstream(cfg, sel->upstream)) {
		snprintf(err, errlen, "selections[%zu] needs a name and a known upstream", i);
		return KHUB_EINVAL;
	}
	char *type = opt_string(s, "type", "kernel");
	int bad_type = repo_type_parse(type, &sel->type) < 0;
	free(type);
	if (bad_type) {
		snprintf(err, errlen, "selections[%zu].type is not a repo type", i);
		return KHUB_EINVAL;
	}
	sel->repos = string_list(json_object_get(s, "repos"), &sel->nrepos, NULL);
	if (!sel->nrepos) {
		snprintf(err, errlen, "selections[%zu].repos is empty", i);
		return KHUB_EINVAL;
	}
	for (size_t k = 0; k < sel->nrepos; k++)
		if (!strchr(sel->repos[k], '/')) {
			snprintf(err, errlen, "selections[%zu].repos: '%s' is not ns/name or ns/*", i, sel->repos[k]);
			return KHUB_EINVAL;
		}
	return 0;
}

/* selections[i]: 0, or KHUB_EINVAL with err set. */
static int parse_selection(const struct mirror_config *cfg, json_t *s, size_t i, struct mirror_selection *sel,
			   char *err, size_t errlen)
{
	int rc = parse_selection_source(cfg, s, i, sel, err, errlen);
	if (rc < 0)
		return rc;
	sel->refs = string_list(json_object_get(s, "refs"), &sel->nrefs, "all");
	sel->eager = string_list(json_object_get(s, "eager_variants"), &sel->neager, "*");
	json_t *lazy = json_object_get(s, "lazy");
	sel->lazy = lazy ? json_is_true(lazy) : 1;
	sel->interval = opt_integer(s, "interval", 600);
	sel->git_timeout = opt_integer(s, "git_timeout", 600);
	if (sel->git_timeout < 1) {
		snprintf(err, errlen, "selections[%zu].git_timeout must be at least 1 second", i);
		return KHUB_EINVAL;
	}
	const char *policy = json_string_value(json_object_get(s, "policy"));
	if (policy && strcmp(policy, "keep") != 0 && strcmp(policy, "mirror") != 0) {
		snprintf(err, errlen, "selections[%zu].policy must be \"mirror\" or \"keep\"", i);
		return KHUB_EINVAL;
	}
	sel->policy = policy && strcmp(policy, "keep") == 0 ? POLICY_KEEP : POLICY_MIRROR;
	return 0;
}

int mirror_config_parse(const char *text, struct mirror_config *out, char *err, size_t errlen)
{
	json_error_t jerr;
	memset(out, 0, sizeof(*out));
	json_t *doc = json_loads(text, 0, &jerr);
	if (!json_is_object(doc)) {
		snprintf(err, errlen, "mirror config is not a JSON object: %s (line %d)", jerr.text, jerr.line);
		json_decref(doc);
		return KHUB_EINVAL;
	}
	json_t *ups = json_object_get(doc, "upstreams"), *sels = json_object_get(doc, "selections");
	int rc = KHUB_EINVAL;
	if (!json_is_array(ups) || !json_is_array(sels)) {
		snprintf(err, errlen, "mirror config needs \"upstreams\" and \"selections\" arrays");
		goto cleanup;
	}
	out->upstreams = xcalloc(json_array_size(ups) + 1, sizeof(*out->upstreams));
	size_t i;
	json_t *v;
	rc = 0;
	json_array_foreach(ups, i, v) {
		if ((rc = parse_upstream(v, i, &out->upstreams[out->nupstreams++], err, errlen)) < 0)
			goto cleanup;
	}
	out->selections = xcalloc(json_array_size(sels) + 1, sizeof(*out->selections));
	json_array_foreach(sels, i, v) {
		if ((rc = parse_selection(out, v, i, &out->selections[out->nselections++], err, errlen)) < 0)
			goto cleanup;
	}
cleanup:
	json_decref(doc);
	if (rc < 0)
		mirror_config_release(out);
	return rc;
}

int mirror_config_load(const char *file, struct mirror_config *out, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len;
	if (file) {
		text = read_file_limited(file, 1 << 20, &len);
		if (!text) {
			snprintf(err, errlen, "cannot read %s", file);
			return KHUB_EIO;
		}
	} else {
		int rc = db_mirror_config_get(&text);
		if (rc == KHUB_EDB) {
			snprintf(err, errlen, "database unavailable");
			return KHUB_EDB;
		}
		if (!text) {
			snprintf(err, errlen, "no mirror configuration: pass --mirror-config FILE or PUT /api/admin/mirror/config");
			return KHUB_ENOTFOUND;
		}
	}
	int rc = mirror_config_parse(text, out, err, errlen);
	free(text);
	return rc;
}

void mirror_config_release(struct mirror_config *cfg)
{
	for (size_t i = 0; i < cfg->nupstreams; i++) {
		free(cfg->upstreams[i].name);
		free(cfg->upstreams[i].url);
		free(cfg->upstreams[i].token_env);
		free(cfg->upstreams[i].token_file);
	}
	free(cfg->upstreams);
	for (size_t i = 0; i < cfg->nselections; i++) {
		struct mirror_selection *s = &cfg->selections[i];
		free(s->name);
		free(s->upstream);
		free_strings(s->repos, s->nrepos);
		free_strings(s->refs, s->nrefs);
		free_strings(s->eager, s->neager);
	}
	free(cfg->selections);
	memset(cfg, 0, sizeof(*cfg));
}

const struct mirror_upstream *mirror_config_upstream(const struct mirror_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->nupstreams; i++)
		if (strcmp(cfg->upstreams[i].name, name) == 0)
			return &cfg->upstreams[i];
	return NULL;
}

char *mirror_upstream_token(const struct mirror_upstream *up)
{
	if (up->token_env && getenv(up->token_env) && getenv(up->token_env)[0])
		return xstrdup(getenv(up->token_env));
	if (up->token_file) {
		size_t len;
		char *t = read_file_limited(up->token_file, 4096, &len);
		if (t) {
			while (len > 0 && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' '))
				t[--len] = '\0';
			return t;
		}
	}
	return NULL;
}
