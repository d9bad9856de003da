/* cmd_benchmark.c -- khub benchmark submit FILE --repo NS/NAME: post the
 * file `kernels benchmark ... --output FILE` writes (BenchmarkResult.
 * to_payload(), as is) to a khub's POST /api/kernels/{ns}/{name}/benchmarks.
 * kernels' own --upload always posts to huggingface.co with HF_TOKEN, which
 * would hand a private hub's token and repo names to huggingface.co; this
 * command refuses that host unless asked. A client: it opens no database. */
#include "server/server.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define SUBMIT_FILE_MAX (1024 * 1024)	/* the server's own limit on an upload */
#define SUBMIT_ANSWER_MAX (64 * 1024)

const char cmd_benchmark_usage[] =
	"usage: khub benchmark submit FILE --repo NS/NAME [--endpoint URL] [--token TOKEN]\n"
	"                             [--allow-huggingface]\n"
	"  post FILE, written by `kernels benchmark NS/NAME@REV --output FILE`, to the hub's\n"
	"  POST /api/kernels/NS/NAME/benchmarks (needs a write token).\n"
	"  endpoint: --endpoint, else $HF_ENDPOINT, else public_url from khub's configuration.\n"
	"  token: --token, else $HF_TOKEN, else $HF_TOKEN_PATH, $HF_HOME/token or\n"
	"  ~/.cache/huggingface/token (where `hf auth login` keeps it).\n"
	"  An endpoint on huggingface.co or hf.co is refused unless --allow-huggingface:\n"
	"  that would send this token and the repo's name to huggingface.co.\n";

struct submit_args {
	const char *file, *repo, *endpoint, *token;
	int allow_huggingface;
};

/* 0 with *a filled, or -1 after printing why. */
static int submit_parse(int argc, char **argv, struct submit_args *a)
{
	for (int i = 2; i < argc; i++) {
		const char *arg = argv[i];
		const char **value = strcmp(arg, "--repo") == 0	    ? &a->repo
				     : strcmp(arg, "--endpoint") == 0 ? &a->endpoint
				     : strcmp(arg, "--token") == 0    ? &a->token
								      : NULL;
		if (value && i + 1 < argc)
			*value = argv[++i];
		else if (strcmp(arg, "--allow-huggingface") == 0)
			a->allow_huggingface = 1;
		else if (arg[0] != '-' && !a->file)
			a->file = arg;
		else {
			fprintf(stderr, "khub benchmark submit: unexpected argument %s\n", arg);
			return -1;
		}
	}
	if (!a->file || !a->repo) {
		fputs(cmd_benchmark_usage, stderr);
		return -1;
	}
	return 0;
}

/* Whether host (any case, an optional final dot) is huggingface.co, hf.co
 * or a name under either. */
static int huggingface_host(const char *host)
{
	static const char *const domains[] = { "huggingface.co", "hf.co" };
	size_t n = strlen(host);
	if (n && host[n - 1] == '.')
		n--;
	for (size_t i = 0; i < sizeof(domains) / sizeof(domains[0]); i++) {
		size_t d = strlen(domains[i]);
		if (n >= d && strncasecmp(host + n - d, domains[i], d) == 0 && (n == d || host[n - d - 1] == '.'))
			return 1;
	}
	return 0;
}

/* 0 when endpoint is an http(s) URL this command may post to; -1 after
 * printing why (a huggingface.co endpoint without allow, or not a URL).
 * The host is read as libcurl reads it, so user@ or odd case fool nothing. */
static int endpoint_check(const char *endpoint, int allow_huggingface)
{
	int rc = -1;
	char *scheme = NULL, *host = NULL;
	CURLU *u = curl_url();
	if (!u || curl_url_set(u, CURLUPART_URL, endpoint, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
		fprintf(stderr, "khub benchmark submit: endpoint '%s' is not an http(s) URL\n", endpoint);
		goto cleanup;
	}
	if (huggingface_host(host) && !allow_huggingface) {
		fprintf(stderr,
			"khub benchmark submit: refusing endpoint %s: it is huggingface.co, and submitting there\n"
			"  would send your token (a private hub's HF_TOKEN) and the repo's name to huggingface.co.\n"
			"  Set HF_ENDPOINT or --endpoint to your hub; pass --allow-huggingface only for a\n"
			"  huggingface.co token and a public repo.\n",
			endpoint);
		goto cleanup;
	}
	rc = 0;
cleanup:
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return rc;
}

/* --endpoint, $HF_ENDPOINT, khub's public_url; NULL when none is set. */
static const char *endpoint_choose(const struct submit_args *a)
{
	const char *env = getenv("HF_ENDPOINT");
	if (a->endpoint && a->endpoint[0])
		return a->endpoint;
	if (env && env[0])
		return env;
	return config.public_url[0] ? config.public_url : NULL;
}

/* The token as huggingface_hub finds it: --token, $HF_TOKEN, then the file
 * at $HF_TOKEN_PATH, $HF_HOME/token or ~/.cache/huggingface/token. The
 * caller frees; NULL when there is none. */
static char *token_choose(const struct submit_args *a)
{
	const char *env = getenv("HF_TOKEN");
	if (a->token && a->token[0])
		return xstrdup(a->token);
	if (env && env[0])
		return xstrdup(env);
	char *path;
	if (getenv("HF_TOKEN_PATH"))
		path = xstrdup(getenv("HF_TOKEN_PATH"));
	else if (getenv("HF_HOME"))
		path = xasprintf("%s/token", getenv("HF_HOME"));
	else
		path = xasprintf("%s/.cache/huggingface/token", getenv("HOME") ? getenv("HOME") : "");
	size_t len = 0;
	char *token = read_file_limited(path, 4096, &len);
	free(path);
	while (token && len && isspace((unsigned char)token[len - 1]))
		token[--len] = '\0';
	if (token && !token[0]) {
		free(token);
		token = NULL;
	}
	return token;
}

/* The file as compact JSON (caller frees), or NULL after printing why. Only
 * the shape is checked here; the hub checks every field and says which. */
static char *payload_read(const char *file)
{
	json_error_t jerr;
	char *text = NULL;
	json_t *doc = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc && jerr.line < 0)	/* jansson's sign that the file was never read */
		fprintf(stderr, "khub benchmark submit: cannot read %s (%s)\n", file, jerr.text);
	else if (!doc)
		fprintf(stderr, "khub benchmark submit: %s is not JSON (line %d: %s)\n", file, jerr.line, jerr.text);
	else if (!json_is_object(doc) || !json_is_array(json_object_get(doc, "results")))
		fprintf(stderr,
			"khub benchmark submit: %s is not what `kernels benchmark --output` writes (an object with a"
			" results array)\n",
			file);
	else if (!(text = json_dumps(doc, JSON_COMPACT)) || strlen(text) > SUBMIT_FILE_MAX) {
		fprintf(stderr, "khub benchmark submit: %s is larger than a hub takes (%d bytes)\n", file,
			SUBMIT_FILE_MAX);
		free(text);
		text = NULL;
	}
	json_decref(doc);
	return text;
}

