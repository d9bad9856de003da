#!/bin/bash
# t0244-runbook.sh -- walks the on-call runbook (docs/runbook.md) for the
# incidents no other test covers step by step. "Restore": the runbook's
# exact sequence (khub backup, khub backup --verify, khub restore into a
# fresh data dir, khub fsck --json clean, khub serve) gives back the repo,
# its LFS bytes and its tokens. "Bucket unreachable" (a real Ceph RGW,
# radosgw stopped): a read of an LFS file answers 503 with Retry-After
# (never a 404, 401 or a 502), a HEAD and the LFS batch too, while git
# reads of the repo (small files, the tree, git clone) and /api/health keep
# answering 200; /metrics counts the 503s; radosgw restarted, the same reads
# answer 200 with the right bytes and nothing else is needed.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$(dirname "$0")/../lib/ceph-s3.sh"
for tool in jq git; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
khub_setup
trap 's3_stop; khub_teardown' EXIT
sha256() { sha256sum "$1" | cut -c1-64; }
W=$TEST_DIR/work
SO=build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so

# ==== Restore (docs/runbook.md "Restore from a backup"), local store =====================
make_kernel_tree "$W/relu" relu
khub import "$W/relu" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log" || bail "import failed"
khub admin user create alice >/dev/null 2>&1
khub admin org create acme >/dev/null 2>&1
khub admin member set acme alice write >/dev/null 2>&1
TOK=$(khub admin token create alice --scope read 2>/dev/null | tail -n 1)
khub_start
BK=$TEST_DIR/backup
khub backup "$BK" >"$TEST_DIR/backup.out" 2>&1
is "$?" 0 "runbook restore 1: khub backup DIR exits 0 while khub serves"
khub backup --verify "$BK" >"$TEST_DIR/verify.out" 2>&1
is "$?" 0 "runbook restore 2: khub backup --verify DIR exits 0"
khub_stop
OLD=$KHUB_DATA_DIR
export KHUB_DATA_DIR=$TEST_DIR/restored	# a fresh, absent data dir
khub restore "$BK" >"$TEST_DIR/restore.out" 2>&1
is "$?" 0 "runbook restore 3: khub restore DIR into an absent data dir exits 0" ||
	sed 's/^/# /' "$TEST_DIR/restore.out" | tail -20
khub fsck --json >"$TEST_DIR/fsck.json" 2>"$TEST_DIR/fsck.err"
is "$?" 0 "runbook restore 4: khub fsck --json exits 0"
is "$(jq -c '[.damaged, .unrepaired, .complete]' "$TEST_DIR/fsck.json")" "[0,0,true]" \
	"and says damaged 0, unrepaired 0, complete true"
khub_start
GOT=$(curl -s -H "Authorization: Bearer $TOK" "$KHUB_URL/kernels/acme/relu/resolve/main/$SO" | sha256sum | cut -c1-64)
is "$GOT" "$(sha256 "$W/relu/$SO")" "runbook restore 5: khub serve on it answers the LFS file, byte-identical, to a restored token"
is "$(curl -s "$KHUB_URL/api/health" | jq -r .status)" ok "and /api/health says ok"
khub jobs >"$TEST_DIR/jobs.out" 2>&1
is "$?" 0 "khub jobs answers on the restored hub"
khub_stop
rm -rf "$OLD"
export KHUB_DATA_DIR=$OLD

# ==== Bucket unreachable (docs/runbook.md "Object store unreachable"), real Ceph RGW ======
if ! command -v radosgw >/dev/null 2>&1 || ! command -v ceph-mon >/dev/null 2>&1; then
	diag "SKIP the bucket part: Ceph packages missing"
	done_testing
	exit
