#!/bin/bash
# t0080-kernel-index.sh -- the kernel variant index and its endpoints against
# a real server: the index written by khub import, the NDJSON commit API and
# git push (checked in the database before any read), and lazily for commits
# made behind khub's back; GET /api/kernels (visibility, filters, sorting,
# Link pagination); repo info versions; /variants with compatible=true for a
# table of client environments (the kernels loader's rules); /metadata (ok,
# missing, invalid); /compliance; /api/openapi.json.
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

skip() { TAP_COUNT=$((TAP_COUNT + 1)); echo "ok $TAP_COUNT # SKIP $*"; }

# variant DIR NAME BACKEND_TYPE [ARCHS_JSON]: a variant with __init__.py and
# a valid metadata.json
variant() {
	local dir=$1/build/$2 type=$3 archs=${4:-}
	mkdir -p "$dir"
	printf 'def f():\n    return "%s"\n' "$2" >"$dir/__init__.py"
	if [ -n "$archs" ]; then
		printf '{"id":"_relu_%s","name":"relu","version":1,"license":"apache-2.0","python-depends":[],"backend":{"type":"%s","archs":%s}}\n' \
			"$(echo "$2" | tr -c 'a-z0-9\n' _)" "$type" "$archs" >"$dir/metadata.json"
	else
		printf '{"id":"_relu_%s","name":"relu","version":1,"license":"apache-2.0","python-depends":[],"backend":{"type":"%s"}}\n' \
			"$(echo "$2" | tr -c 'a-z0-9\n' _)" "$type" >"$dir/metadata.json"
	fi
}

# acme/relu v1 (khub import): the variant zoo of the compatibility table.
R=$TEST_DIR/relu
CUDA_ARCHS='["8.0","9.0"]'
for v in torch211-cxx11-cu126-x86_64-linux torch211-cxx11-cu128-x86_64-linux torch212-cxx11-cu128-x86_64-linux \
	torch211-cxx11-cu128-aarch64-linux torch-stable-abi212-cu128-x86_64-linux tvm-ffi01-cu128-x86_64-linux; do
	variant "$R" "$v" cuda "$CUDA_ARCHS"
done
variant "$R" torch211-cxx11-rocm71-x86_64-linux rocm '["gfx942"]'
variant "$R" torch211-cxx11-rocm72-x86_64-linux rocm '["gfx942"]'
variant "$R" torch211-cxx11-cpu-x86_64-linux cpu
variant "$R" torch211-cpu-aarch64-darwin cpu
variant "$R" torch211-metal-aarch64-darwin metal
variant "$R" torch-cpu cpu
variant "$R" torch-cuda cuda "$CUDA_ARCHS"
variant "$R" torch-metal metal
variant "$R" torch-rocm rocm '["gfx942"]'
# metadata.json that is not JSON, one without a license, one missing
variant "$R" torch211-cxx11-cu130-x86_64-linux cuda "$CUDA_ARCHS"
printf '{"id": "_relu", "name": "relu",\n' >"$R/build/torch211-cxx11-cu130-x86_64-linux/metadata.json"
variant "$R" torch211-cxx11-xpu20253-x86_64-linux xpu
rm "$R/build/torch211-cxx11-xpu20253-x86_64-linux/metadata.json"
variant "$R" torch-xpu xpu
printf '{"id":"_relu","name":"relu","version":1,"python-depends":[],"backend":{"type":"xpu"}}\n' \
	>"$R/build/torch-xpu/metadata.json"
# an unparseable name, a nested file counted to its variant, an LFS file
mkdir -p "$R/build/not-a-variant" "$R/build/torch-cpu/relu/sub"
printf 'x\n' >"$R/build/not-a-variant/__init__.py"
printf 'x = 1\n' >"$R/build/torch-cpu/relu/sub/nested.py"
head -c 200000 /dev/urandom >"$R/build/torch211-cxx11-cu128-x86_64-linux/_relu.abi3.bin"
printf 'readme\n' >"$R/build/README.txt"
printf '# relu\n' >"$R/README.md"
RELU_V1=$(khub import "$R" --repo acme/relu --branch v1 2>>"$TEST_DIR/import.log")
# v2: only the CPU variants
R2=$TEST_DIR/relu2
variant "$R2" torch211-cxx11-cpu-x86_64-linux cpu
variant "$R2" torch-cpu cpu
RELU_V2=$(khub import "$R2" --repo acme/relu --branch v2 2>>"$TEST_DIR/import.log")

# acme/secret (private), other/rocm-only, other/py-only (torch-universal),
# other/compliant (every CUDA x86_64-linux variant of the list)
S=$TEST_DIR/secret
variant "$S" torch211-cxx11-cpu-x86_64-linux cpu
khub import "$S" --repo acme/secret --branch v1 --private >/dev/null 2>>"$TEST_DIR/import.log"
O=$TEST_DIR/rocm
variant "$O" torch211-cxx11-rocm71-x86_64-linux rocm '["gfx942"]'
khub import "$O" --repo other/rocm-only --branch v1 >/dev/null 2>>"$TEST_DIR/import.log"
P=$TEST_DIR/py
variant "$P" torch-universal cpu
khub import "$P" --repo other/py-only --branch v1 >/dev/null 2>>"$TEST_DIR/import.log"
C=$TEST_DIR/compliant
for v in torch211-cxx11-cu126-x86_64-linux torch211-cxx11-cu128-x86_64-linux torch211-cxx11-cu130-x86_64-linux \
	torch212-cxx11-cu126-x86_64-linux torch212-cxx11-cu130-x86_64-linux torch212-cxx11-cu132-x86_64-linux; do
	variant "$C" "$v" cuda "$CUDA_ARCHS"
