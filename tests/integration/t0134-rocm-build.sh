#!/bin/bash
# t0134-rocm-build.sh -- a ROCm variant through the build farm with Debian's
# hipcc and Debian's CPU torch: a toolchain that opts in with
# "rocm_from_hipcc" advertises torch<MM>-cxx11-rocm<MAJ><MIN>-<arch>-linux
# (torch's version, hipcc's HIP version), one without the key does not;
# the daemon hipifies examples/relu's kernel (the toolchain's "hipify":
# "torch") and builds it for its rocm-archs, the server
# publishes build/<variant>/ on v1, the build's ABI report says which torch
# it was compiled against (a CPU build, not a ROCm one), and the published
# library carries a HIP code object for every requested arch that this hipcc
# can target (the others are listed as left out, and hipcc really cannot
# compile for them). The kernel is not run: there is no ROCm torch and no
# AMD GPU here.
. "$(dirname "$0")/../lib/khub-test.sh"

command -v hipcc >/dev/null 2>&1 || { echo "1..0 # SKIP hipcc not installed (apt-get install hipcc)"; exit 0; }
command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
[ -x "$WORKER_BIN" ] || bail "khub-worker not built ($WORKER_BIN)"
PY=/usr/bin/python3
TORCH=$($PY -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) ||
	{ echo "1..0 # SKIP $PY has no torch (apt-get install python3-torch libtorch-dev)"; exit 0; }

khub_setup
# Debian's g++ links symbols newer than manylinux_2_28: the policy warns
export KHUB_ABI_POLICY=warn KHUB_BUILD_LEASE_SECONDS=30 KHUB_BUILD_HEARTBEAT_SECONDS=2
W=$TEST_DIR/worker
mkdir -p "$W/work" "$TEST_DIR/readme"

# ---- the opt-in and the variant name ------------------------------------------------------------
HIP=$(hipcc --version 2>/dev/null | sed -n 's/^HIP version: \([0-9]*\)\.\([0-9]*\).*/\1\2/p' | head -1)
[ -n "$HIP" ] || bail "hipcc --version printed no 'HIP version: X.Y'"
TMM=$(echo "$TORCH" | sed -E 's/^([0-9]+)\.([0-9]+).*/\1\2/')
ABI=$($PY -c 'import torch; print("cxx11" if torch.compiled_with_cxx11_abi() else "cxx98")')
VARIANT=torch$TMM-$ABI-rocm$HIP-$(uname -m)-linux
cat >"$W/toolchains.json" <<EOF
{"toolchains": [{"name": "rocm-debian", "python": "$PY", "cxx": "g++", "hipcc": "hipcc", "rocm_from_hipcc": true,
                 "hipify": "torch"}]}
EOF
cat >"$W/nokey.json" <<EOF
{"toolchains": [{"name": "hipcc-no-key", "python": "$PY", "cxx": "g++", "hipcc": "hipcc"}]}
EOF
cat >"$W/nohipcc.json" <<EOF
{"toolchains": [{"name": "bad", "python": "$PY", "cxx": "g++", "rocm_from_hipcc": true}]}
EOF
"$WORKER_BIN" --check --toolchains "$W/toolchains.json" >"$W/check.out" 2>&1
ok $? "khub-worker --check: the rocm_from_hipcc toolchain is usable" || sed 's/^/#   /' "$W/check.out"
ok $(grep -qx "  $VARIANT" "$W/check.out"; echo $?) "it offers $VARIANT (torch $TORCH, ROCm from hipcc)"
like "$(cat "$W/check.out")" 'from hipcc \(rocm_from_hipcc: the torch is a CPU build, not a ROCm one\)' \
	"and says the torch is not a ROCm build"
"$WORKER_BIN" --check --toolchains "$W/nokey.json" >"$W/nokey.out" 2>&1
unlike_rocm=$(grep -c -- '-rocm' "$W/nokey.out")
is "$unlike_rocm" 0 "without rocm_from_hipcc the same hipcc and CPU torch offer no ROCm variant (never silent)"
"$WORKER_BIN" --check --toolchains "$W/nohipcc.json" >"$W/nohipcc.out" 2>&1
is "$?" 1 "rocm_from_hipcc without hipcc: refused"
like "$(cat "$W/nohipcc.out")" 'toolchains\[0\]\.rocm_from_hipcc: needs "hipcc"' "naming the key"

# A torch that is a ROCm build keeps the probe's own path: there is no ROCm
# torch on this machine, so a stand-in `torch` module on the toolchain's
# PYTHONPATH says what such a torch says (torch.version.hip); only the probe
# (--check) reads it, nothing is built with it.
mkdir -p "$W/rocm-torch/torch"
cat >"$W/rocm-torch/torch/__init__.py" <<'PYEOF'
__version__ = "2.9.1+rocm6.4"
class version:
    cuda = None
    hip = "6.4.43482-0f2d60242"
