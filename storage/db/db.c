/* db.c -- a bounded pool of PostgreSQL connections that threads borrow per
 * query (or keep while they hold an advisory lock or a transaction),
 * queries with text parameters, explicit transactions, advisory locks,
 * the migration runner, and the random secrets tokens are made of. */
#include "storage/db/db_internal.h"
#include "storage/db/migrations.h"

#include <assert.h>
#include <openssl/rand.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One pooled connection. conn is NULL until first borrowed; generation
 * is the server generation it was opened under. */
struct pool_slot {
	PGconn *conn;
	uint64_t generation;
	int in_use;
};

static char *db_conninfo;
static struct pool_slot *pool;
static size_t pool_size = 16;
static long pool_wait_ms = 2000;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

/* Bumped when the server was restarted: every connection opened before
 * is dead, though libpq only learns so from a failed query. */
static atomic_uint_fast64_t server_generation = 1;

/* The slot this thread borrowed, and why it keeps it: advisory locks held
 * and whether a transaction is open. While pinned (locks or tx) the slot is
 * never reset or swapped: a dead connection fails every call with
 * KHUB_EDB (broken) until the pins are released. */
static __thread struct pool_slot *thread_slot;
static uint64_t pool_waits, pool_wait_timeouts;	/* under pool_lock */
static __thread int thread_locks;
static __thread int thread_in_tx;
static __thread int thread_broken;
static __thread char thread_error[256];

/* The shared degraded flag: 0 while the database answers, else when
 * (wall-clock seconds) it stopped answering. */
static _Atomic int64_t down_since;
static atomic_uint_fast64_t outages;

static void pool_init(void)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&pool_cond, &attr);
	pthread_condattr_destroy(&attr);
}

void db_configure(const char *conninfo)
{
	pthread_once(&pool_once, pool_init);
	pthread_mutex_lock(&pool_lock);
	free(db_conninfo);
	db_conninfo = xstrdup(conninfo);
	if (!pool)
		pool = xcalloc(pool_size, sizeof(*pool));
	pthread_mutex_unlock(&pool_lock);
}