done
variant "$C" torch211-cxx11-cpu-x86_64-linux cpu
khub import "$C" --repo other/compliant --branch v1 >/dev/null 2>>"$TEST_DIR/import.log"

khub admin user create bob >/dev/null 2>&1
khub admin member set acme bob write >/dev/null 2>&1
BOB=$(khub admin token create bob --scope write 2>/dev/null | tail -n 1)
khub admin user create alice >/dev/null 2>&1
khub admin member set acme alice read >/dev/null 2>&1
ALICE=$(khub admin token create alice --scope read 2>/dev/null | tail -n 1)
khub admin trust set acme >/dev/null 2>&1
khub_start

like "$RELU_V1/$RELU_V2" '^[0-9a-f]{40}/[0-9a-f]{40}$' "imports of acme/relu v1 and v2"

H=$TEST_DIR/headers
B=$TEST_DIR/body	# for api, header (tests/lib/khub-test.sh)
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print($1)"; }
PSQL=
if command -v psql >/dev/null 2>&1; then
	PSQL="psql -h $KHUB_DATA_DIR/pg/run -U khub khub -Atc"
fi
sql() { $PSQL "$1" 2>/dev/null; }
indexed() {	# indexed SHA -> variant count recorded for that commit, or "none"
	local n
	n=$(sql "SELECT variant_count FROM kernel_commits WHERE commit_sha = '$1'")
	echo "${n:-none}"
}

# ---- the index, written by import before any read ---------------------------------
if [ -n "$PSQL" ]; then
	is "$(indexed "$RELU_V1")" 19 "khub import indexed v1's 19 build/ directories"
	is "$(sql "SELECT file_count || '/' || total_size FROM kernel_variants WHERE commit_sha = '$RELU_V1' AND variant = 'torch-cpu'")" \
		"$(find "$R/build/torch-cpu" -type f | wc -l)/$(find "$R/build/torch-cpu" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')" \
		"file count and size of torch-cpu (nested files included)"
	is "$(sql "SELECT total_size > 200000 FROM kernel_variants WHERE commit_sha = '$RELU_V1' AND variant = 'torch211-cxx11-cu128-x86_64-linux'")" \
		t "the LFS file counts with its real size"
	is "$(sql "SELECT framework || ' ' || framework_major || '.' || framework_minor || ' ' || cxx_abi || ' ' || backend || ' ' || backend_major || '.' || backend_minor || ' ' || arch || ' ' || os || ' ' || kernel_name || ' ' || kernel_version || ' ' || license || ' ' || backend_type || ' ' || backend_archs::text FROM kernel_variants WHERE commit_sha = '$RELU_V1' AND variant = 'torch211-cxx11-cu128-x86_64-linux'")" \
		'torch 2.11 cxx11 cuda 12.8 x86_64 linux relu 1 apache-2.0 cuda ["8.0", "9.0"]' "parsed name parts and metadata columns"
	is "$(sql "SELECT string_agg(variant || '=' || metadata_status, ' ' ORDER BY variant) FROM kernel_variants WHERE commit_sha = '$RELU_V1' AND metadata_status <> 'ok'")" \
		"not-a-variant=missing torch-xpu=invalid torch211-cxx11-cu130-x86_64-linux=invalid torch211-cxx11-xpu20253-x86_64-linux=missing" \
		"missing and invalid metadata recorded"
	is "$(sql "SELECT name_valid FROM kernel_variants WHERE commit_sha = '$RELU_V1' AND variant = 'not-a-variant'")" f \
		"an unparseable name is recorded as such"
	is "$(sql "SELECT string_agg(substr(ref, 12) || '=' || commit_sha, ' ' ORDER BY ref) FROM kernel_heads h JOIN repos r ON r.id = h.repo_id WHERE r.name = 'relu'")" \
		"main=$(curl -s "$KHUB_URL/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])') v1=$RELU_V1 v2=$RELU_V2" \
		"branch heads recorded"
else
	skip "psql missing: index rows"
fi