def compiled_with_cxx11_abi():
    return True
PYEOF
cat >"$W/rocm-torch.json" <<EOF
{"toolchains": [{"name": "rocm-torch", "python": "$PY", "cxx": "g++", "hipcc": "hipcc",
                 "env": {"PYTHONPATH": "$W/rocm-torch"}},
                {"name": "rocm-torch-key", "python": "$PY", "cxx": "g++", "hipcc": "hipcc", "rocm_from_hipcc": true,
                 "env": {"PYTHONPATH": "$W/rocm-torch"}}]}
EOF
"$WORKER_BIN" --check --toolchains "$W/rocm-torch.json" >"$W/rocm-torch.out" 2>&1
ok $(grep -qx "  torch29-cxx11-rocm64-$(uname -m)-linux" "$W/rocm-torch.out"; echo $?) \
	"a ROCm torch (torch.version.hip 6.4) without the key: torch29-cxx11-rocm64, its version from torch, not hipcc"
ok $(grep -qx "  torch-rocm" "$W/rocm-torch.out"; echo $?) "and its noarch torch-rocm"
like "$(cat "$W/rocm-torch.out")" 'rocm-torch-key: not usable: rocm_from_hipcc: torch 2.9.1 is itself a ROCm build \(HIP 6\.4' \
	"rocm_from_hipcc with a ROCm torch is refused, saying why"

# ---- the farm: push, build, publish --------------------------------------------------------------
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
T1=$(khub admin worker add w1 2>/dev/null | tail -n 1)
[ -n "$T1" ] || bail "khub admin worker add failed"
printf '%s\n' "$T1" >"$W/w1.token"
chmod 600 "$W/w1.token"
printf '# relu\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start

