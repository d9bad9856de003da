#!/bin/bash
# t0103-lazy-background.sh -- lazily mirrored downloads run on the work
# queue, not on the server's request threads: while several cold requests
# for a large file wait on a slow upstream (the fault proxy throttles it),
# metadata requests (repo info, tree, a small file of another repo) still
# answer within a second each; every download then completes with the right
# bytes, and the upstream is asked for the file once (single-flight). With
# one work thread and room for one waiting job, a third file is refused at
# once (503, Retry-After), and a request whose job outlasts work_wait_ms
# gets 503 with Retry-After too. Two mirror nodes on one data dir that miss
# the same file at once fetch it from the upstream once.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 git curl; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
BIG_MB=${BIG_MB:-48}
COLD=${COLD:-12}	# more cold clients than the mirror has request threads (4)

hubs_setup
hub_init up
hub_init mirror
UP=$(hub_url up)
MI=$(hub_url mirror)
hub_spawn up
KHUB_THREADS=4 hub_spawn mirror
hub_wait up

ORG=acme
LZ_VARIANT=torch211-cxx11-rocm71-x86_64-linux
make_kernel_tree "$TEST_DIR/src/lzb" lzb
mkdir -p "$TEST_DIR/src/lzb/build/$LZ_VARIANT"
printf 'x = 1\n' >"$TEST_DIR/src/lzb/build/$LZ_VARIANT/__init__.py"
BIG=$TEST_DIR/src/lzb/build/$LZ_VARIANT/_lzb_rocm.abi3.so
head -c $((BIG_MB * 1024 * 1024)) /dev/urandom >"$BIG"
BIG_OID=$(sha256sum "$BIG" | cut -d' ' -f1)
for i in 1 2 3; do head -c 1000000 /dev/urandom >"$TEST_DIR/src/lzb/build/$LZ_VARIANT/_slow$i.abi3.so"; done
TWIN=$TEST_DIR/src/lzb/build/$LZ_VARIANT/_twin.abi3.so
head -c 2000000 /dev/urandom >"$TWIN"
TWIN_OID=$(sha256sum "$TWIN" | cut -d' ' -f1)
rm_big() { rm -f "$BIG"; }
SHA_LZB=$(hub up import "$TEST_DIR/src/lzb" --repo $ORG/lzb --branch main 2>>"$TEST_DIR/import.log")
rm_big
make_kernel_tree "$TEST_DIR/src/meta" meta
SHA_META=$(hub up import "$TEST_DIR/src/meta" --repo $ORG/meta --branch main 2>>"$TEST_DIR/import.log")
like "$SHA_LZB/$SHA_META" '^[0-9a-f]{40}/[0-9a-f]{40}$' "upstream seeded (a ${BIG_MB} MiB file in a lazy variant)"

hub_wait mirror
proxy_start "$UP"
cat >"$TEST_DIR/mirror.json" <<EOF
{"upstreams": [{"name": "up", "url": "$PROXY_URL", "concurrency": 4, "max_retries": 2}],
 "selections": [{"name": "s", "upstream": "up", "repos": ["$ORG/lzb", "$ORG/meta"], "refs": ["main"],
                 "eager_variants": ["torch-*", "torch21*-cxx11-cu12*-x86_64-linux"], "lazy": true}]}
EOF
hub mirror mirror sync --mirror-config "$TEST_DIR/mirror.json" >"$TEST_DIR/sync.out" 2>"$TEST_DIR/sync.err"
ok $? "mirror synced both repos" || sed 's/^/#   /' "$TEST_DIR/sync.err"
check "the big file is not in the mirror's store yet" -- test ! -e "$(lfs_object mirror "$BIG_OID")"

# a metadata probe: "status seconds" of one request
probe() { curl -s -o /dev/null -m 10 -w '%{http_code} %{time_total}\n' "$1"; }
META_URLS=("$MI/api/kernels/$ORG/meta" "$MI/api/kernels/$ORG/meta/tree/main" "$MI/api/kernels/$ORG/lzb"
	"$MI/kernels/$ORG/meta/resolve/main/README.md")
for u in "${META_URLS[@]}"; do
	is "$(probe "$u" | cut -d' ' -f1)" 200 "metadata answers before the downloads: ${u#"$MI"}"
done

# ~8 s for the big file through the proxy
proxy_rules "[{\"match\": \"_lzb_rocm.abi3.so\", \"action\": \"throttle\", \"bytes_per_sec\": $((BIG_MB * 1024 * 1024 / 8))}]"
n0=$(lines "$PROXY_LOG")
pids=()
for i in $(seq 1 "$COLD"); do
	curl -s -m 120 -o "$TEST_DIR/big$i" -w '%{http_code}\n' \
		"$MI/kernels/$ORG/lzb/resolve/main/build/$LZ_VARIANT/_lzb_rocm.abi3.so" >"$TEST_DIR/big$i.code" &
	pids+=($!)
done
sleep 1
# metadata while the downloads wait on the upstream
: >"$TEST_DIR/probes"
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do
	running=0
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && running=1; done
	[ $running = 1 ] || break
	for u in "${META_URLS[@]}"; do probe "$u" >>"$TEST_DIR/probes"; done
