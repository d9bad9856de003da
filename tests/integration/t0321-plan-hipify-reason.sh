#!/bin/bash
# t0321-plan-hipify-reason.sh -- a ROCm build of CUDA sources needs a
# toolchain with hipify (as kernel-builder hipifies a rocm kernel's .cu
# files), and the plan says so: examples/relu (its rocm kernel lists
# relu_cuda/relu_kernel.cu) pushed while the only live ROCm toolchain has
# no hipify tool gets its cpu variant planned and its rocm variant skipped
# with "no toolchain has hipify to build ROCm from CUDA sources
# (relu_cuda/relu_kernel.cu)", in the answer, the matrix and the push's
# log, never "no live worker builds rocm" (one does); once the worker
# registers that toolchain with a hipify tool the rocm variant is planned.
# A kernel whose rocm kernel has only .hip sources needs no hipify.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v jq >/dev/null 2>&1 || { echo "1..0 # SKIP jq not installed"; exit 0; }
khub_setup
log=$TEST_DIR/setup.log
khub admin org create acme >>"$log" 2>&1
khub admin user create alice >>"$log" 2>&1
khub admin member set acme alice admin >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
WL=$(khub admin worker add live 2>>"$log" | tail -n 1)
khub_start

B=$TEST_DIR/b
api() {	# api TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
ROCM=torch211-cxx11-rocm71-x86_64-linux
CPU=torch211-cxx11-cpu-x86_64-linux
register() {	# register [HIPIFY]: the live worker's rocm_from_hipcc toolchain, with a hipify tool when given
	local hip=""
	[ -n "${1-}" ] && hip=",\"hipify\":\"$1\""
	api "$WL" POST /api/workers/register \
		"{\"name\":\"live\",\"toolchains\":[{\"name\":\"rocm\",\"variants\":[\"$ROCM\",\"$CPU\"]$hip}]}"
}
register
is "$ST" 200 "a live worker registers a ROCm toolchain without hipify ($ROCM, $CPU)"

# kernel NAME [SED]: examples/relu, build.toml edited by SED, imported as
# acme/NAME (planned in place, its log in $TEST_DIR/import-NAME.log).
kernel() {
	local dir=$TEST_DIR/$1
	cp -r "$KHUB_SRC/examples/relu" "$dir"
	[ -n "${2-}" ] && sed -i "$2" "$dir/build.toml"
	khub import "$dir" --repo "acme/$1" --type kernel >"$TEST_DIR/import-$1.log" 2>&1
}
WHY='no toolchain has hipify to build ROCm from CUDA sources (relu_cuda/relu_kernel.cu)'

# ---- no toolchain has hipify ------------------------------------------------------------------
kernel relu
grep -qF "not building $ROCM: $WHY" "$TEST_DIR/import-relu.log"
ok $? "the push's log: not building $ROCM: $WHY" || sed 's/^/#   /' "$TEST_DIR/import-relu.log"
api "$ALICE" GET "/api/kernels/acme/relu/builds?limit=100"
is "$(jq -r '[.builds[].variant] | sort | join(" ")' "$B")" "$CPU" "the push queued the cpu variant only"
for id in $(jq -r '.builds[].id' "$B"); do api "$ALICE" POST "/api/builds/$id/cancel" '{}'; done
api "$ALICE" POST /api/kernels/acme/relu/builds '{}'
is "$ST $(jq -r '.queued | join(" ")' "$B")" "202 $CPU" "POST .../builds {}: cpu queued"
is "$(jq -r '.skipped[] | select(.variant == "'$ROCM'") | .reason' "$B")" "$WHY" "$ROCM: $WHY"
is "$(jq -r '.skipped[] | select(.variant == "torch<MM>-cxx11-rocm…") | .reason' "$B")" "$WHY" \
	"and the rocm backend: the same reason"
! grep -q "no live worker builds rocm" "$B" "$TEST_DIR/import-relu.log"
ok $? "never 'no live worker builds rocm' (a live worker offers it)"
api "$ALICE" GET "/api/kernels/acme/relu/builds?limit=1"
SHA=$(jq -r '.builds[0].commit' "$B")
api "$ALICE" GET "/api/kernels/acme/relu/builds?commit=$SHA"
is "$(jq -r '.unbuildable[] | select(.variant == "torch<MM>-cxx11-rocm…") | .reason' "$B")" "$WHY" \
	"the commit's matrix lists rocm as unbuildable, with that reason"

# ---- a toolchain with hipify ----------------------------------------------------------------------
register "torch.utils.hipify 1.0.0 (torch 2.11.0)"
is "$ST" 200 "the worker registers the same toolchain with a hipify tool"
api "$ALICE" GET "/api/kernels/acme/relu/builds?limit=100"
for id in $(jq -r '.builds[].id' "$B"); do api "$ALICE" POST "/api/builds/$id/cancel" '{}'; done
api "$ALICE" POST /api/kernels/acme/relu/builds '{}'
is "$ST $(jq -r '.queued | sort | join(" ")' "$B")" "202 $CPU $ROCM" "POST .../builds: cpu and rocm queued"
is "$(jq -r '[.skipped[]? | select(.reason | test("hipify"))] | length' "$B")" 0 "no hipify reason left"

# ---- .hip sources need no hipify -------------------------------------------------------------------
register
dir=$TEST_DIR/relu-hip2
cp -r "$KHUB_SRC/examples/relu" "$dir"
cp "$dir/relu_cuda/relu_kernel.cu" "$dir/relu_cuda/relu_kernel.hip"
/usr/bin/python3 - "$dir/build.toml" <<'PYEOF'
import sys
p = sys.argv[1]
s = open(p).read()
head, rocm = s.split("[kernel.relu_rocm]")
rocm = rocm.replace("relu_cuda/relu_kernel.cu", "relu_cuda/relu_kernel.hip")
open(p, "w").write(head + "[kernel.relu_rocm]" + rocm)
PYEOF
khub import "$dir" --repo acme/relu-hip2 --type kernel >"$TEST_DIR/import-relu-hip2.log" 2>&1
! grep -q hipify "$TEST_DIR/import-relu-hip2.log"
ok $? "a rocm kernel of .hip sources (the cuda kernel keeps its .cu): no hipify reason"
api "$ALICE" GET "/api/kernels/acme/relu-hip2/builds?limit=100"
is "$(jq -r '[.builds[].variant] | sort | join(" ")' "$B")" "$CPU $ROCM" "and its push queued cpu and rocm"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