H=$TEST_DIR/headers
B=$TEST_DIR/body
api() {	# api METHOD PATH [curl args]: status in $STATUS, body in $B
	local method=$1 path=$2; shift 2
	STATUS=$(curl -s -X "$method" -D "$H" -o "$B" -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$@" \
		"$KHUB_URL$path")
}
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$B" 2>/dev/null; }

api PUT /api/kernels/acme/relu/settings -H 'Content-Type: application/json' -d '{"buildOnPush": false}'
is "$STATUS" 200 "buildOnPush off: the test enqueues the ROCm variant alone"

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
REMOTE=http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu
git clone -q "$REMOTE" "$TEST_DIR/clone" 2>"$TEST_DIR/git.err" || bail "git clone failed: $(cat "$TEST_DIR/git.err")"
cd "$TEST_DIR/clone" || bail "no clone"
cp -r "$KHUB_SRC/examples/relu"/. .
# the example's archs (gfx90a, gfx942) plus gfx1030: Debian's ROCm 5.2 hipcc
# targets gfx90a and gfx1030 but not gfx942
sed -i 's/^rocm-archs = .*/rocm-archs = ["gfx942", "gfx90a", "gfx1030"]/' build.toml
REQUESTED="gfx942 gfx90a gfx1030"
grep -q '^rocm-archs = \["gfx942", "gfx90a", "gfx1030"\]' build.toml || bail "examples/relu/build.toml has no rocm-archs line"
git add -A >/dev/null && git commit -qm "relu source" && git push -q origin main 2>"$TEST_DIR/git.err"
ok $? "git push of examples/relu" || sed 's/^/#   /' "$TEST_DIR/git.err"
SHA=$(git rev-parse HEAD)
api POST /api/kernels/acme/relu/builds -H 'Content-Type: application/json' \
	-d "{\"revision\": \"$SHA\", \"variants\": [\"$VARIANT\"]}"
ID=$(json 'd["builds"][0]["id"]')
like "$ID" '^[0-9]+$' "build #$ID of $VARIANT enqueued ($STATUS)"

"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work" --once 2>>"$W/w1.log"
is "$?" 0 "khub-worker --once built the queue"
like "$(cat "$W/w1.log")" "published build #$ID $VARIANT acme/relu@${SHA:0:12} on v1" "the worker published it on v1"
api GET "/api/builds/$ID"
STATE=$(json 'd["state"]')
is "$STATE" succeeded "build #$ID succeeded"
[ "$STATE" = succeeded ] || sed 's/^/#   /' "$W/w1.log" | tail -30
cp "$B" "$TEST_DIR/build.json"

# ---- the build log and the ABI report ---------------------------------------------------------------
api GET "/api/builds/$ID/log"
cp "$B" "$TEST_DIR/build.log"
like "$(cat "$TEST_DIR/build.log")" "against torch $TORCH, a cpu build, not a ROCm torch build \(rocm_from_hipcc\)" \
	"the build log says the variant is compiled against a CPU torch, not a ROCm one"
like "$(cat "$TEST_DIR/build.log")" '\+ ([^ ]*ccache )?[^ ]*hipcc .*--offload-arch=gfx1030 --offload-arch=gfx90a .*-x hip .*relu_kernel\.hip' \
	"hipcc compiled the example's kernel, hipified (relu_kernel.hip), for the archs it can target"
like "$(cat "$TEST_DIR/build.log")" 'linking without torch_hip and c10_hip' "and the link says why torch_hip is not linked"
B=$TEST_DIR/build.json
is "$(json 'd["abi_report"]["build"]["torch"]')" "$TORCH" "the ABI report (build record) names the torch compiled against"
is "$(json 'd["abi_report"]["build"]["torch_build"]')" cpu "and that this torch is a CPU build"
is "$(json 'd["abi_report"]["build"]["rocm_from"]')/$(json 'd["abi_report"]["build"]["rocm"].replace(".", "")')" \
	"hipcc/$HIP" "ROCm's version comes from hipcc"
like "$(json '" ".join(d["abi_report"]["build"]["notes"])')" 'not a ROCm torch build' "a note says so in words"
like "$(json 'd["abi_report"]["build"]["smoke_import"]')" '^loaded in torch .*not a ROCm one.*its ops registered; no kernel was run' \
	"the smoke import is reported as what it was: loaded in the CPU torch, no kernel run"
like "$(json '" ".join(d["abi_report"]["files"][0]["needed"])')" 'libamdhip64\.so' "the library needs the HIP runtime"
is "$(json 'sum(1 for f in d["abi_report"]["files"] for v in f["violations"] if v["kind"] == "needed")')" 0 \
	"which the ABI check allows (no DT_NEEDED violation)"
like "$(json 'd["abi_report"]["text"]')" 'Checking for compatibility with manylinux_2_28' "the report holds check-abi's text"

# ---- the published variant ----------------------------------------------------------------------------
B=$TEST_DIR/body
api GET "/api/kernels/acme/relu/tree/v1/build/$VARIANT"
is "$STATUS" 200 "build/$VARIANT/ is listed on v1 by the Hub API"
FILES=$(json '" ".join(sorted(f["path"].split("/")[-1] for f in d))')
like "$FILES" '__init__\.py.*_ops\.py.*_relu_rocm_[0-9a-f]{7}\.abi3\.so.*metadata\.json' "with __init__.py, _ops.py, the library and metadata.json"
SO=$(json '[f["path"] for f in d if f["path"].endswith(".abi3.so")][0]')
curl -sf -H "Authorization: Bearer $ALICE" -o "$TEST_DIR/relu.so" "$KHUB_URL/kernels/acme/relu/resolve/v1/$SO"
ok $? "the published library downloads through resolve"
curl -sf -H "Authorization: Bearer $ALICE" -o "$TEST_DIR/metadata.json" \
	"$KHUB_URL/kernels/acme/relu/resolve/v1/build/$VARIANT/metadata.json"
MD_ARCHS=$(/usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["backend"]["type"], " ".join(m["backend"]["archs"]))' \
	"$TEST_DIR/metadata.json")
like "$MD_ARCHS" '^rocm gfx' "metadata.json: backend rocm with its archs ($MD_ARCHS)"
like "$(readelf -S "$TEST_DIR/relu.so" 2>&1)" '\.hip_fatbin' "the library has a .hip_fatbin section"
if command -v roc-obj-ls >/dev/null 2>&1; then
	(cd "$TEST_DIR" && roc-obj-ls relu.so) >"$TEST_DIR/objs" 2>&1
else
	strings "$TEST_DIR/relu.so" | grep -o 'hipv4-amdgcn-amd-amdhsa--gfx[0-9a-z]*' >"$TEST_DIR/objs"
fi
LEFT=$(B=$TEST_DIR/build.json json '" ".join(d["abi_report"]["build"].get("archs_left_out", []))')
: >"$TEST_DIR/empty.hip"
present=0
for arch in $REQUESTED; do
	if hipcc -x hip --offload-arch="$arch" --cuda-device-only -S "$TEST_DIR/empty.hip" -o /dev/null >/dev/null 2>&1; then
		present=$((present + 1))
		ok $(grep -qE -- "amdgcn-amd-amdhsa--$arch([[:space:]]|\$)" "$TEST_DIR/objs"; echo $?) \
			"the library carries a $arch code object"
		like " $MD_ARCHS " " $arch " "and metadata.json lists $arch"
	else
		like " $LEFT " " $arch " "$arch, which this hipcc cannot target, is reported as left out"
		unlike=$(grep -cE -- "--$arch([[:space:]]|\$)" "$TEST_DIR/objs")
		is "$unlike" 0 "and the library has no $arch code object"
	fi
done
ok $([ "$present" -ge 1 ]; echo $?) "at least one requested arch was compiled ($present)"
is "$(ls "$W/work/w1" 2>/dev/null | grep -c '^build-')" 0 "the worker's scratch directory is gone"

done_testing
