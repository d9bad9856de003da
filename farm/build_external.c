/* build_external.c -- builds of an external git source: the server
 * fetches the URL (http, https or git) with libgit2 into
 * {data_dir}/build-sources/<hash>.git on the fetch pool's threads (its
 * connections checked and bounded by farm/build_source_net.c), and the
 * worker gets that commit from GET /api/builds/{id}/source as usual. */
#include "farm/farm.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SOURCE_URL_MAX 2048

/* The authority of url (after "scheme://", up to its path, query or
 * fragment): its start, and its length in *len; NULL without "://". */
static const char *url_authority(const char *url, size_t *len)
{
	const char *p = url ? strstr(url, "://") : NULL;
	if (!p)
		return NULL;
	p += 3;
	*len = strcspn(p, "/?#");
	return p;
}

int build_source_url_has_userinfo(const char *url)
{
	size_t len;
	const char *a = url_authority(url, &len);
	return a && memchr(a, '@', len) != NULL;
}

char *build_source_url_public(const char *url)
{
	size_t len;
	const char *a = url_authority(url, &len);
	if (!url)
		return NULL;
	const char *at = NULL;
	for (size_t i = 0; a && i < len; i++)
		if (a[i] == '@')
			at = a + i;
	if (!at)
		return xstrdup(url);
	return xasprintf("%.*s%s", (int)(a - url), url, at + 1);
}

int build_source_url_valid(const char *url)
{
	size_t n = url ? strlen(url) : 0;
	if (n == 0 || n > SOURCE_URL_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f)
			return 0;
	if (build_source_url_has_userinfo(url))
		return 0;
	return strncmp(url, "https://", 8) == 0 || strncmp(url, "http://", 7) == 0 || strncmp(url, "git://", 6) == 0;
}

int build_source_revision_valid(const char *rev)
{
	return rev && ((strlen(rev) == 40 && is_lower_hex(rev, 40)) || ref_name_validate(rev, NULL) == 0);
}

char *build_source_dir(const char *url)
{
	char hash[65];
	sha256_hex(url, strlen(url), hash);
	return xasprintf("%s/%.24s.git", farm_settings.sources_dir, hash);
}

int build_source_open(const char *url, git_repository **out)
{
	char *dir = build_source_dir(url);
	int rc = git_repository_open_bare(out, dir) < 0 ? KHUB_ENOTFOUND : 0;
	free(dir);
	return rc;
}

int build_source_resolve(git_repository *git, const char *revision, char sha[41])
{
	static const char *const prefixes[] = { "refs/khub/heads/", "refs/khub/tags/" };
	git_object *obj = NULL, *peeled = NULL;
	int rc = KHUB_ENOTFOUND;
	if (strlen(revision) == 40 && is_lower_hex(revision, 40)) {
		git_oid oid;
		git_commit *c = NULL;
		if (git_oid_fromstr(&oid, revision) == 0 && git_commit_lookup(&c, git, &oid) == 0) {
			memcpy(sha, revision, 41);
			rc = 0;
		}
		git_commit_free(c);
		return rc;
	}
	for (size_t i = 0; i < 2 && rc < 0; i++) {
		char *ref = xasprintf("%s%s", prefixes[i], revision);
		if (git_revparse_single(&obj, git, ref) == 0 && git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT) == 0) {
			git_oid_tostr(sha, 41, git_object_id(peeled));
			rc = 0;
		}
		git_object_free(peeled);
		git_object_free(obj);
		peeled = obj = NULL;
		free(ref);
	}
	return rc;
}

struct fetch_job {
	char *url;
};

static void fetch_job_free(void *arg)
{
	struct fetch_job *job = arg;
	free(job->url);
	free(job);
}

/* Why recent fetches failed, by URL hash: a small ring the requests that
 * waited read when they resume. */
#define FAILURES_KEPT 32
static struct {
	char hash[25];
	char why[300];
} failures[FAILURES_KEPT];
static size_t failures_next;
static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember_failure(const char *url, const char *why)
{
	char hash[65];
	sha256_hex(url, strlen(url), hash);
	pthread_mutex_lock(&failures_lock);
	size_t i = 0;
	while (i < FAILURES_KEPT && strncmp(failures[i].hash, hash, 24) != 0)
		i++;
	if (i == FAILURES_KEPT)
		i = failures_next++ % FAILURES_KEPT;
	snprintf(failures[i].hash, sizeof(failures[i].hash), "%.24s", hash);
	snprintf(failures[i].why, sizeof(failures[i].why), "%s", why);
	pthread_mutex_unlock(&failures_lock);
}

