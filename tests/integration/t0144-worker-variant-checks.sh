#!/bin/bash
# t0144-worker-variant-checks.sh -- only variants that work are built and
# published. `khub-worker build` (Debian's python3-torch): a kernel with
# compiled sources never gets a noarch variant (exit 5, bad job, also when
# its compile fails); the smoke import's ops check fails a kernel whose
# Python calls an op the library does not register, one whose library
# registers in another build's namespace, and a Python op named without
# add_op_namespace_prefix; nothing lands in OUT. Stable ABI: a
# [torch.stable-abi] kernel is built as torch-stable-abi<MM>-cpu-<cpu>-linux
# with TORCH_TARGET_VERSION (with a torch >= 2.11 for real, loaded and
# checked against torch.relu; else the naming, the command line and the
# refusals, through a toolchain whose probe reports torch 2.11); tvm-ffi is
# refused with a reason. The server refuses a noarch output of a compiled
# kernel and publishes nothing; the daemon fails such a job for good.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs torch	# $WORKER, $PY, or a skip
KERNELS=$KHUB_SRC/tests/integration/kernels

# Under /opt: the fake toolchain Python below must be visible inside the
# build sandbox, which shows builds /usr and toolchains under /opt, never
# /tmp, /var or /home.
mkdir -p /opt
T=$(mktemp -d /opt/khub-t0144-XXXXXX)
chmod 755 "$T"
khub_setup
trap 'rm -rf "$T"; khub_teardown' EXIT

worker_toolchain "$T/toolchains.json"
VARIANT=$(worker_torch_variant)
TORCH_MM=$($PY -c 'import torch; v = torch.__version__.split("."); print(int(v[0]) * 100 + int(v[1]))')
COMMIT=0123456789abcdef0123456789abcdef01234567

wbuild() {	# wbuild NAME SOURCE VARIANT [ARGS...]: exit status in $RC, log in $T/NAME.log
	local name=$1 src=$2 variant=$3; shift 3
	"$WORKER" build --toolchains "${TOOLCHAINS:-$T/toolchains.json}" --toolchain "${TOOLCHAIN:-cpu-debian}" \
		--source "$src" --out "$T/out-$name" --variant "$variant" --work-dir "$T/work" --probe-cache "$T/probe" \
		"$@" >"$T/$name.log" 2>&1	# each toolchain probed once, as the daemon does
	RC=$?
}
out_empty() { [ -z "$(ls -A "$T/out-$1" 2>/dev/null)" ]; }
log() { cat "$T/$1.log"; }

# ---- no noarch variant of compiled sources ------------------------------------------------
wbuild relu-noarch "$KHUB_SRC/examples/relu" torch-cpu
is "$RC" 5 "examples/relu (compiled sources) as torch-cpu: exit 5, a bad job"
like "$(log relu-noarch)" 'build.toml: kernel.relu_(cpu|cuda|rocm): the kernel has compiled sources, so it has no noarch variant: torch-cpu' \
	"… saying the kernel has compiled sources and no noarch variant"
check "… nothing in OUT" -- out_empty relu-noarch
cp -r "$KHUB_SRC/examples/relu" "$T/broken"
printf 'this is not C++\n' >>"$T/broken/relu_cpu/relu_cpu.cpp"
wbuild broken-noarch "$T/broken" torch-cpu
is "$RC" 5 "a kernel whose compile fails, as torch-cpu: exit 5 (never packaged as Python only)"
check "… nothing in OUT" -- out_empty broken-noarch

# ---- the ops check ---------------------------------------------------------------------------
wbuild badreg "$KERNELS/relu-bad-registration" "$VARIANT" --commit $COMMIT
is "$RC" 1 "relu-bad-registration (calls ops.relu_missing, registers relu): exit 1"
like "$(log badreg)" 'ops check: __init__.py:9: ops.relu_missing is called, but _relu_bad_registration_cpu_0123456 registers no op relu_missing \(it registers: relu\)' \
	"… the ops check names the call, the namespace and what is registered"
like "$(log badreg)" 'the smoke import failed .*: nothing is published' "… and says nothing is published"
check "… nothing in OUT" -- out_empty badreg
wbuild wrongns "$KERNELS/relu-wrong-namespace" "$VARIANT" --commit $COMMIT
is "$RC" 1 "relu-wrong-namespace (TORCH_LIBRARY in another build's namespace): exit 1"
like "$(log wrongns)" 'ops check: the import registered ops in namespace _relu_cpu_0123456, not in this build.s _relu_wrong_namespace_cpu_0123456' \
	"… the ops check names the foreign namespace and the build's"
