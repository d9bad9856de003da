#!/bin/bash
# t0282-worker-build-cache.sh -- khub-worker's build cache (ccache per repo
# and toolchain), with `khub-worker build` by hand as the daemon runs it:
# a cold build of examples/relu misses; the build of a changed commit (a new
# op namespace, one line of build.toml changed) is served from the cache for
# both translation units (the binding registers under the runtime op
# namespace, linked in: its command line names no commit), and gives byte for byte the
# variant a build without the cache gives; ccache's max_size is the one
# given. A hostile repo's build (evil/relu, whose smoke import walks and
# fills its cache mount and reaches for acme/relu's cache by its path on the
# host) sees only its own cache, empty at first (no hit although acme's
# cache holds the same object), cannot read or write acme's, and the cache
# it filled past its bound is emptied after the build.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker_build.sh"

worker_build_setup t0282
R=$T/ccache	# the cache root, as the daemon's WORKDIR/NAME/ccache
A_DIR=$R/$(printf 'acme/relu\ncpu-debian' | sha256sum | cut -d' ' -f1)
B_DIR=$R/$(printf 'evil/relu\ncpu-debian' | sha256sum | cut -d' ' -f1)

# ---- a cold build: every compile misses ----------------------------------------------------------
cp -r "$KHUB_SRC/examples/relu" "$T/a1"
wbuild a1 "$T/a1" 1111111111111111111111111111111111111111 --repo acme/relu --cache-root "$R"
is "$(cat "$T/a1.rc")" 0 "a cold build with the cache exits 0"
like "$(grep -m1 -- '-ffile-prefix-map' "$T/a1.log")" '^\+ /[^ ]*ccache g\+\+ ' "its compiler runs through ccache"
like "$(cat "$T/a1.log")" "build cache $A_DIR \(ccache, at most 2048 MiB" \
	"its cache is ROOT/<sha256 of the repo and the toolchain>, 2048 MiB by default"
is "$(cache_field a1 used)/$(cache_field a1 hits)/$(cache_field a1 misses)" "true/0/2" \
	"abi-report.json build.cache: used, 0 hits, 2 misses (the binding and relu_cpu.cpp)"
is "$(stat_of "$A_DIR" cleanups_performed)" 0 "under 2048 MiB nothing was evicted"
[ -d "$A_DIR" ] && echo "acme's own" >"$A_DIR/a-secret" && chown 65534:65534 "$A_DIR/a-secret"

# ---- a changed commit with the cache, the same without it, and a hostile repo's build, at once ---------
cp -r "$T/a1" "$T/a2"
printf '\n# one more line\n' >>"$T/a2/build.toml"
C2=2222222222222222222222222222222222222222
cp -r "$T/a1" "$T/evil"
cat >>"$T/evil/torch-ext/relu/__init__.py" <<EOF

def _attack_cache():	# run by the smoke import, in the sandbox
    import os
    seen = [os.path.join(d, f) for d, _, files in os.walk("/khub/ccache") for f in files]
    print("CACHE_SEEN %d" % len(seen), flush=True)
    for path in seen:
        print("CACHE_FILE " + path, flush=True)
    for label, path in (("read-other-cache", "$A_DIR/a-secret"), ("list-cache-root", "$R"),
                        ("list-other-cache", "$A_DIR")):
        try:
            os.listdir(path) if label.startswith("list") else open(path).read()
            print("ATTACK %s: ESCAPED" % label, flush=True)
        except OSError as e:
            print("ATTACK %s: blocked (%s)" % (label, e.strerror), flush=True)
    try:
        open("$A_DIR/evil-marker", "w").write("pwned")
        print("ATTACK write-other-cache: ESCAPED", flush=True)
    except OSError as e:
        print("ATTACK write-other-cache: blocked (%s)" % e.strerror, flush=True)
    open("/khub/ccache/evil-marker", "w").write("mine")
    with open("/khub/ccache/fill", "wb") as f:
        for _ in range(20):
            f.write(b"x" * (1 << 20))
    print("FILLED own cache with 20 MiB", flush=True)


