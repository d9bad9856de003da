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
. tests/device/lib.sh
device_ccache	# before the worker starts: its builds use the cache
device_setup relu

# ---- one push: the matrix ---------------------------------------------------
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
echo "== one worker pass (concurrency 2): $(seconds_since "$start") s"
api GET "/api/kernels/acme/relu/builds?commit=$SHA" >"$T/matrix.json"
echo "== matrix: $(field '" ".join(v["variant"] + "=" + v["status"] + "/" + str(v.get("duration_seconds")) + "s" for v in d["variants"])' <"$T/matrix.json")"
for v in "$CUDA_VARIANT" "$CPU_VARIANT"; do
	st=$(field "[x['status'] for x in d['variants'] if x['variant'] == '$v'][0]" <"$T/matrix.json" 2>/dev/null)
	[ "$st" = published ] && pass "the matrix of $SHA: $v published" || fail "the matrix: $v is '$st'"
done

# ---- the real loader, each variant on its backend ------------------------------------------
loader_env
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

# ---- a one-line change through the farm: push to published, the cache -------------------------
# The first push built cold (an empty cache); now one line of the CUDA
# kernel changes: the worker's cache (per repo and toolchain) serves the
# other units. Each variant's build time is the matrix's, claim to finish.
dur() { field "[x.get('duration_seconds') for x in d['variants'] if x['variant'] == '$2'][0]" <"$1"; }
git -C "$T/clone" pull -q --rebase origin main >>"$T/push.log" 2>&1 || fail "git pull (the published builds' commit)"
echo '__device__ int relu_cuda_ci_line(void) { return 1; }' >>"$T/clone/relu_cuda/relu_kernel.cu"
(cd "$T/clone" && git commit -qam "one line in the CUDA kernel" && git push origin main) >>"$T/push.log" 2>&1 ||
	{ fail "git push of the one-line change"; tail -5 "$T/push.log"; }
SHA2=$(git -C "$T/clone" rev-parse HEAD)
start=$(date +%s.%N)
run_worker
echo "== one worker pass after a one-line change: $(seconds_since "$start") s"
api GET "/api/kernels/acme/relu/builds?commit=$SHA2" >"$T/matrix2.json"
echo "== matrix: $(field '" ".join(v["variant"] + "=" + v["status"] + "/" + str(v.get("duration_seconds")) + "s" for v in d["variants"])' <"$T/matrix2.json")"
grep -h 'build cache: [0-9]* hits' "$T"/work/*/*.log 2>/dev/null | sed 's/^/   /' | tail -2
D1=$(dur "$T/matrix.json" "$CUDA_VARIANT") D2=$(dur "$T/matrix2.json" "$CUDA_VARIANT")
python3 -c "import sys; a, b = float('$D1'), float('$D2'); print(f'== {sys.argv[1]}: one-line change {b:.1f} s / cold {a:.1f} s = {b / a:.2f}'); sys.exit(0 if b / a <= 0.3 else 1)" \
	"$CUDA_VARIANT" && pass "through the farm, a one-line change in the CUDA kernel builds in <= 0.3 of cold" ||
	fail "through the farm, a one-line change: over 0.3 of cold ($D2 s / $D1 s)"

# ---- nvcc: one thread against the machine's cores ------------------------------------------
git -C "$T/clone" archive HEAD | (mkdir -p "$T/src" && tar -x -C "$T/src")
for jobs in 1 "$(nproc)"; do
	rm -rf "$T/out-$jobs"
	start=$(date +%s.%N)
	worker build --toolchains "$T/toolchains.json" --toolchain torch-cuda --source "$T/src" --out "$T/out-$jobs" \
		--variant "$CUDA_VARIANT" --jobs "$jobs" >"$T/build-jobs-$jobs.log" 2>&1 || fail "khub-worker build --jobs $jobs"
	secs=$(seconds_since "$start")
	echo "== full-capability CUDA build, --jobs $jobs: $secs s ($(grep -o -- '--threads=[0-9]*' "$T/build-jobs-$jobs.log" | sort -u | tr '\n' ' '))"
	eval "SECS_$jobs=$secs"
done
N=$(nproc)
python3 -c "import sys; a, b = $SECS_1, $(eval echo \$SECS_$N); print(f'== whole build: {b:.1f} s vs {a:.1f} s = {b / a:.2f}x')"
# the CUDA unit's own compile (the worker logs "compiled UNIT in S s" per unit)
unit_secs() { sed -n 's/^compiled \(.*\.cu\) in \([0-9.]*\) s$/\1 \2/p' "$T/build-jobs-$1.log"; }
unit_secs 1 | sed 's/^/== --jobs 1: /'
unit_secs "$N" | sed "s/^/== --jobs $N: /"
CU_1=$(unit_secs 1 | awk '{ s += $2 } END { print s + 0 }')
CU_N=$(unit_secs "$N" | awk '{ s += $2 } END { print s + 0 }')
python3 -c "a, b = $CU_1, $CU_N; print(f'== nvcc threads (the .cu units): {b:.1f} s vs {a:.1f} s = {b / a:.2f}x (target <= 0.5)') if a else print('== no per-unit times in the logs')"
s1=$(find "$T/out-1" -name '*.so' -exec sha256sum {} + | awk '{print $1}' | sort | tr '\n' ' ')
sN=$(find "$T/out-$N" -name '*.so' -exec sha256sum {} + | awk '{print $1}' | sort | tr '\n' ' ')
[ -n "$s1" ] && [ "$s1" = "$sN" ] && pass "the same bytes with 1 and $N nvcc threads" || echo "NOTE: bytes differ with threads ($s1 / $sN)"

device_result