check "… nothing in OUT" -- out_empty wrongns

noarch_kernel() {	# noarch_kernel DIR INIT_PY: a [torch-noarch] kernel "halve" with that __init__.py
	mkdir -p "$1/torch-ext/halve"
	printf '[general]\nname = "halve"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch-noarch]\n' >"$1/build.toml"
	printf '%s\n' "$2" >"$1/torch-ext/halve/__init__.py"
}
noarch_kernel "$T/noprefix" 'import torch


@torch.library.custom_op("mylib::halve", mutates_args=())
def halve(x: torch.Tensor) -> torch.Tensor:
    return x / 2'
wbuild noprefix "$T/noprefix" torch-cpu
is "$RC" 1 "a Python op named \"mylib::halve\" (no add_op_namespace_prefix): exit 1"
like "$(log noprefix)" 'ops check: __init__.py:5: @custom_op on halve does not name its op with add_op_namespace_prefix' \
	"… kernel-builder's torch ops check, with file and line"
check "… nothing in OUT" -- out_empty noprefix
noarch_kernel "$T/nocall" 'from ._ops import ops


def halve(x):
    return ops.halve(x)'
wbuild nocall "$T/nocall" torch-cpu
is "$RC" 1 "a noarch kernel calling ops.halve that it never registers: exit 1"
like "$(log nocall)" 'ops check: __init__.py:5: ops.halve is called, but _halve_cpu_[0-9a-f]{7} registers no op halve' \
	"… named by the ops check"
noarch_kernel "$T/foreign" 'import torch


def halve(x):
    return torch.ops._relu_cpu_0123456.relu(x)'
wbuild foreign "$T/foreign" torch-cpu
is "$RC" 1 "a kernel calling torch.ops of another build's namespace: exit 1"
like "$(log foreign)" "torch.ops._relu_cpu_0123456 is another build's op namespace" "… named by the ops check"

# ---- stable ABI ------------------------------------------------------------------------------
STABLE=$KHUB_SRC/examples/relu-stable-abi
wbuild stable-arch "$STABLE" "$VARIANT"
is "$RC" 5 "examples/relu-stable-abi as the ordinary arch variant $VARIANT: exit 5"
like "$(log stable-arch)" 'torch.stable-abi: the kernel is built against the torch stable ABI 2.11 for cpu: its variant is torch-stable-abi211-' \
	"… naming the variant it is built as"
wbuild relu-stable "$KHUB_SRC/examples/relu" torch-stable-abi211-cpu-x86_64-linux
if [ "$TORCH_MM" -ge 211 ]; then
	is "$RC" 5 "examples/relu (no [torch.stable-abi]) as a stable ABI variant: exit 5"
	ok 0 "# SKIP torch >= 2.11 advertises stable ABI variants"
	ok 0 "# SKIP torch >= 2.11 advertises stable ABI variants"
else
	is "$RC" 64 "torch $TORCH_MM is older than 2.11: the toolchain cannot build torch-stable-abi211 (exit 64)"
	like "$(log relu-stable)" 'builds the stable ABI 2.9 up to its own version only' "… and says why"
	is "$("$WORKER" --check --toolchains "$T/toolchains.json" 2>&1 | grep -c stable-abi)" 0 \
		"--check: a torch older than 2.9 advertises no stable ABI variant"
fi

# A toolchain whose probe says torch 2.11 (everything else runs Debian's
# Python): the stable ABI variants it advertises and the compile command.
# In a directory of its own (a toolchain directory never holds a scratch).
mkdir -p "$T/tc"
printf '#!/bin/sh\nif [ "$1" = "-c" ]; then\n\techo %s\n\texit 0\nfi\nexec %s "$@"\n' \
	"'{\"python\": \"3.11.2\", \"machine\": \"x86_64\", \"python_include\": \"/usr/include/python3.11\", \"torch\": \"2.11.0\", \"cuda\": null, \"hip\": null, \"cxx11_abi\": true, \"torch_include\": [], \"torch_lib\": \"/nonexistent\", \"kernels\": false, \"tomllib\": true}'" \
	"$PY" >"$T/tc/py211"
