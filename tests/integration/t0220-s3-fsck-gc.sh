#!/bin/bash
# t0220-s3-fsck-gc.sh -- khub fsck, khub gc and /metrics with lfs_backend =
# s3 on a real Ceph RGW (one per file). fsck of a healthy hub is clean and
# lists and re-hashes the bucket's objects; /metrics counts them. gc removes
# an orphan in the bucket once older than the grace period, keeps a young
# one and the object of an upload in flight, and still cleans git temp
# packs. fsck finds an object deleted from the bucket (one problem, not one
# per check), an object overwritten with other bytes (attributed to the repo
# using it), a link to a missing object and an object no repo links (a
# notice, not damage); --repair moves the damaged object to the bucket's
# quarantine/lfs/ and drops the dangling link; fsck and /metrics walk a
# listing of more than one page. khub backup, then khub
# restore into an empty bucket, then fsck: clean.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$(dirname "$0")/../lib/ceph-s3.sh"
s3_skip_unless_ceph
for tool in jq psql; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
khub_setup
trap 's3_stop; khub_teardown' EXIT
s3_start

sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1" 2>/dev/null; }
sha256() { sha256sum "$1" | cut -c1-64; }
W=$TEST_DIR/work
# s3_plant FILE: put FILE's bytes into the bucket at their oid's key (with khub's mark); prints the oid
s3_plant() {
	local oid; oid=$(sha256 "$1")
	curl -s -o /dev/null -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H "x-amz-meta-sha256: $oid" \
		--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		--data-binary @"$1" "$S3_ENDPOINT/$S3_BUCKET/$(s3_object_key "$oid")"
	echo "$oid"
}
in_bucket() { [ "$(s3_curl HEAD "$(s3_object_key "$1")")" = 200 ]; }
batch_upload_url() {	# batch_upload_url REPO OID SIZE
	curl -s -u "alice:$TOK" -H "Content-Type: application/vnd.git-lfs+json" \
		--data "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$2\",\"size\":$3}]}" \
		"$KHUB_URL/kernels/$1.git/info/lfs/objects/batch" | jq -r '.objects[0].actions.upload.href'
}

seed=0
for r in relu other; do
	make_kernel_tree "$W/$r" "$r"
	khub import "$W/$r" --repo "acme/$r" --branch main >/dev/null 2>>"$TEST_DIR/import.log" || seed=1
done
ok $seed "two kernel repos imported onto the s3 backend"
RELU_SO=$(sha256 "$W/relu/build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so")
OTHER_SO=$(sha256 "$W/other/build/torch211-cxx11-cu128-x86_64-linux/_other_cuda.abi3.so")
ok $(in_bucket "$RELU_SO" && in_bucket "$OTHER_SO"; echo $?) "their .so objects are in the bucket"
khub admin user create alice >/dev/null 2>&1
khub admin user create root --site-admin >/dev/null 2>&1
khub admin member set acme alice write >/dev/null 2>&1
TOK=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
ROOT=$(khub admin token create root --scope read 2>/dev/null | tail -n 1)
khub_start --metrics-lfs-scan-s 1

# ---- a healthy hub ------------------------------------------------------------------------
khub fsck --json >"$TEST_DIR/fsck0.json" 2>"$TEST_DIR/fsck0.err"
is "$?" 0 "fsck on s3 of a healthy hub exits 0 (it no longer refuses)"
N=$(s3_count_objects)
is "$(jq -c '[.damaged, .complete, .lfs_backend, .lfs_objects]' "$TEST_DIR/fsck0.json")" "[0,true,\"s3\",$N]" \
	"fsck --json: nothing damaged, complete, every object of the bucket listed ($N)"
like "$(cat "$TEST_DIR/fsck0.err")" "$N LFS objects re-hashed" "each object was streamed through sha256"

# ---- /metrics counts the bucket -------------------------------------------------------------
BYTES=$(s3_curl GET "?max-keys=1000&prefix=objects" >/dev/null; grep -o '<Size>[0-9]*' "$S3_DIR/answer" | cut -c7- | awk '{ s += $1 } END { print s }')
metric() { curl -s -H "Authorization: Bearer $ROOT" "$KHUB_URL/metrics" | awk -v s="$1" '$1 == s { print $2 }'; }
got=
for _ in $(seq 1 300); do
	got="$(metric khub_lfs_store_objects) $(metric khub_lfs_store_bytes)"
	[ "$got" = "$N $BYTES" ] && break
	sleep 0.2
done
is "$got" "$N $BYTES" "khub_lfs_store_objects and _bytes count the bucket (not 0)"

