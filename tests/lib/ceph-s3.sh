# ceph-s3.sh -- sourced by the S3 backend's tests: a real single-node Ceph
# RGW (deploy/ceph-single.sh) on free loopback ports, and khub pointed at it
# through KHUB_LFS_* variables (every khub process of the test inherits them).

# s3_skip_unless_ceph: SKIP the whole script when the Ceph packages are missing.
s3_skip_unless_ceph() {
	local b
	for b in ceph-mon ceph-osd radosgw radosgw-admin; do
		command -v "$b" >/dev/null 2>&1 ||
			{ echo "1..0 # SKIP $b not installed (apt-get install ceph-mon ceph-osd radosgw ceph-common)"; exit 0; }
	done
}

# s3_start: start the cluster under $S3_DIR; export the S3_* and khub settings.
s3_start() {
	S3_DIR=$(mktemp -d /tmp/khub-ceph.XXXXXX)
	local t0=$SECONDS
	if ! CEPH_MON_PORT=$(free_port) CEPH_RGW_PORT=$(free_port) \
		"$KHUB_SRC/deploy/ceph-single.sh" start "$S3_DIR" >"$S3_DIR/start.log" 2>&1; then
		sed 's/^/# /' "$S3_DIR/start.log" | tail -20
		tail -20 "$S3_DIR"/log/*.log 2>/dev/null | sed 's/^/# /'
		bail "deploy/ceph-single.sh start failed"
	fi
	echo "# ceph (mon, memstore osd, rgw) started in $((SECONDS - t0)) s"
	set -a
	. "$S3_DIR/s3.env"
	set +a
	export KHUB_LFS_BACKEND=s3 KHUB_LFS_S3_ENDPOINT="$S3_ENDPOINT" KHUB_LFS_S3_BUCKET="$S3_BUCKET"
	export KHUB_LFS_S3_REGION="$S3_REGION" KHUB_LFS_S3_PATH_STYLE=1
}

s3_stop() {
	[ -n "${S3_DIR:-}" ] || return 0
	"$KHUB_SRC/deploy/ceph-single.sh" stop "$S3_DIR" >/dev/null 2>&1
	rm -rf "$S3_DIR"
	S3_DIR=
}

# s3_curl METHOD KEY [curl args]: a signed request to the bucket; prints the status.
s3_curl() {
	local method=$1 key=$2 how=(-X "$1")
	shift 2
	[ "$method" = HEAD ] && how=(-I)	# -X HEAD would wait for a body
	curl -s -o "$S3_DIR/answer" -w '%{http_code}' "${how[@]}" \
		-H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
		--aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		"$@" "$S3_ENDPOINT/$S3_BUCKET/$key"
}

# s3_object_key OID: where khub keeps an object in the bucket.
s3_object_key() { echo "objects/${1:0:2}/${1:2:2}/$1"; }

# s3_count_objects: how many keys under objects/ the bucket holds.
s3_count_objects() {
	s3_curl GET "?max-keys=1000&prefix=objects" >/dev/null	# sorted, nothing to encode: curl 7.88 signs queries as written
	grep -o '<Key>' "$S3_DIR/answer" | wc -l
}

# run_subtest PREFIX SCRIPT: run another integration test (with this
# environment) and re-emit its TAP lines as this script's.
run_subtest() {
	local prefix=$1 script=$2 line plan= results=0
	while IFS= read -r line; do
		if [[ "$line" =~ ^ok\ [0-9]+\ *-?\ *(.*)$ ]]; then
			results=$((results + 1)); ok 0 "$prefix${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^not\ ok\ [0-9]+\ *-?\ *(.*)$ ]]; then
			results=$((results + 1)); ok 1 "$prefix${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^1\.\.([0-9]+)(.*)$ ]]; then
			plan=${BASH_REMATCH[1]}
			[[ "${BASH_REMATCH[2]}" == *SKIP* ]] && diag "$prefix${BASH_REMATCH[2]}"
		else
			echo "$line"
		fi
	done < <(bash "$script" 2>&1)
	[ "$plan" = 0 ] && return 0
	is "$results" "$plan" "$prefix ran its whole plan"
}
