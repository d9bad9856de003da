# install-deps.sh -- sourced by quickstart.sh and test.sh: install the Debian
# packages khub needs, only those missing. install_deps build|test
install_deps() {
	local want=(build-essential autoconf automake libtool pkg-config
		libmicrohttpd-dev libgit2-dev libjansson-dev libpq-dev libssl-dev
		libcurl4-openssl-dev libarchive-dev zstd libelf-dev bubblewrap ccache libseccomp-dev libcmark-gfm-dev libcmark-gfm-extensions-dev zlib1g-dev
		libsystemd-dev	# sd_notify: khub serve under a Type=notify unit
		debhelper dpkg-dev	# make deb (debian/, dpkg-buildpackage)
		postgresql git git-lfs curl python3 ca-certificates
		nodejs npm)	# npm installs the web UI's chart library (web/package.json), compiled in
	if [ "${1:-build}" = test ]; then
		want+=(chromium)	# the web UI's end-to-end test (tests/web, playwright-core)
		want+=(jq)	# JSON in the shell tests (t0170-fsck-gc reads fsck --json with it)
		want+=(python3-cryptography)	# t0199 re-signs a tampered sync bundle with the trusted Ed25519 key
		want+=(strace)	# t0185-file-body counts the sendfile calls of a download
		want+=(debootstrap)	# t0286 builds in a Debian 11 root made with it (tests/lib/debian-root.sh)
		want+=(ceph-mon ceph-osd radosgw ceph-common)	# deploy/ceph-single.sh: the S3 backend's tests run on a real RGW
		want+=(nginx openssl)	# t0174-tls-proxy: deploy/nginx-khub.conf terminating TLS (self-signed)
		want+=(haproxy)	# t0183-nodes: three khub nodes behind deploy/haproxy-khub.cfg
		# khub-worker's tests build a kernel with Debian's torch and compile
		# its HIP source with Debian's hipcc (CUDA sources hipified by python3-torch's torch.utils.hipify).
		want+=(python3-torch libtorch-dev hipcc)
	fi
	local missing=()
	for p in "${want[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
	done
	# node/npm may come from elsewhere (nodesource, nvm): accept working binaries.
	if command -v node >/dev/null && command -v npm >/dev/null; then
		local keep=()
		for p in "${missing[@]}"; do
			[ "$p" = nodejs ] || [ "$p" = npm ] || keep+=("$p")
		done
		missing=("${keep[@]}")
	fi
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "==> installing: ${missing[*]}"
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
