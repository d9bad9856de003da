#!/bin/bash
# t0246-plan-reasons.sh -- the planner says everything it leaves out, with
# the real reason (docs/build-farm.md, "Planning"): a live worker whose
# toolchains build cuda (CUDA 13.0) and cpu with torch 2.11; a kernel
# whose cuda-capabilities include 5.0, which CUDA 13 cannot build, gets
# its cu130 variant planned and "capability 5.0 left out: CUDA 13.0 cannot
# build it (oldest it builds: 7.5)" in the answer and in the import's
# log; a kernel whose torch bounds (2.12 only) exclude every live
# toolchain's torch is answered with exactly that, never "no live worker
# builds cuda" (a live worker does).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v psql >/dev/null 2>&1 || { echo "1..0 # SKIP psql not installed"; exit 0; }
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
CU=torch211-cxx11-cu130-x86_64-linux
CPU=torch211-cxx11-cpu-x86_64-linux
api "$WL" POST /api/workers/register "{\"name\":\"live\",\"toolchains\":[{\"name\":\"cuda13\",\"variants\":[\"$CU\"]},{\"name\":\"cpu\",\"variants\":[\"$CPU\"]}]}"
is "$ST" 200 "a live worker registers a CUDA 13.0 toolchain ($CU) and a cpu one, both torch 2.11"

# kernel NAME SED: examples/relu with build.toml edited by SED, imported
# as acme/NAME (planned in place, its log in $TEST_DIR/import-NAME.log).
kernel() {
	local dir=$TEST_DIR/$1
	cp -r "$KHUB_SRC/examples/relu" "$dir"
	sed -i "$2" "$dir/build.toml"
	khub import "$dir" --repo "acme/$1" --type kernel >"$TEST_DIR/import-$1.log" 2>&1
}

# ---- (a) a capability CUDA 13 cannot build ------------------------------------------------
kernel relu-archs-subset '/^\[kernel.relu_cuda\]/a cuda-capabilities = ["5.0", "8.0", "9.0"]'
WHY5='capability 5.0 left out: CUDA 13.0 cannot build it (oldest it builds: 7.5)'
grep -qF "building $CU: $WHY5" "$TEST_DIR/import-relu-archs-subset.log"
ok $? "the push's log says: building $CU: $WHY5"
api "$ALICE" GET "/api/kernels/acme/relu-archs-subset/builds?limit=100"
for id in $(jq -r '.builds[].id' "$B"); do api "$ALICE" POST "/api/builds/$id/cancel" '{}'; done
api "$ALICE" POST /api/kernels/acme/relu-archs-subset/builds '{}'
is "$ST $(jq -r '.queued | sort | join(" ")' "$B")" "202 $CPU $CU" "POST .../builds {}: cpu and cu130 queued (8.0 and 9.0 build)"
is "$(jq -c '.capabilities_left_out' "$B")" \
	"[{\"capability\":\"5.0\",\"reason\":\"$WHY5\",\"variant\":\"$CU\"}]" \
	"capabilities_left_out: 5.0 for $CU, with the real reason, and nothing else"

# ---- (b) torch bounds no live toolchain meets ----------------------------------------------
kernel relu-torch-bounds '/^\[torch\]/a minver = "2.12"\nmaxver = "2.12"'
api "$ALICE" POST /api/kernels/acme/relu-torch-bounds/builds '{}'
is "$ST" 422 "POST .../builds {}: nothing to build, 422"
CUWHY="torch 2.11 of every live cuda toolchain is outside build.toml's torch bounds >=2.12,<=2.12"
is "$(jq -r '.skipped[] | select(.variant == "torch<MM>-cxx11-cu…") | .reason' "$B")" "$CUWHY" \
	"cuda: $CUWHY"
is "$(jq -r '.skipped[] | select(.variant == "'$CU'") | .reason' "$B")" "torch 2.11 is below torch.minver 2.12" \
	"$CU: torch 2.11 is below torch.minver 2.12"
like "$(jq -r '.skipped[] | select(.variant == "torch<MM>-cxx11-rocm…") | .reason' "$B")" "^no live worker builds rocm$" \
	"rocm, which no live worker builds: no live worker builds rocm"
! grep -q "no live worker builds cuda" "$B" "$TEST_DIR/import-relu-torch-bounds.log"
ok $? "never 'no live worker builds cuda' (in the answer or the import's log)"
grep -qF "not building torch<MM>-cxx11-cu…: $CUWHY" "$TEST_DIR/import-relu-torch-bounds.log"
ok $? "the push's log gives the same reason"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