void build_source_fetch_error(const char *url, char *why, size_t why_size)
{
	char hash[65];
	sha256_hex(url, strlen(url), hash);
	why[0] = '\0';
	pthread_mutex_lock(&failures_lock);
	for (size_t i = 0; i < FAILURES_KEPT; i++)
		if (strncmp(failures[i].hash, hash, 24) == 0)
			snprintf(why, why_size, "%s", failures[i].why);
	pthread_mutex_unlock(&failures_lock);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Remove a directory and everything below it (a failed first fetch). */
static void remove_tree(const char *dir)
{
	if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", dir, strerror(errno));
}

void build_sources_clean(void)
{
	DIR *d = opendir(farm_settings.sources_dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (strstr(de->d_name, ".git.new-")) {
			char *path = xasprintf("%s/%s", farm_settings.sources_dir, de->d_name);
			log_info("removing %s, a fetch a crash cut short", path);
			remove_tree(path);
			free(path);
		}
	if (d)
		closedir(d);
}

/* The host of url (no userinfo, no port) into host; 0 or -1. */
static int url_host(const char *url, char *host, size_t size)
{
	size_t len;
	const char *a = url_authority(url, &len);
	if (!a)
		return -1;
	const char *at = memchr(a, '@', len);
	if (at) {
		len -= (size_t)(at + 1 - a);
		a = at + 1;
	}
	size_t n = a[0] == '[' ? strcspn(a, "]") + 1 : strcspn(a, ":/?#");
	if (n > len)
		n = len;
	if (n == 0 || n >= size)
		return -1;
	snprintf(host, size, "%.*s", (int)n, a);
	return 0;
}

/* login and password of machine host in the netrc file path (each up to
 * size bytes): 0, or -1 when it has none. */
static int netrc_lookup(const char *path, const char *host, char *login, char *password, size_t size)
{
	FILE *f = path && path[0] ? fopen(path, "re") : NULL;
	char word[512], machine[512] = "";
	int found = -1;
	login[0] = password[0] = '\0';
	while (f && fscanf(f, "%511s", word) == 1) {
		char value[512];
		if (strcmp(word, "default") == 0) {
			snprintf(machine, sizeof(machine), "%s", host);	/* the rest applies to every host */
			continue;
		}
		if (fscanf(f, "%511s", value) != 1)
			break;
		if (strcmp(word, "machine") == 0)
			snprintf(machine, sizeof(machine), "%s", value);
		else if (strcasecmp(machine, host) == 0 && strcmp(word, "login") == 0)
			snprintf(login, size, "%s", value);
		else if (strcasecmp(machine, host) == 0 && strcmp(word, "password") == 0)
			snprintf(password, size, "%s", value);
		if (login[0] && password[0]) {
			found = 0;
			break;
		}
	}
	if (f)
		fclose(f);
	explicit_bzero(word, sizeof(word));
	return found;
}

/* libgit2 asks when the host wants credentials: the server's
 * (build_source_credentials, for the host of the URL asked, redirects
 * included), offered once. */
static int fetch_credentials(git_credential **out, const char *url, const char *user_from_url, unsigned int allowed,
			     void *payload)
{
	(void)user_from_url;
	int *asked = payload;
	char host[256], login[512], password[512];
	int rc = GIT_PASSTHROUGH;
	if ((*asked)++ || !(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) || url_host(url, host, sizeof(host)) < 0)
		return GIT_PASSTHROUGH;
	if (netrc_lookup(farm_settings.source_credentials, host, login, password, sizeof(login)) == 0)
		rc = git_credential_userpass_plaintext_new(out, login, password);
	explicit_bzero(password, sizeof(password));
	return rc;
}

/* Every branch and tag of the URL into git, under the fetch limits and
 * address checks; 0 or KHUB_ENOTFOUND (the reason remembered). */
static int fetch_into(git_repository *git, const char *url)
{
	git_remote *remote = NULL;
	char *refspecs[] = { "+refs/heads/*:refs/khub/heads/*", "+refs/tags/*:refs/khub/tags/*" };
	git_strarray specs = { refspecs, 2 };
	/* the URL as given, never rewritten by url.*.insteadOf (libgit2 1.5
	 * also leaks a regex match per config entry it checks) */
	git_remote_create_options ropts = GIT_REMOTE_CREATE_OPTIONS_INIT;
	ropts.repository = git;
	ropts.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	if (git_remote_create_with_opts(&remote, url, &ropts) < 0) {
		remember_failure(url, "not a git URL libgit2 can fetch");
		return KHUB_ENOTFOUND;
	}
	git_fetch_options opts = GIT_FETCH_OPTIONS_INIT;
	int asked = 0;
	opts.callbacks.credentials = fetch_credentials;
	opts.callbacks.payload = &asked;
	source_net_begin();
	int rc = git_remote_fetch(remote, &specs, &opts, "khub build source") < 0 ? KHUB_ENOTFOUND : 0;
	source_net_end();
	if (rc < 0) {
		const git_error *e = git_error_last();
		const char *why = source_net_failure()[0] ? source_net_failure() : e && e->message ? e->message : "?";
		char *shown = build_source_url_public(url);
		log_warn("build source %s: fetch failed: %s", shown, why);
		free(shown);
		remember_failure(url, why);
	}
	git_remote_free(remote);
	return rc;
}

/* Every branch and tag of the URL into its bare repo. A first fetch goes
 * to a temporary folder renamed into place once it worked, so a failed one
 * leaves nothing; a failed refetch keeps what the last one got. */
static int fetch_run(void *arg)
{
	struct fetch_job *job = arg;
	char *dir = build_source_dir(job->url), *tmp = NULL;
	git_repository *git = NULL;
	int rc = KHUB_EIO;
	if (mkdir_p(farm_settings.sources_dir, 0755) < 0)
		goto cleanup;
	if (git_repository_open_bare(&git, dir) < 0) {
		tmp = xasprintf("%s.new-XXXXXX", dir);
		if (!mkdtemp(tmp) || git_repository_init(&git, tmp, 1) < 0) {
			free(tmp);
			tmp = NULL;
			goto cleanup;
		}
	}
	rc = fetch_into(git, job->url);
	git_repository_free(git);
	git = NULL;
	if (tmp && rc == 0 && rename(tmp, dir) < 0) {
		log_warn("build source %s: cannot rename it into place: %s", dir, strerror(errno));
		rc = KHUB_EIO;
	}
cleanup:
	if (tmp && rc < 0)
		remove_tree(tmp);
	git_repository_free(git);
	free(tmp);
	free(dir);
	return rc;
}

void build_source_fetch_job(const char *url, struct farm_job *job)
{
	char hash[65];
	sha256_hex(url, strlen(url), hash);
	snprintf(job->key, sizeof(job->key), "build-source/%.24s", hash);
	struct fetch_job *arg = xcalloc(1, sizeof(*arg));
	arg->url = xstrdup(url);
	job->run = fetch_run;
	job->free_arg = fetch_job_free;
	job->arg = arg;
}

static int commit_has_build_toml(git_repository *git, const char *sha)
{
	struct tree_entry st;
	memset(&st, 0, sizeof(st));
	int rc = repo_stat_path(git, sha, "build.toml", &st);
	int found = rc == 0 && !st.is_dir;
	if (rc == 0)
		tree_entry_release(&st);
	return found;
}

int build_source_commit(const char *url, const char *rev, int fetch_rc, char sha[41], char *why, size_t why_size)
{
	git_repository *git = NULL;
	char *shown = build_source_url_public(url);
	int rc = FARM_EREFUSED;
	if (fetch_rc < 0 || build_source_open(url, &git) < 0) {
		char failure[300];
		build_source_fetch_error(url, failure, sizeof(failure));
		snprintf(why, why_size, "cannot fetch %s%s%s", shown, failure[0] ? ": " : "", failure);
		goto cleanup;
	}
	rc = build_source_resolve(git, rev, sha);
	int has_toml = rc == 0 && commit_has_build_toml(git, sha);
	if (rc < 0) {
		snprintf(why, why_size, "%s has no branch, tag or commit %s", shown, rev);
		rc = KHUB_ENOTFOUND;
	} else if (!has_toml) {
		snprintf(why, why_size, "%s at %s has no build.toml at its root: nothing to build", shown, rev);
		rc = FARM_EREFUSED;
	}
cleanup:
	git_repository_free(git);
	free(shown);
	return rc;
}

int build_open_job_source(const struct build_row *b, git_repository **out)
{
	if (b->source_url)
		return build_source_open(b->source_url, out);
	return repo_store_open(farm_settings.repo_root, REPO_KERNEL, b->ns, b->name, out);
}
