#!/usr/bin/env bash
# run_farm_ci.sh -- the farm as a kernel author's CI on the GPU device
# machine (Ubuntu 24.04, a CUDA torch, nvcc, git; no network), from the repo
# root, with the bundle of tests/device/make_bundle.sh: khub serves with
# buildOnPush on; ONE git push of examples/relu (a real CUDA kernel and a CPU
# op) plans the commit's matrix, and the CPU variant of the same torch joins
# that matrix; one worker pass builds both; the matrix API says published
# for both; the REAL loader loads the CUDA variant on the GPU and the CPU
# variant with backend="cpu" (relu == torch.relu); each build's signed
# provenance (GET /api/builds/ID/provenance) verifies offline against the
# downloaded variant with `khub verify-build` and the key of GET
# /api/signing-key, and a flipped byte is caught. Last, the CUDA variant's
# full-capability compile by hand, nvcc with one thread and with the
# machine's cores (--jobs), without the cache: the times, and whether the
# bytes are the same. Prints PASS/FAIL lines; logs go to $OUT when set.
#
#   bash tests/device/run_farm_ci.sh
set -u

ROOT=$(pwd)
BUNDLE=${BUNDLE:-$ROOT/.device/bundle.tar.xz}
SHIM=$ROOT/tests/device/kernels_data_shim
PORT=${KHUB_CHECK_PORT:-8080}
PY=${PYTHON:-$(command -v python3)}
FAILS=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

T=$(mktemp -d /tmp/kfarmci.XXXXXX)
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

# ---- one push: the matrix ---------------------------------------------------
export HOME=$T/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME"
git config --global user.name khub-device && git config --global user.email device@example.com
git clone -q "http://alice:$TOKEN@127.0.0.1:$PORT/kernels/acme/relu" "$T/clone" 2>"$T/git.log" || fail "git clone"
api PUT /api/kernels/acme/relu/settings '{"buildOnPush": true}' >/dev/null
cp -r "$ROOT/examples/relu/." "$T/clone/"
(cd "$T/clone" && git add -A && git commit -qm "relu source: CPU op and CUDA kernel" && git push origin main) \
	>"$T/push.log" 2>&1 && pass "git push of examples/relu" || fail "git push: $(tail -3 "$T/push.log")"
grep 'remote:' "$T/push.log" | sed 's/^/   /'
SHA=$(git -C "$T/clone" rev-parse HEAD)
grep -q "/kernels/acme/relu/builds?commit=$SHA" "$T/push.log" && pass "the push's remote: lines give the matrix URL" ||
	fail "no matrix URL in the push's answer"
api GET "/api/kernels/acme/relu/builds?commit=$SHA" >"$T/matrix-planned.json"
echo "== planned: $(field '" ".join(v["variant"] + "=" + v["status"] for v in d["variants"])' <"$T/matrix-planned.json")"
if ! field '" ".join(v["variant"] for v in d["variants"])' <"$T/matrix-planned.json" | grep -qw "$CPU_VARIANT"; then
	api POST /api/kernels/acme/relu/builds "{\"revision\": \"$SHA\", \"variants\": [\"$CPU_VARIANT\"]}" >"$T/enqueue-cpu.json"
	echo "== $CPU_VARIANT added to the commit's matrix: $(head -c 300 "$T/enqueue-cpu.json")"
fi
start=$(date +%s.%N)
run_worker
echo "== one worker pass (concurrency 2): $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
api GET "/api/kernels/acme/relu/builds?commit=$SHA" >"$T/matrix.json"
echo "== matrix: $(field '" ".join(v["variant"] + "=" + v["status"] + "/" + str(v.get("duration_seconds")) + "s" for v in d["variants"])' <"$T/matrix.json")"
for v in "$CUDA_VARIANT" "$CPU_VARIANT"; do
	st=$(field "[x['status'] for x in d['variants'] if x['variant'] == '$v'][0]" <"$T/matrix.json" 2>/dev/null)
	[ "$st" = published ] && pass "the matrix of $SHA: $v published" || fail "the matrix: $v is '$st'"
done

# ---- the real loader, each variant on its backend ------------------------------------------
export HF_ENDPOINT=$E HF_TOKEN=$TOKEN HF_HUB_DISABLE_XET=1 HF_HUB_CACHE=$T/hf-cache HF_HOME=$T/hf-home PYTHONUNBUFFERED=1
if ! "$PY" -c 'import kernels' 2>/dev/null; then
	export PYTHONPATH=$B/py${PYTHONPATH:+:$PYTHONPATH}
	"$PY" -c 'import kernels_data' 2>/dev/null || export PYTHONPATH=$PYTHONPATH:$SHIM
