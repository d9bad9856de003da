/* test_db_pins.c -- the connection pool against a real PostgreSQL (the
 * conninfo in argv[1]; run by tests/integration/t0114-db-pins.sh): a lock
 * or transaction pins a connection to its thread, a connection that dies
 * while pinned fails every call until released and is replaced only then,
 * and a full pool makes a call wait its deadline and fail with KHUB_EDB. */
#include "storage/db/db_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static long backend_pid(void)
{
	struct db_rows rows;
	if (db_query(&rows, "SELECT pg_backend_pid()", 0, NULL) < 0)
		return -1;
	long pid = strtol(db_rows_get(&rows, 0, 0), NULL, 10);
	db_rows_release(&rows);
	return pid;
}

/* Kill a backend from a connection of our own, outside the pool. */
static int terminate(const char *conninfo, long pid)
{
	PGconn *c = PQconnectdb(conninfo);
	char sql[64];
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%ld)", pid);
	PGresult *res = PQexec(c, sql);
	int ok_ = PQresultStatus(res) == PGRES_TUPLES_OK && PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	PQfinish(c);
	return ok_ ? 0 : -1;
}

static int other_rc;
static void *other_thread(void *arg)
{
	(void)arg;
	other_rc = db_ping();
	db_thread_done();
	return NULL;
}

static int ping_from_other_thread(void)
{
	pthread_t t;
	pthread_create(&t, NULL, other_thread, NULL);
	pthread_join(t, NULL);
	return other_rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		printf("1..0 # SKIP needs a conninfo\n");
		return 0;
	}
	log_threshold = LOG_LEVEL_ERROR;
	db_configure(argv[1]);
	db_pool_configure(1, 200);

	ok(db_ping() == 0, "a query works");
	long open = 0, in_use = 0;
	db_pool_stats(&open, &in_use);
	ok(open == 1 && in_use == 0, "one connection open, none borrowed between calls (%ld, %ld)", open, in_use);

	/* a session lock pins the connection */
	ok(db_lock_try(DB_LOCK_REPO_WRITE, 424242) == 0, "repo write lock taken");
	long pid = backend_pid();
	ok(pid > 0 && backend_pid() == pid, "the same backend for every call while the lock is held");
	db_pool_stats(&open, &in_use);
	ok(in_use == 1, "the connection stays borrowed while the lock is held");
	ok(ping_from_other_thread() == KHUB_EDB, "pool of 1: another thread waits its deadline, then KHUB_EDB");

	/* the pinned connection dies: no silent reset while the lock is held */
	ok(terminate(argv[1], pid) == 0, "backend %ld terminated", pid);
	ok(db_ping() == KHUB_EDB, "the next call fails");
	ok(db_ping() == KHUB_EDB, "and the one after: no reset while the lock is held");
	ok(db_tx_begin() == KHUB_EDB, "no transaction on it either");
	db_unlock(DB_LOCK_REPO_WRITE, 424242);
	db_pool_stats(&open, &in_use);
	ok(in_use == 0, "unlocking gives the connection back");
	ok(db_ping() == 0, "after the unlock a new connection works");
	long pid2 = backend_pid();
	ok(pid2 > 0 && pid2 != pid, "on a new backend (%ld)", pid2);
	ok(ping_from_other_thread() == 0, "another thread gets the connection now");

	/* a transaction pins too, and fails loudly when its connection dies */
	ok(db_tx_begin() == 0, "transaction begun");
	long tx_pid = backend_pid();
	ok(db_run("CREATE TEMP TABLE pins_probe (x int)", 0, NULL) == 0 && backend_pid() == tx_pid,
	   "statements of the transaction share its backend");
	ok(ping_from_other_thread() == KHUB_EDB, "the pool's only connection is the transaction's");
	ok(terminate(argv[1], tx_pid) == 0, "transaction's backend terminated");
	ok(db_run("INSERT INTO pins_probe VALUES (1)", 0, NULL) == KHUB_EDB, "the next statement fails");
	ok(db_run("SELECT 1", 0, NULL) == KHUB_EDB, "every statement fails until the rollback");
	ok(db_tx_commit() == KHUB_EDB, "commit says it did not commit");
	ok(db_ping() == 0, "after the transaction ended a new connection works");

	/* commit and rollback */
	ok(db_run("CREATE TABLE IF NOT EXISTS pins_probe (x int)", 0, NULL) == 0, "probe table");
	ok(db_tx_begin() == 0 && db_run("INSERT INTO pins_probe VALUES (1)", 0, NULL) == 0, "insert in a transaction");
	db_tx_rollback();
	ok(db_tx_begin() == 0 && db_run("INSERT INTO pins_probe VALUES (2)", 0, NULL) == 0 && db_tx_commit() == 0,
	   "insert committed");
	struct db_rows rows;
	ok(db_query(&rows, "SELECT string_agg(x::text, ',') FROM pins_probe", 0, NULL) == 0, "read back");
	is_str(rows.count == 1 ? db_rows_get(&rows, 0, 0) : NULL, "2", "the rolled back row is not there");
	db_rows_release(&rows);
	db_run("DROP TABLE pins_probe", 0, NULL);

	/* a transaction-scoped lock ends with the transaction */
	ok(db_tx_begin() == 0 && db_lock_xact(DB_LOCK_VARIANT_INDEX, 7) == 0 && db_tx_commit() == 0,
	   "xact lock taken and released by the commit");
	ok(db_lock_try(DB_LOCK_VARIANT_INDEX, 7) == 0, "so it can be taken again");
	db_unlock(DB_LOCK_VARIANT_INDEX, 7);

	/* the migration lock keeps its single bigint key 4242001 */
	ok(db_lock_wait(DB_LOCK_MIGRATIONS, 0) == 0, "migration lock taken");
	ok(db_query(&rows, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 0"
			   " AND objid = 4242001 AND objsubid = 1 AND pid = pg_backend_pid()", 0, NULL) == 0, "pg_locks");
	is_str(rows.count == 1 ? db_rows_get(&rows, 0, 0) : NULL, "1", "as the single key 4242001, as older khubs take it");
	db_rows_release(&rows);
	db_unlock(DB_LOCK_MIGRATIONS, 0);

	db_shutdown();
	db_pool_stats(&open, &in_use);
	ok(open == 0 && in_use == 0, "shutdown closes the pool");
	return done_testing();
}
