#!/bin/bash
# t0214-lfs-verify.sh -- a local LFS object whose bytes changed after they
# were verified is never served: a byte flipped in place (dd conv=notrunc),
# and one flipped with the mtime put back (touch -d), are each answered 502
# in JSON by resolve and by the LFS download URL, not with the changed bytes,
# and the object is moved to data_dir/quarantine/lfs (logged, counted in
# /metrics); an untouched object is still served whole, without a re-hash.
# The scrub (scrub_mb_per_s) finds a flipped byte in an object nobody reads,
# quarantines it and reports it in /metrics and the log.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
for tool in python3 curl jq; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

khub_setup
khub admin org create acme >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin member set acme alice admin >/dev/null 2>&1
TOK=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
khub admin user create root --site-admin >/dev/null 2>&1
ROOT=$(khub admin token create root --scope read 2>/dev/null | tail -n 1)
S=$TEST_DIR/src
make_kernel_tree "$S" relu
for f in good flip touched fetched scrubbed; do head -c 300000 /dev/urandom >"$S/build/torch-cpu/$f.bin"; done
khub import "$S" --repo acme/relu --branch main >/dev/null 2>"$TEST_DIR/import.err" || bail "import failed"
khub_start
sha256() { sha256sum "$1" | cut -d' ' -f1; }
declare -A OID OBJ
for f in good flip touched fetched scrubbed; do
	OID[$f]=$(sha256 "$S/build/torch-cpu/$f.bin")
	OBJ[$f]=$(lfs_object_file "${OID[$f]}")
done
ok "$(for f in good flip touched fetched scrubbed; do [ -f "${OBJ[$f]}" ] || echo missing; done | grep -c missing)" \
	"five LFS objects stored by khub import"
U="$KHUB_URL/kernels/acme/relu/resolve/main/build/torch-cpu"
metric() { curl -s -H "Authorization: Bearer $ROOT" "$KHUB_URL/metrics" | awk -v s="$1" '$1 == s { v = $2 } END { print v == "" ? "absent" : v }'; }
quarantined() { ls "$KHUB_DATA_DIR/quarantine/lfs/$1".* >/dev/null 2>&1 && [ ! -e "${OBJ[$2]}" ]; }
# flip FILE: one byte in the middle changed in place
flip() { printf '\xff' | dd of="$1" bs=1 seek=150000 conv=notrunc status=none; }

# ---- an untouched object: served whole, no re-hash -------------------------------
is "$(curl -s -o "$TEST_DIR/good" -w '%{http_code}' "$U/good.bin")" 200 "an untouched object: 200"
is "$(sha256 "$TEST_DIR/good")" "${OID[good]}" "byte for byte"
is "$(metric khub_lfs_rehashed_total)" 0 "served without a re-hash (its verification was recorded at import)"

# ---- a byte flipped in place -----------------------------------------------------
flip "${OBJ[flip]}"
code=$(curl -s -o "$TEST_DIR/flip" -w '%{http_code}' "$U/flip.bin")
is "$code" 502 "a flipped byte: 502, not 200 with the changed bytes"
like "$(jq -r .error "$TEST_DIR/flip" 2>/dev/null)" "could not give ${OID[flip]} intact" "a JSON error naming the object"
ok "$(quarantined "${OID[flip]}" flip; echo $?)" "the object is in data_dir/quarantine/lfs, out of the store"
like "$(grep -F "${OID[flip]}" "$TEST_DIR/server.log")" "is damaged" "the server log says so"
is "$(metric khub_lfs_damaged_on_read_total)" 1 "khub_lfs_damaged_on_read_total counts it"
is "$(curl -s -o /dev/null -w '%{http_code}' "$U/flip.bin")" 404 "then it is missing (404), as any object not stored"

# ---- a byte flipped with the mtime put back ---------------------------------------
mtime=$(stat -c %y "${OBJ[touched]}")
flip "${OBJ[touched]}"
touch -d "$mtime" "${OBJ[touched]}"
is "$(stat -c %y "${OBJ[touched]}")" "$mtime" "a flip with its mtime restored (touch -d)"
code=$(curl -s -o "$TEST_DIR/touched" -w '%{http_code}' -H 'Range: bytes=149990-150009' "$U/touched.bin")
is "$code" 502 "a ranged GET of it: 502 (the ctime moved; re-hashed before the first byte)"
ok "$(quarantined "${OID[touched]}" touched; echo $?)" "quarantined"

# ---- the LFS download URL (git lfs) ----------------------------------------------
href=$(curl -s -u "alice:$TOK" -H "Content-Type: application/vnd.git-lfs+json" \
	--data "{\"operation\":\"download\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"${OID[fetched]}\",\"size\":300000}]}" \
	"$KHUB_URL/kernels/acme/relu.git/info/lfs/objects/batch" | jq -r '.objects[0].actions.download.href')
like "$href" '^http' "a signed LFS download URL"
is "$(curl -s -o "$TEST_DIR/fetched" -w '%{http_code}' "$href")" 200 "before the flip: 200"
flip "${OBJ[fetched]}"
code=$(curl -s -o "$TEST_DIR/fetched" -w '%{http_code}' "$href")
is "$code" 502 "after it: the download URL answers 502"
like "$(jq -r .message "$TEST_DIR/fetched" 2>/dev/null)" "intact" "in JSON (git-lfs reads message)"
ok "$(quarantined "${OID[fetched]}" fetched; echo $?)" "quarantined"

is "$(curl -s -o "$TEST_DIR/good2" -w '%{http_code}' "$U/good.bin")" 200 "the untouched object: still 200"
is "$(sha256 "$TEST_DIR/good2")" "${OID[good]}" "and whole"
is "$(metric khub_lfs_rehashed_total)" 3 "three re-hashes: the three changed files, nothing else"

# ---- the scrub: a flip in an object nobody reads -----------------------------------
khub_stop
printf '\x00' | dd of="${OBJ[scrubbed]}" bs=1 seek=10 conv=notrunc status=none
LEFT=$(find "$KHUB_DATA_DIR/lfs/objects" -type f | wc -l)
KHUB_SCRUB_MB_PER_S=1000 khub_start
for _ in $(seq 1 600); do
	[ "$(metric khub_lfs_scrub_completed_timestamp_seconds)" != 0 ] && break
	sleep 0.2
done
like "$(metric khub_lfs_scrub_completed_timestamp_seconds)" '^[1-9]' "a scrub pass ran at start-up and completed"
is "$(metric khub_lfs_scrub_damaged_total)" 1 "khub_lfs_scrub_damaged_total: 1"
is "$(metric khub_lfs_scrub_objects_total)" "$LEFT" "khub_lfs_scrub_objects_total: every object left ($LEFT)"
ok "$(quarantined "${OID[scrubbed]}" scrubbed; echo $?)" "the damaged object is quarantined"
like "$(grep -F "lfs scrub: object ${OID[scrubbed]}" "$TEST_DIR/server.log")" "damaged" "the log names it"
[ -e "${OBJ[good]}" ]
ok $? "the good object stays"
is "$(curl -s -o "$TEST_DIR/good3" -w '%{http_code}' "$U/good.bin")" 200 "and is served"
is "$(sha256 "$TEST_DIR/good3")" "${OID[good]}" "whole"
is "$(metric khub_lfs_rehashed_total)" 0 "without a re-hash (the scrub recorded it again)"

khub_stop
done_testing
