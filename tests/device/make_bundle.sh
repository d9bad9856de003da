#!/usr/bin/env bash
# make_bundle.sh -- pack khub, the shared libraries it needs, PostgreSQL 15's
# server pieces (for khub's embedded cluster) and the real `kernels` Python
# package into .device/bundle.tar.xz, for run_loader_check.sh on a machine
# (Ubuntu 24.04 GPU box) that has none of khub's C dependencies and no network.
#
# Runs here (Debian bookworm, with khub's build dependencies and
# postgresql-15 installed). Nothing it collects is committed: .device/ is
# gitignored.
#
#   tests/device/make_bundle.sh
#
# Environment:
#   KHUB_BIN        khub binary to pack; default: a release (non-sanitizer)
#                   build of git HEAD made in a temp dir (with khub-worker)
#   KHUB_WORKER_BIN khub-worker to pack; default: next to KHUB_BIN
#   KERNELS_GIT_DIR git dir of a huggingface/kernels clone (required, e.g.
#                   git clone --bare https://github.com/huggingface/kernels)
#   KERNELS_REF     tag of kernels to pack (default v0.16.0)
#   PG_ROOT         PostgreSQL 15 install (default /usr/lib/postgresql/15)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUTDIR=$ROOT/.device
KERNELS_GIT_DIR=${KERNELS_GIT_DIR:?set KERNELS_GIT_DIR to the git dir of a huggingface/kernels clone}
KERNELS_REF=${KERNELS_REF:-v0.16.0}
PG_ROOT=${PG_ROOT:-/usr/lib/postgresql/15}
PG_SHARE=/usr/share/postgresql/15

WORK=$(mktemp -d /tmp/khub-bundle-build.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
STAGE=$WORK/stage
mkdir -p "$STAGE"/{bin,lib,py} "$STAGE/usr/lib/postgresql/15/bin" "$STAGE/usr/lib/postgresql/15/lib" \
	"$STAGE/usr/share/postgresql"

# 1. khub: a release build of HEAD unless one is given (the in-tree ./khub is
# often an --enable-debug ASan build, whose libasan wants a tuned kernel).
if [ -z "${KHUB_BIN:-}" ]; then
	echo "building a release khub from git HEAD ..."
	mkdir "$WORK/src"
	git -C "$ROOT" archive HEAD | tar -x -C "$WORK/src"
	[ -d "$ROOT/web/node_modules" ] && cp -a "$ROOT/web/node_modules" "$WORK/src/web/"
	(cd "$WORK/src" && autoreconf -fi >/dev/null 2>&1 && ./configure -q && make -j8 khub khub-worker >/dev/null)
	KHUB_BIN=$WORK/src/khub
	KHUB_WORKER_BIN=${KHUB_WORKER_BIN:-$WORK/src/khub-worker}
fi
KHUB_WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
install -m 755 "$KHUB_BIN" "$STAGE/bin/khub"
install -m 755 "$KHUB_WORKER_BIN" "$STAGE/bin/khub-worker"
# The worker's sandbox: Debian's bubblewrap (the device has none); its
# libraries come with the ldd closure below.
install -m 755 "$(command -v bwrap)" "$STAGE/bin/bwrap"
strip "$STAGE/bin/khub" "$STAGE/bin/khub-worker" 2>/dev/null || true
# khub-worker starts itself again (the daemon runs `khub-worker build`, the
# sandbox its CPU-time launcher) with an environment built from nothing, so
# it finds the bundled libraries through its RPATH (DT_RPATH, which also
# serves its libraries' own dependencies), not LD_LIBRARY_PATH.
patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$STAGE/bin/khub-worker" ||
	{ echo "make_bundle: patchelf (Debian: patchelf) is needed" >&2; exit 1; }

# 2. PostgreSQL: initdb, pg_ctl, postgres, the loadable modules (no JIT) and
# the share dir, in the same relative layout so postgres finds its share dir
# and pkglibdir relative to its own location.
for b in initdb pg_ctl postgres; do
	install -m 755 "$PG_ROOT/bin/$b" "$STAGE/usr/lib/postgresql/15/bin/$b"
done
for so in "$PG_ROOT"/lib/*.so; do
	case $(basename "$so") in llvmjit*) continue ;; esac
	install -m 755 "$so" "$STAGE/usr/lib/postgresql/15/lib/"
done
cp -a "$PG_SHARE" "$STAGE/usr/share/postgresql/15"
rm -rf "$STAGE/usr/share/postgresql/15/man"

# 3. Shared libraries: the ldd closure of all of the above, minus glibc and
# the compiler runtime (the target's are newer and backward compatible).
is_system_lib() {
	case $1 in
	linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | \
		librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libstdc++.so.* | libgcc_s.so.*)
		return 0 ;;
	esac
	return 1
}
for f in "$STAGE/bin/khub" "$STAGE/bin/khub-worker" "$STAGE/bin/bwrap" "$STAGE"/usr/lib/postgresql/15/bin/* "$STAGE"/usr/lib/postgresql/15/lib/*.so; do
	ldd "$f" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
	is_system_lib "$name" && continue
	cp -L "$path" "$STAGE/lib/$name"
done
chmod 755 "$STAGE"/lib/*

# Every non-system dependency must now resolve inside the bundle.
missing=0
for f in "$STAGE/bin/khub" "$STAGE/bin/khub-worker" "$STAGE/bin/bwrap" "$STAGE"/usr/lib/postgresql/15/bin/* "$STAGE"/usr/lib/postgresql/15/lib/*.so "$STAGE"/lib/*; do
	while read -r name path; do
		is_system_lib "$name" && continue
		case $(realpath -m "$path") in "$STAGE"/lib/*) ;; *) echo "not bundled: $name ($path) for $f" >&2; missing=1 ;; esac
	done < <(LD_LIBRARY_PATH=$STAGE/lib ldd "$f" | awk '/=>/{print $1, $3}')
done
[ "$missing" -eq 0 ] || { echo "make_bundle: missing libraries" >&2; exit 1; }

# 4. The real kernels package at a release tag, with a dist-info so that
# importlib.metadata.version("kernels") (run by `import kernels`) works.
git --git-dir="$KERNELS_GIT_DIR" archive "$KERNELS_REF" kernels/src/kernels | tar -x -C "$WORK"
mv "$WORK/kernels/src/kernels" "$STAGE/py/kernels"
ver=${KERNELS_REF#v}
mkdir "$STAGE/py/kernels-$ver.dist-info"
printf 'Metadata-Version: 2.1\nName: kernels\nVersion: %s\n' "$ver" >"$STAGE/py/kernels-$ver.dist-info/METADATA"
printf 'khub-device-bundle\n' >"$STAGE/py/kernels-$ver.dist-info/INSTALLER"
git --git-dir="$KERNELS_GIT_DIR" rev-parse "$KERNELS_REF^{commit}" >"$STAGE/py/KERNELS_COMMIT"

# 5. Pack.
chmod -R a+rX "$STAGE"
mkdir -p "$OUTDIR"
tar -C "$STAGE" -cJf "$OUTDIR/bundle.tar.xz.tmp" .
mv "$OUTDIR/bundle.tar.xz.tmp" "$OUTDIR/bundle.tar.xz"
echo "bundle: $OUTDIR/bundle.tar.xz ($(du -h "$OUTDIR/bundle.tar.xz" | cut -f1); $(ls "$STAGE/lib" | wc -l) libs; kernels $KERNELS_REF)"
