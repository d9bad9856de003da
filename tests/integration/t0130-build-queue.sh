#!/bin/bash
# t0130-build-queue.sh -- the build farm's queue and worker protocol
# (docs/build-farm.md) against a real server, curl acting as the workers
# with real worker tokens: enqueue by hand, on git push and not on a
# README-only commit; de-duplication and force; claims limited to the
# worker's variants and never shared between concurrent claimers; a parked
# claim woken by an enqueue; heartbeats, lease expiry with attempts and
# backoff, max attempts; cancel, retry, fail, release; logs at offsets;
# the source tar; output tars published on v1 (stale files of the variant
# removed, another variant untouched, README.md on main), refused under the
# ABI policy or for a bad layout with nothing published, and published
# under abi_policy=warn; what worker tokens may not do and who may call the
# worker routes; GET /api/admin/workers.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

# build_variants lists V1 and V2 (not on the official list); the workers
# also build V4 (on it): default builds are V1 and V2 only where the
# configured list is read (the server, khub import, the push hook)
V1=torch211-cxx11-cpu-x86_64-linux
V2=torch210-cxx11-cpu-x86_64-linux
V3=torch212-cxx11-cu130-x86_64-linux	# no worker builds it
V4=torch212-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s", "%s"]}}\n' "$V1" "$V2" >"$TEST_DIR/variants.json"
# the external sources below are this server and a git daemon on loopback
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json KHUB_BUILD_LEASE_SECONDS=10 KHUB_BUILD_HEARTBEAT_SECONDS=1 \
	KHUB_BUILD_MAX_ATTEMPTS=2 KHUB_BUILD_SOURCE_ALLOW=127.0.0.1
