/* db.c -- one PostgreSQL connection per thread, queries with text
 * parameters, and the migration runner. */
#include "storage.h"
#include "storage/migrations.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static char *db_conninfo;
static __thread PGconn *thread_conn;
/* Bumped when the server was restarted: every thread's connection predates
 * it and is dead, though libpq only learns so from a failed query. */
static atomic_uint_fast64_t server_generation = 1;
static __thread uint64_t thread_generation;
static __thread char thread_error[256];
/* A thread that ends (an HTTP worker when the daemon stops) closes its
 * connection through this key's destructor. */
static pthread_key_t conn_key;
static pthread_once_t conn_key_once = PTHREAD_ONCE_INIT;

static void conn_at_thread_exit(void *conn)
{
	PQfinish(conn);
	thread_conn = NULL;
}

static void conn_key_create(void)
{
	pthread_key_create(&conn_key, conn_at_thread_exit);
}

static void set_thread_conn(PGconn *conn)
{
	pthread_once(&conn_key_once, conn_key_create);
	thread_conn = conn;
	pthread_setspecific(conn_key, conn);
}

void db_configure(const char *conninfo)
{
	free(db_conninfo);
	db_conninfo = xstrdup(conninfo);
}

void db_server_restarted(void)
{
	atomic_fetch_add(&server_generation, 1);
}

static void note_error(const char *msg)
{
	snprintf(thread_error, sizeof(thread_error), "%s", msg && msg[0] ? msg : "unknown error");
	for (char *p = thread_error; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	for (size_t n = strlen(thread_error); n > 0 && thread_error[n - 1] == ' '; n--)
		thread_error[n - 1] = '\0';
}

const char *db_last_error(void)
{
	return thread_error[0] ? thread_error : "unknown error";
}

PGconn *db_conn(void)
{
	uint64_t generation = atomic_load(&server_generation);
	if (thread_conn && thread_generation != generation) {
		PQfinish(thread_conn);
		set_thread_conn(NULL);
	}
	if (thread_conn && PQstatus(thread_conn) == CONNECTION_OK)
		return thread_conn;
	if (thread_conn) {
		PQreset(thread_conn);
		if (PQstatus(thread_conn) == CONNECTION_OK)
			return thread_conn;
		PQfinish(thread_conn);
		set_thread_conn(NULL);
	}
	if (!db_conninfo)
		return NULL;
	PGconn *conn = PQconnectdb(db_conninfo);
	if (PQstatus(conn) != CONNECTION_OK) {
		note_error(PQerrorMessage(conn));
		log_error("database: %s", thread_error);
		PQfinish(conn);
		return NULL;
	}
	PQclear(PQexec(conn, "SET client_min_messages = warning"));
	set_thread_conn(conn);
	thread_generation = generation;
	return conn;
}

void db_thread_done(void)
{
	if (thread_conn)
		PQfinish(thread_conn);
	set_thread_conn(NULL);
}

PGresult *db_exec(const char *sql, int nparams, const char *const *params, const char **sqlstate)
{
	static const char unreachable[] = "08006";
	if (sqlstate)
		*sqlstate = NULL;
	PGconn *conn = db_conn();
	if (!conn) {
		if (sqlstate)
			*sqlstate = unreachable;
		return NULL;
	}
	PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return res;
	/* A dead connection fails here (and is reset on the next call); the
	 * caller reports KHUB_EDB like any other database failure. */
	if (PQstatus(conn) != CONNECTION_OK && sqlstate)
		*sqlstate = unreachable;
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	note_error(res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
	if (sqlstate && state) {
		static __thread char state_copy[8];
		snprintf(state_copy, sizeof(state_copy), "%s", state);
		*sqlstate = state_copy;
	}
	/* Unique violations are answers, not failures. */
	if (!state || strcmp(state, "23505") != 0)
		log_error("database: %s", PQresultErrorMessage(res));
	PQclear(res);
	return NULL;
}

static int exec_simple(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok)
		log_error("migration: %s", PQresultErrorMessage(res));
	PQclear(res);
	return ok ? 0 : KHUB_EDB;
}

int db_migrate(void)
{
	PGconn *conn = db_conn();
	if (!conn)
		return KHUB_EDB;
	/* Several processes may migrate at once; one advisory lock orders them. */
	if (exec_simple(conn, "SELECT pg_advisory_lock(4242001)") < 0)
		return KHUB_EDB;
	int rc = exec_simple(conn, "CREATE TABLE IF NOT EXISTS schema_migrations ("
				   "version int PRIMARY KEY, name text NOT NULL,"
				   "applied_at timestamptz NOT NULL DEFAULT now())");
	for (size_t i = 0; rc == 0 && i < migration_count; i++) {
		const struct migration *m = &migrations[i];
		char version[16];
		snprintf(version, sizeof(version), "%d", m->version);
		const char *params[2] = { version, m->name };
		PGresult *res = PQexecParams(conn, "SELECT 1 FROM schema_migrations WHERE version = $1",
					     1, NULL, params, NULL, NULL, 0);
		int applied = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0;
		PQclear(res);
		if (applied)
			continue;
		log_info("applying migration %s", m->name);
		if ((rc = exec_simple(conn, "BEGIN")) < 0)
			break;
		rc = exec_simple(conn, m->sql);
		if (rc == 0) {
			res = PQexecParams(conn, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
					   2, NULL, params, NULL, NULL, 0);
			rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : KHUB_EDB;
			PQclear(res);
		}
		exec_simple(conn, rc == 0 ? "COMMIT" : "ROLLBACK");
	}
	exec_simple(conn, "SELECT pg_advisory_unlock(4242001)");
	return rc;
}

void db_array_add(struct strbuf *sb, const char *s)
{
	if (!s) {
		strbuf_adds(sb, "NULL");
		return;
	}
	strbuf_adds(sb, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			strbuf_add(sb, "\\", 1);
		strbuf_add(sb, s, 1);
	}
	strbuf_adds(sb, "\"");
}

/* ---- advisory locks ------------------------------------------------------------- */

/* Session-level locks on this thread's connection: (kind, id) pairs, so
 * the kinds never collide. The order when several are taken: registry,
 * then a repo's write lock. */
static int lock_query(const char *fn, enum db_lock kind, int64_t id, int *got)
{
	char k[16], i[24], sql[80];
	snprintf(k, sizeof(k), "%d", (int)kind);
	snprintf(i, sizeof(i), "%" PRId64, id);
	snprintf(sql, sizeof(sql), "SELECT %s($1::int, $2::int)", fn);
	const char *params[2] = { k, i };
	PGresult *res = db_exec(sql, 2, params, NULL);
	if (!res)
		return KHUB_EDB;
	if (got)
		*got = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	return 0;
}

int db_lock_try(enum db_lock kind, int64_t id)
{
	int got = 0;
	int rc = lock_query("pg_try_advisory_lock", kind, id, &got);
	return rc < 0 ? rc : got ? 0 : 1;
}

int db_lock_wait(enum db_lock kind, int64_t id)
{
	return lock_query("pg_advisory_lock", kind, id, NULL);
}

void db_unlock(enum db_lock kind, int64_t id)
{
	lock_query("pg_advisory_unlock", kind, id, NULL);
}
