/* git_http.c -- git smart HTTP ({prefix}{ns}/{name}[.git]/info/refs,
 * git-upload-pack, git-receive-pack) through Debian's `git http-backend`
 * as a CGI child: khub authenticates and authorises, streams the request
 * body into the child and its answer back out (packs never sit in memory).
 * Pushes are checked by `khub hook pre-receive` (paths, LFS objects) and
 * recorded by `khub hook post-receive` (audit, last-modified). */
#include "api/api.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_SILENCE_MS (120 * 1000)

struct git_cgi {
	pid_t pid;
	int to_child;		/* child's stdin, -1 once closed */
	int from_child;		/* child's stdout */
	int receive;		/* receive-pack (a push) */
	uint64_t *bytes_out;
	struct repo_handle repo;
	char repo_id[2 * REPO_NAME_MAX + 16];
};

static enum MHD_Result need_credentials(struct request *req, int status, const char *msg)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
	if (status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Basic realm=\"khub\"");
	return respond(req, status, resp);
}

/* Authorise and open: upload-pack needs read, receive-pack write. Git
 * clients send credentials only after a 401 with a Basic challenge, so an
 * anonymous push, or an anonymous read of a repo anonymous callers cannot
 * see, gets that challenge rather than a 404. */
static int git_authorize(struct request *req, int receive, struct repo_handle *h, enum MHD_Result *result)
{
	if (!req->principal.user_id) {
		struct repo_record rec;
		int rc = receive ? KHUB_ENOTFOUND : db_repo_get(req->type, req->ns, req->name, &rec);
		if (rc == KHUB_ENOTFOUND && !receive && req->type == REPO_MODEL)
			rc = db_repo_get(REPO_KERNEL, req->ns, req->name, &rec);
		if (rc == KHUB_EDB) {
			*result = respond_db_unavailable(req);
			return -1;
		}
		if (rc < 0 || rec.private) {
			*result = need_credentials(req, 401, "Authentication required: use a khub token as the password\n");
			return -1;
		}
	}
	if (!receive)
		return repo_open_for_read(req, h, result);
	return repo_open_for_write(req, h, ROLE_WRITE, result);
}

static void env_add(struct strvec *env, const char *key, const char *value)
{
	if (value)
		strvec_pushf(env, "%s=%s", key, value);
}

#define CGI_PATH "/usr/local/bin:/usr/bin:/bin"

/* git's path, looked up once (no PATH search between fork and exec) */
static char *git_path_found;
static pthread_once_t git_once = PTHREAD_ONCE_INIT;

static void find_git(void)
{
	git_path_found = spawn_find_program("git", CGI_PATH);
}

/* Start `git http-backend` with the CGI environment, all of it built
 * before the fork (common/spawn.c). */