chmod 755 "$T/tc/py211"
printf '{"toolchains": [{"name": "t211", "python": "%s", "cxx": "g++"}]}\n' "$T/tc/py211" >"$T/t211.json"
check211=$("$WORKER" --check --toolchains "$T/t211.json" 2>&1)
like "$(echo $check211)" 'torch211-cxx11-cpu-x86_64-linux torch-stable-abi29-cpu-x86_64-linux torch-stable-abi210-cpu-x86_64-linux torch-stable-abi211-cpu-x86_64-linux torch-cpu' \
	"--check: torch 2.11 advertises torch-stable-abi29..211-cpu-x86_64-linux (no cxx11 tag)"
TOOLCHAINS=$T/t211.json TOOLCHAIN=t211 wbuild stable211 "$STABLE" torch-stable-abi211-cpu-x86_64-linux --commit $COMMIT
like "$(log stable211)" 'kernel relu-stable-abi \(against the torch stable ABI 2.11\), op namespace _relu_stable_abi_cpu_0123456' \
	"torch-stable-abi211-cpu-x86_64-linux: built against the stable ABI 2.11"
like "$(log stable211)" '\+ g\+\+ .*-DTORCH_TARGET_VERSION=0x020b000000000000 .*-DTORCH_EXTENSION_NAME=_relu_stable_abi_cpu_0123456 ' \
	"… compiled with TORCH_TARGET_VERSION = (2 << 56) | (11 << 48), kernel-builder's define"
TOOLCHAINS=$T/t211.json TOOLCHAIN=t211 wbuild stable210 "$STABLE" torch-stable-abi210-cpu-x86_64-linux
is "$RC" 5 "the same kernel as torch-stable-abi210 (it targets 2.11): exit 5"
like "$(log stable210)" 'targets the stable ABI 2.11 \(torch-stable-abi211-...\), not torch-stable-abi210' "… and says which"
if [ "$TORCH_MM" -ge 211 ]; then
	V=torch-stable-abi211-cpu-x86_64-linux
	wbuild stable-real "$STABLE" $V --commit $COMMIT
	is "$RC" 0 "with torch >= 2.11: $V builds"
	like "$(cat "$T/out-stable-real/abi-report.json")" '"torch_stable_abi": "2.11"' "… ABI-checked against the stable ABI 2.11"
	loaded=$($PY - "$T/out-stable-real/$V" <<'PYEOF' 2>&1
import importlib.util, json, os, sys
import torch
d = sys.argv[1]
kid = json.load(open(os.path.join(d, "metadata.json")))["id"]
spec = importlib.util.spec_from_file_location(kid, os.path.join(d, "__init__.py"))
mod = importlib.util.module_from_spec(spec)
sys.modules[kid] = mod
spec.loader.exec_module(mod)
same = all(torch.equal(mod.relu(x), torch.relu(x)) for x in [torch.randn(1000), torch.randn(7, 9, dtype=torch.float64)])
print("equal" if same else "DIFFERENT")
PYEOF
)
	is "$loaded" equal "… loads as the loader does and equals torch.relu"
else
	for i in 1 2 3; do
		ok 0 "# SKIP a real stable ABI build needs torch >= 2.11 (here $TORCH_MM; tests/device/run_stable_abi.sh runs it on 2.11)"
	done
fi

# ---- tvm-ffi ---------------------------------------------------------------------------------
wbuild tvm "$KHUB_SRC/examples/relu" tvm-ffi01-cpu-x86_64-linux
is "$RC" 5 "a tvm-ffi variant: exit 5"
like "$(log tvm)" 'tvm-ffi variants are not built by this worker' "… with the reason"
mkdir -p "$T/tvm/tvm-ffi-ext/relu_tvm"
printf '[general]\nname = "relu-tvm"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[tvm-ffi]\nsrc = ["relu.cc"]\n' >"$T/tvm/build.toml"
wbuild tvm-kernel "$T/tvm" torch-cpu
is "$RC" 5 "a [tvm-ffi] kernel asked for torch-cpu: exit 5"
like "$(log tvm-kernel)" 'build.toml: tvm-ffi: tvm-ffi kernels are not built by this worker' "… with the reason"

