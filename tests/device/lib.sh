# tests/device/lib.sh -- what every farm script on the GPU device machine
# (Ubuntu 24.04, a CUDA torch, nvcc, git; no network) starts with: the
# bundle of tests/device/make_bundle.sh unpacked under /usr (the sandbox shows
# build code /usr read-only, not /tmp), bubblewrap, khub serving on
# 127.0.0.1:$PORT with embedded PostgreSQL, org acme (trusted) with alice its
# admin and her write $TOKEN, a worker token, the kernel repo acme/$1, and a
# toolchain on the machine's torch and nvcc ($CUDA_VARIANT, $CPU_VARIANT).
# Sourced from the repo root; defines pass/fail, khub, worker, api, field,
# run_worker, push_source and loader_env. Logs go to $OUT when set.
#
#   . tests/device/lib.sh; device_setup relu [TOOLCHAIN_JSON_EXTRA]

ROOT=$(pwd)
BUNDLE=${BUNDLE:-$ROOT/.device/bundle.tar.xz}
SHIM=$ROOT/tests/device/kernels_data_shim
PORT=${KHUB_CHECK_PORT:-8080}
PY=${PYTHON:-$(command -v python3)}
E=http://127.0.0.1:$PORT
FAILS=0
SERVER_PID=
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
khub() { PATH=$PGBIN:$PATH LD_LIBRARY_PATH=$B/lib "$B/bin/khub" "$@"; }
worker() { LD_LIBRARY_PATH=$B/lib "$B/bin/khub-worker" "$@"; }
api() {	# api METHOD PATH [JSON]: body on stdout
	curl -s -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"} "$E$2"
}
field() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
seconds_since() { "$PY" -c "print(round($(date +%s.%N) - $1, 1))"; }

