#!/usr/bin/env bash
# run_farm_plan.sh -- the build farm choosing variants by itself, on the GPU
# device machine (Ubuntu 24.04, a CUDA torch, nvcc, git; no network), from
# the repo root, with the bundle of tests/device/make_bundle.sh. Three
# kernels are pushed with git, build-on-push on: examples/relu-triton (a
# [torch-noarch] Triton kernel), examples/silu-cuda (a CUDA-only [torch]
# kernel) and examples/relu-stable-abi ([torch.stable-abi], cpu and cuda).
# khub plans every variant from build.toml and what the live worker offers;
# the worker (sandboxed: bubblewrap from the bundle) builds them; the REAL
# loader's get_kernel(repo, version=1) loads each and its op is checked
# against torch on the GPU. Prints PASS/FAIL lines, the plan, the sandbox
# report and the times (push -> published); logs go to $OUT when set.
#
#   bash tests/device/run_farm_plan.sh
set -u

ROOT=$(pwd)
BUNDLE=${BUNDLE:-$ROOT/.device/bundle.tar.xz}
SHIM=$ROOT/tests/device/kernels_data_shim
PORT=${KHUB_CHECK_PORT:-8080}
PY=${PYTHON:-$(command -v python3)}
FAILS=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
now() { date +%s.%N; }
since() { python3 -c "print(round($(now) - $1, 1))"; }