done
for p in "${pids[@]}"; do wait "$p"; done
nprobes=$(wc -l <"$TEST_DIR/probes")
slow=$(awk '$1 != 200 || $2 >= 1.0' "$TEST_DIR/probes" | wc -l)
worst=$(sort -k2 -n "$TEST_DIR/probes" | tail -n 1)
diag "$nprobes metadata requests during the downloads; slowest: $worst"
ok $((nprobes < 4)) "metadata requests were made while the downloads ran ($nprobes)"
is "$slow" 0 "each answered 200 within a second while $COLD cold downloads waited on the upstream"

results=$(for i in $(seq 1 "$COLD"); do
	touch "$TEST_DIR/big$i"
	echo "$(cat "$TEST_DIR/big$i.code")/$(sha256sum <"$TEST_DIR/big$i" | cut -d' ' -f1 | cut -c1-12)"
done | sort | uniq -c | tr -s ' ' | tr '\n' ';')
is "$results" " $COLD 200/${BIG_OID:0:12};" "all $COLD cold downloads got 200 and the right bytes"
nreq=$(lines_since "$PROXY_LOG" "$n0" | grep -c '_lzb_rocm.abi3.so')
is "$nreq" 1 "the upstream was asked for the file once (one job for all the waiting requests)"
check "the object is in the mirror's store" -- test -s "$(lfs_object mirror "$BIG_OID")"
is "$(curl -s -o /dev/null -w '%{http_code}' "$MI/kernels/$ORG/lzb/resolve/main/build/$LZ_VARIANT/_lzb_rocm.abi3.so")" 200 \
	"a later request is served from the store"
like "$(grep -c 'ERROR' "$(hub_log mirror)")" '^0$' "no errors in the mirror's log"

# ---- a full queue and a job past work_wait_ms -----------------------------------------------
hub_stop mirror
KHUB_WORK_THREADS=1 KHUB_WORK_QUEUE_MAX=1 KHUB_WORK_WAIT_MS=1500 hub_start mirror
proxy_rules '[{"match": "_slow", "action": "throttle", "bytes_per_sec": 50000}]'
slow_url() { echo "$MI/kernels/$ORG/lzb/resolve/main/build/$LZ_VARIANT/_slow$1.abi3.so"; }
curl -s -o /dev/null -D "$TEST_DIR/slow1.h" -w '%{http_code} %{time_total}\n' "$(slow_url 1)" >"$TEST_DIR/slow1.code" &
p1=$!
sleep 0.3
curl -s -o /dev/null -w '%{http_code}\n' "$(slow_url 2)" >"$TEST_DIR/slow2.code" &
p2=$!
sleep 0.3
is "$(curl -s -o /dev/null -D "$TEST_DIR/slow3.h" -w '%{http_code}' "$(slow_url 3)")" 503 \
	"one job running, one waiting, work_queue_max=1: a third file is refused"
like "$(cat "$TEST_DIR/slow3.h")" 'Retry-After: [0-9]+' "… with Retry-After"
wait $p1 $p2
read -r code1 secs1 <"$TEST_DIR/slow1.code"
is "$code1" 503 "a download whose job outlasts work_wait_ms=1500 answers 503"
like "$(cat "$TEST_DIR/slow1.h")" 'Retry-After: [0-9]+' "… with Retry-After"
ok "$(/usr/bin/python3 -c "print(0 if 1.4 < $secs1 < 10 else 1)")" "… after about work_wait_ms ($secs1 s)"
is "$(curl -s -o /dev/null -w '%{http_code}' "$MI/api/kernels/$ORG/meta")" 200 "metadata still answers meanwhile"

# ---- two mirror nodes miss the same object at once --------------------------------------------
# A second khub serve on the mirror's data dir (one database, one store):
# cold requests for one file through both nodes reach the upstream once
# (the object's DB_LOCK_LAZY_FETCH: the node that waited finds it stored).
hub_stop mirror
hub_start mirror
hub_init mirror2
ln -s "$TEST_DIR/mirror/data" "$TEST_DIR/mirror2/data"
hub_start mirror2
M2=$(hub_url mirror2)
proxy_rules '[{"match": "_twin", "action": "throttle", "bytes_per_sec": 700000}]'
n0=$(lines "$PROXY_LOG")
pids=()
for i in 1 2 3 4 5 6; do
	base=$MI; [ $((i % 2)) = 0 ] && base=$M2
	curl -s -m 120 -o "$TEST_DIR/twin$i" -w '%{http_code}\n' \
		"$base/kernels/$ORG/lzb/resolve/main/build/$LZ_VARIANT/_twin.abi3.so" >"$TEST_DIR/twin$i.code" &
	pids+=($!)
done
wait "${pids[@]}"
results=$(for i in 1 2 3 4 5 6; do
	touch "$TEST_DIR/twin$i"
	echo "$(cat "$TEST_DIR/twin$i.code")/$(sha256sum <"$TEST_DIR/twin$i" | cut -d' ' -f1 | cut -c1-12)"
done | sort | uniq -c | tr -s ' ' | tr '\n' ';')
is "$results" " 6 200/${TWIN_OID:0:12};" "six cold downloads through two mirror nodes: 200 and the right bytes"
is "$(lines_since "$PROXY_LOG" "$n0" | grep -c '_twin.abi3.so')" 1 "the upstream was asked for the file once across both nodes"
done_testing