# ---- gc ------------------------------------------------------------------------------------
head -c 70000 /dev/urandom >"$W/orphan"
ORPHAN=$(s3_plant "$W/orphan")
OTHER_GIT=$KHUB_DATA_DIR/repos/kernels/acme/other.git/objects/pack
mkdir -p "$OTHER_GIT"
head -c 4000 /dev/urandom >"$OTHER_GIT/tmp_pack_oldXYZ"
touch -d '3 days ago' "$OTHER_GIT/tmp_pack_oldXYZ"
khub gc >"$TEST_DIR/gc1.out" 2>&1
is "$?" 0 "gc on s3 exits 0 (it no longer refuses)"
ok $(in_bucket "$ORPHAN"; echo $?) "gc kept the orphan younger than the grace period (its LastModified)"
ok $([ ! -e "$OTHER_GIT/tmp_pack_oldXYZ" ]; echo $?) "gc removed the old git temp pack"
like "$(tail -n 1 "$TEST_DIR/gc1.out")" "kept 1 unreferenced LFS objects younger than the grace period" "gc says it kept the young orphan"
khub gc --grace 0 --dry-run >"$TEST_DIR/gc-dry.out" 2>&1
ok $(in_bucket "$ORPHAN"; echo $?) "gc --dry-run removes nothing"
like "$(cat "$TEST_DIR/gc-dry.out")" "would remove lfs object $ORPHAN \(70000 bytes\)" "gc --dry-run names the orphan"

# an upload in flight: its object (in the bucket already, unlinked) survives gc --grace 0
head -c 400000 /dev/urandom >"$W/slow.bin"
SLOW=$(s3_plant "$W/slow.bin")
URL=$(batch_upload_url acme/relu "$SLOW" 400000)
like "$URL" '^http' "the batch API hands out an upload URL for the slow object"
curl -s -o /dev/null -w '%{http_code}' -X PUT --limit-rate 20k --data-binary @"$W/slow.bin" "$URL" >"$W/put.status" &
PUT_PID=$!
inflight=1
for _ in $(seq 1 600); do
	[ "$(sql "SELECT count(*) FROM lfs_inflight WHERE oid = '$SLOW'")" = 1 ] && { inflight=0; break; }
	sleep 0.1
done
ok $inflight "the upload in flight is recorded in lfs_inflight"
khub gc --grace 0 >"$TEST_DIR/gc2.out" 2>&1
is "$?" 0 "gc --grace 0 exits 0"
ok $(! in_bucket "$ORPHAN"; echo $?) "gc --grace 0 deleted the orphan from the bucket"
ok $(in_bucket "$SLOW"; echo $?) "gc --grace 0 kept the object of the upload in flight"
ok $(in_bucket "$RELU_SO" && in_bucket "$OTHER_SO"; echo $?) "gc kept the objects commits reference"
like "$(tail -n 1 "$TEST_DIR/gc2.out")" "freed 1 LFS objects \(70000 bytes\).*, 1 in use$" \
	"gc reports the deleted orphan and the object a write names"
kill -0 $PUT_PID 2>/dev/null
ok $? "the upload was still in flight while gc ran"
wait $PUT_PID
is "$(cat "$W/put.status")" 200 "the upload completes"

khub backup "$TEST_DIR/bk" >"$TEST_DIR/bk.out" 2>&1
is "$?" 0 "khub backup on s3 (before the damage below)"
N_BACKUP=$(find "$TEST_DIR/bk/lfs" -type f | wc -l)

# ---- damage ---------------------------------------------------------------------------------
# 1. relu's .so deleted from the bucket (a commit references it, relu links it)
s3_curl DELETE "$(s3_object_key "$RELU_SO")" >/dev/null
# 2. other's .so overwritten with other bytes (same size, khub's mark forged)
head -c 1500000 /dev/urandom >"$W/evil.bin"
curl -s -o /dev/null -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H "x-amz-meta-sha256: $OTHER_SO" \
	--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	--data-binary @"$W/evil.bin" "$S3_ENDPOINT/$S3_BUCKET/$(s3_object_key "$OTHER_SO")"
# 3. an object linked to relu (uploaded, no commit) deleted from the bucket
head -c 30000 /dev/urandom >"$W/linked.bin"
LINKED=$(sha256 "$W/linked.bin")
curl -s -o /dev/null -X PUT --data-binary @"$W/linked.bin" "$(batch_upload_url acme/relu "$LINKED" 30000)"
is "$(sql "SELECT count(*) FROM lfs_repo_objects WHERE oid = '$LINKED'")" 1 "an uploaded object is linked to acme/relu"
s3_curl DELETE "$(s3_object_key "$LINKED")" >/dev/null
# 4. an object no repo links
head -c 20000 /dev/urandom >"$W/stray.bin"
STRAY=$(s3_plant "$W/stray.bin")

khub fsck --json >"$TEST_DIR/fsck1.json" 2>"$TEST_DIR/fsck1.err"
is "$?" 1 "fsck of the damaged bucket exits 1"
found() { jq -e --arg r "$1" --arg w "$2" --arg x "$3" \
	'[.problems[] | select(.repo == $r and (.what | test($w)) and (.where | test($x)))] | length == 1' \
	"$TEST_DIR/fsck1.json" >/dev/null; }