# ---- NDJSON commit API ------------------------------------------------------------
b64() { printf '%s' "$1" | base64 -w0; }
commit_body() {	# commit_body PATH=CONTENT... -> NDJSON on stdout
	printf '{"key":"header","value":{"summary":"variants"}}\n'
	for pair in "$@"; do
		printf '{"key":"file","value":{"path":"%s","content":"%s","encoding":"base64"}}\n' "${pair%%=*}" "$(b64 "${pair#*=}")"
	done
}
META_CUDA='{"id":"_activation","name":"activation","version":1,"license":"mit","python-depends":[],"backend":{"type":"cuda","archs":["9.0"]}}'
META_METAL='{"id":"_activation","name":"activation","version":1,"license":"mit","python-depends":[],"backend":{"type":"metal"}}'
api POST "$KHUB_URL/api/repos/create" -H "Authorization: Bearer $BOB" -H 'Content-Type: application/json' \
	-d '{"type":"kernel","organization":"acme","name":"activation"}'
is "$STATUS" 200 "bob creates acme/activation"
api POST "$KHUB_URL/api/kernels/acme/activation/branch/v1" -H "Authorization: Bearer $BOB" -H 'Content-Type: application/json' -d '{}'
commit_body "build/torch211-cxx11-cu128-x86_64-linux/__init__.py=x = 1" \
	"build/torch211-cxx11-cu128-x86_64-linux/metadata.json=$META_CUDA" \
	"build/torch211-metal-aarch64-darwin/__init__.py=x = 1" \
	"build/torch211-metal-aarch64-darwin/metadata.json=$META_METAL" >"$TEST_DIR/commit.ndjson"
api POST "$KHUB_URL/api/kernels/acme/activation/commit/v1" -H "Authorization: Bearer $BOB" \
	-H 'Content-Type: application/x-ndjson' --data-binary @"$TEST_DIR/commit.ndjson"
is "$STATUS" 200 "NDJSON commit to acme/activation v1"
ACT_V1=$(json 'd["commitOid"]')
if [ -n "$PSQL" ]; then
	is "$(indexed "$ACT_V1")" 2 "the commit API indexed its 2 variants before any read"
	is "$(sql "SELECT string_agg(variant || ':' || kernel_name || ':' || license, ' ' ORDER BY variant) FROM kernel_variants WHERE commit_sha = '$ACT_V1'")" \
		"torch211-cxx11-cu128-x86_64-linux:activation:mit torch211-metal-aarch64-darwin:activation:mit" \
		"… with their metadata"
else
	skip "psql missing: commit API index"
fi
api GET "$KHUB_URL/api/kernels/acme/activation/variants?revision=v1"
is "$(json '[v["name"] for v in d["variants"]]')" "['torch211-cxx11-cu128-x86_64-linux', 'torch211-metal-aarch64-darwin']" \
	"variants of a commit made through the API"
is "$(json 'd["sha"]')" "$ACT_V1" "… at the commit's sha"

# ---- git push (post-receive hook) --------------------------------------------------
if command -v git >/dev/null 2>&1 && [ -n "$PSQL" ]; then
	export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_LFS_SKIP_SMUDGE=1
	mkdir -p "$HOME"
	git config --global user.name "Test User"
	git config --global user.email test@example.com
	W=$TEST_DIR/work
	git clone -q -b v1 "http://bob:$BOB@127.0.0.1:$KHUB_PORT/kernels/acme/activation" "$W" >"$TEST_DIR/err" 2>&1
	ok $? "clone acme/activation"
	(cd "$W" && git checkout -q -b v2 && mkdir -p build/torch-cuda && printf 'x = 2\n' >build/torch-cuda/__init__.py &&
		printf '%s\n' "$META_CUDA" >build/torch-cuda/metadata.json && git add -A && git commit -q -m "torch-cuda" &&
		git push -q origin v2) >"$TEST_DIR/err" 2>&1
	ok $? "git push of branch v2 with a new variant" || sed 's/^/#   /' "$TEST_DIR/err"
	PUSHED=$(git -C "$W" rev-parse HEAD)
	is "$(indexed "$PUSHED")" 3 "the post-receive hook indexed the pushed commit"
	is "$(sql "SELECT commit_sha FROM kernel_heads h JOIN repos r ON r.id = h.repo_id WHERE r.name = 'activation' AND ref = 'refs/heads/v2'")" \
		"$PUSHED" "… and recorded the new head"
	(cd "$W" && git push -q origin :v2) >"$TEST_DIR/err" 2>&1
	is "$(sql "SELECT count(*) FROM kernel_heads h JOIN repos r ON r.id = h.repo_id WHERE r.name = 'activation' AND ref = 'refs/heads/v2'")" \
		0 "deleting the branch by push drops its head"
else
	skip "git or psql missing: push indexing"
fi

# ---- lazy indexing: a commit made behind khub's back -----------------------------------
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
LATE=$(git --git-dir="$GITDIR" commit-tree "$RELU_V2^{tree}" -p "$RELU_V2" -m "made by hand")
git --git-dir="$GITDIR" update-ref refs/heads/v3 "$LATE"
[ -n "$PSQL" ] && is "$(indexed "$LATE")" none "a commit made with git plumbing is not indexed"
api GET "$KHUB_URL/api/kernels/acme/relu/variants?version=3"
is "$STATUS/$(json 'd["sha"]')/$(json 'len(d["variants"])')" "200/$LATE/2" "variants?version=3 indexes it on first read"
[ -n "$PSQL" ] && is "$(indexed "$LATE")" 2 "… and the index keeps it"

# ---- repo info: versions ----------------------------------------------------------------
api GET "$KHUB_URL/api/kernels/acme/relu"
is "$(json '[(v["name"], v["version"], v["sha"]) for v in d["versions"]]')" \
	"[('v1', 1, '$RELU_V1'), ('v2', 2, '$RELU_V2'), ('v3', 3, '$LATE')]" "info lists versions v1..v3 by number, with shas"
is "$(json 'd["versions"][1]["variants"]')" "['torch-cpu', 'torch211-cxx11-cpu-x86_64-linux']" "… and each version's variants"
is "$(json '"siblings" in d')" False "kernel info still has no siblings"
is "$(json 'd["id"] + " " + d["sha"]')" "acme/relu $(curl -s "$KHUB_URL/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')" \
	"… and keeps id and sha"
api GET "$KHUB_URL/api/kernels/acme/relu/revision/v1"
is "$(json '"versions" in d')" False "revision info (every load calls it) has no versions"

# ---- variants listing --------------------------------------------------------------------
api GET "$KHUB_URL/api/kernels/acme/relu/variants?revision=v1"
is "$STATUS" 200 "variants of v1"
is "$(json 'len(d["variants"])')" 19 "all 19 build/ directories"
is "$(json '[v for v in d["variants"] if v["name"]=="torch211-cxx11-cu128-x86_64-linux"][0]["framework"]')" \
	"{'name': 'torch', 'version': '2.11', 'cxxAbi': 'cxx11'}" "framework parts"
is "$(json '[v for v in d["variants"] if v["name"]=="torch211-cxx11-cu128-x86_64-linux"][0]["backend"]')" \
	"{'name': 'cuda', 'version': '12.8', 'variant': 'cu128'}" "backend parts"
is "$(json '[(v["valid"], v["error"]) for v in d["variants"] if v["name"]=="not-a-variant"][0]')" \
	"(False, 'unknown framework (want torchNN, torch-stable-abiNN, tvm-ffiNN or torch-BACKEND)')" "an unparseable name says why"
is "$(json '[v["metadata"]["status"] + "/" + v["metadata"]["name"] + "/" + v["metadata"]["license"] for v in d["variants"] if v["name"]=="torch-cpu"][0]')" \
	"ok/relu/apache-2.0" "metadata summary"
api GET "$KHUB_URL/api/kernels/acme/relu/variants?revision=nope"
is "$STATUS/$(header X-Error-Code)" "404/RevisionNotFound" "unknown revision: RevisionNotFound"
api GET "$KHUB_URL/api/kernels/acme/secret/variants?revision=v1"
is "$STATUS" 401 "a private repo's variants are hidden from anonymous callers"
api GET "$KHUB_URL/api/kernels/acme/secret/variants?revision=v1" -H "Authorization: Bearer $ALICE"
is "$STATUS/$(json 'len(d["variants"])')" "200/1" "… and shown to a member"

# ---- compatibility table (kernels/src/kernels/variants.py rules) -------------------------
# compat QUERY EXPECTED-SELECTED DESCRIPTION: GET variants?revision=v1&compatible=true&QUERY on REPO
REPO=acme/relu
CASES=$TEST_DIR/cases
mkdir -p "$CASES"
compat() {
	api GET "$KHUB_URL/api/kernels/$REPO/variants?revision=v1&compatible=true&$1"
	is "$STATUS/$(json 'd["selected"]')" "200/$2" "$3"
	# kept for the comparison with the loader's own code below
	cp "$B" "$CASES/$(printf '%03d' "$TAP_COUNT").json"
	printf '%s\n' "$REPO?$1" >"$CASES/$(printf '%03d' "$TAP_COUNT").query"
}
reason() {	# reason VARIANT -> the rejection reason in the last answer
	json "[r['reason'] for r in d['rejected'] if r['name']=='$1'][0]"
}
compat "torch=2.11&cuda=12.8&arch=x86_64&os=linux" torch211-cxx11-cu128-x86_64-linux \
	"torch 2.11 + CUDA 12.8 x86_64-linux: cu128 over torch-cuda"
is "$(json '[v["name"] for v in d["variants"]]')" \
	"['torch211-cxx11-cu128-x86_64-linux', 'torch211-cxx11-cu126-x86_64-linux', 'torch-cuda']" \
	"… loadable best first: higher CUDA minor, then torch-cuda"
is "$(json '[v["rank"] for v in d["variants"]]')" "[1, 2, 3]" "… ranked"
is "$(reason torch211-cxx11-cu130-x86_64-linux)" "CUDA version (13.0) is not compatible with system CUDA version (12.8)" \
	"… cu130 rejected: other CUDA major"
is "$(reason torch212-cxx11-cu128-x86_64-linux)" "Torch version (2.12) does not match environment Torch version (2.11)" \
	"… torch212 rejected: torch version"
is "$(reason torch-stable-abi212-cu128-x86_64-linux)" "Torch stable ABI version (2.12) is too new for environment Torch version (2.11)" \
	"… stable ABI 2.12 rejected: too new"
is "$(reason torch211-cxx11-cu128-aarch64-linux)" "CPU (aarch64) does not match system CPU (x86_64)" "… aarch64 rejected: CPU"
is "$(reason torch211-cpu-aarch64-darwin)" "CPU (aarch64) does not match system CPU (x86_64)" "… darwin variant rejected"
is "$(reason torch211-cxx11-rocm71-x86_64-linux)" "backend (rocm71) does not match selected backend (cu128)" "… ROCm rejected: backend"
is "$(reason torch-cpu)" "backend (cpu) does not match system backend (cuda) and is not universal" "… torch-cpu rejected: noarch backend"
is "$(reason tvm-ffi01-cu128-x86_64-linux)" "tvm-ffi version (0.1) does not match environment tvm-ffi version (None)" "… tvm-ffi rejected"
like "$(reason not-a-variant)" "^invalid build variant name .*: the loader skips it$" "… an unparseable name is skipped"
is "$(json 'len(d["variants"]) + len(d["rejected"])')" 19 "… every variant decided once"
is "$(json 'd["environment"]')" \
	"{'torch': '2.11', 'backend': 'cuda', 'backendVersion': '12.8', 'backendVariant': 'cu128', 'arch': 'x86_64', 'os': 'linux', 'cxx11Abi': True, 'macos': None, 'tvmFfi': None, 'freeThreaded': False}" \
	"… environment echoed"
compat "torch=2.11&cuda=12.9" torch211-cxx11-cu128-x86_64-linux "CUDA 12.9: highest 12.x not above it (cu128)"
compat "torch=2.11&cuda=12.4" torch-cuda "CUDA 12.4: every cu12x too new, torch-cuda"
compat "torch=2.11&cuda=11.8" torch-cuda "CUDA 11.8: other major, torch-cuda"
compat "torch=2.11&cuda=13.0" torch211-cxx11-cu130-x86_64-linux "CUDA 13.0: cu130"
like "$(json 'd["warnings"][0]')" "picks torch211-cxx11-cu130-x86_64-linux, whose metadata.json is invalid" \
	"… with a warning: its metadata.json is broken"
compat "torch=2.12&cuda=12.8" torch-stable-abi212-cu128-x86_64-linux "torch 2.12: stable ABI before torch212"
is "$(json '[v["name"] for v in d["variants"]]')" \
	"['torch-stable-abi212-cu128-x86_64-linux', 'torch212-cxx11-cu128-x86_64-linux', 'torch-cuda']" "… then torch212, then torch-cuda"
compat "torch=2.13&cuda=12.8" torch-stable-abi212-cu128-x86_64-linux "torch 2.13: stable ABI 2.12 still loads"
compat "torch=2.10&cuda=12.8" torch-cuda "torch 2.10: no arch build, torch-cuda"
compat "torch=2.11.0%2Bcu128&cuda=12.8" torch211-cxx11-cu128-x86_64-linux "torch 2.11.0+cu128 is 2.11"
compat "torch=2.11&rocm=7.1" torch211-cxx11-rocm71-x86_64-linux "ROCm 7.1: rocm71"
is "$(reason torch211-cxx11-rocm72-x86_64-linux)" "backend (rocm72) does not match selected backend (rocm71)" "… rocm72 rejected"
compat "torch=2.11&rocm=7.2" torch211-cxx11-rocm72-x86_64-linux "ROCm 7.2: rocm72 (exact match only)"
compat "torch=2.11&rocm=6.4" torch-rocm "ROCm 6.4: torch-rocm"
compat "torch=2.11&xpu=2025.3" torch211-cxx11-xpu20253-x86_64-linux "XPU 2025.3: xpu20253"
like "$(json 'd["warnings"][0]')" "metadata.json is missing" "… whose metadata.json is missing: warned"
compat "torch=2.11" torch211-cxx11-cpu-x86_64-linux "CPU x86_64-linux: the cpu arch build"
compat "torch=2.11&cuda=12.8&backend=cpu" torch211-cxx11-cpu-x86_64-linux "backend=cpu on a CUDA system"
compat "torch=2.11&cuda=12.8&arch=aarch64" torch211-cxx11-cu128-aarch64-linux "aarch64-linux CUDA 12.8"
compat "torch=2.11&cuda=12.6&arch=aarch64" torch-cuda "aarch64-linux CUDA 12.6: only cu128 there, torch-cuda"
compat "torch=2.11&arch=arm64&os=darwin" torch211-cpu-aarch64-darwin "macOS arm64 CPU: the darwin cpu build"
compat "torch=2.11&arch=arm64&os=Darwin&backend=metal&macos=26.0" torch211-metal-aarch64-darwin "macOS 26 Metal: the Metal build"
compat "torch=2.11&arch=arm64&os=darwin&backend=metal&macos=15.7" torch-metal "macOS 15.7 Metal: torch-metal"
is "$(reason torch211-metal-aarch64-darwin)" "Metal kernels require macOS 26.0 or later, system macOS version is 15.7" "… Metal arch needs macOS 26"
compat "torch=2.11&arch=x86_64&os=darwin" torch-cpu "Intel macOS: torch-cpu"
compat "cuda=12.8" torch-cuda "no torch installed: noarch only"
is "$(reason torch211-cxx11-cu128-x86_64-linux)" "Torch version (2.11) does not match environment Torch version (None)" "… torch None"
compat "cuda=12.8&tvm_ffi=0.1" tvm-ffi01-cu128-x86_64-linux "tvm-ffi 0.1 without torch: tvm-ffi before torch-cuda"
compat "torch=2.11&cuda=12.8&free_threaded=true" torch-cuda "free-threaded Python < 3.15: no arch kernel"
compat "torch=2.11&cuda=12.8&cxx11=false" torch-cuda "pre-C++11-ABI torch: cxx11 builds rejected"
is "$(reason torch211-cxx11-cu128-x86_64-linux)" "Torch CXX11 ABI (True) does not match environment Torch CXX11 ABI (False)" "… ABI reason"
compat "torch=2.11&cuda=12.8&os=windows&arch=AMD64" torch-cuda "Windows AMD64 CUDA: torch-cuda"
compat "torch=2.11&backend=neuron" None "Neuron: nothing"
is "$(json 'len(d["variants"])')" 0 "… no variant loads"
REPO=acme/activation
compat "torch=2.11&arch=arm64&os=darwin&backend=metal&macos=26.0" torch211-metal-aarch64-darwin "acme/activation: macOS 26 Metal"
compat "torch=2.11&arch=arm64&os=darwin&backend=metal&macos=15.7" None "acme/activation: older macOS gets nothing"
compat "torch=2.11&arch=arm64&os=darwin" None "acme/activation: macOS CPU gets nothing"
REPO=other/py-only
compat "torch=2.11&rocm=7.1" torch-universal "torch-universal loads on any backend"
REPO=acme/relu
api GET "$KHUB_URL/api/kernels/acme/relu/variants?revision=v1&compatible=true&cuda=12.8&rocm=7.1"
is "$STATUS" 400 "two GPU backends: 400"
api GET "$KHUB_URL/api/kernels/acme/relu/variants?revision=v1&compatible=true&cuda=12.8&backend=rocm"
is "$STATUS" 400 "backend= other than the system's or cpu: 400 (the loader's ValueError)"
api GET "$KHUB_URL/api/kernels/acme/relu/variants?revision=v1&compatible=true&torch=latest"
is "$STATUS" 400 "bad torch version: 400"

# ---- the same table through the kernels loader's own code -----------------------------
# tests/integration/lib/loader_oracle.py runs kernels' _resolve_variant_for_system
# (read from a huggingface/kernels checkout) on every variant of the repo and
# the environment khub understood; accepted order and every rejection reason
# must be identical. Skipped unless KERNELS_GIT_DIR names the git dir of a
# huggingface/kernels clone, and without Python's packaging.
KERNELS_GIT_DIR=${KERNELS_GIT_DIR:-}
ORACLE_PY=
for py in python3 /usr/bin/python3; do
	if "$py" -c 'import packaging.version' >/dev/null 2>&1; then ORACLE_PY=$py; break; fi
done
if [ -n "$ORACLE_PY" ] && git --git-dir="$KERNELS_GIT_DIR" rev-parse -q --verify HEAD >/dev/null 2>&1; then
	diag "loader: huggingface/kernels $(git --git-dir="$KERNELS_GIT_DIR" log -1 --format='%h %cs')"
	for f in "$CASES"/*.json; do
		repo=$(cut -d'?' -f1 "${f%.json}.query")
		curl -s "$KHUB_URL/api/kernels/$repo/variants?revision=v1" >"${f%.json}.all"
	done
	/usr/bin/python3 - "$CASES" >"$TEST_DIR/oracle-cases.json" <<'PY'
import glob, json, sys
cases = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    d = json.load(open(f))
    e = d["environment"]
    if e["freeThreaded"]:
        continue  # the loader reads that from its own interpreter
    names = [v["name"] for v in json.load(open(f[:-5] + ".all"))["variants"]]
    cases.append({"file": f, "variants": names,
                  "env": {"backend": e["backend"], "version": e["backendVersion"], "cpu": e["arch"], "os": e["os"],
                          "torch": e["torch"], "cxx11": e["cxx11Abi"], "tvm_ffi": e["tvmFfi"], "macos": e["macos"]}})
json.dump(cases, sys.stdout)
PY
	if "$ORACLE_PY" "$KHUB_SRC/tests/integration/lib/loader_oracle.py" "$KERNELS_GIT_DIR" \
		<"$TEST_DIR/oracle-cases.json" >"$TEST_DIR/oracle-answers.json" 2>"$TEST_DIR/oracle.err"; then
		/usr/bin/python3 - "$TEST_DIR/oracle-cases.json" "$TEST_DIR/oracle-answers.json" >"$TEST_DIR/oracle.tap" <<'PY'
import json, sys
cases, answers = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for case, want in zip(cases, answers):
    got = json.load(open(case["file"]))
    query = open(case["file"][:-5] + ".query").read().strip()
    accepted = [v["name"] for v in got["variants"]]
    rejected = {r["name"]: r["reason"] for r in got["rejected"] if r["name"] in case["variants"]}
    rejected = {k: v for k, v in rejected.items() if not v.startswith("invalid build variant name")}
    same = accepted == want["accepted"] and rejected == want["rejected"]
    print(("ok" if same else "not ok") + " " + query)
    if not same:
        print("#   khub:   %s" % accepted)
        print("#   loader: %s" % want["accepted"])
        for k in sorted(set(rejected) | set(want["rejected"])):
            if rejected.get(k) != want["rejected"].get(k):
                print("#   %s: khub %r, loader %r" % (k, rejected.get(k), want["rejected"].get(k)))
PY
		while IFS= read -r line; do
			case $line in
			"ok "*) ok 0 "the loader agrees: ${line#ok }" ;;
			"not ok "*) ok 1 "the loader agrees: ${line#not ok }" ;;
			*) echo "$line" ;;
			esac
		done <"$TEST_DIR/oracle.tap"
	else
		sed 's/^/#   /' "$TEST_DIR/oracle.err" | tail -5
		ok 1 "run the kernels loader's resolution"
	fi
else
	skip "no huggingface/kernels checkout ($KERNELS_GIT_DIR) or no Python packaging: loader comparison"
fi

# ---- metadata ---------------------------------------------------------------------------
api GET "$KHUB_URL/api/kernels/acme/relu/metadata/torch211-cxx11-cu128-x86_64-linux?revision=v1"
is "$STATUS/$(json 'd["status"]')" 200/ok "metadata of a variant"
is "$(json 'd["metadata"]["backend"]')" "{'type': 'cuda', 'archs': ['8.0', '9.0']}" "… the document"
is "$(json 'd["parsed"]["name"] + " " + str(d["parsed"]["version"]) + " " + str(d["parsed"]["pythonDepends"])')" "relu 1 []" "… parsed"
is "$(json 'd["files"]')" 3 "… file count"
api GET "$KHUB_URL/api/kernels/acme/relu/metadata/torch211-cxx11-cu130-x86_64-linux?revision=v1"
is "$STATUS/$(json 'd["status"]')/$(json 'd["metadata"]')/$(json 'd["parsed"]')" "200/invalid/None/None" "invalid JSON reported"
like "$(json 'd["error"]')" "^metadata.json is not valid JSON" "… with the parser's reason"
api GET "$KHUB_URL/api/kernels/acme/relu/metadata/torch-xpu?revision=v1"
is "$(json 'd["status"] + ": " + d["error"]')" 'invalid: "license" (string) is required' "a missing required key reported"
is "$(json 'd["metadata"]["id"]')" "_relu" "… the document is still shown"
api GET "$KHUB_URL/api/kernels/acme/relu/metadata/torch211-cxx11-xpu20253-x86_64-linux?revision=v1"
is "$(json 'd["status"]')" missing "missing metadata.json reported"
api GET "$KHUB_URL/api/kernels/acme/relu/metadata/torch-nope?revision=v1"
is "$STATUS/$(header X-Error-Code)" "404/EntryNotFound" "unknown variant: 404 EntryNotFound"
api GET "$KHUB_URL/api/kernels/acme/relu/metadata/torch-cpu?version=2"
is "$STATUS/$(json 'd["sha"]')" "200/$RELU_V2" "version=2 selects v2"

# ---- compliance ---------------------------------------------------------------------------
api GET "$KHUB_URL/api/kernels/acme/relu/compliance"
is "$(json '[(v["revision"], v["compliant"]) for v in d["versions"]]')" "[('v1', True), ('v2', True), ('v3', True)]" \
	"compliance per version branch"
is "$(json '[g for g in d["versions"][0]["groups"] if g["system"]=="x86_64-linux" and g["backend"]=="cuda"][0]["missing"]')" \
	"['torch212-cxx11-cu126-x86_64-linux', 'torch212-cxx11-cu130-x86_64-linux', 'torch212-cxx11-cu132-x86_64-linux']" \
	"v1: missing CUDA x86_64-linux variants"
is "$(json '[g for g in d["versions"][0]["groups"] if g["system"]=="x86_64-linux" and g["backend"]=="cuda"][0]["invalidMetadata"]')" \
	"['torch211-cxx11-cu130-x86_64-linux']" "… listed as invalid metadata"
is "$(json 'd["versions"][0]["pythonOnly"]')" \
	"{'accepted': ['torch-cpu', 'torch-metal', 'torch-cuda', 'torch-rocm', 'torch-xpu'], 'present': ['torch-cpu', 'torch-metal', 'torch-cuda', 'torch-rocm'], 'compliant': True}" \
	"v1 is compliant as a Python-only kernel (torch-xpu's metadata is broken)"
is "$(json 'd["versions"][0]["compliantWith"]')" "[]" "… and for no arch group"
api GET "$KHUB_URL/api/kernels/other/compliant/compliance?revision=v1"
is "$(json 'd["versions"][0]["compliantWith"]')" "['cuda x86_64-linux']" "other/compliant: compliant for CUDA x86_64-linux"
is "$(json 'd["versions"][0]["pythonOnly"]["compliant"]')" False "… not as Python-only"
is "$(json '[g["missing"] for g in d["versions"][0]["groups"] if g["backend"]=="cpu" and g["system"]=="x86_64-linux"][0]')" \
	"['torch212-cxx11-cpu-x86_64-linux']" "… CPU x86_64-linux misses torch212"
api GET "$KHUB_URL/api/kernels/other/rocm-only/compliance"
is "$(json 'd["versions"][0]["compliant"]')" False "other/rocm-only: not compliant"

# ---- GET /api/kernels ------------------------------------------------------------------------
names() { json '" ".join(x["id"] for x in d)'; }
api GET "$KHUB_URL/api/kernels?sort=id&direction=1"
is "$STATUS/$(names)" "200/acme/activation acme/relu other/compliant other/py-only other/rocm-only" \
	"anonymous listing: public kernels, by id"
is "$(header X-Total-Count)" 5 "X-Total-Count"
is "$(json '[x["versions"] for x in d if x["id"]=="acme/relu"][0]')" "['v1', 'v2', 'v3']" "items carry versions"
is "$(json '[x["supportedDriverFamilies"] for x in d if x["id"]=="other/rocm-only"][0]')" "['rocm']" "… and driver families"
is "$(json '[(x["trustedPublisher"], x["repoType"], x["private"]) for x in d if x["id"]=="acme/relu"][0]')" "(True, 'kernel', False)" \
	"… trustedPublisher, repoType, private"
api GET "$KHUB_URL/api/kernels?sort=id&direction=1" -H "Authorization: Bearer $ALICE"
is "$(names)" "acme/activation acme/relu acme/secret other/compliant other/py-only other/rocm-only" "a member also sees acme/secret"
api GET "$KHUB_URL/api/kernels?author=acme&sort=id&direction=1"
is "$(names)" "acme/activation acme/relu" "author=acme"
api GET "$KHUB_URL/api/kernels?search=ONLY&sort=id&direction=-1"
is "$(names)" "other/rocm-only other/py-only" "search=ONLY (case-insensitive), descending"
api GET "$KHUB_URL/api/kernels?backend=rocm&sort=id&direction=1"
is "$(names)" "acme/relu other/py-only other/rocm-only" "backend=rocm (torch-universal counts)"
api GET "$KHUB_URL/api/kernels?backend=metal&sort=id&direction=1"
is "$(names)" "acme/activation acme/relu other/py-only" "backend=metal"
api GET "$KHUB_URL/api/kernels?backend=cu132&sort=id&direction=1"
is "$(names)" "other/compliant other/py-only" "backend=cu132 (a variant tag; torch-universal loads there too)"
api GET "$KHUB_URL/api/kernels?torch=2.12&sort=id&direction=1"
is "$(names)" "acme/relu other/compliant other/py-only" "torch=2.12 (arch builds, stable ABI, Python-only)"
api GET "$KHUB_URL/api/kernels?arch=aarch64-linux&sort=id&direction=1"
is "$(names)" "acme/relu other/py-only" "arch=aarch64-linux"
api GET "$KHUB_URL/api/kernels?arch=aarch64&sort=id&direction=1"
is "$(names)" "acme/activation acme/relu other/py-only" "arch=aarch64 (any OS)"
api GET "$KHUB_URL/api/kernels?backend=cuda&torch=2.11&arch=x86_64&os=linux&author=other"
is "$(names)" "other/compliant other/py-only" "filters combine on one variant"
api GET "$KHUB_URL/api/kernels?backend=cpu&torch=2.11&os=linux&sort=id&direction=1" -H "Authorization: Bearer $ALICE"
is "$(names)" "acme/relu acme/secret other/compliant other/py-only" "filters see private repos of members"
api GET "$KHUB_URL/api/kernels?sort=id&direction=1&limit=2"
is "$(names)" "acme/activation acme/relu" "limit=2: first page"
NEXT=$(header Link | sed -n 's/^<\(.*\)>; rel="next"$/\1/p')
like "$NEXT" "^$KHUB_URL/api/kernels\?sort=id&direction=1&limit=2&cursor=2$" "absolute Link to the next page"
api GET "$NEXT"
is "$(names)" "other/compliant other/py-only" "second page"
NEXT=$(header Link | sed -n 's/^<\(.*\)>; rel="next"$/\1/p')
api GET "$NEXT"
is "$(names)/$(header Link)" "other/rocm-only/" "last page has no Link"
api GET "$KHUB_URL/api/kernels?sort=downloads"
is "$STATUS/$(json 'len(d)')" 200/5 "sort=downloads"
api GET "$KHUB_URL/api/kernels?sort=trending"
is "$STATUS/$(json 'sorted(set(type(x["trendingScore"]).__name__ for x in d))')" "200/['int']" "sort=trending with trendingScore"
api GET "$KHUB_URL/api/kernels?sort=lastModified&direction=-1&limit=1"
is "$(names)" "acme/activation" "sort=lastModified: the most recently changed first"
api GET "$KHUB_URL/api/kernels?sort=stars"
is "$STATUS" 400 "unknown sort: 400"
api GET "$KHUB_URL/api/kernels?limit=0"
is "$STATUS" 400 "limit=0: 400"

# Repos indexed before the index existed: wipe other/compliant's rows, a
# filtered listing indexes it again.
if [ -n "$PSQL" ]; then
	sql "DELETE FROM kernel_heads WHERE repo_id = (SELECT id FROM repos WHERE name = 'compliant'); DELETE FROM kernel_commits WHERE repo_id = (SELECT id FROM repos WHERE name = 'compliant'); DELETE FROM kernel_variants WHERE repo_id = (SELECT id FROM repos WHERE name = 'compliant')" >/dev/null
	api GET "$KHUB_URL/api/kernels?backend=cu132&sort=id&direction=1"
	is "$(names)" "other/compliant other/py-only" "a repo without index rows is indexed by the listing"
else
	skip "psql missing: catch-up"
fi

# ---- OpenAPI ---------------------------------------------------------------------------------
api GET "$KHUB_URL/api/openapi.json"
is "$STATUS/$(header Content-Type)" "200/application/json; charset=utf-8" "openapi.json served"
is "$(json 'd["openapi"]')" 3.1.0 "… an OpenAPI 3.1 document"
for p in /api/kernels /api/kernels/{ns}/{name}/variants /api/kernels/{ns}/{name}/metadata/{variant} \
	/api/kernels/{ns}/{name}/compliance /api/openapi.json "/api/{type}/{ns}/{name}"; do
	is "$(json "'get' in d['paths']['$p']")" True "… documents GET $p"
done
is "$(cmp -s "$B" "$KHUB_SRC/api/openapi.json" && echo same)" same "… byte for byte the file in the repo"

server_and_sanitizer_logs | grep -E "ERROR|runtime error|AddressSanitizer" | sed 's/^/# /' | head -5
check "no errors in the server log" -- bash -c "! grep -qE 'ERROR|runtime error|AddressSanitizer' '$TEST_DIR/server.log'"
done_testing
