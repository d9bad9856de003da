#!/bin/bash
# t0180-lfs-s3-contract.sh -- the LFS contract on the S3 backend, on a real
# Ceph RGW (deploy/ceph-single.sh): the read contract (resolve HEAD/GET,
# Range), git push/pull with git lfs, the pointer-leak checks, the JS
# client's reads and its uploads, and three nodes behind HAProxy sharing
# the bucket (t0010, t0070, t0110, t0020, t0055, t0183 run unchanged with
# lfs_backend = s3), then a look in the bucket: the objects are there and
# the local store holds none.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$(dirname "$0")/../lib/ceph-s3.sh"
s3_skip_unless_ceph
trap s3_stop EXIT
s3_start

INT=$KHUB_SRC/tests/integration
for t in t0010-read-contract t0070-git t0110-pointer-leak t0020-js-client t0055-js-publish t0183-nodes; do
	run_subtest "s3 ${t%%-*}: " "$INT/$t.sh"
done

n=$(s3_count_objects)
ok $([ "$n" -gt 0 ]; echo $?) "the bucket holds the objects the subtests stored ($n keys)"
done_testing
