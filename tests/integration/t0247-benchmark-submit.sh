#!/bin/bash
# t0247-benchmark-submit.sh -- khub benchmark submit: a file in the format
# `kernels benchmark ... --output` writes (fixtures/benchmark-result.json,
# json.dump(BenchmarkResult.to_payload(), indent=2)) posted to a test hub
# with HF_ENDPOINT/HF_TOKEN and visible through GET .../benchmarks; a
# huggingface.co endpoint refused before any connection (kernels' own
# --upload would send a private hub's token there); a read-scoped token's
# 403 and a malformed file reported; the documented curl line works too.
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

FIXTURE=$(cd "$(dirname "$0")" && pwd)/fixtures/benchmark-result.json
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" silu
V1=$(khub import "$SRC" --repo acme/relu --branch v1 2>/dev/null)
khub admin user create carol >/dev/null 2>&1
khub admin user create dave >/dev/null 2>&1
khub admin member set acme carol write >/dev/null 2>&1
CAROL=$(khub admin token create carol --scope write 2>/dev/null)
CAROL_READ=$(khub admin token create carol --scope read 2>/dev/null)
DAVE=$(khub admin token create dave --scope write 2>/dev/null)
khub_start

# kernels sends the short sha of the build it measured; the fixture's is
# another repo's, so the test points it at this repo's v1 (the one change).
RESULT=$TEST_DIR/result.json
jq --arg sha "${V1:0:7}" '.kernelCommitSha = $sha' "$FIXTURE" >"$RESULT"
is "$(jq -c 'del(.kernelCommitSha)' "$RESULT")" "$(jq -c 'del(.kernelCommitSha)' "$FIXTURE")" \
	"the submitted file is the fixture but for kernelCommitSha"
BENCH=$KHUB_URL/api/kernels/acme/relu/benchmarks
runs() { curl -s "$BENCH?source=all" | jq length; }

# ---- the whole path: HF_ENDPOINT and HF_TOKEN, as for `kernels` itself -------------------
OUT=$(HF_ENDPOINT=$KHUB_URL HF_TOKEN=$CAROL khub benchmark submit "$RESULT" --repo acme/relu 2>"$TEST_DIR/err")
is "$?" 0 "khub benchmark submit with HF_ENDPOINT/HF_TOKEN: exit 0 ($(head -c 200 "$TEST_DIR/err"))"
like "$OUT" "^submitted benchmark run [0-9]+ \\(maintainer, commit ${V1}, 3 workloads\\)" \
	"it prints the run id, maintainer source, the full commit and the workload count"
ID=$(sed -n 's/^submitted benchmark run \([0-9]*\) .*/\1/p' <<<"$OUT")
like "$OUT" "$BENCH\\?id=$ID" "and the run's URL"
curl -s "$BENCH" >"$TEST_DIR/list.json"
is "$(jq -c --argjson id "${ID:-0}" '[.[] | select(.id == $id) | .source, .commit, .submitter]' "$TEST_DIR/list.json" 2>/dev/null)" \
	"[\"maintainer\",\"$V1\",\"carol\"]" "GET .../benchmarks lists the run: carol's, a maintainer run of v1"
is "$(jq --argjson id "${ID:-0}" --slurpfile f "$RESULT" '.[] | select(.id == $id) |
	(.results | sort_by(.workload)) == ($f[0].results | sort_by(.workload)) and .machineInfo == $f[0].machineInfo and
	.kernelCommitSha == $f[0].kernelCommitSha and .benchmarkScriptSha == $f[0].benchmarkScriptSha' "$TEST_DIR/list.json" 2>/dev/null)" \
	true "its workloads, timings, machine and shas are the file's, every field"

# The token from huggingface_hub's token file, the endpoint from --endpoint
# (trailing slash); another user's upload is a community run.
mkdir -p "$TEST_DIR/home/.cache/huggingface"
printf '%s\n' "$DAVE" >"$TEST_DIR/home/.cache/huggingface/token"
OUT=$(env -u HF_TOKEN -u HF_HOME -u HF_TOKEN_PATH HOME="$TEST_DIR/home" HF_ENDPOINT=http://127.0.0.1:1 \
	"$KHUB_BIN" benchmark submit "$RESULT" --repo acme/relu --endpoint "$KHUB_URL/" 2>&1)
like "$OUT" "^submitted benchmark run [0-9]+ \\(community," \
	"--endpoint wins over HF_ENDPOINT; the token comes from ~/.cache/huggingface/token (another user: community)"

# ---- huggingface.co is refused before any connection ----------------------------------------
# A listener stands in as every proxy: libcurl would reach any host through
# it, so a line in its log is a connection khub tried to make.
PROXY_PORT=$(free_port)
PROXY_LOG=$TEST_DIR/proxy.log
: >"$PROXY_LOG"
/usr/bin/python3 - "$PROXY_PORT" "$PROXY_LOG" <<'PY' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    c.settimeout(5)
    try:
        line = c.recv(4096).split(b"\r\n", 1)[0]
    except OSError:
        line = b"(nothing)"
    with open(sys.argv[2], "ab") as f:
        f.write(line + b"\n")
    c.close()
PY
PROXY_PID=$!
for _ in $(seq 1 100); do
	curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/" 2>/dev/null; [ -s "$PROXY_LOG" ] && break; sleep 0.1
done
: >"$PROXY_LOG"
PROXY=http://127.0.0.1:$PROXY_PORT
via_proxy() { env http_proxy=$PROXY https_proxy=$PROXY HTTPS_PROXY=$PROXY all_proxy=$PROXY no_proxy= NO_PROXY= "$@"; }

