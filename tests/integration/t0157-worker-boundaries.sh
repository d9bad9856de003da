#!/bin/bash
# t0157-worker-boundaries.sh -- khub-worker keeps to its boundaries: a
# backend is a row of a table (kernel/backend.c, the worker's compile table
# in builder-worker/compile.c), never a strcmp on its name; the worker links
# kernel/ and common/ only (no server, storage, database, git or HTTP server
# code); its options are one table that drives parsing and --help; its
# functions keep to the budget.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"
WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}

# ---- backends are table rows -------------------------------------------------------------------
NAMES='cuda|rocm|cpu|metal|mps|xpu|npu|cann|neuron|tpu'
backend_strcmp() {	# backend_strcmp DIR...: every strcmp/strncmp/strcasecmp on a backend's name
	grep -rnE --include='*.[ch]' "str(n|case)?cmp *\([^;]*\"($NAMES)\"" "$@" 2>/dev/null
}
# Outside kernel/ (the backend table's home) no code compares a backend's
# name: it finds the row (kernel_backend_find, compile_backend_find).
for dir in builder-worker farm api http common web storage server mirror sync; do
	is "$(backend_strcmp "$dir")" "" "$dir/: no strcmp on a backend's name (use kernel_backend_find, compile_backend_find)"
done
check "the worker's compile table names its backends as kernel/'s table does" -- \
	grep -q 'compile_backend_for(const struct kernel_backend \*kb)' builder-worker/compile.c

# ---- the worker links kernel/ and common/ only ------------------------------------------------------
ldadd=$(sed -n 's/^khub_worker_LDADD *= *//p' Makefile.am)
like "$ldadd" '(^| )libkhubkernel\.a( |$)' "khub-worker links libkhubkernel.a"
unlike=$(grep -c 'libkhub\.a' <<<"$ldadd")
is "$unlike" 0 "… and not libkhub.a (server, storage, api, web)"
sources=$(sed -n '/^khub_worker_SOURCES *=/,/[^\\]$/p' Makefile.am | tr ' \t\\' '\n\n\n' |
	grep '\.[ch]$' | grep -v '^builder-worker/\|^common/' | tr '\n' ' ')
like "$sources" '^(\$\(KERNEL_COMMON\) ?)?$' "its sources are builder-worker/ and common/ only (got: '$sources')"
hits=$(grep -rnE '#include *"(api|storage|server|web|mirror|sync)/|#include *<(microhttpd|libpq-fe|git2)' \
	builder-worker 2>/dev/null)
is "$hits" "" "builder-worker/ includes no server, storage, api, web, mirror or sync header, nor MHD, libpq, libgit2"
if [ -x "$WORKER_BIN" ]; then
	libs=$(ldd "$WORKER_BIN" 2>/dev/null | grep -E 'libpq|libmicrohttpd|libgit2|libcmark' | awk '{print $1}' | tr '\n' ' ')
	is "$libs" "" "the khub-worker binary loads no libpq, libmicrohttpd, libgit2 or libcmark"
	# ---- one options table drives parsing and --help -----------------------------------------
	help=$("$WORKER_BIN" build --help 2>&1)
	is "$?" 0 "khub-worker build --help: exit 0"
	for opt in toolchains toolchain source out variant build-id repo commit worker wall-seconds cpu-seconds \
		memory-mb disk-mb work-dir hide sandbox jobs build-user max-processes source-date-epoch; do
		ok "$(grep -qE -- "^  --$opt( |\$)" <<<"$help"; echo $?)" "build --help lists --$opt"
	done
	help=$("$WORKER_BIN" --help 2>&1)
	is "$?" 0 "khub-worker --help: exit 0"
	for opt in url token-file toolchains concurrency work-dir name once poll-seconds drain-seconds \
		kill-grace-seconds build-user max-processes log-level; do
		ok "$(grep -qE -- "^  --$opt( |\$)" <<<"$help"; echo $?)" "the daemon's --help lists --$opt"
	done
	like "$help" 'concurrency N +builds at once \(1\) \(1 to 256\)' "a row's bounds are in its help line"
	out=$("$WORKER_BIN" --url http://127.0.0.1:1 --toolchains /dev/null --concurrency 0 2>&1)
	is "$?" 64 "--concurrency 0 (under the row's minimum): usage error"
	like "$out" '--concurrency wants a number from 1 to 256' "… saying the row's bounds"
	out=$("$WORKER_BIN" build --toolchains x --toolchain y --source . --out /nonexistent-khub --variant v \
		--jobs 2000 2>&1)
	is "$?" 64 "build --jobs 2000 (over the row's maximum): usage error"
	like "$out" '--jobs wants a number from 1 to 1024' "… saying the row's bounds"
	out=$("$WORKER_BIN" build --toolchains x --source . --out /nonexistent-khub --variant v 2>&1)
	is "$?" 64 "build without the required --toolchain: usage error"
	like "$out" 'usage: khub-worker build' "… with the usage"
	out=$("$WORKER_BIN" --check 2>&1)
	is "$?" 64 "--check without --toolchains: usage error"
else
	diag "no khub-worker binary at $WORKER_BIN: its checks are skipped"
fi

# ---- the function budget ---------------------------------------------------------------------------
long=$(/usr/bin/python3 tests/tools/function_lengths.py 2>/dev/null | grep -E ' (builder-worker|kernel)/' | tr '\n' ';')
is "$long" "" "no function of builder-worker/ or kernel/ is over 80 lines"
done_testing
