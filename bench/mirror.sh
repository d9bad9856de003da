#!/usr/bin/env bash
# bench/mirror.sh -- initial `khub mirror sync` throughput next to curl
# fetching the same bytes from the same upstream, in one run, on loopback.
# Not part of the test suite.
#
# Starts two throw-away khubs (an upstream and a mirror, each with its own
# embedded PostgreSQL), imports one kernel repo with BENCH_FILES LFS files of
# BENCH_FILE_MB MiB in an eagerly mirrored variant into the upstream, then:
# in each of BENCH_ROUNDS rounds (dirty pages flushed before every run):
#   1. curl: every file's resolve URL (by commit sha, as the mirror asks),
#      BENCH_CONCURRENCY at a time (the mirror's "concurrency"), to files in
#      a temp dir on the mirror's filesystem;
#   2. khub mirror sync of that repo into an empty mirror repo and LFS store
#      (eager: every file fetched, verified and stored, then the ref moved);
#   3. curl to /dev/null, and curl to disk + fsync + sha256sum per file (what
#      the mirror does, for reference).
# Prints the median MiB/s of each and the ratio mirror / curl-to-disk (target
# >= 0.8, PASS/MISS; a MISS never fails the script: exit 0 if it ran).
#
# Environment (all optional):
#   BENCH_FILES            number of LFS files                  (default 20)
#   BENCH_FILE_MB          MiB per file                          (default 50)
#   BENCH_CONCURRENCY      parallel transfers, mirror and curl   (default 4)
#   BENCH_ROUNDS           rounds; medians are reported          (default 3)
#   BENCH_RELEASE_BUILD    auto (default): when KHUB_BIN is missing or a sanitizer
#                          build, build a release copy (plain ./configure, -O2) in
#                          the temp dir and measure that; 1: always; 0: never
#   BENCH_RESULTS          where raw outputs go (default bench/results/mirror-DATE)
#   KHUB_BIN               the khub binary (default ./khub)
#   KHUB_LOG_LEVEL         default warn here

set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NFILES=${BENCH_FILES:-20}
FILE_MB=${BENCH_FILE_MB:-50}
CONC=${BENCH_CONCURRENCY:-4}
RESULTS=${BENCH_RESULTS:-$ROOT/bench/results/mirror-$(date +%Y%m%d-%H%M%S)}
export KHUB_LOG_LEVEL=${KHUB_LOG_LEVEL:-warn}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

for tool in curl python3 sha256sum; do
	command -v "$tool" >/dev/null 2>&1 || { echo "mirror.sh: $tool is not installed" >&2; exit 1; }
done

# shellcheck source=../tests/lib/khub-test.sh
. "$ROOT/tests/lib/khub-test.sh"
# shellcheck source=../tests/integration/lib/mirror_hubs.sh
. "$ROOT/tests/integration/lib/mirror_hubs.sh"

mkdir -p "$RESULTS"
hubs_setup
trap 'exit 130' INT TERM

BENCH_RESULTS=$RESULTS
. "$ROOT/bench/lib/release_build.sh"
bench_release_build

now() { date +%s.%N; }
calc() { python3 -c "print($*)"; }

echo "# khub mirror initial sync vs curl, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# machine: $(nproc) CPU cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)" \
	"-- upstream, mirror and curl share them; the ratio is the point"
echo "# khub: $("$KHUB_BIN" version 2>/dev/null | head -1), $KHUB_BUILD"
echo "# data: $NFILES LFS files x $FILE_MB MiB in one eager variant, concurrency $CONC, loopback"

hub_init up
hub_init mirror
hub_spawn up
hub_spawn mirror
hub_wait up
UP=$(hub_url up)