log=$TEST_DIR/setup.log
khub admin org create acme >>"$log" 2>&1
khub admin user create alice >>"$log" 2>&1
khub admin user create root --site-admin >>"$log" 2>&1
khub admin member set acme alice admin >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
ALICE_RO=$(khub admin token create alice --scope read 2>>"$log" | tail -n 1)
ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
W1=$(khub admin worker add w1 --private 2>>"$log" | tail -n 1)	# acme/relu is private
W2=$(khub admin worker add w2 --private 2>>"$log" | tail -n 1)
like "$W1" '^khw_[A-Za-z0-9]{40}$' "khub admin worker add prints a worker token"
khub admin worker add w1 >>"$log" 2>&1
is "$?" 1 "a second worker named w1 is refused"
khub admin worker add gone >>"$log" 2>&1 && GONE=$(grep -o 'khw_[A-Za-z0-9]*' "$log" | tail -n 1)
khub admin worker remove gone >>"$log" 2>&1
ok $? "khub admin worker remove gone"
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
# api TOKEN METHOD PATH [BODY] -> $ST (status), body in $B
api() {
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
j() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print(eval(sys.argv[1]))" "$1" 2>/dev/null; }
hdr() { header "$@"; }	# tests/lib/khub-test.sh
b64() { base64 -w0 "$@"; }

# ---- a private kernel repo with a source tree ----------------------------------------
SRC=$TEST_DIR/src
mkdir -p "$SRC/torch-ext/relu"
# build.toml edition 5 (the server plans from it): a compiled kernel for cpu and cuda
TOML='[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu", "cuda"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
printf "$TOML" >"$SRC/build.toml"
printf 'from ._ops import ops\n' >"$SRC/torch-ext/relu/__init__.py"
head -c 3000 /dev/urandom >"$SRC/torch-ext/relu/weights.bin"	# binary: stored as LFS
files=$(for f in build.toml torch-ext/relu/__init__.py torch-ext/relu/weights.bin; do
	printf '{"path":"%s","content":"%s","encoding":"base64"},' "$f" "$(b64 "$SRC/$f")"; done)
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":true,\"files\":[${files%,}]}"
is "$ST" 200 "acme/relu (private) created with build.toml and sources"
GD=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
C1=$(git --git-dir="$GD" rev-parse main)
api "$ALICE" GET /api/kernels/acme/relu/builds
is "$(j 'len(d["builds"])')" 0 "no workers registered yet: creating the repo queued nothing"

# ---- who may call what --------------------------------------------------------------------
api "$W1" GET /api/kernels/acme/relu
is "$ST" 403 "worker token × GET a private repo → 403"
api "$W1" GET /api/kernels/acme/relu/tree/main
is "$ST" 403 "worker token × GET tree → 403"
api "$W1" POST /api/kernels/acme/relu/commit/main '{}'
is "$ST" 403 "worker token × POST commit → 403"
api "$W1" GET /api/whoami-v2
is "$ST" 403 "worker token × whoami → 403"
api "$W1" POST /api/kernels/acme/relu/builds '{}'
is "$ST" 403 "worker token × enqueue (a user route) → 403"
api "$W1" GET /api/admin/workers
is "$ST" 403 "worker token × GET /api/admin/workers → 403"
code=$(curl -s -o /dev/null -w '%{http_code}' -u "x:$W1" "$KHUB_URL/kernels/acme/relu.git/info/refs?service=git-upload-pack")
is "$code" 403 "worker token × git clone (smart HTTP) → 403"
api "$ALICE_RO" POST /api/workers/claim "{\"variants\":[\"$V1\"]}"
is "$ST" 403 "read token × POST /api/workers/claim → 403"
api "$ALICE" POST /api/workers/register '{"toolchains":[]}'
is "$ST" 403 "write token of an org admin × register → 403"
api "$ROOT" POST /api/builds/1/heartbeat '{}'
is "$ST" 403 "site admin token × heartbeat → 403"
api "" POST /api/workers/claim "{\"variants\":[\"$V1\"]}"
is "$ST" 401 "anonymous × claim → 401"
api "$GONE" POST /api/workers/claim "{\"variants\":[\"$V1\"]}"
is "$ST" 401 "the token of a removed worker × claim → 401"
api "khw_$(head -c 40 /dev/urandom | base64 | tr -dc A-Za-z0-9 | head -c 40)" POST /api/workers/claim '{}'
is "$ST" 401 "a bogus worker token → 401"

# ---- register --------------------------------------------------------------------------------
reg() { api "$1" POST /api/workers/register "{\"name\":\"$2\",\"version\":\"0.1\",\"concurrency\":2,\"toolchains\":[{\"name\":\"cpu-debian\",\"variants\":[\"$V1\",\"$V2\",\"$V4\"],\"torch\":\"2.12\",\"cxx11_abi\":true,\"python\":\"3.11\"}]}"; }
reg "$W1" w1
is "$ST $(j 'd["worker"], d["heartbeat_seconds"], d["lease_seconds"]')" "200 ('w1', 1, 10)" "w1 registers: heartbeat and lease from the configuration"
reg "$W2" w2
is "$ST" 200 "w2 registers"
api "$W1" POST /api/workers/register '{"toolchains":[{"name":"x","variants":["not a variant"]}]}'
is "$ST" 400 "register with an invalid variant name → 400"

# ---- enqueue by hand, de-duplication ---------------------------------------------------------
enqueue() { api "$ALICE" POST /api/kernels/acme/relu/builds "$1"; }
enqueue "{\"revision\":\"main\",\"variants\":[\"$V1\"]}"
is "$ST $(j 'len(d["builds"]), d["builds"][0]["state"], d["builds"][0]["variant"], d["commit"]')" "202 (1, 'queued', '$V1', '$C1')" "enqueue $V1 of main → 202, queued"
J1=$(j 'd["builds"][0]["id"]')
enqueue "{\"revision\":\"main\",\"variants\":[\"$V1\"]}"
is "$ST $(j 'len(d["builds"]), d["skipped"][0]["reason"], d["skipped"][0]["build"]')" "202 (0, 'already queued or running', $J1)" "the same commit and variant again → skipped, one job"
enqueue '{"variants":["bogus"]}'
is "$ST" 400 "an invalid variant name → 400"
enqueue '{"revision":"nope"}'
is "$ST" 404 "an unknown revision → 404"
api "$ALICE_RO" POST /api/kernels/acme/relu/builds "{\"variants\":[\"$V1\"]}"
is "$ST" 403 "a read-scoped token cannot enqueue"
enqueue "{\"variants\":[\"$V3\"]}"
J3=$(j 'd["builds"][0]["id"]')
like "$J3" '^[0-9]+$' "a variant no worker builds can still be queued by name"

# ---- claims ----------------------------------------------------------------------------------
claim() { api "$1" POST /api/workers/claim "{\"variants\":$2,\"wait_seconds\":${3:-0}}"; }
# The backoff, judged at the server's clock, not by sleeping: server_now is
# the last answer's Date; claim_after_backoff TOKEN VARIANTS NOT_BEFORE WHAT
# checks that a claim made at once gets nothing, unless the server's clock
# had already passed NOT_BEFORE (a slow machine), then polls (bounded) until
# the job comes.
server_now() { date -u -d "$(hdr Date)" +%Y-%m-%dT%H:%M:%SZ; }
claim_after_backoff() {
	claim "$1" "$2"
	if [ "$ST" = 204 ]; then
		ok 0 "$4: not claimable during the backoff"
	else
		[[ ! "$(server_now)" < "${3%.*}" ]]
		ok $? "$4: claimed only once the server's clock passed the backoff (${3%.*}, now $(server_now))"
	fi
	for _ in $(seq 1 600); do [ "$ST" = 200 ] && break; sleep 0.5; claim "$1" "$2"; done
}
claim "$W2" "[\"$V2\"]"
is "$ST" 204 "claim for $V2 only: nothing queued → 204"
claim "$W1" "[\"$V1\",\"$V2\"]"
# keep_lease TOKEN JOB: from now on JOB's worker keeps its lease as a real
# worker does, heartbeating in the background twice a second (the lease is
# 10 s; on a loaded machine the checks between a claim and the job's end take
# longer than that); keep_lease alone: no job is held. One job at a time.
LEASE_HOLD=$TEST_DIR/lease-hold
keep_lease() { echo "$*" >"$LEASE_HOLD.new" && mv "$LEASE_HOLD.new" "$LEASE_HOLD"; }
keep_lease "$W1" "$J1"
(while [ -e "$LEASE_HOLD" ]; do
	read -r tok id <"$LEASE_HOLD"
	[ -n "${id:-}" ] && curl -s -o /dev/null -X POST -H "Authorization: Bearer $tok" "$KHUB_URL/api/builds/$id/heartbeat"
	sleep 0.5
done) &
HEARTBEATS=$!
is "$ST $(j 'd["build"]["id"], d["build"]["variant"], d["build"]["commit"], d["build"]["attempt"], d["build"]["repo"], d["build"]["repo_type"]')" \
	"200 ($J1, '$V1', '$C1', 1, 'acme/relu', 'kernel')" "w1 claims $V1: the JOB with attempt 1"
is "$(j 'sorted(d["build"]["limits"])')" "['cpu_seconds', 'disk_mb', 'memory_mb', 'wall_seconds']" "the JOB carries the limits"
claim "$W2" "[\"$V1\",\"$V2\"]"
is "$ST" 204 "the job is w1's: w2 gets nothing ($V3 is not in its list)"
api "$ALICE" GET "/api/builds/$J1"
is "$ST $(j 'd["state"], d["worker"]')" "200 ('running', 'w1')" "GET /api/builds/$J1: running on w1"

# heartbeat
api "$W1" POST "/api/builds/$J1/heartbeat" '{}'
is "$ST $(j 'd["cancel"]')" "200 False" "heartbeat → 200, cancel false"
E1=$(j 'd["lease_expires_at"]')
sleep 1.1
api "$W1" POST "/api/builds/$J1/heartbeat" '{}'
E2=$(j 'd["lease_expires_at"]')
[[ "$E2" > "$E1" ]]
ok $? "a heartbeat extends the lease ($E1 → $E2)"
api "$W2" POST "/api/builds/$J1/heartbeat" '{}'
is "$ST $(j 'd["state"]')" "409 running" "another worker's heartbeat → 409"

# logs: khub's own line starts each attempt; the worker's offsets count from after it
KL=$(curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$J1/log")
like "$KL" '^\[khub\] attempt 1 of [0-9]+ on worker w1$' "the claim started the log with khub's line for attempt 1"
HL=$((${#KL} + 1))
logpost() { curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $1" --data-binary "$3" "$KHUB_URL/api/builds/$J1/log?offset=$2${4:+&attempt=$4}"; }
is "$(logpost "$W1" 0 "cmake ..."$'\n')/$(j 'd["length"]')" "200/10" "log chunk at 0 → length 10"
is "$(logpost "$W1" 0 "cmake ..."$'\n')/$(j 'd["length"]')" "200/10" "the same chunk again → ignored, length 10"
is "$(logpost "$W1" 50 "x")/$(j 'd["length"]')" "409/10" "a chunk beyond the end → 409 with the length"
is "$(logpost "$W1" 10 "ninja"$'\n')/$(j 'd["length"]')" "200/16" "next chunk at 10 → 16"
is "$(logpost "$W1" 13 "ja"$'\n'"ok"$'\n')/$(j 'd["length"]')" "200/19" "an overlapping chunk adds only its new bytes → 19"
is "$(logpost "$W2" 19 "y")" 409 "another worker cannot append"
is "$(logpost "$W1" 19 "z" 7)" 409 "a chunk of another attempt (attempt=7) → 409"
is "$(logpost "$W1" 19 "" 1)/$(j 'd["length"]')" "200/19" "this attempt's (attempt=1) → taken"
got=$(curl -s -D "$H" -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$J1/log?offset=$((HL + 10))")
is "$got|$(hdr X-Log-Length)|$(hdr X-Build-State)" $'ninja\nok|'$((HL + 19))'|running' \
	"read the log from offset $HL+10 while running: X-Log-Length (the whole log), X-Build-State"
is "$(curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$J1/log" | head -2 | tail -1)" "cmake ..." \
	"the log from the start: khub's line, then the worker's"
/usr/bin/python3 -c 'import sys; sys.stdout.write("".join("line %06d\n" % i for i in range(60000)))' >"$TEST_DIR/big.log"	# 720 kB
code=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $W1" --data-binary "@$TEST_DIR/big.log" "$KHUB_URL/api/builds/$J1/log?offset=19")
is "$code/$(j 'd["length"]')" "200/720019" "a 720 kB chunk (stored in pieces)"
got=$(curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$J1/log?offset=$((HL + 19 + 12 * 41000))" | head -c 23)
is "$got" $'line 041000\nline 041001' "read from an offset in its middle"
is "$(curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$J1/log" | sha256sum | cut -c1-16)" \
	"$( (printf '%s\ncmake ...\nninja\nok\n' "$KL"; cat "$TEST_DIR/big.log") | sha256sum | cut -c1-16)" "the whole log reads back byte for byte"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/api/builds/$J1/log")" 401 "anonymous × the log of a private repo's build → 401"

# source
api "$W1" POST "/api/builds/$J1/heartbeat" '{}'
is "$ST" 200 "w1 heartbeats before fetching the source"
curl -s -o "$TEST_DIR/src.tar" -w '%{http_code}' -H "Authorization: Bearer $W1" "$KHUB_URL/api/builds/$J1/source" >"$TEST_DIR/code"
is "$(cat "$TEST_DIR/code")" 200 "GET source → 200"
mkdir -p "$TEST_DIR/unpacked" && tar -xf "$TEST_DIR/src.tar" -C "$TEST_DIR/unpacked"
is "$(cd "$TEST_DIR/unpacked" && find . -type f | sort | tr '\n' ' ')" "./.gitattributes ./build.toml ./torch-ext/relu/__init__.py ./torch-ext/relu/weights.bin " "the source tar holds the tree at the job's commit"
is "$(git --git-dir="$GD" cat-file -p "main:torch-ext/relu/weights.bin" | head -1)" "version https://git-lfs.github.com/spec/v1" "weights.bin is an LFS pointer in the repo"
cmp -s "$TEST_DIR/unpacked/torch-ext/relu/weights.bin" "$SRC/torch-ext/relu/weights.bin"
ok $? "… and its content in the source tar"
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $W2" "$KHUB_URL/api/builds/$J1/source")" 409 "another worker's GET source → 409"

# ---- output tars -----------------------------------------------------------------------------
# mktar OUT VARIANT KIND: a tar as a worker makes it (/usr/bin/python3 tarfile)
mktar() {
	/usr/bin/python3 - "$@" <<'PY'
import io, json, os, sys, tarfile
out, variant, kind = sys.argv[1], sys.argv[2], sys.argv[3]
meta = {"id": "_relu_cpu_0", "name": "relu", "version": 1, "license": "apache-2.0", "python-depends": [],
        "backend": {"type": "cpu"}, "provenance": {"build": 1}, "digest": "sha256:0"}
files = {f"{variant}/__init__.py": b"from ._ops import ops\n", f"{variant}/_ops.py": b"ops = None\n",
         f"{variant}/_relu_cpu.abi3.so": b"\x7fELF" + os.urandom(2000)}
report = {"ok": True, "manylinux": "manylinux_2_28", "python_abi": "3.9", "text": "ok", "files": []}
extra = []
if kind == "stale":
    del files[f"{variant}/_ops.py"]
    files[f"{variant}/new.py"] = b"new = 1\n"
if kind == "violations":
    report = {"ok": False, "manylinux": "manylinux_2_28", "python_abi": "3.9", "text": "GLIBC_2.32",
              "files": [{"path": "_relu_cpu.abi3.so", "needed": [], "violations": [{"kind": "manylinux", "symbol": "memcpy", "version": "GLIBC_2.32"}]}]}
if kind == "nometa":
    meta = None
if kind == "v2meta":
    meta["version"] = 2
if kind == "dotdot":
    extra.append((f"{variant}/../evil.py", b"x"))
if kind == "absolute":
    extra.append(("/tmp/evil.py", b"x"))
if kind == "wrongdir":
    extra.append(("torch999-other/x.py", b"x"))
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    def add(name, data, mode=0o644):
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = mode; t.addfile(ti, io.BytesIO(data))
    d = tarfile.TarInfo(variant); d.type = tarfile.DIRTYPE; d.mode = 0o755; t.addfile(d)
    for n, data in files.items():
        add(n, data, 0o755 if n.endswith(".so") else 0o644)
    if meta is not None:
        add(f"{variant}/metadata.json", json.dumps(meta).encode())
    add("abi-report.json", json.dumps(report).encode())
    add("README.md", b"# relu\n\nBuilt by the farm.\n")
    for n, data in extra:
        add(n, data)
    if kind == "symlink":
        s = tarfile.TarInfo(f"{variant}/link"); s.type = tarfile.SYMTYPE; s.linkname = "/etc/passwd"; t.addfile(s)
PY
}
put_output() { curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $1" -H 'Content-Type: application/x-tar' --data-binary "@$3" "$KHUB_URL/api/builds/$2/output"; }

mktar "$TEST_DIR/good.tar" "$V1" good
is "$(put_output "$W2" "$J1" "$TEST_DIR/good.tar")" 409 "another worker's output → 409"
api "$W1" POST "/api/builds/$J1/heartbeat" '{}'
is "$ST" 200 "w1 heartbeats before uploading its output"
st=$(put_output "$W1" "$J1" "$TEST_DIR/good.tar")
is "$st $(j 'd["state"], d["branch"]')" "200 ('succeeded', 'v1')" "w1's output → 200 succeeded on v1"
keep_lease
PUB1=$(j 'd["commit"]')
is "$(git --git-dir="$GD" rev-parse v1)" "$PUB1" "v1 points at the published commit"
is "$(git --git-dir="$GD" ls-tree -r --name-only v1 -- build | tr '\n' ' ')" \
	"build/$V1/__init__.py build/$V1/_ops.py build/$V1/_relu_cpu.abi3.so build/$V1/metadata.json " "v1 has build/$V1/ whole"
like "$(git --git-dir="$GD" log -1 --format=%s v1)" "^Build $V1 of ${C1:0:7} \\(build #$J1\\)$" "the commit message names the variant, source commit and build"
is "$(git --git-dir="$GD" cat-file -p "v1:build/$V1/_relu_cpu.abi3.so" | head -1)" "version https://git-lfs.github.com/spec/v1" "the binary .so is stored as LFS"
is "$(git --git-dir="$GD" show main:README.md)" $'# relu\n\nBuilt by the farm.' "README.md published on main"
like "$(git --git-dir="$GD" log -1 --format=%s main)" "^Update README.md from build #$J1" "… in a commit of its own"
api "$ALICE" GET "/api/builds/$J1"
is "$(j 'd["state"], d["published"]["branch"], d["published"]["commit"] == "'"$PUB1"'", d["abi_report"]["ok"]')" "('succeeded', 'v1', True, True)" "GET build: succeeded, published, report kept"
api "$ALICE" GET "/api/kernels/acme/relu/variants?revision=v1"
like "$(cat "$B")" "$V1" "the variant index sees the new variant on v1"
api "$ALICE" GET "/api/kernels/acme/relu/builds"
is "$(j 'sorted(set(b["commit"] for b in d["builds"]))')" "['$C1']" "the publications (v1, README on main) queued no build"

# dedupe after success, force
enqueue "{\"revision\":\"$C1\",\"variants\":[\"$V1\"]}"
is "$(j 'len(d["builds"]), d["skipped"][0]["reason"]')" "(0, 'already built (force to rebuild)')" "a succeeded variant is not rebuilt"

# a second variant ("missing": what v1 lacks of the list), then V1 again
# (forced) with a changed file set
enqueue "{\"revision\":\"$C1\",\"variants\":\"missing\"}"
is "$ST $(j '[b["variant"] for b in d["builds"]]')" "202 ['$V2']" "variants \"missing\": only $V2, which v1 lacks"
J2=$(j 'd["builds"][0]["id"]')
claim "$W2" "[\"$V2\"]"
keep_lease "$W2" "$J2"
is "$(j 'd["build"]["id"]')" "$J2" "w2 claims $V2"
mktar "$TEST_DIR/v2.tar" "$V2" good
mkdir -p "$TEST_DIR/v2out" && tar -xf "$TEST_DIR/v2.tar" -C "$TEST_DIR/v2out" && tar -cf "$TEST_DIR/v2.tar" -C "$TEST_DIR/v2out" .
is "$(put_output "$W2" "$J2" "$TEST_DIR/v2.tar")" 200 "$V2 published (a tar made by GNU tar -C dir .)"
V2_TREE=$(git --git-dir="$GD" rev-parse "v1:build/$V2")
enqueue "{\"revision\":\"$C1\",\"variants\":[\"$V1\"],\"force\":true}"
J1B=$(j 'd["builds"][0]["id"]')
claim "$W1" "[\"$V1\"]"
keep_lease "$W1" "$J1B"
mktar "$TEST_DIR/stale.tar" "$V1" stale
is "$(put_output "$W1" "$J1B" "$TEST_DIR/stale.tar")" 200 "forced rebuild of $V1 published"
is "$(git --git-dir="$GD" ls-tree -r --name-only v1 -- "build/$V1" | tr '\n' ' ')" \
	"build/$V1/__init__.py build/$V1/_relu_cpu.abi3.so build/$V1/metadata.json build/$V1/new.py " "stale _ops.py of $V1 removed, new.py added"
is "$(git --git-dir="$GD" rev-parse "v1:build/$V2")" "$V2_TREE" "build/$V2/ untouched"

# refused outputs: nothing published
# fresh V: a job for V held by w1
fresh() { enqueue "{\"revision\":\"$C1\",\"variants\":[\"$1\"],\"force\":true}"; claim "$W1" "[\"$1\"]"; JX=$(j 'd["build"]["id"]'); keep_lease "$W1" "$JX"; }
V1SHA=$(git --git-dir="$GD" rev-parse v1)
MAINSHA=$(git --git-dir="$GD" rev-parse main)
for kind in violations dotdot absolute symlink wrongdir nometa v2meta; do
	fresh "$V1"
	mktar "$TEST_DIR/$kind.tar" "$V1" $kind
	st=$(put_output "$W1" "$JX" "$TEST_DIR/$kind.tar")
	is "$st $(j 'd["state"]')" "422 failed" "output '$kind' → 422, the job failed ($(j 'd["error"]' | head -c 90))"
	is "$(git --git-dir="$GD" rev-parse v1) $(git --git-dir="$GD" rev-parse main)" "$V1SHA $MAINSHA" "… nothing published ($kind)"
done
api "$ALICE" GET "/api/builds/$JX"
is "$(j 'd["state"]')" failed "the last refused job is failed"
printf 'not a tar at all' >"$TEST_DIR/junk.tar"
fresh "$V1"
is "$(put_output "$W1" "$JX" "$TEST_DIR/junk.tar")" 422 "a body that is no tar → 422"

# ---- cancel, retry, fail, release --------------------------------------------------------------
fresh "$V1"
api "$ALICE" POST "/api/builds/$JX/cancel" '{}'
is "$ST $(j 'd["state"]')" "200 canceled" "cancel a running build"
api "$W1" POST "/api/builds/$JX/heartbeat" '{}'
is "$ST $(j 'd["cancel"]')" "200 True" "its worker's heartbeat says cancel"
is "$(put_output "$W1" "$JX" "$TEST_DIR/good.tar")" 409 "a canceled build's output is refused (409)"
api "$ALICE_RO" POST "/api/builds/$JX/retry" '{}'
is "$ST" 403 "a read token cannot retry"
api "$ALICE" POST "/api/builds/$JX/retry" '{}'
is "$ST $(j 'd["state"], d["attempt"]')" "200 ('queued', 0)" "retry a canceled build → queued"
api "$ALICE" POST "/api/builds/$JX/retry" '{}'
is "$ST" 409 "retry of a queued build → 409"
claim "$W1" "[\"$V1\"]"
is "$(j 'd["build"]["id"]')" "$JX" "the retried build is claimed again"
api "$W1" POST "/api/builds/$JX/release" '{}'
is "$ST $(j 'd["state"]')" "200 queued" "release → queued"
claim "$W1" "[\"$V1\"]"
is "$(j 'd["build"]["id"], d["build"]["attempt"]')" "($JX, 1)" "claimed again: a release does not count an attempt"
api "$W1" POST "/api/builds/$JX/fail" '{"error":"compiler crashed","retry":true}'
is "$ST $(j 'd["state"]')" "200 queued" "fail with retry and attempts left → queued"
FAILED_AT=$(server_now)
api "$ALICE" GET "/api/builds/$JX"
NB=$(j 'd["not_before"]')
[[ "$NB" > "$FAILED_AT" ]]
ok $? "… with a backoff (not_before $NB, failed at $FAILED_AT by the server's clock)"
claim_after_backoff "$W1" "[\"$V1\"]" "$NB" "the failed attempt"
is "$(j 'd["build"]["id"], d["build"]["attempt"]')" "($JX, 2)" "claimed after the backoff: attempt 2"
# a retried build's log: the new attempt writes from its own offset 0, and
# neither loses its first bytes nor lands in the earlier attempt's
xlog() { curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $W1" --data-binary "$3" "$KHUB_URL/api/builds/$JX/log?offset=$1&attempt=$2"; }
is "$(xlog 0 2 "second attempt starts"$'\n')/$(j 'd["length"]')" "200/22" "attempt 2's first chunk at offset 0 → taken whole (22 bytes)"
is "$(xlog 0 1 "late chunk of attempt 1"$'\n')" 409 "a late chunk of attempt 1 → 409, not mixed in"
XL=$(curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$JX/log")
is "$(grep -c '^\[khub\] attempt [0-9]* of [0-9]* on worker w1$' <<<"$XL") $(tail -2 <<<"$XL" | tr '\n' '|')" \
	"4 [khub] attempt 2 of 2 on worker w1|second attempt starts|" \
	"the log: a line of khub's per claim (3 of attempt 1: canceled, released, failed), then attempt 2 whole"
api "$W1" POST "/api/builds/$JX/fail" '{"error":"syntax error","retry":true,"abi_report":{"ok":false,"files":[]}}'
is "$ST $(j 'd["state"]')" "200 failed" "fail at the last attempt → failed"
api "$ALICE" GET "/api/builds/$JX"
is "$(j 'd["error"], d["abi_report"]["ok"]')" "('syntax error', False)" "the error and report are kept"

# ---- lease expiry ------------------------------------------------------------------------------------
keep_lease	# this job's worker goes silent
enqueue "{\"revision\":\"$C1\",\"variants\":[\"$V2\"],\"force\":true}"
JL=$(j 'd["builds"][0]["id"]')
claim "$W1" "[\"$V2\"]"
is "$(j 'd["build"]["id"], d["build"]["attempt"]')" "($JL, 1)" "w1 claims $JL, then goes silent"
for _ in $(seq 1 600); do	# the lease (10 s) lapses; the server's timer requeues it (polled, bounded)
	api "$ALICE" GET "/api/builds/$JL"
	[ "$(j 'd["state"]')" = queued ] && break
	sleep 0.5
done
is "$(j 'd["state"], d["attempt"], d["worker"]')" "('queued', 1, None)" "the expired job is queued with its attempt counted"
NB=$(j 'd["not_before"]')
api "$W1" POST "/api/builds/$JL/heartbeat" '{}'
is "$ST" 409 "the silent worker's heartbeat → 409 (kill the build)"
claim_after_backoff "$W2" "[\"$V2\"]" "$NB" "lease expired, back in the queue"
is "$(j 'd["build"]["id"], d["build"]["attempt"]')" "($JL, 2)" "w2 claims it after the backoff: attempt 2"
for _ in $(seq 1 600); do
	api "$ALICE" GET "/api/builds/$JL"
	[ "$(j 'd["state"]')" = failed ] && break
	sleep 0.5
done
is "$(j 'd["state"]')" failed "a second expiry (max_attempts 2) → failed"
like "$(j 'd["error"]')" "lease expired" "… saying the lease expired"

# ---- concurrent claimers, a parked claim woken by an enqueue -------------------------------------------
pids=()
for i in 1 2 3 4; do
	curl -s -o "$TEST_DIR/race$i" -w '%{http_code}\n' -H "Authorization: Bearer $([ $((i % 2)) = 0 ] && echo "$W1" || echo "$W2")" \
		--data-binary "{\"variants\":[\"$V2\"],\"wait_seconds\":3}" "$KHUB_URL/api/workers/claim" >"$TEST_DIR/race$i.code" &
	pids+=($!)
done
sleep 0.5
enqueue "{\"revision\":\"$C1\",\"variants\":[\"$V2\"],\"force\":true}"
JR=$(j 'd["builds"][0]["id"]')
wait "${pids[@]}"
got=$(cat "$TEST_DIR"/race?.code | sort | tr '\n' ' ')
is "$got" "200 204 204 204 " "four parked claimers, one job: exactly one gets it"
is "$(cat "$TEST_DIR"/race? | grep -o '"id": *[0-9]*' | tr -d ' ')" "\"id\":$JR" "… and it is the job just queued"
start=$(date +%s%N)
claim "$W1" "[\"$V1\"]" 3
el=$((($(date +%s%N) - start) / 1000000))
[ "$ST" = 204 ] && [ $el -ge 2900 ]
ok $? "an empty queue: the claim waits wait_seconds (3 s, waited $el ms) and answers 204"

# ---- on push, not on README-only commits ------------------------------------------------------------
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME" && git config --global user.name t && git config --global user.email t@example.com
git clone -q "http://x:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu" "$TEST_DIR/clone" >>"$log" 2>&1
(cd "$TEST_DIR/clone" && printf 'from ._ops import ops\n# v2\n' >torch-ext/relu/__init__.py && git commit -qam "change the source" && git push -q origin main) >>"$log" 2>&1
ok $? "git push of a source change"
C2=$(git --git-dir="$GD" rev-parse main)
for _ in $(seq 1 300); do	# planned after the push was answered, on the server's push planner
	api "$ALICE" GET "/api/kernels/acme/relu/builds?state=queued"
	[ "$(j 'len([b for b in d["builds"] if b["commit"] == "'"$C2"'"])')" = 2 ] && break
	sleep 0.1
done
is "$(j 'sorted(b["variant"] for b in d["builds"] if b["commit"] == "'"$C2"'")')" "['$V2', '$V1']" "the push queued the default variants (build_variants ∩ what workers build: not $V4)"
is "$(j '[b["requested_by"] for b in d["builds"] if b["commit"] == "'"$C2"'"][0]')" push "… requested by push"
printf '{"key":"header","value":{"summary":"docs"}}\n{"key":"file","value":{"content":"%s","path":"README.md","encoding":"base64"}}\n' \
	"$(printf '# relu docs\n' | base64 -w0)" >"$TEST_DIR/readme.ndjson"
code=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/x-ndjson' \
	--data-binary "@$TEST_DIR/readme.ndjson" "$KHUB_URL/api/kernels/acme/relu/commit/main")
is "$code" 200 "a commit touching only README.md"
C3=$(git --git-dir="$GD" rev-parse main)
api "$ALICE" GET "/api/kernels/acme/relu/builds?limit=1000"
is "$(j 'len([b for b in d["builds"] if b["commit"] == "'"$C3"'"])')" 0 "… queued nothing"
api "$ALICE" PUT /api/kernels/acme/relu/settings '{"buildOnPush":false}'
is "$ST $(j 'd["buildOnPush"]')" "200 False" "buildOnPush off"
(cd "$TEST_DIR/clone" && git pull -q && printf 'x = 2\n' >torch-ext/relu/more.py && git add . && git commit -qm more && git push -q origin main) >"$TEST_DIR/off.out" 2>&1
C4=$(git --git-dir="$GD" rev-parse main)
api "$ALICE" GET "/api/kernels/acme/relu/builds?limit=1000"
is "$(j 'len([b for b in d["builds"] if b["commit"] == "'"$C4"'"])')" 0 "with buildOnPush off a push queues nothing"
is "$(grep -c 'will be planned' "$TEST_DIR/off.out")" 0 "… nor hands a plan to the server"
api "$ALICE" PUT /api/kernels/acme/relu/settings '{"buildOnPush":true}'
is "$(j 'd["buildOnPush"]')" True "buildOnPush on again"

# ---- the admin view -----------------------------------------------------------------------------------
claim "$W1" "[\"$V1\"]"
JW=$(j 'd["build"]["id"]')
keep_lease "$W1" "$JW"
api "$ROOT" GET /api/admin/workers
is "$ST $(j '[w["name"] for w in d["workers"]]')" "200 ['w1', 'w2']" "GET /api/admin/workers lists w1 and w2 (gone is removed)"
# (the race's job may still be w1's: its lease need not have lapsed yet)
is "$(j '[(w["toolchains"][0]["name"], w["variants"], '"$JW"' in [x["id"] for x in w["jobs"]]) for w in d["workers"] if w["name"] == "w1"][0]')" \
	"('cpu-debian', ['$V1', '$V2', '$V4'], True)" "… with w1's toolchains, variants and current job"
api "$ALICE" GET /api/admin/workers
is "$ST" 403 "an org admin is not a site admin: 403"
like "$(khub admin worker list 2>&1)" "^w1"$'\t' "khub admin worker list"
# what w1 may still hold (the race's job and this one) is canceled, so its
# later claims do not wait for those leases to lapse (concurrency 2)
for id in $JR $JW; do api "$ALICE" POST "/api/builds/$id/cancel" '{}'; done
keep_lease

# ---- khub import of sources queues builds too -----------------------------------------------------------
mkdir -p "$TEST_DIR/imp/torch-ext/relu" && cp "$SRC/build.toml" "$TEST_DIR/imp/" && cp "$SRC/torch-ext/relu/__init__.py" "$TEST_DIR/imp/torch-ext/relu/"
khub import "$TEST_DIR/imp" --repo acme/imported --type kernel >>"$log" 2>&1
ok $? "khub import of a source tree into acme/imported"
api "$ALICE" GET /api/kernels/acme/imported/builds
is "$(j 'sorted(b["variant"] for b in d["builds"])')" "['$V2', '$V1']" "the import queued the default variants (not $V4)"
for id in $(j '" ".join(str(b["id"]) for b in d["builds"])'); do api "$ALICE" POST "/api/builds/$id/cancel" '{}'; done
is "$ST $(j 'd["state"]')" "200 canceled" "(canceled again, out of the way)"

# ---- an external git source ----------------------------------------------------------------------------
UP=$TEST_DIR/upstream
mkdir -p "$UP/torch-ext/relu"
printf "$TOML" >"$UP/build.toml"
printf 'def upstream():\n    return 1\n' >"$UP/torch-ext/relu/__init__.py"
files=$(for f in build.toml torch-ext/relu/__init__.py; do printf '{"path":"%s","content":"%s","encoding":"base64"},' "$f" "$(b64 "$UP/$f")"; done)
api "$ALICE" POST /api/repos/create "{\"name\":\"upstream-src\",\"organization\":\"acme\",\"type\":\"model\",\"files\":[${files%,}]}"
is "$ST" 200 "an upstream source repo (a public model repo, served over git smart HTTP)"
UPSHA=$(git --git-dir="$KHUB_DATA_DIR/repos/models/acme/upstream-src.git" rev-parse main)
enqueue "{\"source\":{\"url\":\"$KHUB_URL/acme/upstream-src\",\"revision\":\"main\"},\"variants\":[\"$V2\"]}"
is "$ST $(j 'd["commit"], d["builds"][0]["source"]["url"], d["builds"][0]["source"]["revision"]')" \
	"202 ('$UPSHA', '$KHUB_URL/acme/upstream-src', 'main')" "enqueue from an external git URL: the server fetched it; the job names the source"
JE=$(j 'd["builds"][0]["id"]')
api "$ALICE" GET "/api/kernels/acme/relu/builds?state=queued"	# the others out of the way
for id in $(j '" ".join(str(b["id"]) for b in d["builds"] if b["id"] != '"$JE"')'); do api "$ALICE" POST "/api/builds/$id/cancel" '{}'; done
ls -d "$KHUB_DATA_DIR"/build-sources/*.git >/dev/null 2>&1
ok $? "the fetched copy lives under data_dir/build-sources/"
claim "$W2" "[\"$V2\"]"
keep_lease "$W2" "$JE"
is "$(j 'd["build"]["id"], d["build"]["commit"]')" "($JE, '$UPSHA')" "w2 claims the external job"
rm -rf "$TEST_DIR/ext" && mkdir -p "$TEST_DIR/ext"
curl -s -H "Authorization: Bearer $W2" "$KHUB_URL/api/builds/$JE/source" | tar -xf - -C "$TEST_DIR/ext"
is "$(cat "$TEST_DIR/ext/torch-ext/relu/__init__.py" | head -1)" "def upstream():" "its source tar is the external commit's tree"
api "$W2" POST "/api/builds/$JE/fail" '{"error":"done with it"}'
is "$(j 'd["state"]')" failed "(failed, out of the way)"
# An external source is anybody's git tree: a pointer in it naming another
# repo's LFS object (here a private repo of another org) must not bring that
# object's bytes into the source tar; the job's own repo's objects do come.
khub admin org create vault >>"$log" 2>&1
head -c 2048 /dev/urandom >"$TEST_DIR/secret.bin"
SOID=$(sha256sum "$TEST_DIR/secret.bin" | cut -d' ' -f1)
api "$ROOT" POST /api/repos/create "{\"name\":\"secret\",\"organization\":\"vault\",\"type\":\"kernel\",\"private\":true,\"files\":[{\"path\":\"secret.bin\",\"content\":\"$(b64 "$TEST_DIR/secret.bin")\",\"encoding\":\"base64\"}]}"
is "$ST" 200 "vault/secret (private, another org) holds an LFS object"
WOID=$(sha256sum "$SRC/torch-ext/relu/weights.bin" | cut -d' ' -f1)
EVIL=$TEST_DIR/gitd/evil.git
git init -q --bare "$EVIL" && git init -q "$TEST_DIR/evil" &&
	printf "$TOML" >"$TEST_DIR/evil/build.toml" &&
	printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 2048\n' "$SOID" >"$TEST_DIR/evil/stolen.bin" &&
	printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 3000\n' "$WOID" >"$TEST_DIR/evil/own.bin" &&
	git -C "$TEST_DIR/evil" add -A && git -C "$TEST_DIR/evil" -c user.name=t -c user.email=t@t commit -qm evil &&
	git -C "$TEST_DIR/evil" push -q "$EVIL" HEAD:refs/heads/main
GPORT=$(free_port)
git daemon --export-all --reuseaddr --listen=127.0.0.1 --port="$GPORT" --base-path="$TEST_DIR/gitd" "$TEST_DIR/gitd" \
	>"$TEST_DIR/gitd.log" 2>&1 &
GDPID=$!
for _ in $(seq 1 1200); do git ls-remote "git://127.0.0.1:$GPORT/evil.git" >/dev/null 2>&1 && break; sleep 0.1; done
enqueue "{\"source\":{\"url\":\"git://127.0.0.1:$GPORT/evil.git\",\"revision\":\"main\"},\"variants\":[\"$V2\"]}"
is "$ST" 202 "enqueue from a git:// source whose tree points at vault/secret's object"
JS=$(j 'd["builds"][0]["id"]')
claim "$W2" "[\"$V2\"]"
keep_lease "$W2" "$JS"
is "$(j 'd["build"]["id"]')" "$JS" "w2 claims it"
rm -rf "$TEST_DIR/evilsrc" && mkdir -p "$TEST_DIR/evilsrc"
curl -s -H "Authorization: Bearer $W2" "$KHUB_URL/api/builds/$JS/source" | tar -xf - -C "$TEST_DIR/evilsrc"
is "$(head -1 "$TEST_DIR/evilsrc/stolen.bin")" "version https://git-lfs.github.com/spec/v1" \
	"the other repo's object stays a pointer in the source tar (its bytes never leave)"
cmp -s "$TEST_DIR/evilsrc/own.bin" "$SRC/torch-ext/relu/weights.bin"
ok $? "an object linked to the job's repo (acme/relu) comes as its content"
api "$W2" POST "/api/builds/$JS/fail" '{"error":"done with it"}'
keep_lease
kill "$GDPID" 2>/dev/null
wait "$GDPID" 2>/dev/null
enqueue '{"source":{"url":"file:///etc","revision":"main"}}'
is "$ST" 400 "a file:// source URL → 400"
enqueue "{\"source\":{\"url\":\"$KHUB_URL/acme/upstream-src\",\"revision\":\"no-such-branch\"},\"variants\":[\"$V2\"]}"
is "$ST" 404 "an unknown revision of the source → 404"
enqueue "{\"source\":{\"url\":\"http://127.0.0.1:1/nothing\",\"revision\":\"main\"},\"variants\":[\"$V2\"]}"
is "$ST" 422 "a source that cannot be fetched → 422"

# ---- builds asked for by environment (the gap filler) -------------------------------------
# v1 has $V1 and $V2 now; w1/w2 build $V1 $V2 $V4, nobody builds CUDA.
enqueue "{\"revision\":\"$C1\",\"environment\":{\"torch\":\"2.11\",\"arch\":\"x86_64\",\"os\":\"linux\"}}"
is "$ST $(j 'd["variant"], d["loads"], len(d["builds"])')" "200 ('$V1', '$V1', 0)" "environment torch 2.11 CPU: $V1 already loads there, nothing queued"
enqueue "{\"revision\":\"$C1\",\"environment\":{\"torch\":2.12,\"cuda\":null,\"cxx11\":true}}"
is "$ST $(j 'd["variant"], [b["variant"] for b in d["builds"]], d["watch"] == "/api/builds/%d" % d["builds"][0]["id"]')" \
	"202 ('$V4', ['$V4'], True)" "environment torch 2.12 CPU (a JSON number, cuda null): $V4 queued, with the URL to watch"
JENV=$(j 'd["builds"][0]["id"]')
enqueue "{\"revision\":\"$C1\",\"environment\":{\"torch\":\"2.12\"}}"
is "$ST $(j 'len(d["builds"]), d["watch"]')" "202 (0, '/api/builds/$JENV')" "the same environment again: nothing new, the same build to watch"
enqueue "{\"revision\":\"$C1\",\"environment\":{\"torch\":\"2.12\",\"cuda\":\"13.0\"}}"
is "$ST $(j '"no registered worker can build '"$V3"'" in d["error"]')" "422 True" "environment torch 2.12 CUDA 13.0: $V3, which no worker builds → 422 naming it"
enqueue "{\"revision\":\"$C1\",\"environment\":{\"torch\":\"2.11\",\"cuda\":\"12.8\",\"free_threaded\":true}}"
is "$ST $(j '"free-threaded" in d["error"]')" "422 True" "a free-threaded Python loads nothing compiled → 422 saying why"
enqueue "{\"revision\":\"$C1\",\"environment\":{\"torch\":\"latest\"}}"
is "$ST" 400 "an environment with a bad torch version → 400"
enqueue "{\"revision\":\"$C1\",\"environment\":\"torch 2.11\"}"
is "$ST" 400 "an environment that is not an object → 400"
enqueue "{\"revision\":\"$C1\",\"variants\":[\"$V1\"],\"environment\":{\"torch\":\"2.11\"}}"
is "$ST" 400 "variants and environment together → 400"
api "$ALICE_RO" POST /api/kernels/acme/relu/builds "{\"environment\":{\"torch\":\"2.12\"}}"
is "$ST" 403 "a read-scoped token cannot ask for an environment's build"
api "$ALICE" POST "/api/builds/$JENV/cancel"
is "$ST" 200 "the environment's build canceled (the rest of the test claims by name)"

# ---- abi_policy = warn --------------------------------------------------------------------------------
khub_stop
KHUB_ABI_POLICY=warn khub_start
fresh "$V1"
mktar "$TEST_DIR/warn.tar" "$V1" violations
is "$(put_output "$W1" "$JX" "$TEST_DIR/warn.tar") $(j 'd["state"]')" "200 succeeded" "abi_policy=warn: an output with violations is published"
api "$ALICE" GET "/api/builds/$JX"
is "$(j 'd["abi_report"]["ok"], d["abi_report"]["files"][0]["violations"][0]["version"]')" "(False, 'GLIBC_2.32')" "… and its report kept"

khub_stop
server_and_sanitizer_logs | grep -E 'runtime error|AddressSanitizer' | head -5 | sed 's/^/# server: /'
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