device_cleanup() {
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	if [ -n "${OUT:-}" ]; then
		cp "$T"/*.log "$T"/*.json "$OUT"/ 2>/dev/null
	fi
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}

# device_bundle: the bundle under /usr/local/khub-device ($B), bwrap on PATH.
device_bundle() {
	B=/usr/local/khub-device
	rm -rf "$B" && mkdir -p "$B" && tar -xJf "$BUNDLE" -C "$B" || { fail "unpack bundle"; exit 1; }
	chmod 755 "$B"
	if ! command -v bwrap >/dev/null; then
		install -m 755 "$B/bin/bwrap" /usr/local/bin/bwrap
		for so in $(ldd /usr/local/bin/bwrap | awk '/not found/{print $1}'); do
			install -m 644 "$B/lib/$so" /usr/local/lib/
		done
		ldconfig 2>/dev/null
	fi
	PGBIN=$B/usr/lib/postgresql/15/bin
}

# device_accounts REPO: acme (trusted), alice its admin ($TOKEN), worker
# token gpu-1 in $T/worker.token, the repo acme/REPO with a README.
device_accounts() {
	{ khub admin org create acme && khub admin user create alice && khub admin member set acme alice admin &&
		khub admin trust set acme; } >"$T/admin.log" 2>&1 && pass "org acme (trusted), alice admin" ||
		{ fail "admin: $(tail -3 "$T/admin.log")"; exit 1; }
	TOKEN=$(khub admin token create alice --scope write 2>>"$T/admin.log" | tail -n 1)
	khub admin worker add gpu-1 2>>"$T/admin.log" | tail -n 1 >"$T/worker.token"
	chmod 600 "$T/worker.token"
	[ -s "$T/worker.token" ] && pass "khub admin worker add gpu-1" || fail "worker token"
	mkdir -p "$T/readme" && printf '# %s\n' "$1" >"$T/readme/README.md"
	khub import "$T/readme" --repo "acme/$1" --branch main >>"$T/admin.log" 2>&1 || fail "create acme/$1"
}

device_serve() {
	khub serve >"$T/server.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 120); do
		curl -sf "$E/api/health" >/dev/null 2>&1 && break
		sleep 0.25
	done
	curl -sf "$E/api/health" >/dev/null && pass "khub serve on $E" || { fail "khub serve"; tail -20 "$T/server.log"; exit 1; }
}

# device_toolchain [EXTRA_JSON]: the machine's torch + nvcc as toolchain
# torch-cuda (EXTRA_JSON: more members of its entry, e.g. '"benchmarks": true').
device_toolchain() {
	local nvcc
	nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
	printf '{"toolchains": [{"name": "torch-cuda", "python": "%s", "cxx": "g++", "nvcc": "%s"%s}]}\n' \
		"$PY" "$nvcc" "${1:+, $1}" >"$T/toolchains.json"
	worker --check --toolchains "$T/toolchains.json" | tee "$T/check.log"
	CUDA_VARIANT=$(grep -oE 'torch[0-9]+-cxx11-cu[0-9]+-x86_64-linux' "$T/check.log" | head -1)
	CPU_VARIANT=$(echo "$CUDA_VARIANT" | sed -E 's/-cu[0-9]+-/-cpu-/')
	[ -n "$CUDA_VARIANT" ] && pass "the toolchain builds $CUDA_VARIANT" || { fail "no CUDA variant"; exit 1; }
}

run_worker() {	# one pass over the queue
	worker --url "$E" --token-file "$T/worker.token" --toolchains "$T/toolchains.json" --name gpu-1 \
		--work-dir "$T/work" --concurrency 2 --once 2>>"$T/worker.log"
}

# device_clone REPO: alice's clone of acme/REPO in $T/clone.
device_clone() {
	export HOME=$T/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
	mkdir -p "$HOME"
	git config --global user.name khub-device && git config --global user.email device@example.com
	git clone -q "http://alice:$TOKEN@127.0.0.1:$PORT/kernels/acme/$1" "$T/clone" 2>"$T/git.log" || fail "git clone"
}

# loader_env: the real `kernels` loader pointed at this hub.
loader_env() {
	export HF_ENDPOINT=$E HF_TOKEN=$TOKEN HF_HUB_DISABLE_XET=1 HF_HUB_CACHE=$T/hf-cache HF_HOME=$T/hf-home
	export PYTHONUNBUFFERED=1
	if ! "$PY" -c 'import kernels' 2>/dev/null; then
		export PYTHONPATH=$B/py${PYTHONPATH:+:$PYTHONPATH}
		"$PY" -c 'import kernels_data' 2>/dev/null || export PYTHONPATH=$PYTHONPATH:$SHIM
	fi
}

# device_setup REPO [TOOLCHAIN_EXTRA_JSON]: all of the above, up to a
# registered worker and a clone of acme/REPO.
device_setup() {
	T=$(mktemp -d /tmp/kdevice.XXXXXX)
	chmod 755 "$T"
	trap device_cleanup EXIT
	echo "== host: $(uname -m) $(. /etc/os-release; echo "$PRETTY_NAME"), $(nvidia-smi -L 2>/dev/null | head -1)"
	device_bundle
	export KHUB_DATA_DIR=$T/data KHUB_PG_BINDIR=$PGBIN KHUB_LISTEN=127.0.0.1:$PORT KHUB_LOG_LEVEL=info TZ=UTC
	# Ubuntu 24.04's gcc 13 and glibc 2.39 link symbols newer than
	# manylinux_2_28: the farm publishes and keeps the report.
	export KHUB_ABI_POLICY=warn
	unset KHUB_DATABASE_URL KHUB_CONFIG
	device_accounts "$1"
	device_serve
	device_toolchain "${2:-}"
	run_worker || fail "worker registration pass"
	device_clone "$1"
}

device_ccache() {	# Debian's ccache from .device/ccache/ (the machine has none): the build cache
	if ! command -v ccache >/dev/null; then
		install -m 755 "$ROOT/.device/ccache/ccache" /usr/local/bin/ccache
		install -m 644 "$ROOT/.device/ccache/libhiredis.so.0.14" /usr/local/lib/ && ldconfig
	fi
	ccache --version | head -1 && pass "ccache runs here" || { fail "no ccache"; exit 1; }
}

device_result() {
	echo "== summary: $FAILS failures"
	[ "$FAILS" -eq 0 ] && echo "RESULT PASS" || echo "RESULT FAIL"
	[ "$FAILS" -eq 0 ]
}