static int spawn_backend(struct request *req, struct git_cgi *cgi, const char *service_path)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	struct strvec env = STRVEC_INIT;
	static const char *const keep[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "LD_LIBRARY_PATH",
					    "TMPDIR" };
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		env_add(&env, keep[i], getenv(keep[i]));
	env_add(&env, "PATH", CGI_PATH);
	env_add(&env, "GIT_PROJECT_ROOT", api_ctx.repo_root);
	env_add(&env, "GIT_HTTP_EXPORT_ALL", "1");
	strvec_pushf(&env, "PATH_INFO=/%s/%s/%s.git/%s", repo_type_plural(cgi->repo.record.type),
		     cgi->repo.record.ns, cgi->repo.record.name, service_path);
	const char *query = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "service");
	if (query)
		strvec_pushf(&env, "QUERY_STRING=service=%s", query);
	else
		env_add(&env, "QUERY_STRING", "");
	env_add(&env, "REQUEST_METHOD", req->method_name);
	env_add(&env, "CONTENT_TYPE", request_header(req, "Content-Type"));
	env_add(&env, "HTTP_CONTENT_ENCODING", request_header(req, "Content-Encoding"));
	env_add(&env, "GIT_PROTOCOL", request_header(req, "Git-Protocol"));
	env_add(&env, "REMOTE_ADDR", req->remote_addr);
	if (req->principal.user_id)
		env_add(&env, "REMOTE_USER", req->principal.name);
	/* http-backend reads CONTENT_LENGTH bytes, or to EOF without it */
	const char *cl = request_header(req, "Content-Length");
	if (cl && !request_header(req, "Content-Encoding"))
		env_add(&env, "CONTENT_LENGTH", cl);
	/* git configuration for this request, as GIT_CONFIG_KEY_n/VALUE_n */
	const struct { const char *key, *value; } config[] = {
		/* hooks: khub's own, with what they need to check a push */
		{ "core.hooksPath", api_ctx.hooks_dir },
		{ "receive.denyDeleteCurrent", "true" },
		{ "uploadpack.allowFilter", "true" },
		/* a mirror's staging refs are nobody's business */
		{ "uploadpack.hideRefs", "refs/khub-upstream" },
		/* git's own tree checks, as errors: '.git' in any spelling a
		 * checkout would honour (NTFS 'git~1', '.git.', HFS ignorables),
		 * '.' and '..', also as directory names the hook's diff never shows */
		{ "receive.fsckObjects", "true" },
		{ "receive.fsck.hasDotgit", "error" },
		{ "receive.fsck.hasDot", "error" },
		{ "receive.fsck.hasDotdot", "error" },
	};
	size_t nconfig = sizeof(config) / sizeof(config[0]);
	strvec_pushf(&env, "GIT_CONFIG_COUNT=%zu", nconfig);
	for (size_t i = 0; i < nconfig; i++) {
		strvec_pushf(&env, "GIT_CONFIG_KEY_%zu=%s", i, config[i].key);
		strvec_pushf(&env, "GIT_CONFIG_VALUE_%zu=%s", i, config[i].value);
	}
	env_add(&env, "KHUB_HOOK_DATABASE", api_ctx.conninfo);
	env_add(&env, "KHUB_HOOK_LFS_ROOT", api_ctx.lfs_root);
	env_add(&env, "KHUB_HOOK_REPO", cgi->repo_id);
	strvec_pushf(&env, "KHUB_HOOK_REPO_ID=%lld", (long long)cgi->repo.record.id);
	strvec_pushf(&env, "KHUB_HOOK_USER_ID=%lld", (long long)req->principal.user_id);
	env_add(&env, "KHUB_HOOK_USER", req->principal.user_id ? req->principal.name : "anonymous");
	env_add(&env, "KHUB_HOOK_REQUEST_ID", req->request_id);
	env_add(&env, "KHUB_HOOK_BUILD_VARIANTS", api_ctx.builds.variants_file ? api_ctx.builds.variants_file : "");
	strvec_pushf(&env, "KHUB_HOOK_BUILD_ATTEMPTS=%ld", api_ctx.builds.max_attempts);

	pthread_once(&git_once, find_git);
	char *argv[] = { git_path_found ? git_path_found : "git", "http-backend", NULL };
	struct spawn_opts opts = { .argv = argv, .envp = env.items, .fd_in = in[0], .fd_out = out[1], .fd_err = -1 };
	pid_t pid = -1;
	int rc = git_path_found ? spawn_process(&opts, &pid) : -1;
	if (!git_path_found)
		log_error("git is not installed in %s", CGI_PATH);
	strvec_release(&env);
	close(in[0]);
	close(out[1]);
	if (rc < 0) {
		close(in[1]);
		close(out[0]);
		return -1;
	}
	cgi->pid = pid;
	cgi->to_child = in[1];
	cgi->from_child = out[0];
	return 0;
}

static void cgi_free(struct git_cgi *cgi)
{
	if (!cgi)
		return;
	if (cgi->to_child >= 0)
		close(cgi->to_child);
	if (cgi->from_child >= 0)
		close(cgi->from_child);
	if (cgi->pid > 0) {
		int status;
		if (waitpid(cgi->pid, &status, WNOHANG) == 0) {
			kill(cgi->pid, SIGTERM);
			waitpid(cgi->pid, &status, 0);
		}
	}
	free(cgi);
}

/* Wait until the child has output; 0 when it stayed silent too long (a
 * stuck git must not hold a server thread forever). */
