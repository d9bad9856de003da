#!/bin/bash
# t0154-farm-boundaries.sh -- HTTP stays in the handlers: the domain
# modules (farm/, storage/, kernel/, mirror/, sync/) never see a request,
# an MHD_Result or microhttpd.h; the build farm (farm/) sits below api/ and
# web/: it includes none of their headers (nor http/'s) and never parks or
# answers a request itself (its slow steps are farm_jobs the handlers queue).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

check "farm/farm.h is the farm's header" -- test -f farm/farm.h
for dir in farm storage kernel mirror sync; do
	hits=$(grep -rn 'MHD_Result\|struct request\b\|microhttpd\.h' "$dir" --include='*.[ch]' 2>/dev/null)
	is "$hits" "" "$dir/: no MHD_Result, struct request or microhttpd.h"
done
hits=$(grep -rn '#include *"\(api\|web\|http\)/' farm --include='*.[ch]' 2>/dev/null)
is "$hits" "" "farm/: includes no api/, web/ or http/ header"
hits=$(grep -rnw 'request_park\|request_park_fd\|request_wake\|work_queue_run\|work_pool_run\|work_queue_run_to_end\|respond\|respond_error\|respond_err\|respond_json\|api_ctx' farm --include='*.[ch]' 2>/dev/null)
is "$hits" "" "farm/: neither parks, wakes nor answers requests, nor reads api_ctx"
hits=$(grep -rln '#include *"farm/' storage kernel common mirror sync --include='*.[ch]' 2>/dev/null)
is "$hits" "" "storage/, kernel/, common/, mirror/, sync/ do not include farm/ (it sits above them)"
hits=$(ls api/build_*.c 2>/dev/null)
is "$hits" "" "no build farm domain file left in api/ (handlers are api/builds*.c)"
# every farm file says what it is for on its first line
for f in farm/*.[ch]; do
	first=$(head -n1 "$f")
	like "$first" "^/\\* $(basename "$f") -- " "$f starts with its purpose line"
done
done_testing
