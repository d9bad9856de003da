#!/bin/bash
# t0004-layering.sh -- the database stays behind storage/'s typed
# functions: api/, http/, server/, farm/, mirror/ and web/ never see libpq, a PGresult or a raw
# query, and storage/ never includes the HTTP library or api/ headers;
# libpq itself is included only by storage/db/db_internal.h. The HTTP layer
# (http/) sits under the endpoints: it includes no api/, web/ or server/ header,
# and it alone builds libmicrohttpd responses.
# The accounts layer (accounts/) sits between the front ends (api/, web/,
# server/) and storage/: it sees no HTTP, and storage/ does not call up into
# it (t0236: nothing else writes the account tables).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

hits=$(grep -rn 'PGresult\|PGconn\|PQ[a-z]\|db_exec\|db_query\|db_run\b\|libpq\|pg_advisory' accounts api http server farm mirror sync web --include='*.[ch]' 2>/dev/null)
is "$hits" "" "accounts/, api/, http/, server/, farm/, mirror/, sync/, web/: no libpq, PGresult, raw query or raw advisory lock"
hits=$(grep -rn '#include.*\(microhttpd\.h\|"api/\|"http/\|"web/\|"server/\)' accounts 2>/dev/null)
is "$hits" "" "accounts/: includes no HTTP library, api/, http/, web/ or server/ header"
hits=$(grep -rn '#include "accounts/' storage common http farm 2>/dev/null)
is "$hits" "" "storage/, common/, http/, farm/: do not call up into accounts/"
hits=$(grep -rn '#include.*\(microhttpd\.h\|"api/\|"http/\)' storage 2>/dev/null)
is "$hits" "" "storage/: includes neither microhttpd.h nor api/ or http/ headers"
hits=$(grep -rln '#include.*libpq-fe\.h' --include='*.[ch]' --exclude-dir=build-deb . 2>/dev/null | grep -v '^\./storage/db/db_internal\.h$' | grep -v '^\./tests/')
is "$hits" "" "libpq-fe.h is included by storage/db/db_internal.h only"
hits=$(grep -rln '#include "storage/db/db_internal\.h"' --include='*.[ch]' accounts api http server farm mirror sync kernel common 2>/dev/null)
is "$hits" "" "storage/db/db_internal.h is included from storage/ only"
hits=$(grep -rn '#include "\(api\|web\|server\|mirror\|sync\)/' http 2>/dev/null)
is "$hits" "" "http/: includes no api/, web/, server/, mirror/ or sync/ header"
check "http/http.h is the HTTP layer's one header" -- test "$(ls http/*.h)" = "http/http.h"
hits=$(grep -rn '"\(BEGIN\|COMMIT\|ROLLBACK\)"' storage accounts api http server farm mirror sync | grep -v '^storage/db/db\.c:')
is "$hits" "" "transactions only through db_tx_begin/db_tx_commit/db_tx_rollback"
# Responses are built in http/ only: handlers describe an answer (struct
# answer) and http/answer.c makes, heads and queues it. No file outside
# http/ makes, heads or queues a response, or hands one to respond().
mhd_response='MHD_\(create_response_[a-z_0-9]*\|queue_response\|add_response_header\|del_response_header\|destroy_response\)\b'
hits=$(grep -rn "$mhd_response" --include='*.[ch]' --exclude-dir=build-deb . 2>/dev/null | sed 's|^\./||' | grep -v '^http/\|^tests/\|node_modules/')
is "$hits" "" "no libmicrohttpd response call (create, add/del header, queue, destroy) outside http/"
hits=$(grep -rn '\b\(respond\|respond_queue\|respond_and_memo\|respond_add_fixed_headers\|http_file_response\)(' \
	--include='*.c' accounts api server farm mirror sync web kernel common 2>/dev/null)
is "$hits" "" "no respond(), respond_queue(), respond_and_memo(), respond_add_fixed_headers() or http_file_response() outside http/"
done_testing
