/* git_http.c -- git smart HTTP ({prefix}{ns}/{name}[.git]/info/refs,
 * git-upload-pack, git-receive-pack) through Debian's `git http-backend`
 * as a CGI child: khub authenticates and authorises, streams the request
 * body into the child and its answer back out (packs never sit in memory).
 * The pipes are non-blocking: while git thinks (counting objects, indexing
 * a pack) the request waits parked on the pipe, holding no server thread.
 * Pushes are checked by `khub hook pre-receive` (paths, LFS objects) and
 * recorded by `khub hook post-receive` (audit, last-modified), which hands
 * the builds to plan to this server's push planner through a file made
 * per push: they are submitted once the push ended, never planned in it. */
#include "api/api.h"
#include "farm/farm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_SILENCE_MS (120 * 1000)

struct git_cgi {
	pid_t pid;
	int to_child;		/* child's stdin, -1 once closed */
	int from_child;		/* child's stdout */
	int receive;		/* receive-pack (a push) */
	uint64_t last_io_usec;	/* the child last took or gave bytes */
	struct strbuf head;	/* its CGI header block, as read so far */
	size_t body_start;	/* where the body starts in head (0: not yet) */
	size_t body_sent;	/* of head's body bytes, how many were relayed */
	struct MHD_Connection *conn;
	uint64_t *bytes_out;
	struct repo_handle repo;
	char repo_id[2 * REPO_NAME_MAX + 16];
	int plan_fd;		/* a push's: the plans its hook hands over, -1 when none */
	char *plan_path;
};

