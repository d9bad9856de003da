#!/bin/bash
# test.sh -- the whole test suite on a fresh Debian machine: install what is
# missing (including node for the JS client tests), build with warnings as
# errors plus ASan/UBSan, and run every unit and integration test (TAP).
set -euo pipefail
cd "$(dirname "$0")/.."

. deploy/install-deps.sh
install_deps test

if [ ! -d tests/js/node_modules ]; then
	echo "==> installing the pinned JS client (@huggingface/hub)"
	(cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ ! -d web/node_modules/uplot ]; then
	echo "==> installing the web UI's chart library (uPlot, compiled into khub)"
	(cd web && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ ! -d tests/web/node_modules/playwright-core ] || [ ! -d tests/web/node_modules/axe-core ]; then
	echo "==> installing playwright-core for the web UI's tests (drives Debian's chromium)"
	(cd tests/web && npm ci --no-audit --no-fund --loglevel=error)
fi

echo "==> building with --enable-debug (ASan + UBSan)"
./autogen.sh >/dev/null 2>&1
./configure -q --enable-debug
make -s -j"$(nproc)" khub
# LeakSanitizer is on for every khub process of the suite; tests/lsan.supp
# names the few library leaks that are not ours. The integration tests fail
# on any sanitizer report of any khub process they ran (tests/lib/khub-test.sh).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# each integration test's wall and CPU seconds (tests/integration/NAME.time)
# are summed up after the run, passed or failed: the slowest tests, the
# totals and the critical path (tests/tools/suite_times.sh)
suite_times() { echo "==> where the time went"; bash tests/tools/suite_times.sh -n 20 || true; }
# KHUB_TEST_JOBS: how many test programs run at once (default: one per core).
# The suite is 40% CPU (tests/tools/suite_times.sh), but at two per core a
# clean-clone run lost t0113's first connection count to the load.
make -j"${KHUB_TEST_JOBS:-$(nproc)}" check VERBOSE=1 || {
	suite_times
	echo "==> failed test logs:"
	for f in $(grep -l -E '^(FAIL|ERROR)' tests/unit/*.trs tests/integration/*.trs 2>/dev/null); do
		echo "---- ${f%.trs}.log"
		tail -50 "${f%.trs}.log"
	done
	exit 1
}
suite_times
