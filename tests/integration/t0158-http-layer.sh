#!/bin/bash
# t0158-http-layer.sh -- issue 23's shape stays: the request machinery
# lives in http/ only; in web/, the file store (assets.c) and the sessions
# (session.c) call nothing of the page builder (html.c), which calls them
# (no circle); and the functions issue 23 split stay under the 80-line
# function budget (tests/tools/function_lengths.py).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

for f in respond.c park.c work_queue.c response_cache.c response_memo.c repo_records.c; do
	check "http/$f exists" -- test -f "http/$f"
	check "api/$f does not" -- test ! -e "api/$f"
done
hits=$(grep -n 'refresher\|record_cache' api/repo_access.c)
is "$hits" "" "the repo-record cache and its refresher are not in api/repo_access.c"

# the functions html.c defines (column 0, not static)
html_fns=$(grep -oE '^[a-zA-Z][a-zA-Z_ ]*[ *]([a-z_0-9]+)\(' web/html.c | grep -v '^static' | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/')
ok $([ -n "$html_fns" ]; echo $?) "html.c's functions found ($(echo $html_fns | wc -w))"
for f in web/assets.c web/session.c; do
	calls=$(for fn in $html_fns; do grep -nw "$fn" "$f" | sed "s/^/$fn: /"; done)
	is "$calls" "" "$f calls nothing of web/html.c"
done

lengths=$(/usr/bin/python3 tests/tools/function_lengths.py --over 80)
for fn in resolve_file json_stream_feed spawn_backend handle_tree handle_batch kernel_listing_query \
	handle_move handle_create matrix_section handle_upload handle_aggregate; do
	over=$(grep -E " $fn\$" <<<"$lengths")
	is "$over" "" "$fn fits the function budget"
done
done_testing