static enum MHD_Result need_credentials(struct request *req, int status, const char *msg)
{
	struct answer a;
	answer_init(&a, status);
	answer_header(&a, "Content-Type", "text/plain; charset=utf-8");
	if (status == 401)
		answer_header(&a, "WWW-Authenticate", "Basic realm=\"khub\"");
	answer_body_copy(&a, msg, strlen(msg));
	return answer_send(req, &a);
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

/* The pipes to the child (in) and from it (out): 0, or -1 with none open. */
static int open_pipes(int in[2], int out[2])
{
	if (pipe2(in, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	return 0;
}

/* The CGI variables http-backend reads, from the request. */
static void cgi_env(struct strvec *env, struct request *req, const struct git_cgi *cgi, const char *service_path)
{
	static const char *const keep[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "LD_LIBRARY_PATH",
					    "TMPDIR" };
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		env_add(env, keep[i], getenv(keep[i]));
	env_add(env, "PATH", CGI_PATH);
	env_add(env, "GIT_PROJECT_ROOT", api_ctx.repo_root);
	env_add(env, "GIT_HTTP_EXPORT_ALL", "1");
	strvec_pushf(env, "PATH_INFO=/%s/%s/%s.git/%s", repo_type_plural(cgi->repo.record.type),
		     cgi->repo.record.ns, cgi->repo.record.name, service_path);
	const char *query = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "service");
	if (query)
		strvec_pushf(env, "QUERY_STRING=service=%s", query);
	else
		env_add(env, "QUERY_STRING", "");
	env_add(env, "REQUEST_METHOD", req->method_name);
	env_add(env, "CONTENT_TYPE", request_header(req, "Content-Type"));
	env_add(env, "HTTP_CONTENT_ENCODING", request_header(req, "Content-Encoding"));
	env_add(env, "GIT_PROTOCOL", request_header(req, "Git-Protocol"));
	env_add(env, "REMOTE_ADDR", req->remote_addr);
	if (req->principal.user_id)
		env_add(env, "REMOTE_USER", req->principal.name);
	/* http-backend reads CONTENT_LENGTH bytes, or to EOF without it */
	const char *cl = request_header(req, "Content-Length");
	if (cl && !request_header(req, "Content-Encoding"))
		env_add(env, "CONTENT_LENGTH", cl);
}

/* git configuration for this request, as GIT_CONFIG_KEY_n/VALUE_n. */
static void git_config_env(struct strvec *env)
{
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
	strvec_pushf(env, "GIT_CONFIG_COUNT=%zu", nconfig);
	for (size_t i = 0; i < nconfig; i++) {
		strvec_pushf(env, "GIT_CONFIG_KEY_%zu=%s", i, config[i].key);
		strvec_pushf(env, "GIT_CONFIG_VALUE_%zu=%s", i, config[i].value);
	}
}

/* Fork and exec http-backend with env (released) on the pipes (the
 * child's ends closed here): 0 with cgi's ends set non-blocking, or -1
 * with every end closed. */
static int start_backend(struct request *req, struct git_cgi *cgi, struct strvec *env, int in[2], int out[2])
{
	pthread_once(&git_once, find_git);
	char *argv[] = { git_path_found ? git_path_found : "git", "http-backend", NULL };
	struct spawn_opts opts = { .argv = argv, .envp = env->items, .fd_in = in[0], .fd_out = out[1], .fd_err = log_child_stderr_fd() };
	pid_t pid = -1;
	int rc = git_path_found ? spawn_process(&opts, &pid) : -1;
	if (!git_path_found)
		log_error("git is not installed in %s", CGI_PATH);
	strvec_release(env);
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
	/* our ends only: the child's are other open files */
	fcntl(cgi->to_child, F_SETFL, fcntl(cgi->to_child, F_GETFL) | O_NONBLOCK);
	fcntl(cgi->from_child, F_SETFL, fcntl(cgi->from_child, F_GETFL) | O_NONBLOCK);
	cgi->conn = req->conn;
	cgi->last_io_usec = monotonic_usec();
	return 0;
}

/* A push's file for the plans of its hook (farm/build_planner.c): made
 * here, so that the server, not the hook, plans them once the push was
 * answered; with the URL where the pusher sees the builds. */
static void plan_file_open(struct request *req, struct git_cgi *cgi, struct strvec *env)
{
	cgi->plan_path = xasprintf("%s/push-plans-XXXXXX", lfs_store_tmp_dir(api_ctx.lfs));
	cgi->plan_fd = mkostemp(cgi->plan_path, O_CLOEXEC);
	if (cgi->plan_fd >= 0)	/* while held, lfs_store_clean_tmp leaves it */
		flock(cgi->plan_fd, LOCK_EX | LOCK_NB);
	if (cgi->plan_fd < 0) {
		log_error("cannot create %s: %s", cgi->plan_path, strerror(errno));
		strvec_pushf(env, "KHUB_HOOK_PLAN_FILE=/nonexistent");	/* the hook says it cannot plan */
		free(cgi->plan_path);
		cgi->plan_path = NULL;
	} else {
		strvec_pushf(env, "KHUB_HOOK_PLAN_FILE=%s", cgi->plan_path);
	}
	strvec_pushf(env, "KHUB_HOOK_BUILDS_URL=%s/api/kernels/%s/%s/builds", request_base_url(req),
		     cgi->repo.record.ns, cgi->repo.record.name);
	/* the builds page, whose ?commit= is the pushed commit's matrix */
	strvec_pushf(env, "KHUB_HOOK_MATRIX_URL=%s/kernels/%s/%s/builds", request_base_url(req), cgi->repo.record.ns,
		     cgi->repo.record.name);
}

/* After the push: its hook's plans to the push planner. */
static void plan_file_take(struct git_cgi *cgi)
{
	if (cgi->plan_fd < 0)
		return;
	build_planner_take(cgi->plan_fd, cgi->repo.record.id);
	close(cgi->plan_fd);
	unlink(cgi->plan_path);
	free(cgi->plan_path);
	cgi->plan_fd = -1;
}

/* Start `git http-backend` with the CGI environment, all of it built
 * before the fork (common/spawn.c). */
static int spawn_backend(struct request *req, struct git_cgi *cgi, const char *service_path)
{
	int in[2], out[2];
	if (open_pipes(in, out) < 0)
		return -1;
	struct strvec env = STRVEC_INIT;
	cgi_env(&env, req, cgi, service_path);
	git_config_env(&env);
	/* what khub's hooks need to check and publish a push */
	env_add(&env, "KHUB_HOOK_DATABASE", api_ctx.conninfo);
	env_add(&env, "KHUB_HOOK_LFS_ROOT", api_ctx.lfs_root);
	for (char **e = api_ctx.lfs_env; e && *e; e++)
		strvec_pushf(&env, "%s", *e);
	env_add(&env, "KHUB_HOOK_REPO", cgi->repo_id);
	strvec_pushf(&env, "KHUB_HOOK_REPO_ID=%lld", (long long)cgi->repo.record.id);
	strvec_pushf(&env, "KHUB_HOOK_USER_ID=%lld", (long long)req->principal.user_id);
	env_add(&env, "KHUB_HOOK_USER", req->principal.user_id ? req->principal.name : "anonymous");
	env_add(&env, "KHUB_HOOK_REQUEST_ID", req->request_id);
	env_add(&env, "KHUB_HOOK_BUILD_VARIANTS", farm_settings.variants_file ? farm_settings.variants_file : "");
	strvec_pushf(&env, "KHUB_HOOK_BUILD_ATTEMPTS=%ld", farm_settings.max_attempts);
	strvec_pushf(&env, "KHUB_HOOK_BUILD_QUEUE=%ld,%ld,%ld", farm_settings.queue_per_repo,
		     farm_settings.queue_per_user, farm_settings.variants_per_request);
	strvec_pushf(&env, "KHUB_HOOK_BUILD_LIVE=%ld", farm_settings.worker_live_seconds);
	env_add(&env, "KHUB_HOOK_BUILD_PYTHON", farm_settings.plan_python ? farm_settings.plan_python : "python3");
	strvec_pushf(&env, "KHUB_HOOK_BUILD_PLAN_MS=%ld", farm_settings.plan_wall_ms);
	if (strcmp(service_path, "git-receive-pack") == 0)
		plan_file_open(req, cgi, &env);

	return start_backend(req, cgi, &env, in, out);
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
	plan_file_take(cgi);	/* the push ended: its answer was sent */
	strbuf_release(&cgi->head);
	free(cgi);
}

static void cgi_free_state(void *state)
{
	cgi_free(state);
}

static struct git_cgi *cgi_new(void)
{
	struct git_cgi *cgi = xcalloc(1, sizeof(*cgi));
	cgi->to_child = cgi->from_child = cgi->plan_fd = -1;
	strbuf_init(&cgi->head);
	return cgi;
}

/* How long the child may still stay silent before we give up on it (a
 * stuck git must not hold a connection forever): ms, 0 when past. */
static unsigned silence_left_ms(const struct git_cgi *cgi)
{
	uint64_t quiet_ms = (monotonic_usec() - cgi->last_io_usec) / 1000u;
	return quiet_ms >= CHILD_SILENCE_MS ? 0 : (unsigned)(CHILD_SILENCE_MS - quiet_ms);
}

/* The pipe fd is not ready: park until it is (req NULL from the response's
 * reader, which parks the connection itself). -1 when the child has been
 * silent too long or the server stops: give up on it. */
static int wait_for_child(struct request *req, struct git_cgi *cgi, int fd, short events, const char *waiting_for)
{
	unsigned left = silence_left_ms(cgi);
	if (!left || request_park_closing()) {
		log_error("git http-backend: no %s for %d s: giving up", waiting_for, CHILD_SILENCE_MS / 1000);
		return -1;
	}
	if (req)
		request_park_fd(req, fd, events, left);	/* answered 503 when it cannot wait */
	else if (park_connection(cgi->conn, NULL, fd, events, left) < 0)
		return -1;
	return 0;
}

/* The body after the headers: what was read with them first, then the
 * pipe. Nothing to read yet: park the connection on the pipe and give
 * libmicrohttpd nothing (it calls again once resumed). */
static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct git_cgi *cgi = cls;
	(void)pos;
	size_t buffered = cgi->head.len - cgi->body_start - cgi->body_sent;
	if (buffered) {
		size_t n = buffered < max ? buffered : max;
		memcpy(buf, cgi->head.buf + cgi->body_start + cgi->body_sent, n);
		cgi->body_sent += n;
		*cgi->bytes_out += n;
		return (ssize_t)n;
	}
	for (;;) {
		ssize_t n = read(cgi->from_child, buf, max);
		if (n > 0) {
			cgi->last_io_usec = monotonic_usec();
			*cgi->bytes_out += (uint64_t)n;
			return n;
		}
		if (n == 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || wait_for_child(NULL, cgi, cgi->from_child, POLLIN, "output") < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		return 0;	/* parked: called again once the pipe has something */
	}
}

static void free_body(void *cls)
{
	cgi_free(cls);
}

/* The end of the CGI header block in head, or 0 when not there yet. */
static size_t header_end(const struct strbuf *head)
{
	for (size_t i = 1; i < head->len; i++) {
		if (head->buf[i] != '\n')
			continue;
		if (head->buf[i - 1] == '\n')
			return i + 1;
		if (i >= 3 && memcmp(head->buf + i - 3, "\r\n\r\n", 4) == 0)
			return i + 1;
	}
	return 0;
}

/* Read the child's CGI header block (req->handler_state is the child),
 * then hand the rest of its output to libmicrohttpd as a streamed
 * (chunked) body. While the headers are not all there, the request waits
 * parked on the pipe and this runs again. */
static enum MHD_Result relay_answer(struct request *req)
{
	struct git_cgi *cgi = req->handler_state;
	if (cgi->to_child >= 0) {
		close(cgi->to_child);
		cgi->to_child = -1;
	}
	while (!cgi->body_start && cgi->head.len < 16384) {
		char buf[4096];
		ssize_t n = read(cgi->from_child, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (wait_for_child(req, cgi, cgi->from_child, POLLIN, "headers") < 0)
				break;
			return MHD_YES;
		}
		if (n <= 0)
			break;
		cgi->last_io_usec = monotonic_usec();
		strbuf_add(&cgi->head, buf, (size_t)n);
		cgi->body_start = header_end(&cgi->head);
	}
	if (!cgi->head.len)
		return respond_error(req, 500, NULL, "git http-backend gave no answer");
	if (!cgi->body_start)
		cgi->body_start = cgi->head.len;	/* no blank line: all of it is headers */
	req->handler_state = NULL;	/* the response's now */
	cgi->bytes_out = &req->bytes_out;
	struct answer a;
	answer_init(&a, 200);
	answer_body_reader(&a, MHD_SIZE_UNKNOWN, 64 * 1024, read_body, cgi, free_body);
	int status = 200;
	char *headers = xstrndup(cgi->head.buf, cgi->body_start);
	char *save = NULL;
	for (char *line = strtok_r(headers, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
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
			answer_header(&a, line, value);
	}
	a.status = status ? status : 200;
	enum MHD_Result r = answer_send(req, &a);
	free(headers);
	return r;
}

/* ---- GET info/refs ------------------------------------------------------------ */

static enum MHD_Result handle_info_refs(struct request *req)
{
	enum MHD_Result result;
	if (req->handler_state)	/* called again: the headers were not all there */
		return relay_answer(req);
	const char *service = request_query(req, "service");
	if (!service || (strcmp(service, "git-upload-pack") != 0 && strcmp(service, "git-receive-pack") != 0))
		return respond_error(req, 403, NULL, "smart HTTP only: ?service=git-upload-pack or git-receive-pack");
	struct git_cgi *cgi = cgi_new();
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
	req->handler_state = cgi;
	req->handler_state_free = cgi_free_state;
	return relay_answer(req);
}

/* ---- POST git-upload-pack / git-receive-pack (streamed) ------------------------ */

static int rpc_begin(struct request *req)
{
	enum MHD_Result result;
	struct git_cgi *cgi = cgi_new();
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

/* Into the child's stdin; a full pipe (git busy indexing) parks the
 * request on it with the rest of the piece left for later. */
static int rpc_data(struct request *req, const char *data, size_t len)
{
	struct git_cgi *cgi = req->stream_state;
	while (len > 0) {
		ssize_t n = write(cgi->to_child, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (wait_for_child(req, cgi, cgi->to_child, POLLOUT, "room in its input") < 0)
				return -1;
			req->stream_left = len;
			return 0;
		}
		if (n <= 0)
			return -1;	/* the child went away; its answer says why */
		cgi->last_io_usec = monotonic_usec();
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
	if (!req->handler_state) {
		req->handler_state = req->stream_state;	/* relay_answer's now */
		req->handler_state_free = cgi_free_state;
		req->stream_state = NULL;
	}
	return relay_answer(req);
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