# ---- the server refuses a noarch output of a compiled kernel ---------------------------------
setup_log=$TEST_DIR/setup.log
khub admin org create acme >>"$setup_log" 2>&1
khub admin user create alice >>"$setup_log" 2>&1
khub admin member set acme alice admin >>"$setup_log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$setup_log" | tail -n 1)
W1=$(khub admin worker add w1 2>>"$setup_log" | tail -n 1)
khub_start
B=$TEST_DIR/b
api() {	# api TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
j() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print(eval(sys.argv[1]))" "$1" 2>/dev/null; }
files=$(cd "$KHUB_SRC/examples/relu" && for f in build.toml torch-ext/relu/__init__.py torch-ext/torch_binding.cpp relu_cpu/relu_cpu.cpp; do
	printf '{"path":"%s","content":"%s","encoding":"base64"},' "$f" "$(base64 -w0 "$f")"; done)
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[${files%,}]}"
is "$ST" 200 "acme/relu created with examples/relu's compiled sources"
GD=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
api "$W1" POST /api/workers/register '{"name":"w1","version":"0.1","concurrency":1,"toolchains":[{"name":"cpu","variants":["torch-cpu"],"torch":"2.11","cxx11_abi":true,"python":"3.11"}]}'
is "$ST" 200 "a worker that says it builds torch-cpu registers"
api "$ALICE" POST /api/kernels/acme/relu/builds '{"revision":"main","variants":["torch-cpu"],"force":true}'
JOB=$(j 'd["builds"][0]["id"] if d["builds"] else ""')
if [ -n "$JOB" ]; then
	api "$W1" POST /api/workers/claim '{"variants":["torch-cpu"],"wait_seconds":0}'
	is "$ST $(j 'd["build"]["id"]')" "200 $JOB" "the worker claims the torch-cpu job"
	/usr/bin/python3 - "$TEST_DIR/noarch.tar" <<'PYEOF'
import io, json, sys, tarfile
meta = {"id": "_relu_cpu_0123456", "name": "relu", "version": 1, "license": "Apache-2.0", "python-depends": [],
        "backend": {"type": "cpu"}}
with tarfile.open(sys.argv[1], "w") as t:
    for name, data in [("torch-cpu/__init__.py", b"from ._ops import ops\n"), ("torch-cpu/_ops.py", b"ops = None\n"),
                       ("torch-cpu/metadata.json", json.dumps(meta).encode()),
                       ("abi-report.json", b'{"ok": true, "files": []}')]:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
PYEOF
	st=$(curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $W1" -H 'Content-Type: application/x-tar' \
		--data-binary "@$TEST_DIR/noarch.tar" "$KHUB_URL/api/builds/$JOB/output")
	is "$st $(j 'd["state"]')" "422 failed" "a noarch output of a kernel with compiled sources → 422, the job failed"
	like "$(j 'd["error"]')" 'torch-cpu is a noarch \(Python-only\) variant but the source.s build.toml lists sources to compile' \
		"… saying why"
else
	ok 0 "the server did not queue torch-cpu for a compiled kernel: $(j 'd["skipped"][0]["reason"]' | head -c 120)"
	ok 0 "# SKIP no noarch job to upload an output for (planning refused it: the first line)"
fi

# The daemon: a torch-cpu job of the compiled kernel fails as a bad job, for good (not retried).
W2=$(khub admin worker add w2 2>>"$setup_log" | tail -n 1)
printf '%s\n' "$W2" >"$T/w2.token"
chmod 600 "$T/w2.token"
api "$ALICE" POST /api/kernels/acme/relu/builds '{"revision":"main","variants":["torch-cpu"],"force":true}'
JOB2=$(j 'd["builds"][0]["id"] if d["builds"] else ""')
if [ -n "$JOB2" ]; then
	"$WORKER" --url "$KHUB_URL" --token-file "$T/w2.token" --toolchains "$T/toolchains.json" --name w2 --once \
		--poll-seconds 1 --work-dir "$T/dwork" 2>"$T/daemon.log"
	ok $? "the daemon (--once) ran the torch-cpu job and exited"
	api "$ALICE" GET "/api/builds/$JOB2"
	is "$(j 'd["state"]')" failed "… the job failed, not queued again"
	like "$(j 'd["error"]')" '^bad job: the kernel is not built as this variant \(exit 5\): ' "… as a bad job (exit 5)"
else
	ok 0 "# SKIP torch-cpu of a compiled kernel not queued (planning refused it)"
	ok 0 "# SKIP torch-cpu of a compiled kernel not queued (planning refused it)"
	ok 0 "# SKIP torch-cpu of a compiled kernel not queued (planning refused it)"
fi
is "$(git --git-dir="$GD" rev-parse -q --verify v1 || echo none)" none "nothing published: no v1"

done_testing
