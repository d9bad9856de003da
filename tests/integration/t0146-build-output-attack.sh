#!/bin/bash
# t0146-build-output-attack.sh -- PUT /api/builds/{id}/output with hostile
# tars (docs/build-farm.md): a few KB of sparse members claiming 1 GiB
# each, a hard link out of the tree and a tar whose member claims more bytes
# than it holds are refused with 422 and the reason, the job fails,
# nothing is published and the server's memory
# does not grow by the claimed sizes.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

V=torch211-cxx11-cpu-x86_64-linux
log=$TEST_DIR/setup.log
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
W=$(khub admin worker add w1 2>>"$log" | tail -n 1)
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
api() {
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
j() { jq -rc "$1" "$B" 2>/dev/null; }	# j JQ-FILTER: on the last body
b64() { base64 -w0 "$@"; }
peak_kb() { awk '/^VmHWM/ {print $2}' "/proc/$KHUB_PID/status"; }

files=$(printf '{"path":"build.toml","content":"%s","encoding":"base64"}' "$(printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' | b64)")
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[$files]}"
is "$ST" 200 "acme/relu"
GD=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
api "$W" POST /api/workers/register "{\"name\":\"w1\",\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V\"],\"torch\":\"2.11\",\"cxx11_abi\":true,\"python\":\"3.11\"}]}"
is "$ST" 200 "w1 registers"

# claim_job: a fresh job of V claimed by w1 -> $JOB
claim_job() {
	api "$ALICE" POST /api/kernels/acme/relu/builds "{\"revision\":\"main\",\"variants\":[\"$V\"],\"force\":true}"
	api "$W" POST /api/workers/claim "{\"variants\":[\"$V\"],\"wait_seconds\":0}"
	JOB=$(j '.build.id')
}
put_output() { curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $W" -H 'Content-Type: application/x-tar' --data-binary "@$2" "$KHUB_URL/api/builds/$1/output"; }
meta='{"id":"_relu","name":"relu","version":1,"license":"apache-2.0","python-depends":[],"backend":{"type":"cpu"}}'

# ---- sparse members ------------------------------------------------------------------------------
OUT=$TEST_DIR/out
mkdir -p "$OUT/$V"
printf '%s\n' "$meta" >"$OUT/$V/metadata.json"
printf '{"ok": true}\n' >"$OUT/abi-report.json"	# the ABI policy has nothing to say
for f in a b; do printf 'ELF' >"$OUT/$V/_$f.so"; truncate -s 1G "$OUT/$V/_$f.so"; done
tar --sparse --format=pax -C "$OUT" -cf "$TEST_DIR/sparse.tar" "$V" abi-report.json
rm -rf "$OUT"
size=$(stat -c %s "$TEST_DIR/sparse.tar")
ok $((size < 100000 ? 0 : 1)) "a tar of $size bytes whose two members claim 1 GiB each"
claim_job
before=$(peak_kb)
is "$(put_output "$JOB" "$TEST_DIR/sparse.tar") $(j '.state')" "422 failed" "its upload is refused: 422, the job failed"
like "$(j '.error')" "sparse" "… saying why: $(j '.error')"
after=$(peak_kb)
ok $(((after - before) < 262144 ? 0 : 1)) "the server's peak memory grew by $(((after - before) / 1024)) MiB, not by the claimed 2 GiB"
git --git-dir="$GD" rev-parse --verify -q v1 >/dev/null
is $? 1 "nothing was published (no v1)"
is "$(du -sm "$KHUB_DATA_DIR" | cut -f1 | awk '{print ($1 < 1024) ? "small" : $1 " MiB"}')" small "the data dir did not grow by the claimed sizes"

# ---- a hard link out of the tree, a member claiming more than the tar holds ------------------------
/usr/bin/python3 - "$TEST_DIR" "$V" "$meta" <<'PY'
import io, sys, tarfile
d, v, meta = sys.argv[1], sys.argv[2], sys.argv[3].encode()
def tar(path, extra):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        i = tarfile.TarInfo(f"{v}/metadata.json"); i.size = len(meta); t.addfile(i, io.BytesIO(meta))
        r = b'{"ok": true}'
        i = tarfile.TarInfo("abi-report.json"); i.size = len(r); t.addfile(i, io.BytesIO(r))
        extra(t)
def hard(t):
    i = tarfile.TarInfo(f"{v}/passwd"); i.type = tarfile.LNKTYPE; i.linkname = "../../../../etc/passwd"; t.addfile(i)
tar(f"{d}/hardlink.tar", hard)
def claims(t):
    i = tarfile.TarInfo(f"{v}/_big.so"); i.size = 1 << 30; t.addfile(i, io.BytesIO(b"\0" * 4096))
    t.fileobj.write(b"\0" * 4096)   # the rest of its bytes never come
try:
    tar(f"{d}/claims.tar", claims)
except Exception:
    pass
PY
claim_job
is "$(put_output "$JOB" "$TEST_DIR/hardlink.tar") $(j '.state')" "422 failed" "a hard link to ../../../../etc/passwd → 422"
like "$(j '.error')" "not a regular file" "… saying why"
claim_job
before=$(peak_kb)
is "$(put_output "$JOB" "$TEST_DIR/claims.tar") $(j '.state')" "422 failed" "a member claiming 1 GiB in a tar of $(stat -c %s "$TEST_DIR/claims.tar") bytes → 422"
like "$(j '.error')" "too large|claims" "… saying why: $(j '.error')"
after=$(peak_kb)
ok $(((after - before) < 262144 ? 0 : 1)) "… the server's peak memory grew by $(((after - before) / 1024)) MiB"
git --git-dir="$GD" rev-parse --verify -q v1 >/dev/null
is $? 1 "still nothing published"

# ---- the second line: an output the plan of build.toml does not build --------------------------------
# Planning never queues torch-cpu for this compiled kernel (t0142); a job that
# got in anyway (put here by hand) must still not publish a Python-only variant.
NA=torch-cpu
api "$W" POST /api/workers/register "{\"name\":\"w1\",\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V\",\"$NA\"],\"torch\":\"2.11\",\"cxx11_abi\":true,\"python\":\"3.11\"}]}"
psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt -c "INSERT INTO builds (repo_id, source_commit, variant, requested_by)
	SELECT id, '$(git --git-dir="$GD" rev-parse main)', '$NA', 'test' FROM repos WHERE namespace = 'acme' AND name = 'relu'" >/dev/null
api "$W" POST /api/workers/claim "{\"variants\":[\"$NA\"],\"wait_seconds\":0}"
JOB=$(j '.build.id')
is "$ST $(j '.build.variant')" "200 $NA" "a $NA job of the compiled kernel, inserted past planning, is claimed"
mkdir -p "$TEST_DIR/na/$NA"
printf '%s\n' "$meta" >"$TEST_DIR/na/$NA/metadata.json"
printf 'def relu(x):\n    return x\n' >"$TEST_DIR/na/$NA/__init__.py"
tar -C "$TEST_DIR/na" -cf "$TEST_DIR/noarch.tar" "$NA"
is "$(put_output "$JOB" "$TEST_DIR/noarch.tar") $(j '.state')" "422 failed" "its Python-only output is refused: 422, the job failed"
like "$(j '.error')" "build.toml does not build $NA \\(.*compiled" "… saying the plan does not build it: $(j '.error')"
git --git-dir="$GD" rev-parse --verify -q v1 >/dev/null
is $? 1 "nothing was published"
done_testing
