#!/bin/bash
# t0040-external-database.sh -- khub against a PostgreSQL server it did not
# start (--database-url / KHUB_DATABASE_URL): no embedded cluster is made.
KHUB_TEST_FRESH_CLUSTER=1	# the data dir must stay without pg/
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
PGDIR=$TEST_DIR/extpg
mkdir -p "$PGDIR/run"
as_pg() {	# PostgreSQL refuses root: run its tools as 'postgres' then
	if [ "$(id -u)" -eq 0 ]; then
		chown -R postgres: "$PGDIR"
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}
as_pg "$PGBIN/initdb" -D "$PGDIR/data" -U tester --auth=trust >/dev/null 2>&1
ok $? "initdb of an independent cluster"
as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w \
	-o "-c listen_addresses='' -c unix_socket_directories='$PGDIR/run'" start >/dev/null 2>&1
ok $? "it runs"
stop_external() { as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null 2>&1; }
trap 'khub_teardown_ext' EXIT
khub_teardown_ext() { khub_stop; stop_external; khub_teardown; }
psql -h "$PGDIR/run" -U tester -d postgres -qc 'CREATE DATABASE khubext' >/dev/null 2>&1
ok $? "database created"

export KHUB_DATABASE_URL="postgresql:///khubext?host=$PGDIR/run&user=tester"
check "db migrate against the external server" -- khub db migrate
TABLES=$(psql -h "$PGDIR/run" -U tester -d khubext -Atc "select count(*) from information_schema.tables where table_name in ('accounts','tokens','repos','audit_log','memberships','trusted_publisher_changes')")
is "$TABLES" 6 "the schema is in the external database"
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
SHA=$(khub import "$SRC" --repo acme/relu --branch v1 2>/dev/null)
like "$SHA" '^[0-9a-f]{40}$' "import with an external database"
khub_start
STATUS=$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/kernels/acme/relu/revision/v1")
is "$STATUS" 200 "the server reads the repo"
ok $([ ! -e "$KHUB_DATA_DIR/pg" ]; echo $?) "no embedded cluster was created"
AUDIT=$(psql -h "$PGDIR/run" -U tester -d khubext -Atc "select count(*) from audit_log where action = 'repo.import'")
is "$AUDIT" 1 "the import is in the audit log"
khub_stop
KHUB_DATABASE_URL="postgresql:///nodb?host=$PGDIR/run&user=tester" khub db migrate >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -ne 0 ]; echo $?) "an unreachable database is a clear start-up failure"
like "$(cat "$TEST_DIR/err")" "database" "naming the database"
done_testing
