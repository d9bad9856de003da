#!/bin/bash
# t0182-lfs-migrate.sh -- khub lfs migrate --to s3 on a real Ceph RGW: it
# copies a serving hub's local LFS store into the bucket (the hub keeps
# serving), refuses a local object whose bytes do not hash to its name,
# resumes (a second run copies nothing new), and a hub switched to
# lfs_backend = s3 serves the same bytes with the local objects gone.
# fsck finds the migrated bucket clean; khub backup reads the
# objects from the bucket (incrementally: a second backup downloads none)
# and khub restore puts them into another, empty bucket, from which a hub
# on the restored data dir serves the same bytes.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$(dirname "$0")/../lib/ceph-s3.sh"
s3_skip_unless_ceph
khub_setup
trap 's3_stop; khub_teardown' EXIT

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
head -c 3000000 /dev/urandom >"$SRC/build/torch-cpu/weights.bin"
V1=$(khub import "$SRC" --repo acme/relu --branch main 2>>"$TEST_DIR/import.log")
like "$V1" '^[0-9a-f]{40}$' "import onto the local backend"
khub_start
OBJS=$KHUB_DATA_DIR/lfs/objects
N=$(find "$OBJS" -type f | wc -l)
ok $([ "$N" -ge 2 ]; echo $?) "the local store holds $N objects"

s3_start	# exports KHUB_LFS_* (the running server keeps its local store)
# a damaged local object: its bytes hash to something else
BAD=$(printf 'not these bytes' | sha256sum | cut -c1-64)
mkdir -p "$OBJS/${BAD:0:2}/${BAD:2:2}" && printf 'other bytes' >"$OBJS/${BAD:0:2}/${BAD:2:2}/$BAD"

# keep reading while the migration runs
URL=$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu/weights.bin
WANT=$(sha256sum "$SRC/build/torch-cpu/weights.bin" | cut -c1-64)
( while :; do curl -s "$URL" | sha256sum | cut -c1-64 >>"$TEST_DIR/reads"; done ) &
READER=$!
khub lfs migrate --to s3 >"$TEST_DIR/m1.out" 2>"$TEST_DIR/m1.err"
is "$?" 1 "migrate exits 1 when an object could not be copied"
kill $READER; wait $READER 2>/dev/null
like "$(cat "$TEST_DIR/m1.out")" "^khub lfs migrate: $N objects copied \([0-9]+ bytes\), 0 already there, 1 failed" "it says what it did"
check "and names the damaged object" -- grep -q "$BAD" "$TEST_DIR/m1.err"
is "$(s3_curl HEAD "$(s3_object_key "$BAD")")" 404 "the damaged object is not in the bucket"
is "$(s3_count_objects)" "$N" "the bucket holds every good object"
is "$(sort -u "$TEST_DIR/reads")" "$WANT" "the hub kept serving the right bytes during the migration ($(wc -l <"$TEST_DIR/reads") reads)"

rm -f "$OBJS/${BAD:0:2}/${BAD:2:2}/$BAD"
khub lfs migrate --to s3 >"$TEST_DIR/m2.out" 2>&1
is "$?" 0 "a second run succeeds"
like "$(head -1 "$TEST_DIR/m2.out")" "^khub lfs migrate: 0 objects copied \(0 bytes\), $N already there, 0 failed" "and resumes: nothing copied again"

khub_stop
mv "$OBJS" "$TEST_DIR/objects.local"
khub_start	# lfs_backend = s3 from the environment
is "$(curl -s "$URL" | sha256sum | cut -c1-64)" "$WANT" "the s3-backed hub serves the migrated object"
STATUS=$(curl -s -o "$TEST_DIR/r" -w '%{http_code}' -r 100-199 "$URL")
is "$STATUS/$(cmp -s "$TEST_DIR/r" <(tail -c +101 "$SRC/build/torch-cpu/weights.bin" | head -c 100); echo $?)" "206/0" "Range on the migrated object"
is "$(find "$KHUB_DATA_DIR/lfs" -path '*/objects/*' -type f 2>/dev/null | wc -l)" 0 "no local object is used"

khub fsck >"$TEST_DIR/out" 2>&1
is "$?" 0 "khub fsck checks the migrated bucket: clean (t0220 tests fsck and gc on s3)"

# ---- backup from the bucket, restore into another bucket -----------------------------------
khub backup "$TEST_DIR/bk" >"$TEST_DIR/b1.out" 2>&1
is "$?" 0 "khub backup on the s3 backend succeeds"
manifest() { /usr/bin/python3 -c 'import json,sys; m = json.load(open(sys.argv[1])); print(m["lfs"]["backend"], m["lfs"]["objects"], m["lfs"]["copied"], m["lfs"]["already_present"])' "$TEST_DIR/bk/manifest.json"; }
is "$(manifest)" "s3 $N $N 0" "its manifest: every linked object read from the bucket ($N)"
is "$(find "$TEST_DIR/bk/lfs" -type f | wc -l)" "$N" "the backup holds $N object files"
khub backup "$TEST_DIR/bk" >"$TEST_DIR/b2.out" 2>&1
is "$?/$(manifest)" "0/s3 $N 0 $N" "a second backup downloads none of them again"
khub_stop
NEW_BUCKET=khub-restored
is "$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
	--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$S3_ENDPOINT/$NEW_BUCKET")" 200 \
	"a second, empty bucket"
OLD_DATA=$KHUB_DATA_DIR
export KHUB_DATA_DIR=$TEST_DIR/restored KHUB_LFS_S3_BUCKET=$NEW_BUCKET
khub restore "$TEST_DIR/bk" >"$TEST_DIR/restore.out" 2>&1
is "$?" 0 "khub restore into a fresh data dir with the empty bucket"
S3_BUCKET=$NEW_BUCKET
is "$(s3_count_objects)" "$N" "the restored bucket holds the $N objects"
khub_start
is "$(curl -s "$URL" | sha256sum | cut -c1-64)" "$WANT" "the restored hub serves the file from the restored bucket"
khub_stop
export KHUB_DATA_DIR=$OLD_DATA
done_testing
