#!/bin/bash
# t0142-build-planning.sh -- the server plans builds from build.toml
# (docs/build-farm.md, "Planning"): real kernel sources (examples/relu, a
# Triton noarch kernel, a CUDA-only kernel, a stable-ABI kernel, an edition 4
# build.toml) imported into a server whose workers (registered through the
# worker API, one of them not seen for a day) offer a mix of variants:
# exactly the right variants are queued, on import and by POST .../builds,
# every other one answered with its reason; explicit names are judged too;
# a stale worker offers nothing until it is seen again; hostile build.toml
# files (too large, deeply nested, not UTF-8, a billion-laughs-like table
# flood) get a 422 with a reason, and a planner that hangs or floods its
# output is stopped at its limits.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v psql >/dev/null 2>&1 || { echo "1..0 # SKIP psql not installed"; exit 0; }
khub_setup
EX=$KHUB_SRC/examples
log=$TEST_DIR/setup.log
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
WL=$(khub admin worker add live 2>>"$log" | tail -n 1)
WS=$(khub admin worker add stale 2>>"$log" | tail -n 1)
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
api() {	# api TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
j() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print(eval(sys.argv[1]))" "$1" 2>/dev/null; }
PSQL=(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt)

A0=torch211-cxx11-cpu-x86_64-linux
A1=torch212-cxx11-cpu-x86_64-linux
A2=torch212-cxx11-cu130-x86_64-linux
A3=torch210-cxx11-cu126-x86_64-linux	# not on the required list
S1=torch-stable-abi211-cpu-x86_64-linux
S2=torch-stable-abi211-cu130-x86_64-linux
R1=torch212-cxx11-rocm71-x86_64-linux	# only the stale worker (with hipify: relu's rocm kernel is .cu)
register() {	# register TOKEN NAME VARIANT...
	local t=$1 n=$2; shift 2
	local vs
	vs=$(printf '"%s",' "$@")
	api "$t" POST /api/workers/register \
		"{\"name\":\"$n\",\"toolchains\":[{\"name\":\"fake\",\"variants\":[${vs%,}]${HIPIFY_TOOL:+,\"hipify\":\"$HIPIFY_TOOL\"}}]}"
}
register "$WL" live $A0 $A1 $A2 $A3 torch-cpu torch-cuda $S1 $S2 tvm-ffi01-cu130-x86_64-linux
is "$ST" 200 "the live worker registers arch, noarch, stable-ABI and tvm-ffi variants (all valid names)"
HIPIFY_TOOL="torch.utils.hipify 1.0.0 (torch 2.12.0)" register "$WS" stale $R1 torch-rocm
is "$ST" 200 "the stale worker registers ROCm variants"
"${PSQL[@]}" -c "UPDATE workers SET last_heartbeat = now() - interval '1 day' WHERE name = 'stale'"
ok $? "… and was last seen a day ago"

# plan NAME DIR: import DIR as acme/NAME (the import's trigger plans and
# queues); $PUSHED: the variants it queued, sorted; then they are canceled
# and POST .../builds {} plans again: $QUEUED, and reason VARIANT prints
# the reason given for VARIANT.
plan() {
	local name=$1 dir=$2
	khub import "$dir" --repo "acme/$name" --type kernel >"$TEST_DIR/import-$name.log" 2>&1
	api "$ALICE" GET "/api/kernels/acme/$name/builds?limit=100"
	PUSHED=$(j '" ".join(sorted(b["variant"] for b in d["builds"]))')
	for id in $(j '" ".join(str(b["id"]) for b in d["builds"])'); do api "$ALICE" POST "/api/builds/$id/cancel" '{}'; done
	api "$ALICE" POST "/api/kernels/acme/$name/builds" '{}'
	QUEUED=$(j '" ".join(sorted(d.get("queued", [])))')
}
reason() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print([s['reason'] for s in d['skipped'] if s['variant'] == sys.argv[1]][0])" "$1" 2>/dev/null; }

# ---- examples/relu: [torch] with cpu, cuda and rocm kernels ---------------------------------------
plan relu "$EX/relu"
is "$PUSHED" "$A0 $A1 $A2" "relu imported: the trigger queued the arch variants of cpu and cuda on the required list"
is "$ST $QUEUED" "202 $A0 $A1 $A2" "POST .../builds {}: the same, 202"
is "$(j '[b["variant"] for b in d["builds"]] == d["queued"], d["plan"]["framework"], d["plan"]["compiled"]')" "(True, 'torch', True)" "… builds and queued agree; the plan says [torch], compiled"
like "$(reason torch-cpu)" "compiled sources" "torch-cpu skipped: a noarch variant of a compiled kernel is never built"
like "$(reason torch-cuda)" "compiled sources" "torch-cuda skipped likewise"
like "$(reason $S1)" "no torch.stable-abi" "$S1 skipped: build.toml targets no stable ABI"
like "$(reason $A3)" "not on the required list" "$A3 skipped: the required list's variants come first"
like "$(reason tvm-ffi01-cu130-x86_64-linux)" "tvm-ffi" "the tvm-ffi variant skipped"
like "$(reason $R1)" "not seen within build_worker_live_seconds" "$R1: only the stale worker offers it"
like "$(reason 'torch<MM>-cxx11-rocm…')" "^no live worker builds rocm" "rocm (in general.backends): no live worker builds it"

# ---- a Triton kernel: [torch-noarch], backends = ["cuda"] -----------------------------------------
plan relu-triton "$EX/relu-triton"
is "$PUSHED" "torch-cuda" "relu-triton imported: only torch-cuda queued"
is "$ST $QUEUED" "202 torch-cuda" "POST .../builds {}: only torch-cuda"
like "$(reason $A2)" "builds only torch-<backend> variants" "$A2 skipped: a noarch kernel has no arch variants"
like "$(reason torch-cpu)" "general.backends does not list cpu" "torch-cpu skipped: general.backends does not list cpu"
like "$(reason $A0)" "general.backends does not list cpu" "$A0 skipped: not a listed backend"

# ---- CUDA only --------------------------------------------------------------------------------------
plan silu-cuda "$EX/silu-cuda"
is "$PUSHED" "$A2" "silu-cuda imported: only the CUDA arch variant of the required list"
is "$ST $QUEUED" "202 $A2" "POST .../builds {}: the same"
like "$(reason $A1)" "general.backends does not list cpu" "no CPU job for a CUDA-only kernel"
like "$(reason torch-cuda)" "compiled sources" "no torch-cuda for it either"

# ---- the Torch stable ABI -------------------------------------------------------------------------------
plan relu-stable-abi "$EX/relu-stable-abi"
is "$PUSHED" "$S1 $S2" "relu-stable-abi imported: the stable-ABI variants only"
is "$ST $QUEUED" "202 $S1 $S2" "POST .../builds {}: the same"
like "$(reason $A1)" "torch.stable-abi targets 2.11 for cpu: built as $S1 instead" "$A1 skipped, naming the stable-ABI variant"

# ---- edition 4 ----------------------------------------------------------------------------------------------
plan relu4 "$EX/relu-edition4"
is "$PUSHED" "$A0 $A1 $A2" "an edition 4 build.toml is upgraded in memory: its variants queued on import"
is "$ST $QUEUED" "202 $A0 $A1 $A2" "POST .../builds {}: the same"
like "$(j 'd["plan"]["warning"]')" "edition 4.*kernel-builder update-build" "… and the answer says it was upgraded, with the command that persists it"
like "$(cat "$TEST_DIR/import-relu4.log")" "edition 4" "the import's trigger logged the upgrade"

# ---- the worker reads build.toml with the same file ------------------------------------------------------
/usr/bin/python3 -I "$KHUB_SRC/builder-worker/build_toml.py" "$EX/relu-edition4/build.toml" >"$TEST_DIR/w4.json" 2>"$TEST_DIR/w4.err"
is "$? $(/usr/bin/python3 -c "import json; print(json.load(open('$TEST_DIR/w4.json'))['general']['edition'])")" "0 5" \
	"the worker's reader (build_toml.py PATH) upgrades edition 4 too: exit 0, edition 5"
like "$(cat "$TEST_DIR/w4.err")" "edition 4.*kernel-builder update-build" "… and warns in the build log"

# ---- inline build.toml files -----------------------------------------------------------------------------
# tree NAME BUILD_TOML: a kernel tree with that build.toml and a module.
tree() {
	rm -rf "$TEST_DIR/t/$1" && mkdir -p "$TEST_DIR/t/$1/torch-ext/k"
	printf 'def f():\n    return 1\n' >"$TEST_DIR/t/$1/torch-ext/k/__init__.py"
	printf '%s\n' "$2" >"$TEST_DIR/t/$1/build.toml"
	echo "$TEST_DIR/t/$1"
}
G='[general]
name = "kk"
version = 1
edition = 5
license = "MIT"'
plan old "$(tree old '[general]
name = "k"
version = 1

[torch]
src = ["torch-ext/b.cpp"]')"
is "$ST $PUSHED" "422 " "an older (edition 3) build.toml: nothing queued, 422"
like "$(j 'd["error"]')" "general.license: missing.*kernel-builder update-build" "… naming what is missing and the command that migrates it"
plan bounds "$(tree bounds "$G
backends = [\"cpu\"]

[torch]
src = [\"torch-ext/b.cpp\"]
minver = \"2.11\"
maxver = \"2.11\"

[kernel.k]
backend = \"cpu\"
depends = [\"torch\"]
src = [\"k.cpp\"]")"
is "$QUEUED" "$A0" "torch.minver = maxver = 2.11: only torch 2.11"
like "$(reason $A1)" "torch 2.12 is above torch.maxver 2.11" "torch 2.12 skipped: above torch.maxver"
plan caps "$(tree caps "$G
backends = [\"cuda\"]

[torch]
src = [\"torch-ext/b.cpp\"]

[kernel.k]
backend = \"cuda\"
depends = [\"torch\"]
cuda-capabilities = [\"7.0\"]
src = [\"k.cu\"]")"
is "$QUEUED" "$A3" "cuda-capabilities = [\"7.0\"]: CUDA 12.6 builds it, CUDA 13.0 (which dropped Volta) does not"
like "$(reason $A2)" "no \[kernel.\*\] for cuda compiles with CUDA 13.0" "… saying why"
plan metal "$(tree metal "$G
backends = [\"metal\"]

[torch]
src = [\"torch-ext/b.cpp\"]

[kernel.k]
backend = \"metal\"
depends = [\"torch\"]
src = [\"k.mm\"]")"
is "$ST $PUSHED" "422 " "a Metal-only kernel: no CPU job; nothing to build here → 422"
like "$(reason 'torch<MM>-cxx11-metal…')" "^no live worker builds metal" "… no live worker builds metal"
plan tpu "$(tree tpu "$G
backends = [\"tpu\"]

[torch-noarch]")"
is "$ST $PUSHED" "422 " "a TPU noarch kernel: nothing queued, 422"
is "$(reason torch-tpu)" "no live worker builds tpu" "… torch-tpu: no live worker builds tpu"
plan tvm "$(tree tvm "$G
backends = [\"cuda\"]

[tvm-ffi]
src = [\"tvm-ffi-ext/b.cpp\"]")"
is "$ST" 202 "a tvm-ffi kernel: a worker offering its variant gets it"
is "$QUEUED" "tvm-ffi01-cu130-x86_64-linux" "… only the tvm-ffi variant"
like "$(reason $A2)" "builds only tvm-ffi" "… and no torch job"

# ---- explicit names are judged too ---------------------------------------------------------------------------
api "$ALICE" POST /api/kernels/acme/relu/builds "{\"variants\":[\"torch-cpu\",\"$A3\",\"torch-xpu\"],\"force\":true}"
is "$ST $(j 'd["queued"]')" "202 ['$A3']" "relu, named torch-cpu, $A3, torch-xpu: only $A3 queued (named: no required-list preference)"
like "$(reason torch-cpu)" "compiled sources" "… torch-cpu refused: compiled sources"
like "$(reason torch-xpu)" "general.backends does not list xpu" "… torch-xpu refused: not a listed backend"
api "$ALICE" POST /api/kernels/acme/relu-triton/builds "{\"variants\":[\"$A2\"]}"
is "$ST" 422 "relu-triton named only $A2: nothing it builds → 422"

# ---- a stale worker seen again counts again -------------------------------------------------------------------
HIPIFY_TOOL="torch.utils.hipify 1.0.0 (torch 2.12.0)" register "$WS" stale $R1 torch-rocm
api "$ALICE" POST /api/kernels/acme/relu/builds '{}'
like "$(j 'd["queued"]')" "$R1" "the stale worker registers again: relu's $R1 is queued"

# ---- hostile build.toml ------------------------------------------------------------------------------------------
/usr/bin/python3 -c "print('a = \"' + 'x' * (10 << 20) + '\"')" >"$TEST_DIR/big.toml"
plan big "$(tree big "$(cat "$TEST_DIR/big.toml")")"
is "$ST $PUSHED" "422 " "a 10 MB string in build.toml: nothing queued, 422"
like "$(j 'd["error"]')" "build.toml is (stored in LFS|[0-9]+ bytes; at most 262144 are read)" "… refused unread (too large, here stored in LFS)"
plan big2 "$(tree big2 "$(/usr/bin/python3 -c "print('# ' + 'x' * 300000)")")"
is "$ST" 422 "a 300 KB build.toml: 422"
like "$(j 'd["error"]')" "build.toml is 30[0-9]+ bytes; at most 262144 are read" "… refused unread, saying the limit"
plan deep "$(tree deep "$(/usr/bin/python3 -c "print('a = ' + '[' * 100000 + ']' * 100000)")")"
is "$ST $PUSHED" "422 " "100,000 nested arrays: 422"
like "$(j 'd["error"]')" "too deeply nested" "… too deeply nested"
plan utf "$(tree utf "$(printf '[general]\nname = "\xff\xfe"\n')")"
is "$ST" 422 "invalid UTF-8: 422"
like "$(j 'd["error"]')" "not UTF-8" "… not UTF-8"
plan laughs "$(tree laughs "$(/usr/bin/python3 -c "
print('[general]')
print('lol = [' + ', '.join(['[' + ', '.join(['\"lol\"'] * 40) + ']'] * 400) + ']')
for i in range(2000): print('[kernel.k%d]' % i)")")"
is "$ST" 422 "a billion-laughs-like flood of tables and arrays: 422"
like "$(j 'd["error"]')" "^build.toml: general" "… refused with the first bad key"
plan junk "$(tree junk 'a = = 1')"
like "$(j 'd["error"]')" "not valid TOML" "junk: not valid TOML"

# ---- the planner's limits ---------------------------------------------------------------------------------------
khub_stop
printf '#!/bin/sh\nwhile :; do :; done\n' >"$TEST_DIR/spin" && chmod +x "$TEST_DIR/spin"
KHUB_BUILD_PLAN_PYTHON=$TEST_DIR/spin KHUB_BUILD_PLAN_WALL_MS=1000 khub_start
tree spin "a = 1 # $RANDOM" >/dev/null
khub import "$TEST_DIR/t/spin" --repo acme/spin --type kernel >>"$log" 2>&1
api "$ALICE" POST /api/kernels/acme/spin/builds '{}'
is "$ST" 422 "a planner that never ends: 422"
like "$(j 'd["error"]')" "stopped at its wall-clock limit" "… stopped at its wall-clock limit"
khub_stop
printf '#!/bin/sh\nexec yes\n' >"$TEST_DIR/flood" && chmod +x "$TEST_DIR/flood"
KHUB_BUILD_PLAN_PYTHON=$TEST_DIR/flood khub_start
tree flood "a = 2 # $RANDOM" >/dev/null
khub import "$TEST_DIR/t/flood" --repo acme/flood --type kernel >>"$log" 2>&1
api "$ALICE" POST /api/kernels/acme/flood/builds '{}'
is "$ST" 422 "a planner that floods its output: 422"
like "$(j 'd["error"]')" "stopped at its output limit" "… stopped at its output limit"
curl -sf "$KHUB_URL/api/health" >/dev/null
ok $? "the server is still up"
khub_stop
cat >"$TEST_DIR/probe" <<'SH'
#!/bin/sh
echo "build.toml: uid=$(/usr/bin/id -u) env=[$(/usr/bin/env | /usr/bin/cut -d= -f1 | /usr/bin/grep -v '^PWD$' | /usr/bin/tr '\n' ' ')] cpu=$(ulimit -t) as=$(ulimit -v) core=$(ulimit -c) fsize=$(ulimit -f) nofile=$(ulimit -n)"
exit 2
SH
chmod +x "$TEST_DIR/probe"
KHUB_BUILD_PLAN_PYTHON=$TEST_DIR/probe khub_start
tree probe "a = 3 # $RANDOM" >/dev/null
khub import "$TEST_DIR/t/probe" --repo acme/probe --type kernel >>"$log" 2>&1
api "$ALICE" POST /api/kernels/acme/probe/builds '{}'
want_uid=$(id -u); [ "$want_uid" = 0 ] && want_uid=65534
is "$ST $(j 'd["error"]')" "422 build.toml: uid=$want_uid env=[] cpu=10 as=524288 core=0 fsize=0 nofile=16" \
	"the planner child runs with no environment, as nobody when khub runs as root, under CPU, memory, core, file and fd limits"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