T=$(mktemp -d /tmp/kplan.XXXXXX)
chmod 755 "$T"
SERVER_PID=
cleanup() {
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	[ -n "${OUT:-}" ] && cp "$T"/*.log "$T"/*.json "$OUT"/ 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

echo "== host: $(uname -m) $(. /etc/os-release; echo "$PRETTY_NAME"), $(nvidia-smi -L 2>/dev/null | head -1)"
# Under /usr: the sandbox shows build code /usr (read-only) and not /tmp, and
# khub-worker's measuring launcher runs inside it with the bundle's libraries.
B=/usr/local/khub-device
rm -rf "$B" && mkdir -p "$B" && tar -xJf "$BUNDLE" -C "$B" || { fail "unpack bundle"; exit 1; }
chmod 755 "$B"
PGBIN=$B/usr/lib/postgresql/15/bin
# The worker's sandbox is bubblewrap (Debian's, carried in the bundle).
if ! command -v bwrap >/dev/null; then
	install -m 755 "$B/bin/bwrap" /usr/local/bin/bwrap
	for so in $(ldd /usr/local/bin/bwrap | awk '/not found/{print $1}'); do install -m 644 "$B/lib/$so" /usr/local/lib/; done
	ldconfig 2>/dev/null
fi
echo "== bwrap: $(bwrap --version 2>&1 | head -1)"
khub() { PATH=$PGBIN:$PATH LD_LIBRARY_PATH=$B/lib "$B/bin/khub" "$@"; }
worker() { LD_LIBRARY_PATH=$B/lib "$B/bin/khub-worker" "$@"; }

export KHUB_DATA_DIR=$T/data KHUB_PG_BINDIR=$PGBIN KHUB_LISTEN=127.0.0.1:$PORT KHUB_LOG_LEVEL=info TZ=UTC
export KHUB_ABI_POLICY=warn	# Ubuntu 24.04's gcc 13 / glibc 2.39 are newer than manylinux_2_28
unset KHUB_DATABASE_URL KHUB_CONFIG

KERNELS="relu-triton silu-cuda relu-stable-abi"
{ khub admin org create acme && khub admin user create alice && khub admin member set acme alice admin &&
	khub admin trust set acme; } >"$T/admin.log" 2>&1 && pass "org acme (trusted), alice admin" ||
	{ fail "admin: $(tail -3 "$T/admin.log")"; exit 1; }
TOKEN=$(khub admin token create alice --scope write 2>>"$T/admin.log" | tail -n 1)
khub admin worker add gpu-1 --org acme 2>>"$T/admin.log" | tail -n 1 >"$T/worker.token"
chmod 600 "$T/worker.token"
[ -s "$T/worker.token" ] && pass "khub admin worker add gpu-1 --org acme" || fail "worker token"
mkdir -p "$T/readme" && printf '# kernel\n' >"$T/readme/README.md"
for k in $KERNELS; do khub import "$T/readme" --repo "acme/$k" --branch main >>"$T/admin.log" 2>&1 || fail "create acme/$k"; done

PATH=$PGBIN:$PATH LD_LIBRARY_PATH=$B/lib "$B/bin/khub" serve >"$T/server.log" 2>&1 &
SERVER_PID=$!
E=http://127.0.0.1:$PORT
for _ in $(seq 1 120); do curl -sf "$E/api/health" >/dev/null 2>&1 && break; sleep 0.25; done
curl -sf "$E/api/health" >/dev/null && pass "khub serve on $E" || { fail "khub serve"; tail -20 "$T/server.log"; exit 1; }
api() { curl -s -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"} "$E$2"; }
field() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cat >"$T/toolchains.json" <<JSON
{"toolchains": [{"name": "torch-cuda", "python": "$PY", "cxx": "g++", "nvcc": "$NVCC"}]}
JSON
worker --check --toolchains "$T/toolchains.json" >"$T/check.log" 2>&1
sed 's/^/   /' "$T/check.log"
grep -qE 'torch[0-9]+-cxx11-cu[0-9]+-x86_64-linux' "$T/check.log" && pass "worker --check: the toolchain builds CUDA variants" ||
	fail "worker --check"
run_worker() {
	worker --url "$E" --token-file "$T/worker.token" --toolchains "$T/toolchains.json" --name gpu-1 \
		--work-dir "$T/work" --concurrency 2 --once 2>>"$T/worker.log"
}
run_worker || fail "worker registration pass"

export HOME=$T/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME"
git config --global user.name khub-device && git config --global user.email device@example.com
declare -A PUSHED_AT
for k in $KERNELS; do
	git clone -q "http://alice:$TOKEN@127.0.0.1:$PORT/kernels/acme/$k" "$T/clone-$k" 2>>"$T/git.log" || fail "clone $k"
	cp -r "$ROOT/examples/$k/." "$T/clone-$k/"
	PUSHED_AT[$k]=$(now)
	(cd "$T/clone-$k" && git add -A && git commit -qm "$k source" && git push -q origin main) 2>>"$T/git.log" &&
		pass "git push of examples/$k (build on push)" || fail "push $k: $(tail -3 "$T/git.log")"
done
sleep 2
for k in $KERNELS; do
	api GET "/api/kernels/acme/$k/builds?limit=50" >"$T/builds-$k.json"
	echo "== khub planned for acme/$k: $(field '" ".join(sorted(b["variant"] for b in d["builds"]))' <"$T/builds-$k.json")"
done
grep 'build trigger' "$T/server.log" | sed 's/^.*build trigger: /   trigger: /' | head -40

start=$(now)
run_worker
echo "== the worker's pass over the queue: $(since "$start") s"
for k in $KERNELS; do
	api GET "/api/kernels/acme/$k/builds?limit=50" >"$T/builds-$k.json"
	echo "== acme/$k: $(field '"; ".join("%s %s" % (b["variant"], b["state"]) for b in d["builds"])' <"$T/builds-$k.json")"
	bad=$(field 'sum(1 for b in d["builds"] if b["state"] != "succeeded")' <"$T/builds-$k.json")
	n=$(field 'len(d["builds"])' <"$T/builds-$k.json")
	[ "$n" -gt 0 ] && [ "$bad" -eq 0 ] && pass "acme/$k: $n builds planned by khub, all succeeded (push -> published $(since "${PUSHED_AT[$k]}") s)" ||
		{ fail "acme/$k builds"; for id in $(field '" ".join(str(b["id"]) for b in d["builds"] if b["state"] != "succeeded")' <"$T/builds-$k.json"); do api GET "/api/builds/$id/log" | tail -25; done; }
done
field '" ".join(sorted(b["variant"] for b in d["builds"]))' <"$T/builds-relu-triton.json" | grep -qx 'torch-cuda' &&
	pass "relu-triton: exactly the noarch torch-cuda" || fail "relu-triton variants"
field '" ".join(sorted(b["variant"] for b in d["builds"]))' <"$T/builds-silu-cuda.json" | grep -qE '^torch[0-9]+-cxx11-cu[0-9]+-x86_64-linux$' &&
	pass "silu-cuda: exactly one arch CUDA variant, no CPU, no noarch" || fail "silu-cuda variants"
field '" ".join(sorted(b["variant"] for b in d["builds"]))' <"$T/builds-relu-stable-abi.json" | grep -qE '^torch-stable-abi[0-9]+-cpu-x86_64-linux torch-stable-abi[0-9]+-cu[0-9]+-x86_64-linux$' &&
	pass "relu-stable-abi: the stable-ABI cpu and cuda variants" || fail "relu-stable-abi variants"

export HF_ENDPOINT=$E HF_TOKEN=$TOKEN HF_HUB_DISABLE_XET=1 HF_HUB_CACHE=$T/hf-cache HF_HOME=$T/hf-home PYTHONUNBUFFERED=1
if ! "$PY" -c 'import kernels' 2>/dev/null; then
	export PYTHONPATH=$B/py${PYTHONPATH:+:$PYTHONPATH}
	"$PY" -c 'import kernels_data' 2>/dev/null || export PYTHONPATH=$PYTHONPATH:$SHIM
fi
check() {	# check REPO OP [--backend cpu]
	"$PY" "$ROOT/tests/device/farm_plan_check.py" "$@" 2>"$T/load-${1#acme/}.log" | tee -a "$T/loads.json"
	[ "${PIPESTATUS[0]}" -eq 0 ] && pass "get_kernel($1, version=1)${3:+ $3 $4}: $2 == torch on $( [ -n "${3:-}" ] && echo CPU || echo GPU)" ||
		{ fail "loading $1"; tail -15 "$T/load-${1#acme/}.log"; }
}
check acme/relu-triton relu
check acme/silu-cuda silu
check acme/relu-stable-abi relu
check acme/relu-stable-abi relu --backend cpu

echo "== a rebuild of the same commit publishes nothing"
before=$(api GET "/api/kernels/acme/silu-cuda/revision/v1" | field 'd["sha"]')
SHA=$(git -C "$T/clone-silu-cuda" rev-parse HEAD)
api POST /api/kernels/acme/silu-cuda/builds "{\"revision\": \"$SHA\", \"force\": true}" >"$T/rebuild.json"
run_worker
after=$(api GET "/api/kernels/acme/silu-cuda/revision/v1" | field 'd["sha"]')
api GET "/api/kernels/acme/silu-cuda/builds?limit=50" >"$T/rebuild-builds.json"
echo "== rebuild: $(field '"; ".join("#%s %s %s" % (b["id"], b["state"], b.get("note")) for b in d["builds"])' <"$T/rebuild-builds.json")"
if [ -n "$before" ] && [ "$before" = "$after" ]; then
	pass "forced rebuild of silu-cuda: identical, v1 still at ${before:0:12}"
else
	fail "rebuild moved v1: $before -> $after"
	git clone -q -b v1 "http://alice:$TOKEN@127.0.0.1:$PORT/kernels/acme/silu-cuda" "$T/v1" 2>>"$T/git.log"
	git -C "$T/v1" diff --stat "$before" "$after" | sed 's/^/   /'
	for f in $(git -C "$T/v1" diff --name-only "$before" "$after"); do
		curl -s -H "Authorization: Bearer $TOKEN" "$E/kernels/acme/silu-cuda/resolve/$before/$f" >"$T/a.bin"
		curl -s -H "Authorization: Bearer $TOKEN" "$E/kernels/acme/silu-cuda/resolve/$after/$f" >"$T/b.bin"
		case $f in *.so) cp "$T/a.bin" "$OUT/a.so" 2>/dev/null; cp "$T/b.bin" "$OUT/b.so" 2>/dev/null ;; esac
		echo "   $f: $(cmp -l "$T/a.bin" "$T/b.bin" | wc -l) bytes differ"
		case $f in *.so) cmp -l "$T/a.bin" "$T/b.bin" | head -5 | sed 's/^/     /'
			diff <(readelf -SW "$T/a.bin") <(readelf -SW "$T/b.bin") | head -10 | sed 's/^/     /'
			diff <(strings -a "$T/a.bin") <(strings -a "$T/b.bin") | head -20 | sed 's/^/     /' ;;
		*) diff "$T/a.bin" "$T/b.bin" | head -10 | sed 's/^/     /' ;; esac
	done
fi
grep -c 'sandbox' "$T/worker.log" >/dev/null && grep -m3 -i 'sandbox' "$T/worker.log" | sed 's/^/   /'
echo "== summary: $FAILS failures"
[ "$FAILS" -eq 0 ] && echo "RESULT PASS" || echo "RESULT FAIL"
[ "$FAILS" -eq 0 ]
