#!/bin/bash
# debian-root.sh -- an unpacked Debian root for hermetic toolchain tests,
# made once with debootstrap and cached: `debian-root.sh SUITE PKG...`
# prints the root's path (/var/cache/khub-tests/SUITE-<hash of the suite,
# the mirror and the package list>) on stdout, building it first when it
# is not there. A build goes into a temporary directory renamed into place
# only when complete, so a killed build never leaves a half root. Exit 77
# with the reason on stderr when debootstrap or the mirror is missing.
# Nothing is downloaded but Debian's packages from $KHUB_TEST_DEBIAN_MIRROR.
set -u
suite=$1; shift
mirror=${KHUB_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${KHUB_TEST_ROOT_CACHE:-/var/cache/khub-tests}
pkgs=$(printf '%s\n' "$@" | sort -u | paste -sd, -)
key=$(printf '%s %s %s v1\n' "$suite" "$mirror" "$pkgs" | sha256sum | cut -c1-16)
root=$cache/$suite-$key

if [ -f "$root/.khub-root-complete" ]; then
	echo "$root"
	exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is not installed" >&2; exit 77; }
[ "$(id -u)" = 0 ] || { echo "debootstrap needs root" >&2; exit 77; }
curl -fsS -o /dev/null --max-time 60 "$mirror/dists/$suite/Release" ||
	{ echo "the mirror $mirror does not serve $suite" >&2; exit 77; }

mkdir -p "$cache" || exit 1
# One builder at a time; a second one waits and then finds the root made.
exec 9>"$cache/.lock-$suite-$key"
flock 9
if [ -f "$root/.khub-root-complete" ]; then
	echo "$root"
	exit 0
fi
tmp=$(mktemp -d "$cache/.building-$suite-$key.XXXXXX") || exit 1
log=$cache/build-$suite-$key.log
debs=$cache/debs-$suite
mkdir -p "$debs" || exit 1
echo "# building the $suite root ($pkgs) in $tmp; log: $log" >&2
# minbase first, then the packages with apt (no Recommends: GUI libraries
# whose scripts fail in a chroot would come with them)
if ! debootstrap --variant=minbase --cache-dir="$debs" "$suite" "$tmp" "$mirror" >"$log" 2>&1 ||
   ! chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get update >>"$log" 2>&1 ||
   ! chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >>"$log" 2>&1; then
	tail -5 "$log" | sed 's/^/# /' >&2
	rm -rf --one-file-system "$tmp"
	echo "building the $suite root failed (log: $log)" >&2
	exit 1
fi
# Only the packages stay: no apt lists or downloaded .debs.
chroot "$tmp" apt-get clean >/dev/null 2>&1
rm -rf "$tmp"/var/lib/apt/lists/*
chmod 755 "$tmp"	# mktemp's 0700: the build uid must reach the root
date -u +%FT%TZ >"$tmp/.khub-root-complete"
rm -rf --one-file-system "$root"
mv "$tmp" "$root" || exit 1
rm -f "$log"
echo "$root"
