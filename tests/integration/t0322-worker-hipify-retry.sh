#!/bin/bash
# t0322-worker-hipify-retry.sh -- a worker whose toolchain has no hipify
# tool, handed a ROCm job of CUDA sources (examples/relu: its rocm kernel
# is relu_cuda/relu_kernel.cu, queued by name), does not fail the author's
# build for good: `khub-worker build` stops at once (exit 6, nothing
# compiled), the daemon reports a failure to retry (an attempt spent), so
# the job is queued again for a worker whose toolchain has hipify, and the
# build's error and log say why.
. "$(dirname "$0")/../lib/khub-test.sh"

command -v hipcc >/dev/null 2>&1 || { echo "1..0 # SKIP hipcc not installed (apt-get install hipcc)"; exit 0; }
command -v jq >/dev/null 2>&1 || { echo "1..0 # SKIP jq not installed"; exit 0; }
WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
[ -x "$WORKER_BIN" ] || bail "khub-worker not built ($WORKER_BIN)"
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || { echo "1..0 # SKIP $PY has no torch (apt-get install python3-torch)"; exit 0; }

khub_setup
export KHUB_BUILD_LEASE_SECONDS=30 KHUB_BUILD_HEARTBEAT_SECONDS=2
W=$TEST_DIR/worker
mkdir -p "$W/work"
cat >"$W/toolchains.json" <<EOF
{"toolchains": [{"name": "rocm-plain", "python": "$PY", "cxx": "g++", "hipcc": "hipcc", "rocm_from_hipcc": true}]}
EOF
"$WORKER_BIN" --check --toolchains "$W/toolchains.json" >"$W/check.out" 2>&1
VARIANT=$(grep -oE 'torch[0-9]+-cxx11-rocm[0-9]+-[a-z0-9_]+-linux' "$W/check.out" | head -1)
like "$VARIANT" '^torch[0-9]+-cxx11-rocm' "rocm-plain (no hipify) offers $VARIANT" || sed 's/^/#   /' "$W/check.out"

khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
khub admin worker add w1 2>/dev/null | tail -n 1 >"$W/w1.token"
chmod 600 "$W/w1.token"
khub_start
cp -r "$KHUB_SRC/examples/relu" "$TEST_DIR/relu"
khub import "$TEST_DIR/relu" --repo acme/relu --type kernel >"$TEST_DIR/import.log" 2>&1
ok $? "examples/relu imported as acme/relu"
B=$TEST_DIR/b
api() {	# api METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $ALICE")
	[ -n "${3-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
	ST=$(curl "${args[@]}" "$KHUB_URL$2")
}
api GET "/api/kernels/acme/relu/builds?limit=100"
for id in $(jq -r '.builds[].id' "$B"); do api POST "/api/builds/$id/cancel" '{}'; done
SHA=$(sed -n 's/^khub import: acme\/relu@main -> \([0-9a-f]\{40\}\).*/\1/p' "$TEST_DIR/import.log")
api POST /api/kernels/acme/relu/builds "{\"revision\": \"$SHA\", \"variants\": [\"$VARIANT\"]}"
ID=$(jq -r '.builds[0].id // empty' "$B")
like "$ID" '^[0-9]+$' "build #$ID of $VARIANT queued by name ($ST)" || sed 's/^/#   /' "$B"

"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work" --once 2>>"$W/w1.log"
is "$?" 0 "khub-worker --once ran the job (and keeps running: not a misconfiguration)"
api GET "/api/builds/$ID"
is "$(jq -r '.state + " " + (.attempt | tostring)' "$B")" "queued 1" \
	"build #$ID is queued again, one attempt spent (retried, not failed for good)"
like "$(jq -r '.error' "$B")" "lacks a tool the source needs \\(hipify\\) \\(exit 6\\)" "its error says why"
api GET "/api/builds/$ID/log"
like "$(cat "$B")" 'relu_cuda/relu_kernel\.cu is a CUDA source: a ROCm build hipifies it first \(as kernel-builder does\) and toolchain rocm-plain has no hipify' \
	"and its log names the CUDA source and the toolchain without hipify"
unlike=$(grep -c 'hipcc .* -c relu_cuda/relu_kernel' "$B")
is "$unlike" 0 "nothing was compiled"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "no sanitizer reports"
done_testing
