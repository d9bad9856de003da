# release_build.sh -- sourced by bench scripts after khub_setup: measure a
# release khub, not a sanitizer build. bench_release_build sets KHUB_BIN and
# KHUB_BUILD. BENCH_RELEASE_BUILD: auto (default: build a release copy of the
# tree when KHUB_BIN is missing or links ASan/UBSan), 1 (always), 0 (never).
# BENCH_RESULTS, when set, receives the build log. Arguments name more make
# targets to build in the release copy (khub-worker: then KHUB_WORKER_BIN is
# set too, to the release one or, without a release build, next to KHUB_BIN).

is_sanitized() { ldd "$1" 2>/dev/null | grep -Eq 'lib(asan|ubsan|tsan)'; }

bench_release_build() {
	local want=${BENCH_RELEASE_BUILD:-auto} log=${BENCH_RESULTS:-$TEST_DIR}/release-build.log
	if [ "$want" = 0 ] && [ ! -x "$KHUB_BIN" ]; then
		echo "bench: $KHUB_BIN not built (run make)" >&2
		exit 1
	fi
	if [ "$want" = 1 ] || { [ "$want" = auto ] && { [ ! -x "$KHUB_BIN" ] || is_sanitized "$KHUB_BIN"; }; }; then
		echo "# building a release khub (plain ./configure, no sanitizers) in $TEST_DIR/build ..." >&2
		mkdir -p "$TEST_DIR/build" "$(dirname "$log")"
		tar -C "$KHUB_SRC" -cf - --exclude=.git --exclude='*.o' --exclude='*.a' --exclude=./khub --exclude=./khub-worker \
			--exclude=./var --exclude=./bench/results --exclude=node_modules . | tar -C "$TEST_DIR/build" -xf -
		if (cd "$TEST_DIR/build" &&
			{ [ ! -f Makefile ] || make distclean; } &&
			{ [ -x configure ] || ./autogen.sh; } &&
			./configure -q && make -j"$(nproc)" khub "$@") >"$log" 2>&1; then
			KHUB_BIN="$TEST_DIR/build/khub"
			KHUB_BUILD="release (-O2, built from a copy of $KHUB_SRC)"
		else
			echo "# release build failed (see $log); measuring $KHUB_BIN as is" >&2
			[ -x "$KHUB_BIN" ] || exit 1
		fi
	fi
	KHUB_WORKER_BIN=$(dirname "$KHUB_BIN")/khub-worker
	if is_sanitized "$KHUB_BIN"; then
		KHUB_BUILD="SANITIZER BUILD ($KHUB_BIN links ASan/UBSan): numbers are not representative"
	else
		KHUB_BUILD=${KHUB_BUILD:-"$KHUB_BIN (no sanitizers)"}
	fi
}
