#!/usr/bin/env bash
# run_build_farm.sh -- the build farm on the GPU device machine (Ubuntu 24.04,
# a CUDA torch, nvcc, git; no network), from the repo root, with the bundle
# of tests/device/make_bundle.sh (khub, khub-worker, their libraries,
# PostgreSQL, the real `kernels` package): khub serves; examples/relu (a
# real CUDA kernel and a CPU op) is pushed as source with git; a worker with
# a toolchain on the machine's torch builds the CUDA variant; the REAL
# loader's get_kernel(repo, version=1) loads it and relu equals torch.relu
# on random GPU tensors. Then the gap path: the environment API asks for the
# CPU build of the same torch (backend="cpu"), the worker builds it, and
# get_kernel(..., backend="cpu") loads it. Prints PASS/FAIL lines, the ABI
# reports, build times; logs go to $OUT when set.
#
#   bash tests/device/run_build_farm.sh
set -u

ROOT=$(pwd)
BUNDLE=${BUNDLE:-$ROOT/.device/bundle.tar.xz}
SHIM=$ROOT/tests/device/kernels_data_shim
PORT=${KHUB_CHECK_PORT:-8080}
PY=${PYTHON:-$(command -v python3)}
FAILS=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

T=$(mktemp -d /tmp/kfarm.XXXXXX)
chmod 755 "$T"
SERVER_PID=
cleanup() {
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	if [ -n "${OUT:-}" ]; then
		cp "$T"/*.log "$T"/*.json "$OUT"/ 2>/dev/null
	fi
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

echo "== host: $(uname -m) $(. /etc/os-release; echo "$PRETTY_NAME"), $(nvidia-smi -L 2>/dev/null | head -1)"
# Under /usr: the sandbox shows build code /usr (read-only) and not /tmp, and
# khub-worker's measuring launcher runs inside it with the bundle's libraries.
B=/usr/local/khub-device
rm -rf "$B" && mkdir -p "$B" && tar -xJf "$BUNDLE" -C "$B" || { fail "unpack bundle"; exit 1; }
chmod 755 "$B"
# The worker's sandbox is bubblewrap (Debian's, carried in the bundle).
if ! command -v bwrap >/dev/null; then
	install -m 755 "$B/bin/bwrap" /usr/local/bin/bwrap
	for so in $(ldd /usr/local/bin/bwrap | awk '/not found/{print $1}'); do install -m 644 "$B/lib/$so" /usr/local/lib/; done
	ldconfig 2>/dev/null
fi
PGBIN=$B/usr/lib/postgresql/15/bin
khub() { PATH=$PGBIN:$PATH LD_LIBRARY_PATH=$B/lib "$B/bin/khub" "$@"; }
worker() { LD_LIBRARY_PATH=$B/lib "$B/bin/khub-worker" "$@"; }

export KHUB_DATA_DIR=$T/data KHUB_PG_BINDIR=$PGBIN KHUB_LISTEN=127.0.0.1:$PORT KHUB_LOG_LEVEL=info TZ=UTC
# Ubuntu 24.04's gcc 13 and glibc 2.39 link symbols newer than manylinux_2_28:
# the farm publishes and keeps the report (enforce would refuse them).
export KHUB_ABI_POLICY=warn
unset KHUB_DATABASE_URL KHUB_CONFIG

# ---- accounts, worker token -------------------------------------------------
{ khub admin org create acme && khub admin user create alice && khub admin member set acme alice admin &&
	khub admin trust set acme; } >"$T/admin.log" 2>&1 && pass "org acme (trusted), alice admin" ||
	{ fail "admin: $(tail -3 "$T/admin.log")"; exit 1; }
TOKEN=$(khub admin token create alice --scope write 2>>"$T/admin.log" | tail -n 1)
khub admin worker add gpu-1 2>>"$T/admin.log" | tail -n 1 >"$T/worker.token"
chmod 600 "$T/worker.token"
[ -s "$T/worker.token" ] && pass "khub admin worker add gpu-1" || fail "worker token"
mkdir -p "$T/readme" && printf '# relu\n' >"$T/readme/README.md"
khub import "$T/readme" --repo acme/relu --branch main >>"$T/admin.log" 2>&1 || fail "create acme/relu"

PATH=$PGBIN:$PATH LD_LIBRARY_PATH=$B/lib "$B/bin/khub" serve >"$T/server.log" 2>&1 &
SERVER_PID=$!
E=http://127.0.0.1:$PORT
for _ in $(seq 1 120); do
	curl -sf "$E/api/health" >/dev/null 2>&1 && break
	sleep 0.25
done
curl -sf "$E/api/health" >/dev/null && pass "khub serve on $E" || { fail "khub serve"; tail -20 "$T/server.log"; exit 1; }

api() {	# api METHOD PATH [JSON]: body on stdout
	curl -s -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"} "$E$2"
}
field() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# ---- toolchain ----------------------------------------------------------------
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cat >"$T/toolchains.json" <<EOF
{"toolchains": [{"name": "torch-cuda", "python": "$PY", "cxx": "g++", "nvcc": "$NVCC"}]}
EOF
worker --check --toolchains "$T/toolchains.json" | tee "$T/check.log"
CUDA_VARIANT=$(grep -oE 'torch[0-9]+-cxx11-cu[0-9]+-x86_64-linux' "$T/check.log" | head -1)
CPU_VARIANT=$(echo "$CUDA_VARIANT" | sed -E 's/-cu[0-9]+-/-cpu-/')
[ -n "$CUDA_VARIANT" ] && pass "the toolchain builds $CUDA_VARIANT" || { fail "no CUDA variant"; exit 1; }
run_worker() {	# one pass over the queue
	worker --url "$E" --token-file "$T/worker.token" --toolchains "$T/toolchains.json" --name gpu-1 \
		--work-dir "$T/work" --concurrency 2 --once 2>>"$T/worker.log"
}
run_worker || fail "worker registration pass"

# ---- push the source ---------------------------------------------------------------
export HOME=$T/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME"
git config --global user.name khub-device && git config --global user.email device@example.com
git clone -q "http://alice:$TOKEN@127.0.0.1:$PORT/kernels/acme/relu" "$T/clone" 2>"$T/git.log" || fail "git clone"
api PUT /api/kernels/acme/relu/settings '{"buildOnPush": false}' >/dev/null
cp -r "$ROOT/examples/relu/." "$T/clone/"
(cd "$T/clone" && git add -A && git commit -qm "relu source: CPU op and CUDA kernel" && git push -q origin main) \
	2>>"$T/git.log" && pass "git push of examples/relu" || fail "git push: $(tail -3 "$T/git.log")"
SHA=$(git -C "$T/clone" rev-parse HEAD)

# ---- the CUDA variant ----------------------------------------------------------------
api POST /api/kernels/acme/relu/builds "{\"revision\": \"$SHA\", \"variants\": [\"$CUDA_VARIANT\"]}" >"$T/enqueue-cuda.json"
ID=$(field 'd["builds"][0]["id"]' <"$T/enqueue-cuda.json")
start=$(date +%s.%N)
run_worker
echo "== build #$ID ($CUDA_VARIANT): $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s end to end"
api GET "/api/builds/$ID" >"$T/build-cuda.json"
state=$(field 'd["state"]' <"$T/build-cuda.json")
[ "$state" = succeeded ] && pass "build #$ID of $CUDA_VARIANT succeeded and was published" ||
	{ fail "build #$ID: $state"; api GET "/api/builds/$ID/log" | tail -30; }
echo "== ABI report of $CUDA_VARIANT:"; field 'd["abi_report"]["text"]' <"$T/build-cuda.json" | sed 's/^/   /'
api GET "/api/builds/$ID/log" >"$T/build-cuda.log"
grep 'khub-worker build: ok' "$T/build-cuda.log" | sed 's/^/   /'

export HF_ENDPOINT=$E HF_TOKEN=$TOKEN HF_HUB_DISABLE_XET=1 HF_HUB_CACHE=$T/hf-cache HF_HOME=$T/hf-home PYTHONUNBUFFERED=1
if ! "$PY" -c 'import kernels' 2>/dev/null; then
	export PYTHONPATH=$B/py${PYTHONPATH:+:$PYTHONPATH}
	"$PY" -c 'import kernels_data' 2>/dev/null || export PYTHONPATH=$PYTHONPATH:$SHIM
fi
"$PY" "$ROOT/tests/integration/lib/load_kernel.py" "$E" acme/relu 1 --device cuda --expect-variant "$CUDA_VARIANT" \
	--token "$TOKEN" | tee "$T/load-cuda.json"
[ "${PIPESTATUS[0]}" -eq 0 ] && pass "get_kernel(acme/relu, version=1) loads $CUDA_VARIANT; relu == torch.relu on GPU" ||
	fail "loading the CUDA variant"

# ---- the gap: an environment nobody built for --------------------------------------------
TORCH_MM=$("$PY" -c 'import torch; print(".".join(torch.__version__.split("+")[0].split(".")[:2]))')
api POST /api/kernels/acme/relu/builds "{\"revision\": \"$SHA\", \"environment\": {\"torch\": \"$TORCH_MM\", \"cuda\": \"$("$PY" -c 'import torch; print(torch.version.cuda)')\"}}" >"$T/env-cuda.json"
echo "== environment of this machine: $(cat "$T/env-cuda.json")"
[ "$(field 'd.get("loads")' <"$T/env-cuda.json")" = "$CUDA_VARIANT" ] &&
	pass "the environment API: this machine already loads $CUDA_VARIANT (nothing queued)" || fail "environment answer"
api POST /api/kernels/acme/relu/builds "{\"revision\": \"$SHA\", \"environment\": {\"torch\": \"$TORCH_MM\", \"backend\": \"cpu\"}}" >"$T/env-cpu.json"
echo "== environment torch $TORCH_MM, backend cpu: $(cat "$T/env-cpu.json" | head -c 400)"
[ "$(field 'd["variant"]' <"$T/env-cpu.json")" = "$CPU_VARIANT" ] && pass "the environment API queues $CPU_VARIANT" ||
	fail "environment → $CPU_VARIANT"
ID2=$(field 'd["builds"][0]["id"]' <"$T/env-cpu.json")
start=$(date +%s.%N)
run_worker
echo "== build #$ID2 ($CPU_VARIANT): $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s end to end"
api GET "/api/builds/$ID2" >"$T/build-cpu.json"
[ "$(field 'd["state"]' <"$T/build-cpu.json")" = succeeded ] && pass "build #$ID2 of $CPU_VARIANT succeeded" ||
	{ fail "build #$ID2"; api GET "/api/builds/$ID2/log" | tail -30; }
api GET "/api/builds/$ID2/log" | grep 'khub-worker build: ok' | sed 's/^/   /'
"$PY" "$ROOT/tests/integration/lib/load_kernel.py" "$E" acme/relu 1 --backend cpu --expect-variant "$CPU_VARIANT" \
	--token "$TOKEN" | tee "$T/load-cpu.json"
[ "${PIPESTATUS[0]}" -eq 0 ] && pass "get_kernel(acme/relu, version=1, backend=\"cpu\") loads $CPU_VARIANT; relu == torch.relu" ||
	fail "loading the CPU variant"
"$PY" "$ROOT/tests/integration/lib/load_kernel.py" "$E" acme/relu 1 --device cuda --expect-variant "$CUDA_VARIANT" \
	--token "$TOKEN" >/dev/null && pass "the CUDA variant is still the one a CUDA environment loads" ||
	fail "CUDA variant after the CPU build"
api GET "/api/kernels/acme/relu/tree/v1/build" | field '" ".join(sorted(e["path"] for e in d))' | sed 's/^/== v1: /'

echo "== summary: $FAILS failures"
[ "$FAILS" -eq 0 ] && echo "RESULT PASS" || echo "RESULT FAIL"
[ "$FAILS" -eq 0 ]