# ---- seed ---------------------------------------------------------------------------
SRC=$TEST_DIR/src
VAR=build/torch211-cxx11-cu128-x86_64-linux
make_kernel_tree "$SRC" bench
rm -f "$SRC/$VAR/_bench_cuda.abi3.so"
t=$(now)
for i in $(seq -w 1 "$NFILES"); do
	head -c $((FILE_MB * 1024 * 1024)) /dev/urandom >"$SRC/$VAR/_bench_$i.abi3.so"
done
SHA=$(hub up import "$SRC" --repo bench/big --branch main 2>"$RESULTS/import.log")
[[ "$SHA" =~ ^[0-9a-f]{40}$ ]] || { cat "$RESULTS/import.log" >&2; bail "import failed"; }
TOTAL=$((NFILES * FILE_MB * 1024 * 1024))
rm -rf "$SRC"
echo "# seeded bench/big@${SHA:0:12} ($TOTAL bytes of LFS) in $(calc "round($(now) - $t, 1)") s"
hub_wait mirror

URLS=$RESULTS/urls.txt
for i in $(seq -w 1 "$NFILES"); do
	echo "$UP/kernels/bench/big/resolve/$SHA/$VAR/_bench_$i.abi3.so"
done >"$URLS"

CURL_DIR=$(hub_data mirror)/../curl-out	# same filesystem as the mirror's LFS store
mkdir -p "$CURL_DIR"
curl_run() {	# curl_run LABEL disk|null|verify -> MiB/s on stdout, details in RESULTS
	local label=$1 dest=$2 t0 t1 got
	rm -f "$CURL_DIR"/*.so
	sync
	t0=$(now)
	case $dest in
	disk)
		xargs -P "$CONC" -I{} sh -c 'curl -sf -o "$1/$(basename "$2")" -w "%{size_download}\n" "$2"' _ "$CURL_DIR" {} \
			<"$URLS" >"$RESULTS/curl-$label.sizes" ;;
	verify)	# what the mirror does per file: download, fsync, then sha256 of the file
		xargs -P "$CONC" -I{} sh -c 'f="$1/$(basename "$2")"; curl -sf -o "$f" -w "%{size_download}\n" "$2" &&
			sync "$f" && sha256sum "$f" >/dev/null' _ "$CURL_DIR" {} <"$URLS" >"$RESULTS/curl-$label.sizes" ;;
	null)
		xargs -P "$CONC" -I{} curl -sf -o /dev/null -w '%{size_download}\n' {} <"$URLS" >"$RESULTS/curl-$label.sizes" ;;
	esac
	t1=$(now)
	got=$(awk '{s += $1} END {print s + 0}' "$RESULTS/curl-$label.sizes")
	[ "$got" = "$TOTAL" ] || echo "# curl $label: got $got bytes, want $TOTAL" >&2
	calc "round($got / 1048576 / ($t1 - $t0), 1)"
	echo "curl $label: $got bytes in $(calc "round($t1 - $t0, 3)") s" >>"$RESULTS/summary.txt"
	rm -f "$CURL_DIR"/*.so
}

CFG=$TEST_DIR/mirror.json
printf '%s\n' "{\"upstreams\": [{\"name\": \"up\", \"url\": \"$UP\", \"concurrency\": $CONC}]," \
	' "selections": [{"name": "bench", "upstream": "up", "repos": ["bench/big"], "refs": ["main"],' \
	'                 "eager_variants": ["torch-*", "torch21*-cxx11-cu12*-x86_64-linux"], "lazy": true}]}' >"$CFG"
MI_DATA=$(hub_data mirror)
[ -d "$MI_DATA/lfs" ] || bail "no mirror data dir at $MI_DATA"
mirror_run() {	# mirror_run ROUND -> MiB/s on stdout: a first sync into an empty mirror repo
	local r=$1 t0 t1 rc line stored
	rm -rf "$MI_DATA/repos/kernels/bench/big.git" "$MI_DATA/lfs/objects"
	rm -f "$MI_DATA"/lfs/tmp/mirror-*
	sync
	t0=$(now)
	hub mirror mirror sync bench --mirror-config "$CFG" >"$RESULTS/mirror-$r.out" 2>"$RESULTS/mirror-$r.err"
	rc=$?
	t1=$(now)
	line=$(grep 'khub mirror: bench:' "$RESULTS/mirror-$r.err")
	stored=$(find "$MI_DATA/lfs/objects" -type f -name '[0-9a-f]*' 2>/dev/null | wc -l)
	echo "mirror round $r: exit $rc, $stored objects stored, wall $(calc "round($t1 - $t0, 3)") s: $line" >>"$RESULTS/summary.txt"
	if [ $rc -ne 0 ] || [ "$stored" -ne "$NFILES" ]; then
		tail -5 "$RESULTS/mirror-$r.err" >&2
		echo "# mirror round $r failed (exit $rc, $stored objects)" >&2
	fi
	calc "round($TOTAL / 1048576 / ($t1 - $t0), 1)"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# warm the upstream's page cache once, unmeasured
xargs -P "$CONC" -I{} curl -sf -o /dev/null {} <"$URLS"

ROUNDS=${BENCH_ROUNDS:-3}
C_DISK=() C_NULL=() C_VERIFY=() M=()
for r in $(seq 1 "$ROUNDS"); do
	C_DISK+=("$(curl_run disk-$r disk)")
	M+=("$(mirror_run "$r")")
	C_NULL+=("$(curl_run null-$r null)")
	C_VERIFY+=("$(curl_run verify-$r verify)")
	echo "# round $r: curl->disk ${C_DISK[-1]}, mirror ${M[-1]}, curl->/dev/null ${C_NULL[-1]}," \
		"curl->disk+fsync+sha256 ${C_VERIFY[-1]} MiB/s"
done
CURL=$(median "${C_DISK[@]}")
CURLNULL=$(median "${C_NULL[@]}")
CURLVERIFY=$(median "${C_VERIFY[@]}")
MIRROR=$(median "${M[@]}")
RATIO=$(calc "round($MIRROR / $CURL, 2)")
RATIO_NULL=$(calc "round($MIRROR / $CURLNULL, 2)")
RATIO_VERIFY=$(calc "round($MIRROR / $CURLVERIFY, 2)")
verdict=$(calc "'PASS' if $RATIO >= 0.8 else 'MISS'")
last=$(grep "mirror round $ROUNDS:" "$RESULTS/summary.txt" | sed 's/.*khub mirror: //')

printf '\n%-64s %10s\n' "transfer of $((TOTAL / 1048576)) MiB ($NFILES files, $CONC at a time), median of $ROUNDS" "MiB/s"
printf '%-64s %10s\n' "curl -> files on disk" "$CURL"
printf '%-64s %10s\n' "khub mirror sync (wall: git fetch, LFS fetch+verify+store, refs)" "$MIRROR"
printf '%-64s %10s\n' "curl -> /dev/null" "$CURLNULL"
printf '%-64s %10s\n' "curl -> disk, then fsync + sha256sum per file (informative)" "$CURLVERIFY"
echo
echo "khub's own line (last round): $last"
echo "ratio mirror / curl-to-disk: $RATIO  (target >= 0.8: $verdict)"
echo "ratio mirror / curl-to-/dev/null: $RATIO_NULL; mirror / curl+fsync+sha256: $RATIO_VERIFY"
echo "raw outputs: $RESULTS"
{
	echo "curl_disk_MiBps=${C_DISK[*]} mirror_MiBps=${M[*]} curl_null_MiBps=${C_NULL[*]} curl_verify_MiBps=${C_VERIFY[*]}"
	echo "median: curl_disk=$CURL mirror=$MIRROR curl_null=$CURLNULL curl_verify=$CURLVERIFY"
	echo "ratio=$RATIO ratio_null=$RATIO_NULL ratio_verify=$RATIO_VERIFY verdict=$verdict build=$KHUB_BUILD"
} >>"$RESULTS/summary.txt"
exit 0