check "reports the object deleted from the bucket, for the repo whose commit references it" -- \
	found kernels/acme/relu "referenced by a commit is missing" "$RELU_SO"
is "$(jq --arg o "$RELU_SO" '[.problems[] | select(.where | test($o))] | length' "$TEST_DIR/fsck1.json")" 1 \
	"one missing object is one problem (not one per check)"
check "reports the overwritten object, attributed to the repo using it (not \"-\")" -- \
	found kernels/acme/other "does not match its sha256" "$OTHER_SO"
check "reports the link to a missing object" -- found kernels/acme/relu "LFS link to a missing object" "$LINKED"
is "$(jq -c --arg k "$(s3_object_key "$STRAY")" '[.unlinked[] | select(.where == $k) | .size]' "$TEST_DIR/fsck1.json")" "[20000]" \
	"names the object no repo links (a notice)"
is "$(jq '.damaged' "$TEST_DIR/fsck1.json")" 3 "three problems in all (the unlinked object is no damage)"

khub fsck --repair --json >"$TEST_DIR/repair.json" 2>"$TEST_DIR/repair.err"
is "$?" 1 "fsck --repair exits 1 (relu's deleted object cannot be repaired)"
is "$(jq -c '[.problems[] | select(.state == "repaired") | .what] | sort' "$TEST_DIR/repair.json" | grep -o 'does not match\|LFS link' | tr '\n' ' ')" \
	"LFS link does not match " "--repair: quarantined the overwritten object, dropped the dangling link"
ok $(! in_bucket "$OTHER_SO"; echo $?) "the overwritten object is gone from objects/"
s3_curl GET "?max-keys=1000&prefix=quarantine" >/dev/null
like "$(cat "$S3_DIR/answer")" "<Key>quarantine/lfs/$OTHER_SO\.[0-9]+</Key>" "it is in the bucket's quarantine/lfs/, not deleted"
is "$(sql "SELECT count(*) FROM lfs_repo_objects WHERE oid = '$LINKED'")" 0 "the dangling link is gone"
unrepaired() { jq -c '[.problems[] | select(.state != "repaired") | [.repo, .what, .where]] | sort' "$1"; }
khub fsck --json >"$TEST_DIR/after.json" 2>/dev/null
is "$(unrepaired "$TEST_DIR/after.json")" "$(unrepaired "$TEST_DIR/repair.json")" \
	"fsck after --repair reports exactly what --repair said it could not repair"

# ---- a listing of more than one page (ListObjectsV2 answers 1000 keys at most) ------------------
urls=()
for i in $(seq 1 1100); do urls+=("$S3_ENDPOINT/$S3_BUCKET/objects/zz/junk-$i"); done
curl -s -o /dev/null -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --data-binary x \
	--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "${urls[@]}"
khub fsck --quick --json >"$TEST_DIR/pages.json" 2>"$TEST_DIR/pages.err"
is "$(jq '[.problems[] | select(.what | test("not named by a sha256"))] | length' "$TEST_DIR/pages.json")" 1100 \
	"fsck walks every page of the listing: 1100 keys not named by a sha256 reported"
LISTED=$(( $(jq '.lfs_objects' "$TEST_DIR/pages.json") + 1100 ))
got=
for _ in $(seq 1 300); do
	got=$(metric khub_lfs_store_objects)
	[ "$got" = "$LISTED" ] && break
	sleep 0.2
done
is "$got" "$LISTED" "khub_lfs_store_objects counts every page too"

# ---- restore (of the backup made before the damage) into an empty bucket, then fsck -------------
khub_stop
NEW_BUCKET=khub-restored
is "$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
	--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$S3_ENDPOINT/$NEW_BUCKET")" 200 \
	"a second, empty bucket"
export KHUB_DATA_DIR=$TEST_DIR/restored KHUB_LFS_S3_BUCKET=$NEW_BUCKET
khub restore "$TEST_DIR/bk" >"$TEST_DIR/restore.out" 2>&1
is "$?" 0 "khub restore into a fresh data dir with the empty bucket"
like "$(tail -n 1 "$TEST_DIR/restore.out")" "run khub fsck" "restore ends by asking for khub fsck"
khub fsck --json >"$TEST_DIR/restored.json" 2>"$TEST_DIR/restored.err"
is "$?" 0 "khub fsck of the restored hub on s3 exits 0"
is "$(jq -c '[.damaged, .complete, .lfs_backend, .lfs_objects]' "$TEST_DIR/restored.json")" "[0,true,\"s3\",$N_BACKUP]" \
	"nothing damaged, complete, every restored object listed and re-hashed"
done_testing