fi
"$PY" "$ROOT/tests/integration/lib/load_kernel.py" "$E" acme/relu 1 --device cuda --expect-variant "$CUDA_VARIANT" \
	--token "$TOKEN" >"$T/load-cuda.json" 2>&1 && pass "get_kernel(acme/relu, version=1) loads $CUDA_VARIANT; relu == torch.relu on GPU" ||
	{ fail "loading the CUDA variant"; tail -5 "$T/load-cuda.json"; }
"$PY" "$ROOT/tests/integration/lib/load_kernel.py" "$E" acme/relu 1 --backend cpu --expect-variant "$CPU_VARIANT" \
	--token "$TOKEN" >"$T/load-cpu.json" 2>&1 && pass "get_kernel(acme/relu, version=1, backend=\"cpu\") loads $CPU_VARIANT" ||
	{ fail "loading the CPU variant"; tail -5 "$T/load-cpu.json"; }

# ---- provenance, offline -----------------------------------------------------------------
curl -sf "$E/api/signing-key" >"$T/hub.pub" && pass "GET /api/signing-key" || fail "no signing key"
for v in "$CUDA_VARIANT" "$CPU_VARIANT"; do
	id=$(field "[x['id'] for x in d['variants'] if x['variant'] == '$v'][0]" <"$T/matrix.json")
	api GET "/api/builds/$id/provenance" >"$T/prov-$v.json"
	dir=$T/dl/$v
	mkdir -p "$dir"
	for f in $(api GET "/api/kernels/acme/relu/tree/v1/build/$v?recursive=true" | field '" ".join(e["path"] for e in d if e["type"] == "file")'); do
		mkdir -p "$dir/$(dirname "${f#build/$v/}")"
		curl -sfL -H "Authorization: Bearer $TOKEN" "$E/kernels/acme/relu/resolve/v1/$f" -o "$dir/${f#build/$v/}"
	done
	khub verify-build "$dir" --provenance "$T/prov-$v.json" --key "$T/hub.pub" >"$T/verify-$v.log" 2>&1 &&
		pass "khub verify-build: $v ($(ls -R "$dir" | grep -c '\.') files) matches its signed provenance (build #$id)" ||
		{ fail "verify-build $v"; cat "$T/verify-$v.log"; }
	so=$(find "$dir" -name '*.so' | head -1)
	if [ -n "$so" ]; then
		printf '\x00' | dd of="$so" bs=1 seek=4096 conv=notrunc 2>/dev/null
		khub verify-build "$dir" --provenance "$T/prov-$v.json" --key "$T/hub.pub" >>"$T/verify-$v.log" 2>&1
		[ $? -eq 1 ] && pass "… a flipped byte in $(basename "$so") is caught: $(tail -1 "$T/verify-$v.log")" ||
			fail "a flipped byte was not caught"
	fi
done

# ---- nvcc: one thread against the machine's cores ------------------------------------------
git -C "$T/clone" archive HEAD | (mkdir -p "$T/src" && tar -x -C "$T/src")
for jobs in 1 "$(nproc)"; do
	rm -rf "$T/out-$jobs"
	start=$(date +%s.%N)
	worker build --toolchains "$T/toolchains.json" --toolchain torch-cuda --source "$T/src" --out "$T/out-$jobs" \
		--variant "$CUDA_VARIANT" --jobs "$jobs" >"$T/build-jobs-$jobs.log" 2>&1 || fail "khub-worker build --jobs $jobs"
	secs=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
	echo "== full-capability CUDA build, --jobs $jobs: $secs s ($(grep -o -- '--threads=[0-9]*' "$T/build-jobs-$jobs.log" | sort -u | tr '\n' ' '))"
	eval "SECS_$jobs=$secs"
done
N=$(nproc)
python3 -c "import sys; a, b = $SECS_1, $(eval echo \$SECS_$N); print(f'== nvcc threads: {b:.1f} s vs {a:.1f} s = {b / a:.2f}x (target <= 0.5)')"
s1=$(find "$T/out-1" -name '*.so' -exec sha256sum {} + | awk '{print $1}' | sort | tr '\n' ' ')
sN=$(find "$T/out-$N" -name '*.so' -exec sha256sum {} + | awk '{print $1}' | sort | tr '\n' ' ')
[ -n "$s1" ] && [ "$s1" = "$sN" ] && pass "the same bytes with 1 and $N nvcc threads" || echo "NOTE: bytes differ with threads ($s1 / $sN)"

echo "== summary: $FAILS failures"
[ "$FAILS" -eq 0 ] && echo "RESULT PASS" || echo "RESULT FAIL"
[ "$FAILS" -eq 0 ]
