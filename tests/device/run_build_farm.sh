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
. tests/device/lib.sh
device_setup relu

# ---- push the source ---------------------------------------------------------------
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
echo "== build #$ID ($CUDA_VARIANT): $(seconds_since "$start") s end to end"
api GET "/api/builds/$ID" >"$T/build-cuda.json"
state=$(field 'd["state"]' <"$T/build-cuda.json")
[ "$state" = succeeded ] && pass "build #$ID of $CUDA_VARIANT succeeded and was published" ||
	{ fail "build #$ID: $state"; api GET "/api/builds/$ID/log" | tail -30; }
echo "== ABI report of $CUDA_VARIANT:"; field 'd["abi_report"]["text"]' <"$T/build-cuda.json" | sed 's/^/   /'
api GET "/api/builds/$ID/log" >"$T/build-cuda.log"
grep 'khub-worker build: ok' "$T/build-cuda.log" | sed 's/^/   /'

loader_env
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
echo "== build #$ID2 ($CPU_VARIANT): $(seconds_since "$start") s end to end"
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

device_result