_attack_cache()
EOF
chmod -R a+rX "$T/a2" "$T/evil"
wbuild a2 "$T/a2" $C2 --repo acme/relu --cache-root "$R" --cache-max-mb 1 &
wbuild a3 "$T/a2" $C2 --repo acme/relu &
wbuild evil "$T/evil" 3333333333333333333333333333333333333333 --repo evil/relu --cache-root "$R" --cache-max-mb 1 &
wait

is "$(cat "$T/a2.rc")" 0 "the changed commit's build with the cache exits 0"
is "$(cache_field a2 hits)/$(cache_field a2 misses)" "2/0" \
	"the changed commit: relu_cpu.cpp and the binding (a new op namespace, compiled for the runtime namespace) served from the cache"
like "$(cat "$T/a2.log")" 'build cache: 2 hits, 0 misses, 0 not cacheable' "the build log says so"
is "$(cat "$T/a3.rc")/$(cache_field a3 used)" "0/false" "the same build without the cache: exit 0, cache not used"
check "the variant from the cache is byte for byte the variant built without it" -- \
	diff -r "$T/out-a2/$VARIANT" "$T/out-a3/$VARIANT"
check "… and its .so is the same file (sha256)" -- bash -c \
	"[ \"\$(sha256sum <'$T/out-a2/$VARIANT/_relu_cpu_2222222.abi3.so')\" = \"\$(sha256sum <'$T/out-a3/$VARIANT/_relu_cpu_2222222.abi3.so')\" ]"

# ccache's max_size: the one given (1 MiB), and the cache stays under it
like "$(cat "$T/a2.log")" 'build cache .* \(ccache, at most 1 MiB' "--cache-max-mb 1: the build says its bound"
# (whether ccache runs a cleanup is its business: both units are direct hits,
# this build stores no object and updates no manifest, and ccache 4.7 ran none;
# a preprocessed-mode hit used to update one and run one)
ok $([ "$(stat_of "$A_DIR" cache_size_kibibyte)" -le 1024 ]; echo $?) \
	"ccache keeps its objects under 1 MiB ($(stat_of "$A_DIR" cache_size_kibibyte) KiB, cleanups: $(stat_of "$A_DIR" cleanups_performed))"
used_kib=$(du -sk --exclude=a-secret "$A_DIR" | cut -f1)
ok $([ "$used_kib" -le 1200 ]; echo $?) "acme's cache takes ${used_kib} KiB (at most 1 MiB of objects and ccache's own files)"

# the hostile repo
is "$(cat "$T/evil.rc")" 0 "the hostile repo's build ends normally (its attacks failed, its import ran)"
is "$(cache_field evil hits)/$(cache_field evil misses)" "0/2" \
	"evil/relu: no hit, though acme's cache holds relu_cpu.cpp's object (the caches are not shared)"
like "$(grep -m1 '^CACHE_SEEN' "$T/evil.log")" '^CACHE_SEEN [0-9]+$' "its smoke import walked /khub/ccache"
is "$(grep '^CACHE_FILE' "$T/evil.log" | grep -c -e a-secret -e "$A_DIR")" 0 "and found none of acme's files there"
for a in read-other-cache list-cache-root list-other-cache write-other-cache; do
	like "$(grep -m1 "^ATTACK $a:" "$T/evil.log")" "^ATTACK $a: blocked" "evil/relu: $a refused"
done
is "$(grep -c ESCAPED "$T/evil.log")" 0 "no attack escaped"
like "$(cat "$T/evil.log")" 'FILLED own cache with 20 MiB' "it could write its own cache"
like "$(cat "$T/evil.log")" 'the build cache holds [0-9.]+ MiB, over its bound of 1 MiB: emptied' \
	"a cache filled past its bound is emptied after the build"
ok $([ ! -e "$B_DIR/fill" ]; echo $?) "evil/relu's 20 MiB are gone"
is "$(cat "$A_DIR/a-secret")" "acme's own" "acme's file is untouched"
ok $([ ! -e "$A_DIR/evil-marker" ]; echo $?) "and nothing of evil/relu's landed in acme's cache"
done_testing
