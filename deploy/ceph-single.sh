#!/bin/bash
# ceph-single.sh -- a throw-away single-node Ceph for tests and trials: one
# mon, one OSD (memstore: objects in the OSD's memory, nothing on disk), one
# RADOS Gateway (beast) on a loopback port, an S3 user and a bucket.
#
#   deploy/ceph-single.sh start DIR    # prints nothing on success; see DIR/s3.env
#   deploy/ceph-single.sh stop DIR
#
# Environment: CEPH_MON_PORT (default 22010), CEPH_RGW_PORT (22011),
# CEPH_BUCKET (khub-lfs), CEPH_MEMSTORE_MB (4096: the OSD's memory budget).
# After start, DIR/s3.env holds S3_ENDPOINT, S3_BUCKET, S3_REGION,
# AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (shell syntax) and
# DIR/credentials the same keys in the AWS credentials-file form that
# khub's lfs_s3_credentials_file reads. Needs the Debian packages ceph-mon,
# ceph-osd, radosgw and ceph-common. Runs as the calling user; everything
# (config, logs, sockets, pids) stays under DIR.
set -euo pipefail

MON_PORT=${CEPH_MON_PORT:-22010}
RGW_PORT=${CEPH_RGW_PORT:-22011}
BUCKET=${CEPH_BUCKET:-khub-lfs}
MEM_MB=${CEPH_MEMSTORE_MB:-4096}

die() { echo "ceph-single: $*" >&2; exit 1; }

need_packages() {
	local b
	for b in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool; do
		command -v "$b" >/dev/null || die "missing $b (apt-get install --no-install-recommends ceph-mon ceph-osd radosgw ceph-common)"
	done
}

write_conf() {
	local dir=$1 fsid
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$MON_PORT
mon initial members = a
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms bind msgr1 = false
# auth none cannot do the secure mode radosgw asks the mon for by default
ms mon client mode = crc secure
ms client mode = crc secure
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
keyring = $dir/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon pg warn min per osd = 0
mon max pg per osd = 1000
[mon.a]
mon data = $dir/mon
[osd.0]
osd data = $dir/osd
osd objectstore = memstore
memstore device bytes = $((MEM_MB * 1024 * 1024))
osd max object size = 134217728
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw data = $dir/rgw
rgw dns name = localhost
rgw thread pool size = 64
EOF
}

start_mon() {
	local dir=$1
	ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	monmaptool --create --fsid "$(sed -n 's/^fsid = //p' "$dir/ceph.conf")" \
		--addv a "[v2:127.0.0.1:$MON_PORT]" "$dir/monmap" >/dev/null
	ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring"
	ceph-mon -c "$dir/ceph.conf" -i a
	cephc "$dir" mon stat >/dev/null
}

start_osd() {
	local dir=$1 id
	id=$(cephc "$dir" osd create)
	[ "$id" = 0 ] || die "osd create gave id $id"
	mkdir -p "$dir/osd"
	ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs >"$dir/log/osd-mkfs.out" 2>&1 || die "osd mkfs failed: $(tail -3 "$dir/log/osd-mkfs.out")"
	cephc "$dir" osd crush add osd.0 1.0 host=localhost root=default >/dev/null 2>&1 ||
		cephc "$dir" osd crush add-bucket localhost host >/dev/null
	ceph-osd -c "$dir/ceph.conf" -i 0
	local i
	for i in $(seq 1 120); do
		cephc "$dir" osd dump 2>/dev/null | grep -q '^osd.0 up' && return 0
		sleep 1
	done
	die "osd.0 not up after 120 s"
}

cephc() {
	local dir=$1
	shift
	timeout 60 ceph -c "$dir/ceph.conf" --connect-timeout 30 "$@"
}

start_rgw() {
	local dir=$1 i
	mkdir -p "$dir/rgw"
	radosgw -c "$dir/ceph.conf" -n client.rgw
	for i in $(seq 1 180); do
		curl -s -o /dev/null "http://127.0.0.1:$RGW_PORT/" && return 0
		sleep 1
	done
	die "radosgw not answering on 127.0.0.1:$RGW_PORT after 180 s (see $dir/log/client.rgw.log)"
}

make_user_and_bucket() {
	local dir=$1 ak sk
	ak=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)
	sk=$(head -c 30 /dev/urandom | od -An -tx1 | tr -d ' \n')
	radosgw-admin -c "$dir/ceph.conf" user create --uid=khub --display-name=khub \
		--access-key="$ak" --secret-key="$sk" >/dev/null
	cat >"$dir/s3.env" <<EOF
S3_ENDPOINT=http://127.0.0.1:$RGW_PORT
S3_BUCKET=$BUCKET
S3_REGION=default
AWS_ACCESS_KEY_ID=$ak
AWS_SECRET_ACCESS_KEY=$sk
EOF
	printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$ak" "$sk" >"$dir/credentials"
	chmod 600 "$dir/s3.env" "$dir/credentials"
	# curl 7.88 signs no payload hash itself: S3 wants it (this is the empty body's)
	curl -sf -X PUT -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" --aws-sigv4 "aws:amz:default:s3" --user "$ak:$sk" \
		"http://127.0.0.1:$RGW_PORT/$BUCKET" >/dev/null || die "cannot create bucket $BUCKET"
}

do_start() {
	local dir=$1
	need_packages
	[ ! -e "$dir/ceph.conf" ] || die "$dir already holds a cluster (stop it first)"
	mkdir -p "$dir/run" "$dir/log" "$dir/mon"
	dir=$(cd "$dir" && pwd)
	write_conf "$dir"
	start_mon "$dir"
	start_osd "$dir"
	start_rgw "$dir"
	make_user_and_bucket "$dir"
}

do_stop() {
	local dir=$1 p pid i
	[ -d "$dir" ] || return 0
	for p in client.rgw osd.0 mon.a; do
		[ -f "$dir/run/$p.pid" ] || continue
		pid=$(cat "$dir/run/$p.pid")
		kill "$pid" 2>/dev/null || continue
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -9 "$pid" 2>/dev/null || true
	done
	rm -rf "$dir/mon" "$dir/osd" "$dir/rgw" "$dir/run" "$dir/ceph.conf" "$dir/monmap" "$dir/keyring"
}

case "${1:-}" in
start) [ $# -eq 2 ] || die "usage: $0 start DIR"; do_start "$2" ;;
stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; do_stop "$2" ;;
*) die "usage: $0 start|stop DIR" ;;
esac