BEFORE=$(runs)
for ep in https://huggingface.co https://HuggingFace.co/ https://huggingface.co. https://api.huggingface.co \
	https://hf.co "https://user@huggingface.co:443/x" http://hf.co:8080; do
	via_proxy env HF_ENDPOINT="$ep" HF_TOKEN="$CAROL" "$KHUB_BIN" benchmark submit "$RESULT" --repo acme/relu \
		>"$TEST_DIR/out" 2>"$TEST_DIR/err"
	rc=$?
	is "$rc/$(grep -c 'refusing endpoint' "$TEST_DIR/err")" "2/1" "HF_ENDPOINT=$ep: refused, exit 2"
done
like "$(cat "$TEST_DIR/err")" "would send your token .* to huggingface.co" "the message says what would leak"
via_proxy "$KHUB_BIN" benchmark submit "$RESULT" --repo acme/relu --endpoint https://huggingface.co \
	--token "$CAROL" >/dev/null 2>"$TEST_DIR/err"
is "$?/$(grep -c 'refusing endpoint' "$TEST_DIR/err")" "2/1" "--endpoint https://huggingface.co: refused, exit 2"
is "$(cat "$PROXY_LOG")" "" "no refused submit made any connection (the proxy log is empty)"
# The same with --allow-huggingface does try: the listener sees it, so its
# silence above means something.
via_proxy "$KHUB_BIN" benchmark submit "$RESULT" --repo acme/relu --endpoint https://huggingface.co \
	--token "$CAROL" --allow-huggingface >/dev/null 2>"$TEST_DIR/err"
is "$?" 1 "--allow-huggingface: it goes out (and fails here, offline): exit 1"
like "$(cat "$PROXY_LOG")" "huggingface\\.co" "and the listener saw that connection"
kill "$PROXY_PID" 2>/dev/null
wait "$PROXY_PID" 2>/dev/null
is "$(runs)" "$BEFORE" "nothing was stored by the refused submits"

# ---- errors the hub and the file give -------------------------------------------------------
HF_ENDPOINT=$KHUB_URL HF_TOKEN=$CAROL_READ khub benchmark submit "$RESULT" --repo acme/relu >/dev/null 2>"$TEST_DIR/err"
is "$?" 1 "a read-scoped token: exit 1"
like "$(cat "$TEST_DIR/err")" "the hub answered 403: .+" "the server's 403 and its error are shown"
jq '.kernelCommitSha = "0000000"' "$RESULT" >"$TEST_DIR/unknown-commit.json"
HF_ENDPOINT=$KHUB_URL HF_TOKEN=$CAROL khub benchmark submit "$TEST_DIR/unknown-commit.json" --repo acme/relu \
	>/dev/null 2>"$TEST_DIR/err"
is "$?/$(cat "$TEST_DIR/err")" "1/khub benchmark submit: the hub answered 400: invalid benchmark: kernelCommitSha 0000000 is not a commit of acme/relu" \
	"a commit the repo lacks: the server's 400 and its reason"
head -c 300 "$RESULT" >"$TEST_DIR/truncated.json"
HF_ENDPOINT=$KHUB_URL HF_TOKEN=$CAROL khub benchmark submit "$TEST_DIR/truncated.json" --repo acme/relu >/dev/null 2>"$TEST_DIR/err"
is "$?" 2 "a truncated file: exit 2"
like "$(cat "$TEST_DIR/err")" "truncated.json is not JSON \\(line [0-9]+: " "with where the JSON breaks"
echo '[1, 2]' >"$TEST_DIR/array.json"
HF_ENDPOINT=$KHUB_URL HF_TOKEN=$CAROL khub benchmark submit "$TEST_DIR/array.json" --repo acme/relu >/dev/null 2>"$TEST_DIR/err"
is "$?/$(grep -c 'is not what `kernels benchmark --output` writes' "$TEST_DIR/err")" "2/1" "JSON of another shape: exit 2, says so"
HF_ENDPOINT=$KHUB_URL HF_TOKEN=$CAROL khub benchmark submit "$TEST_DIR/missing.json" --repo acme/relu >/dev/null 2>"$TEST_DIR/err"
is "$?/$(grep -c 'cannot read .*missing.json' "$TEST_DIR/err")" 2/1 "a missing file: exit 2, says so"
env -u HF_ENDPOINT HF_TOKEN=$CAROL "$KHUB_BIN" benchmark submit "$RESULT" --repo acme/relu >/dev/null 2>"$TEST_DIR/err"
is "$?/$(grep -c 'no hub' "$TEST_DIR/err")" "2/1" "no endpoint anywhere: exit 2, says so"
HF_ENDPOINT=$KHUB_URL HF_TOKEN=$CAROL khub benchmark submit "$RESULT" --repo silu >/dev/null 2>&1
is "$?" 2 "--repo without a namespace: exit 2"
is "$(khub benchmark --help | head -1)" "usage: khub benchmark submit FILE --repo NS/NAME [--endpoint URL] [--token TOKEN]" \
	"khub benchmark --help"

# ---- the documented curl line (README, "Benchmark results") ----------------------------------
LINE=$(grep -A1 '^curl -X POST' "$(dirname "$0")/../../README.md" | head -2 | tr -d '\\\n')
like "$LINE" "--data-binary @result.json" "the README has the curl line"
(cd "$TEST_DIR" && HF_ENDPOINT=$KHUB_URL HF_TOKEN=$CAROL bash -c "$LINE" >"$TEST_DIR/curl.out" 2>/dev/null)
is "$(jq -r .source "$TEST_DIR/curl.out" 2>/dev/null)/$(jq -r .results "$TEST_DIR/curl.out" 2>/dev/null)" "maintainer/3" \
	"the README's curl line posts result.json as a maintainer run"

check "no sanitizer report in the server log" -- bash -c "! grep -qE 'runtime error|AddressSanitizer' '$TEST_DIR/server.log'"
done_testing