fi
s3_start
make_kernel_tree "$W/s3k" relu
khub import "$W/s3k" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log" || bail "s3 import failed"
khub admin user create root --site-admin >/dev/null 2>&1
ROOT=$(khub admin token create root --scope read 2>/dev/null | tail -n 1)
khub_start
BASE=$KHUB_URL/kernels/acme/relu
OID=$(sha256 "$W/s3k/$SO")
SIZE=$(stat -c %s "$W/s3k/$SO")
is "$(curl -s "$BASE/resolve/main/$SO" | sha256sum | cut -c1-64)" "$OID" "s3: the LFS file is served from the bucket"
metric5() { curl -s -H "Authorization: Bearer $ROOT" "$KHUB_URL/metrics" |
	awk '$1 ~ /^khub_http_requests_total\{/ && $1 ~ /status="503"/ { n += $2 } END { print n + 0 }'; }
M0=$(metric5)

RGW_PID=$(cat "$S3_DIR/run/client.rgw.pid")
kill "$RGW_PID"
for _ in $(seq 1 100); do kill -0 "$RGW_PID" 2>/dev/null || break; sleep 0.2; done
ok $(! curl -s -o /dev/null "$S3_ENDPOINT/"; echo $?) "radosgw stopped: the bucket refuses connections"

curl -s -D "$TEST_DIR/get.h" -o "$TEST_DIR/get.body" "$BASE/resolve/main/$SO"
is "$(head -n 1 "$TEST_DIR/get.h" | cut -d' ' -f2)" 503 "bucket down: a GET of the LFS file answers 503"
like "$(grep -i '^retry-after:' "$TEST_DIR/get.h")" '[0-9]' "with Retry-After"
like "$(jq -r .error "$TEST_DIR/get.body" 2>/dev/null)" 'LFS store' "and a JSON error that names the LFS store"
curl -s -I -o /dev/null -D "$TEST_DIR/head.h" "$BASE/resolve/main/$SO"
is "$(head -n 1 "$TEST_DIR/head.h" | cut -d' ' -f2)" 503 "a HEAD of it answers 503 too (not 404: the object is not missing)"
BATCH=$(curl -s -D "$TEST_DIR/batch.h" -o "$TEST_DIR/batch.json" -w '%{http_code}' -H "Content-Type: application/vnd.git-lfs+json" \
	--data "{\"operation\":\"download\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$OID\",\"size\":$SIZE}]}" \
	"$BASE.git/info/lfs/objects/batch")
is "$BATCH" 503 "the LFS batch API answers 503 (not a per-object 404: git lfs would call the object missing)"
like "$(grep -i '^retry-after:' "$TEST_DIR/batch.h")" '[0-9]' "with Retry-After (git lfs retries)"
is "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/resolve/main/build/torch-cpu/__init__.py")" 200 \
	"a file stored in git still answers 200"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/kernels/acme/relu/tree/main")" 200 "the tree answers 200"
GIT_LFS_SKIP_SMUDGE=1 git clone -q "$KHUB_URL/kernels/acme/relu" "$TEST_DIR/clone" >/dev/null 2>&1
ok $? "git clone of the repo works"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/health")" 200 "/api/health still answers 200 (no node taken out)"
M1=$(metric5)
ok $([ "$M1" -ge $((M0 + 2)) ]; echo $?) "/metrics counts the 503s (khub_http_requests_total{status=\"503\"}: $M0 -> $M1)"
like "$(cat "$TEST_DIR/server.log")" 'lfs s3' "the server log names the S3 failure"

radosgw -c "$S3_DIR/ceph.conf" -n client.rgw
for _ in $(seq 1 180); do curl -s -o /dev/null "$S3_ENDPOINT/" && break; sleep 1; done
is "$(curl -s "$BASE/resolve/main/$SO" | sha256sum | cut -c1-64)" "$OID" \
	"radosgw restarted: the LFS file answers again, byte-identical, nothing restarted in khub"
is "$(curl -s -o /dev/null -w '%{http_code}' -I "$BASE/resolve/main/$SO")" 200 "and its HEAD 200"
khub fsck --json >"$TEST_DIR/fsck-s3.json" 2>"$TEST_DIR/fsck-s3.err"
is "$?" 0 "khub fsck --json after the outage exits 0"
is "$(jq -c '[.damaged, .lfs_backend]' "$TEST_DIR/fsck-s3.json")" '[0,"s3"]' "nothing damaged in the bucket"
khub_stop
done_testing