static size_t on_answer(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct strbuf *sb = userdata;
	if (sb->len + size * nmemb > SUBMIT_ANSWER_MAX)
		return 0;
	strbuf_add(sb, ptr, size * nmemb);
	return size * nmemb;
}

/* POST body to url with token; 0 with *status and the answer in answer, or
 * -1 after printing why the hub could not be reached. No redirects: the
 * token goes to the host named and no other. */
static int submit_post(const char *url, const char *token, const char *body, long *status, struct strbuf *answer)
{
	struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURL *h = curl_easy_init();
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
	curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, token);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "khub-benchmark-submit/" PACKAGE_VERSION);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_answer);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
	CURLcode cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(h);
	curl_slist_free_all(headers);
	curl_global_cleanup();
	if (cc != CURLE_OK)
		fprintf(stderr, "khub benchmark submit: cannot post to %s: %s\n", url, curl_easy_strerror(cc));
	return cc == CURLE_OK ? 0 : -1;
}

/* The hub's answer on stdout (success) or stderr (its error): 0 or 1. */
static int submit_report(long status, const char *answer)
{
	json_t *doc = json_loads(answer, 0, NULL);
	int rc = 1;
	if (status == 200 && json_is_integer(json_object_get(doc, "id"))) {
		printf("submitted benchmark run %" JSON_INTEGER_FORMAT " (%s, commit %s, %" JSON_INTEGER_FORMAT
		       " workloads)\n%s\n",
		       json_integer_value(json_object_get(doc, "id")), json_string_value(json_object_get(doc, "source")),
		       json_string_value(json_object_get(doc, "commit")),
		       json_integer_value(json_object_get(doc, "results")), json_string_value(json_object_get(doc, "url")));
		rc = 0;
	} else {
		const char *error = json_string_value(json_object_get(doc, "error"));
		fprintf(stderr, "khub benchmark submit: the hub answered %ld: %s\n", status,
			error ? error : (answer[0] ? answer : "(no body)"));
	}
	json_decref(doc);
	return rc;
}

static int benchmark_submit(int argc, char **argv)
{
	struct submit_args a = { 0 };
	struct strbuf answer = STRBUF_INIT;
	char *token = NULL, *body = NULL, *url = NULL, *ns = NULL;
	const char *why, *endpoint, *slash;
	long status = 0;
	int rc = 2;

	if (submit_parse(argc, argv, &a) < 0)
		goto cleanup;
	slash = strchr(a.repo, '/');
	ns = slash ? xstrndup(a.repo, (size_t)(slash - a.repo)) : NULL;
	if (!ns || repo_name_validate(ns, &why) < 0 || repo_name_validate(slash + 1, &why) < 0) {
		fprintf(stderr, "khub benchmark submit: --repo must be NS/NAME, not '%s'\n", a.repo);
		goto cleanup;
	}
	if (!(endpoint = endpoint_choose(&a))) {
		fprintf(stderr, "khub benchmark submit: no hub: pass --endpoint URL or set HF_ENDPOINT\n");
		goto cleanup;
	}
	if (endpoint_check(endpoint, a.allow_huggingface) < 0)	/* before the token is even read */
		goto cleanup;
	if (!(token = token_choose(&a))) {
		fprintf(stderr, "khub benchmark submit: no token: pass --token, set HF_TOKEN or run `hf auth login`\n");
		goto cleanup;
	}
	if (!(body = payload_read(a.file)))
		goto cleanup;
	size_t elen = strlen(endpoint);
	while (elen && endpoint[elen - 1] == '/')
		elen--;
	url = xasprintf("%.*s/api/kernels/%s/%s/benchmarks", (int)elen, endpoint, ns, slash + 1);
	rc = submit_post(url, token, body, &status, &answer) < 0 ? 1 : submit_report(status, answer.buf ? answer.buf : "");
cleanup:
	free(ns);
	free(url);
	free(body);
	free(token);
	strbuf_release(&answer);
	return rc;
}

int cmd_benchmark(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "submit") == 0)
		return benchmark_submit(argc, argv);
	fputs(cmd_benchmark_usage, stderr);
	return 2;
}
