#!/bin/bash
# t0352-worker-hipify-header-escape.sh -- the header translation of a ROCm
# build from CUDA sources never leaves the source tree (docs/worker-build.md,
# "ROCm from CUDA sources"): a CUDA-only .cu includes, besides a header of its
# own, "../../…/<outside>/hostile.h" (leads out of the tree), the absolute
# path of another outside file, "evil.h" (a symbolic link to the outside
# file) and "linked/inner.h" (a linked directory pointing outside), all under
# #if 0 so only a scan could meet them. The outside files are FIFOs: opening
# one for reading would block the build. The build ends (within its wall
# limit), translates its own header, logs each hostile include as not
# translated with why, lists none of them in the ABI report, writes nothing
# next to the outside files and leaves them unread.
. "$(dirname "$0")/../lib/khub-test.sh"
. "$KHUB_SRC/tests/lib/hipify.sh"
hipify_setup
OUT=$W/outside
mkdir -p "$OUT/dir"
mkfifo "$OUT/hostile.h" "$OUT/abs.h" "$OUT/dir/inner.h"
UP=$(printf '../%.0s' $(seq 1 40))	# past / whatever the scratch's depth: $OUT/hostile.h
ln -s "$OUT/hostile.h" "$SRC/relu_cuda/evil.h"
ln -s "$OUT/dir" "$SRC/relu_cuda/linked"
cat >"$SRC/relu_cuda/relu_errors.cuh" <<'EOF'
#pragma once
#include <cuda_runtime.h>
static inline int relu_error_code(cudaError_t err) { return err == cudaSuccess ? 0 : (int)err; }
EOF
hipify_cuda_kernel "$SRC/relu_cuda/relu_kernel.cu" "CUDA only; the includes under #if 0 are never compiled, only scanned." \
	"#include \"relu_errors.cuh\"
#if 0
#include \"${UP}${OUT#/}/hostile.h\"
#include \"$OUT/abs.h\"
#include \"evil.h\"
#include \"linked/inner.h\"
#include \"../../../../../../../../../../../../etc/passwd\"
#endif" \
	'  relu_kernel_f32<<<(unsigned)((n + 255) / 256 > 65535 ? 65535 : (n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(out, in, n);
  return relu_error_code(cudaGetLastError());'
ls -lAR --time-style=full-iso "$OUT" >"$W/outside.before"

timeout 900 "$WORKER_BIN" build --toolchains "$W/toolchains.json" --toolchain rocm-hipify --source "$SRC" --out "$W/out" \
	--variant "$VARIANT" --work-dir "$W/work" --wall-seconds 800 >"$W/build.log" 2>&1
is "$?" 0 "the build ends and succeeds (no FIFO outside the tree was opened)" || tail -40 "$W/build.log" | sed 's/^/#   /'
LOG=$(cat "$W/build.log")
like "$LOG" 'hipified header relu_cuda/relu_errors\.cuh -> relu_cuda/relu_errors_hip\.cuh' "its own header is translated"
grep -qF "hipify: \"${UP}${OUT#/}/hostile.h\" (included by relu_cuda/relu_kernel.cu) not translated: it leads outside the source tree" "$W/build.log"
ok $? "a relative path out of the tree: not translated, it leads outside"
grep -qF "hipify: \"$OUT/abs.h\" (included by relu_cuda/relu_kernel.cu) not translated: an absolute path" "$W/build.log"
ok $? "an absolute path: not translated"
grep -qF 'hipify: "../../../../../../../../../../../../etc/passwd" (included by relu_cuda/relu_kernel.cu) not translated: it leads outside the source tree' "$W/build.log"
ok $? "../…/etc/passwd: not translated"
grep -qE 'hipify: "evil\.h" \(included by relu_cuda/relu_kernel\.cu\) not translated: (no such file in the source tree|a symbolic link)' "$W/build.log"
ok $? "a symbolic link out of the tree: not translated (the scratch copy holds no link)"
grep -qE 'hipify: "linked/inner\.h" \(included by relu_cuda/relu_kernel\.cu\) not translated: (no such file in the source tree|a symbolic link)' "$W/build.log"
ok $? "a header through a linked directory: not translated"
is "$(jq -c '.build.hipify.headers' "$W/out/abi-report.json")" '["relu_cuda/relu_kernel.h","relu_cuda/relu_errors.cuh"]' \
	"the ABI report lists only the tree's own headers"
ls -lAR --time-style=full-iso "$OUT" >"$W/outside.after"
diff "$W/outside.before" "$W/outside.after" >/dev/null
ok $? "nothing was written beside the outside files"
ok $([ ! -e /etc/passwd_hip ] && [ -z "$(find "$W" -name '*_hip*' -not -path "$W/work/*" 2>/dev/null)" ]; echo $?) \
	"no translation of an outside file anywhere"
ok $([ -z "$(ls "$TEST_DIR"/sanitizer* 2>/dev/null)" ]; echo $?) "no sanitizer reports from khub-worker"
done_testing