void db_pool_configure(long size, long wait_ms)
{
	pthread_once(&pool_once, pool_init);
	pthread_mutex_lock(&pool_lock);
	/* Only before the first connection: slots are never moved after. */
	int opened = 0;
	for (size_t i = 0; pool && i < pool_size; i++)
		opened |= pool[i].conn != NULL || pool[i].in_use;
	if (size >= 1 && !opened) {
		free(pool);
		pool_size = (size_t)size;
		pool = xcalloc(pool_size, sizeof(*pool));
	}
	if (wait_ms >= 0)
		pool_wait_ms = wait_ms;
	pthread_mutex_unlock(&pool_lock);
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

/* A connect failed or a query lost its connection. */
static void db_mark_down(void)
{
	int64_t expected = 0;
	if (atomic_compare_exchange_strong(&down_since, &expected, (int64_t)time(NULL))) {
		atomic_fetch_add(&outages, 1);
		log_warn("database: down (%s); serving what git and the caches can answer", thread_error);
	}
}

/* Close the idle pooled connections: those opened before an outage are
 * dead, though libpq only learns so from a failed query (a write's 503). */
static void pool_drop_idle(void)
{
	pthread_mutex_lock(&pool_lock);
	for (size_t i = 0; pool && i < pool_size; i++)
		if (!pool[i].in_use && pool[i].conn) {
			PQfinish(pool[i].conn);
			pool[i].conn = NULL;
		}
	pthread_mutex_unlock(&pool_lock);
}

/* A query succeeded: the database answers. */
static void db_mark_up(void)
{
	if (atomic_load_explicit(&down_since, memory_order_relaxed) != 0 && atomic_exchange(&down_since, 0) != 0) {
		log_info("database: answering again");
		pool_drop_idle();
	}
}

int db_is_down(time_t *since)
{
	int64_t at = atomic_load(&down_since);
	if (since)
		*since = (time_t)at;
	return at != 0;
}

uint64_t db_outages(void)
{
	return atomic_load(&outages);
}

static int pinned(void)
{
	return thread_locks > 0 || thread_in_tx;
}

/* Make slot's connection usable (connect, or replace a stale or dead one);
 * only for a slot no pin depends on. */
static int slot_connect(struct pool_slot *slot)
{
	uint64_t generation = atomic_load(&server_generation);
	if (slot->conn && slot->generation != generation) {
		PQfinish(slot->conn);
		slot->conn = NULL;
	}
	if (slot->conn && PQstatus(slot->conn) == CONNECTION_OK &&
	    PQtransactionStatus(slot->conn) == PQTRANS_IDLE)
		return 0;
	if (slot->conn) {
		/* Dead, or left inside a transaction: start afresh (locks and
		 * transactions of a connection end with it). */
		PQfinish(slot->conn);
		slot->conn = NULL;
	}
	if (!db_conninfo)
		return KHUB_EDB;
	PGconn *conn = PQconnectdb(db_conninfo);
	if (PQstatus(conn) != CONNECTION_OK) {
		note_error(PQerrorMessage(conn));
		log_error("database: %s", thread_error);
		PQfinish(conn);
		db_mark_down();
		return KHUB_EDB;
	}
	db_notices_to_log(conn);
	PQclear(PQexec(conn, "SET client_min_messages = warning"));
	slot->conn = conn;
	slot->generation = generation;
	return 0;
}

static void notice_to_log(void *arg, const char *message)
{
	(void)arg;
	size_t n = strlen(message);
	log_warn("database: %.*s", (int)(n && message[n - 1] == '\n' ? n - 1 : n), message);
}

void db_notices_to_log(PGconn *conn)
{
	PQsetNoticeProcessor(conn, notice_to_log, NULL);
}

/* This thread's connection: the pinned one, or one borrowed from the pool
 * (waiting up to db_pool_wait_ms for a free one). NULL on failure (noted). */
static PGconn *conn_get(void)
{
	if (thread_slot) {
		if (thread_broken) {
			note_error("the connection holding this thread's lock or transaction is gone");
			return NULL;
		}
		if (pinned() && (PQstatus(thread_slot->conn) != CONNECTION_OK ||
				 thread_slot->generation != atomic_load(&server_generation))) {
			thread_broken = 1;
			note_error("the connection holding this thread's lock or transaction is gone");
			return NULL;
		}
		if (!pinned() && slot_connect(thread_slot) < 0)
			return NULL;
		return thread_slot->conn;
	}
	pthread_once(&pool_once, pool_init);
	struct timespec until = clock_after_usec(CLOCK_MONOTONIC, (uint64_t)pool_wait_ms * 1000);
	struct pool_slot *slot = NULL;
	int waited = 0;
	pthread_mutex_lock(&pool_lock);
	while (pool) {
		/* Prefer a slot with a connection already open. */
		for (size_t i = 0; i < pool_size && !slot; i++)
			if (!pool[i].in_use && pool[i].conn)
				slot = &pool[i];
		for (size_t i = 0; i < pool_size && !slot; i++)
			if (!pool[i].in_use)
				slot = &pool[i];
		if (!slot && !waited++)
			pool_waits++;
		if (slot || pthread_cond_timedwait(&pool_cond, &pool_lock, &until) == ETIMEDOUT)
			break;
	}
	if (slot)
		slot->in_use = 1;
	else if (pool)
		pool_wait_timeouts++;
	pthread_mutex_unlock(&pool_lock);
	if (!slot) {
		note_error(pool ? "every database connection is in use" : "database not configured");
		log_warn("database: %s", thread_error);
		return NULL;
	}
	thread_slot = slot;
	if (slot_connect(slot) < 0) {
		thread_slot = NULL;
		pthread_mutex_lock(&pool_lock);
		slot->in_use = 0;
		pthread_cond_signal(&pool_cond);
		pthread_mutex_unlock(&pool_lock);
		return NULL;
	}
	return slot->conn;
}

/* Give the connection back unless a lock or transaction pins it. A
 * connection that broke while pinned is dropped here, once unpinned. */
static void conn_put(void)
{
	if (!thread_slot || pinned())
		return;
	struct pool_slot *slot = thread_slot;
	thread_slot = NULL;
	if (thread_broken && slot->conn) {
		PQfinish(slot->conn);
		slot->conn = NULL;
	}
	thread_broken = 0;
	pthread_mutex_lock(&pool_lock);
	slot->in_use = 0;
	pthread_cond_signal(&pool_cond);
	pthread_mutex_unlock(&pool_lock);
}


void db_thread_done(void)
{
	if (thread_slot && pinned()) {
		/* A lock or transaction left behind ends with its connection. */
		log_warn("database: thread exits holding %d lock(s)%s", thread_locks,
			 thread_in_tx ? " and a transaction" : "");
		PQfinish(thread_slot->conn);
		thread_slot->conn = NULL;
	}
	thread_locks = 0;
	thread_in_tx = 0;
	conn_put();
}

void db_shutdown(void)
{
	db_thread_done();
	pool_drop_idle();
}

int db_pool_stats(long *open, long *in_use)
{
	long o = 0, u = 0;
	pthread_mutex_lock(&pool_lock);
	for (size_t i = 0; pool && i < pool_size; i++) {
		o += pool[i].conn != NULL;
		u += pool[i].in_use;
	}
	pthread_mutex_unlock(&pool_lock);
	if (open)
		*open = o;
	if (in_use)
		*in_use = u;
	return 0;
}

void db_pool_waits(long *size, uint64_t *waits, uint64_t *timeouts)
{
	pthread_mutex_lock(&pool_lock);
	*size = (long)pool_size;
	*waits = pool_waits;
	*timeouts = pool_wait_timeouts;
	pthread_mutex_unlock(&pool_lock);
}

PGresult *db_exec(const char *sql, int nparams, const char *const *params, const char **sqlstate)
{
	static const char unreachable[] = "08006";
	if (sqlstate)
		*sqlstate = NULL;
	PGconn *conn = conn_get();
	if (!conn) {
		if (sqlstate)
			*sqlstate = unreachable;
		conn_put();
		return NULL;
	}
	PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
		conn_put();
		db_mark_up();
		return res;
	}
	/* A dead connection fails here; unpinned, it is replaced on its next
	 * borrowing; pinned, every call fails until the pins are released. */
	if (PQstatus(conn) != CONNECTION_OK) {
		if (sqlstate)
			*sqlstate = unreachable;
		if (pinned())
			thread_broken = 1;
	}
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	note_error(res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
	if (PQstatus(conn) != CONNECTION_OK)
		db_mark_down();
	if (sqlstate && state) {
		static __thread char state_copy[8];
		snprintf(state_copy, sizeof(state_copy), "%s", state);
		*sqlstate = state_copy;
	}
	/* Unique violations are answers, not failures. */
	if (!state || strcmp(state, "23505") != 0)
		log_error("database: %s", res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
	PQclear(res);
	conn_put();
	return NULL;
}

int db_run(const char *sql, int nparams, const char *const *params)
{
	PGresult *res = db_exec(sql, nparams, params, NULL);
	if (!res)
		return KHUB_EDB;
	PQclear(res);
	return 0;
}

int db_run_count(const char *sql, int nparams, const char *const *params)
{
	PGresult *res = db_exec(sql, nparams, params, NULL);
	if (!res)
		return KHUB_EDB;
	int changed = atoi(PQcmdTuples(res));
	PQclear(res);
	return changed;
}

int db_run_one(const char *sql, int nparams, const char *const *params)
{
	int changed = db_run_count(sql, nparams, params);
	return changed < 0 ? changed : changed == 1 ? 0 : KHUB_ENOTFOUND;
}

int db_run_id(const char *sql, int64_t id)
{
	char text[24];
	const char *params[1] = { db_param_int(text, id) };
	return db_run_count(sql, 1, params);
}

int db_ping(void)
{
	return db_run("SELECT 1", 0, NULL);
}

/* ---- transactions ------------------------------------------------------------- */

int db_tx_begin(void)
{
	assert(!thread_in_tx);
	if (thread_in_tx)
		return KHUB_EINVAL;
	PGconn *conn = conn_get();
	if (!conn) {
		conn_put();
		return KHUB_EDB;
	}
	thread_in_tx = 1;
	if (db_run("BEGIN", 0, NULL) < 0) {
		thread_in_tx = 0;
		conn_put();
		return KHUB_EDB;
	}
	return 0;
}

int db_tx_commit(void)
{
	assert(thread_in_tx);
	if (!thread_in_tx)
		return KHUB_EINVAL;
	int rc = db_run("COMMIT", 0, NULL);
	thread_in_tx = 0;
	conn_put();
	return rc;
}

void db_tx_rollback(void)
{
	if (!thread_in_tx)
		return;
	if (!thread_broken)
		db_run("ROLLBACK", 0, NULL);
	thread_in_tx = 0;
	conn_put();
}

/* ---- migrations ----------------------------------------------------------------- */

/* Several statements in one string (a migration file): PQexec on the
 * pinned connection. */
static int exec_script(const char *sql)
{
	PGconn *conn = conn_get();
	if (!conn)
		return KHUB_EDB;
	PGresult *res = PQexec(conn, sql);
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok) {
		note_error(PQresultErrorMessage(res));
		log_error("migration: %s", thread_error);
		if (PQstatus(conn) != CONNECTION_OK)
			thread_broken = 1;
	}
	PQclear(res);
	return ok ? 0 : KHUB_EDB;
}

int db_migrate(void)
{
	/* Several processes may migrate at once; one advisory lock orders them. */
	int rc = db_lock_wait(DB_LOCK_MIGRATIONS, 0);
	if (rc < 0)
		return rc;
	rc = db_run("CREATE TABLE IF NOT EXISTS schema_migrations ("
		    "version int PRIMARY KEY, name text NOT NULL,"
		    "applied_at timestamptz NOT NULL DEFAULT now())", 0, NULL);
	for (size_t i = 0; rc == 0 && i < migration_count; i++) {
		const struct migration *m = &migrations[i];
		char version[16];
		snprintf(version, sizeof(version), "%d", m->version);
		const char *params[2] = { version, m->name };
		PGresult *res = db_exec("SELECT 1 FROM schema_migrations WHERE version = $1", 1, params, NULL);
		if (!res) {
			rc = KHUB_EDB;
			break;
		}
		int applied = PQntuples(res) > 0;
		PQclear(res);
		if (applied)
			continue;
		log_info("applying migration %s", m->name);
		if ((rc = db_tx_begin()) < 0)
			break;
		rc = exec_script(m->sql);
		if (rc == 0)
			rc = db_run("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", 2, params);
		if (rc == 0)
			rc = db_tx_commit();
		else
			db_tx_rollback();
	}
	db_unlock(DB_LOCK_MIGRATIONS, 0);
	return rc;
}

/* ---- advisory locks ------------------------------------------------------------- */

/* Session-level locks on this thread's (then pinned) connection: (kind,
 * id) pairs, so the kinds never collide. The migration lock keeps the
 * single bigint key 4242001 it has always had (a separate key space in
 * PostgreSQL), so an older khub and this one never migrate at once. The
 * order when several are taken: registry, then a repo's write lock. */
#define MIGRATION_LOCK_KEY "4242001"

static int lock_query(const char *fn, enum db_lock kind, int64_t id, int *got)
{
	char k[24], i[24], sql[80];
	const char *params[2] = { k, i };
	int nparams = 2;
	if (kind == DB_LOCK_MIGRATIONS) {
		snprintf(sql, sizeof(sql), "SELECT %s($1::bigint)", fn);
		params[0] = MIGRATION_LOCK_KEY;
		nparams = 1;
	} else {
		db_param_int(k, kind);
		db_param_int(i, id);
		snprintf(sql, sizeof(sql), "SELECT %s($1::int, $2::int)", fn);
	}
	PGresult *res = db_exec(sql, nparams, params, NULL);
	if (!res)
		return KHUB_EDB;
	if (got)
		*got = PQgetvalue(res, 0, 0)[0] != 'f';
	PQclear(res);
	return 0;
}

/* Pin the connection before the query so that it is still this thread's
 * when the lock is taken; unpin when it was not. */
static int lock_take(const char *fn, enum db_lock kind, int64_t id, int *got)
{
	thread_locks++;
	int rc = lock_query(fn, kind, id, got);
	if (rc < 0 || (got && !*got)) {
		thread_locks--;
		conn_put();
	}
	return rc;
}

int db_lock_try(enum db_lock kind, int64_t id)
{
	int got = 0;
	int rc = lock_take("pg_try_advisory_lock", kind, id, &got);
	return rc < 0 ? rc : got ? 0 : 1;
}

int db_lock_wait(enum db_lock kind, int64_t id)
{
	return lock_take("pg_advisory_lock", kind, id, NULL);
}

void db_unlock(enum db_lock kind, int64_t id)
{
	assert(thread_locks > 0);
	if (thread_locks <= 0)
		return;
	/* On a broken connection the lock ended with it. */
	if (!thread_broken)
		lock_query("pg_advisory_unlock", kind, id, NULL);
	thread_locks--;
	conn_put();
}

int db_lock_xact(enum db_lock kind, int64_t id)
{
	assert(thread_in_tx);
	if (!thread_in_tx)
		return KHUB_EINVAL;
	return lock_query("pg_advisory_xact_lock", kind, id, NULL);
}

int db_lock_xact_shared(enum db_lock kind, int64_t id)
{
	assert(thread_in_tx);
	if (!thread_in_tx)
		return KHUB_EINVAL;
	return lock_query("pg_advisory_xact_lock_shared", kind, id, NULL);
}

/* ---- rows as text ----------------------------------------------------------------- */

const char *db_rows_get(const struct db_rows *rows, size_t row, size_t column)
{
	assert(row < rows->count && column < rows->columns);
	const char *v = rows->cells[row * rows->columns + column];
	return v ? v : "";
}

int db_rows_isnull(const struct db_rows *rows, size_t row, size_t column)
{
	assert(row < rows->count && column < rows->columns);
	return rows->cells[row * rows->columns + column] == NULL;
}

char *db_rows_strdup(const struct db_rows *rows, size_t row, size_t column)
{
	return db_rows_isnull(rows, row, column) ? NULL : xstrdup(db_rows_get(rows, row, column));
}

int64_t db_rows_int(const struct db_rows *rows, size_t row, size_t column, int64_t null_value)
{
	return db_rows_isnull(rows, row, column) ? null_value : strtoll(db_rows_get(rows, row, column), NULL, 10);
}

void db_rows_release(struct db_rows *rows)
{
	if (!rows)
		return;
	free_strings(rows->cells, rows->count * rows->columns);
	rows->cells = NULL;
	rows->count = rows->columns = 0;
}

int db_query(struct db_rows *out, const char *sql, int nparams, const char *const *params)
{
	out->count = out->columns = 0;
	out->cells = NULL;
	PGresult *res = db_exec(sql, nparams, params, NULL);
	if (!res)
		return KHUB_EDB;
	size_t n = (size_t)PQntuples(res), c = (size_t)PQnfields(res);
	out->cells = xcalloc(n * c + 1, sizeof(char *));
	for (size_t r = 0; r < n; r++)
		for (size_t k = 0; k < c; k++)
			if (!PQgetisnull(res, (int)r, (int)k))
				out->cells[r * c + k] = xstrdup(PQgetvalue(res, (int)r, (int)k));
	out->count = n;
	out->columns = c;
	PQclear(res);
	return 0;
}

int db_query_one(struct db_rows *out, const char *sql, int nparams, const char *const *params)
{
	int rc = db_query(out, sql, nparams, params);
	if (rc == 0 && out->count == 0) {
		db_rows_release(out);
		rc = KHUB_ENOTFOUND;
	}
	return rc;
}

void *db_query_items(size_t size, void (*fill)(void *item, const struct db_rows *rows, size_t row),
		     size_t *count, int *rc, const char *sql, int nparams, const char *const *params)
{
	struct db_rows rows;
	*count = 0;
	*rc = db_query(&rows, sql, nparams, params);
	if (*rc < 0)
		return NULL;
	char *items = xcalloc(rows.count + 1, size);
	for (size_t i = 0; i < rows.count; i++)
		fill(items + i * size, &rows, i);
	*count = rows.count;
	db_rows_release(&rows);
	return items;
}

int db_token_secret(const char *prefix, const char *alphabet, size_t len, char *secret, char hash[65])
{
	unsigned char random[64];
	size_t plen = strlen(prefix), n = strlen(alphabet);
	assert(len <= sizeof(random));
	if (RAND_bytes(random, (int)len) != 1)
		return KHUB_EIO;
	memcpy(secret, prefix, plen);
	for (size_t i = 0; i < len; i++)
		secret[plen + i] = alphabet[random[i] % n];
	secret[plen + len] = '\0';
	sha256_hex(secret, plen + len, hash);
	return 0;
}
