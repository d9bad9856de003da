#!/bin/bash
# t0114-db-pins.sh -- tests/unit/test_db_pins against the embedded
# PostgreSQL of a running khub: locks and transactions pin a connection, a
# pinned connection that dies fails every call until released (no silent
# reset), a full pool fails after its deadline, the migration lock keeps
# its key.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
PROG=$KHUB_SRC/tests/unit/test_db_pins
[ -x "$PROG" ] || { echo "1..0 # SKIP $PROG not built (make check builds it)"; exit 0; }
KHUB_TEST_FRESH_CLUSTER=1	# migrations run here, as on a new install
khub_setup
khub_start
"$PROG" "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" 2>"$TEST_DIR/pins.err"
rc=$?
[ $rc -eq 0 ] || sed 's/^/# /' "$TEST_DIR/pins.err" | tail -20
exit $rc
