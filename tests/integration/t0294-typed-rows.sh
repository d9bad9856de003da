#!/bin/bash
# t0294-typed-rows.sh -- typed rows at the storage boundary (STYLE.md 19,
# issue 33 item 3): outside storage/ nothing reads a query's cells by
# position (db_rows_get, db_rows_isnull, db_rows_int, struct db_rows) or
# names a column constant (*_COL_*, BENCH_AGG_*); storage/ hands callers
# structs with named fields. The raw rows live in storage/db/db_internal.h only.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

# every folder of C but storage/ (and tests/, whose unit tests of storage/
# may read its internals); build-deb/ holds a copy of the tree
C_DIRS=$(find . -name '*.[ch]' -not -path './build-deb/*' -not -path './storage/*' -not -path './tests/*' \
	-not -path './node_modules/*' -not -path '*/node_modules/*' | cut -d/ -f2 | sort -u | grep -v '\.[ch]$')
[ -n "$C_DIRS" ]
ok $? "there are C folders besides storage/ ($(echo $C_DIRS | tr '\n' ' '))"
src() { grep -rn --include='*.[ch]' -e "$1" $C_DIRS 2>/dev/null | grep -v '/embedded_'; }

hits=$(src 'db_rows_\(get\|isnull\|int\|strdup\|release\)\b')
is "$hits" "" "no positional cell read (db_rows_get and kin) outside storage/"
hits=$(src 'struct db_rows\b')
is "$hits" "" "no struct db_rows outside storage/"
hits=$(src '[A-Z]_COL_[A-Z]\|\bBENCH_AGG_[A-Z]')
is "$hits" "" "no column constant (*_COL_*, BENCH_AGG_*) outside storage/"
hits=$(grep -n 'struct db_rows\b\|db_rows_get' storage/*/*.h | grep -v '^storage/db/db_internal.h:')
is "$hits" "" "struct db_rows and db_rows_get are declared in storage/db/db_internal.h only"
hits=$(grep -rln --include='*.[ch]' 'storage/db/db_internal.h' $C_DIRS 2>/dev/null)
is "$hits" "" "nothing outside storage/ includes storage/db/db_internal.h"
done_testing