static int child_readable(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	for (;;) {
		int rc = poll(&p, 1, CHILD_SILENCE_MS);
		if (rc > 0)
			return 1;
		if (rc == 0)
			return 0;
		if (errno != EINTR)
			return 1;	/* let read() report it */
	}
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct git_cgi *cgi = cls;
	for (;;) {
		if (!child_readable(cgi->from_child)) {
			log_error("git http-backend sent nothing for %d s: giving up", CHILD_SILENCE_MS / 1000);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		ssize_t n = read(cgi->from_child, buf, max);
		if (n > 0) {
			*cgi->bytes_out += (uint64_t)n;
			return n;
		}
		if (n == 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (errno != EINTR)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
}

static void free_body(void *cls)
{
	cgi_free(cls);
}

/* Read the CGI header block, then hand the rest of the child's output to
 * libmicrohttpd as a streamed (chunked) body. Takes ownership of cgi. */
static enum MHD_Result relay_answer(struct request *req, struct git_cgi *cgi)
{
	if (cgi->to_child >= 0) {
		close(cgi->to_child);
		cgi->to_child = -1;
	}
	struct strbuf head = STRBUF_INIT;
	char c;
	int status = 200;
	/* byte by byte up to the blank line: the rest stays in the pipe */
	while (head.len < 16384) {
		if (!child_readable(cgi->from_child)) {
			log_error("git http-backend sent no headers for %d s: giving up", CHILD_SILENCE_MS / 1000);
			break;
		}
		ssize_t n = read(cgi->from_child, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		strbuf_add(&head, &c, 1);
		if (head.len >= 2 && head.buf[head.len - 1] == '\n' &&
		    (head.buf[head.len - 2] == '\n' ||
		     (head.len >= 4 && memcmp(head.buf + head.len - 4, "\r\n\r\n", 4) == 0)))
			break;
	}
	if (!head.len) {
		strbuf_release(&head);
		cgi_free(cgi);
		return respond_error(req, 500, NULL, "git http-backend gave no answer");
	}
	cgi->bytes_out = &req->bytes_out;
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, read_body, cgi,
								      free_body);
	char *save = NULL;
	for (char *line = strtok_r(head.buf, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		char *value = colon + 1;
		while (*value == ' ')
			value++;
		if (strcasecmp(line, "Status") == 0)
			status = atoi(value);
		else
			MHD_add_response_header(resp, line, value);
	}
	strbuf_release(&head);
	return respond(req, status ? status : 200, resp);
}

/* ---- GET info/refs ------------------------------------------------------------ */

static enum MHD_Result handle_info_refs(struct request *req)
{
	enum MHD_Result result;
	const char *service = request_query(req, "service");
	if (!service || (strcmp(service, "git-upload-pack") != 0 && strcmp(service, "git-receive-pack") != 0))
		return respond_error(req, 403, NULL, "smart HTTP only: ?service=git-upload-pack or git-receive-pack");
	struct git_cgi *cgi = xcalloc(1, sizeof(*cgi));
	cgi->to_child = cgi->from_child = -1;
	cgi->receive = strcmp(service, "git-receive-pack") == 0;
	if (git_authorize(req, cgi->receive, &cgi->repo, &result) < 0) {
		cgi_free(cgi);
		return result;
	}
	snprintf(cgi->repo_id, sizeof(cgi->repo_id), "%s/%s", cgi->repo.record.ns, cgi->repo.record.name);
	if (spawn_backend(req, cgi, "info/refs") < 0) {
		cgi_free(cgi);
		return respond_error(req, 500, NULL, "cannot start git http-backend");
	}
	return relay_answer(req, cgi);
}

/* ---- POST git-upload-pack / git-receive-pack (streamed) ------------------------ */

static int rpc_begin(struct request *req)
{
	enum MHD_Result result;
	struct git_cgi *cgi = xcalloc(1, sizeof(*cgi));
	cgi->to_child = cgi->from_child = -1;
	req->stream_state = cgi;
	const char *last = req->segv[req->segc - 1];
	cgi->receive = strcmp(last, "git-receive-pack") == 0;
	if (git_authorize(req, cgi->receive, &cgi->repo, &result) < 0)
		return -1;
	snprintf(cgi->repo_id, sizeof(cgi->repo_id), "%s/%s", cgi->repo.record.ns, cgi->repo.record.name);
	if (spawn_backend(req, cgi, last) < 0) {
		respond_error(req, 500, NULL, "cannot start git http-backend");
		return -1;
	}
	return 0;
}

static int rpc_data(struct request *req, const char *data, size_t len)
{
	struct git_cgi *cgi = req->stream_state;
	while (len > 0) {
		ssize_t n = write(cgi->to_child, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;	/* the child went away; its answer says why */
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static void rpc_cleanup(struct request *req)
{
	cgi_free(req->stream_state);
	req->stream_state = NULL;
}

static enum MHD_Result handle_rpc(struct request *req)
{
	struct git_cgi *cgi = req->stream_state;
	req->stream_state = NULL;	/* relay_answer owns it now */
	return relay_answer(req, cgi);
}

static const struct stream_ops rpc_stream_ops = { rpc_begin, rpc_data, rpc_cleanup };

/* ACCESS_GIT: the handler decides per service (git_authorize): info/refs
 * and upload-pack read, receive-pack write; an anonymous caller who needs
 * more gets a Basic challenge, not a 404. A bad token is 401 before. */
const struct route git_routes[] = {
	{ METHOD_GET, "/{tprefix}/{ns}/{gname}/info/refs", handle_info_refs, ROUTE_GIT, 0, NULL, ACCESS_GIT },
	{ METHOD_POST, "/{tprefix}/{ns}/{gname}/git-upload-pack", handle_rpc, ROUTE_GIT, 0,
	  &rpc_stream_ops, ACCESS_GIT },
	{ METHOD_POST, "/{tprefix}/{ns}/{gname}/git-receive-pack", handle_rpc, ROUTE_GIT, 0,
	  &rpc_stream_ops, ACCESS_GIT },
	{ METHOD_GET, "/{ns}/{gname}/info/refs", handle_info_refs, ROUTE_GIT, REPO_MODEL, NULL, ACCESS_GIT },
	{ METHOD_POST, "/{ns}/{gname}/git-upload-pack", handle_rpc, ROUTE_GIT, REPO_MODEL,
	  &rpc_stream_ops, ACCESS_GIT },
	{ METHOD_POST, "/{ns}/{gname}/git-receive-pack", handle_rpc, ROUTE_GIT, REPO_MODEL,
	  &rpc_stream_ops, ACCESS_GIT },
	{ 0, NULL, NULL, 0, 0, NULL },
};
