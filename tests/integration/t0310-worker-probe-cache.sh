#!/bin/bash
# t0310-worker-probe-cache.sh -- khub-worker keeps each toolchain's Python
# probe (an `import torch`: seconds) in its work dir and reuses it at the
# next start; touching the interpreter, changing the toolchain's entry or
# torch's version.py probes again, and a damaged cache file is ignored.
. "$(dirname "$0")/../lib/khub-test.sh"

WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
[ -x "$WORKER_BIN" ] || bail "khub-worker not built ($WORKER_BIN)"
KHUB_TEST_FRESH_CLUSTER=1 khub_setup	# its temp dir only: no server, the worker finds no khub

W=$TEST_DIR/worker
mkdir -p "$W/torch" "$W/work"
chmod 711 "$TEST_DIR" "$W" "$W/work"	# a root worker's build uid must reach its work dir
printf 'not-a-real-token\n' >"$W/token"
chmod 600 "$W/token"
printf '__version__ = "2.9.0"\n' >"$W/torch/version.py"
# A Python that counts its runs and answers the probe like a CPU torch 2.9.
{
	printf '#!/bin/bash\necho run >>"%s/probes"\n' "$W"
	printf "echo '{\"python\": \"3.11.2\", \"machine\": \"x86_64\", \"python_include\": \"/usr/include/python3.11\", "
	printf "\"torch\": \"2.9.0\", \"cuda\": null, \"hip\": null, \"cxx11_abi\": true, \"torch_include\": [], "
	printf "\"torch_lib\": \"/usr/lib\", \"torch_version_file\": \"%s/torch/version.py\", " "$W"
	printf "\"kernels\": false, \"tomllib\": true}'\n"
} >"$W/python"
chmod 755 "$W/python"
toolchains() {
	printf '{"toolchains": [{"name": "fake", "python": "%s", "cxx": "g++"%s}]}\n' "$W/python" "$1" \
		>"$W/toolchains.json"
}
toolchains ""
probes() { if [ -f "$W/probes" ]; then wc -l <"$W/probes" | tr -d ' '; else echo 0; fi; }
# start: one worker start, stopped (SIGTERM) once it has probed and tried khub
start() {
	"$WORKER_BIN" --url http://127.0.0.1:1 --token-file "$W/token" --toolchains "$W/toolchains.json" \
		--work-dir "$W/work" --name w1 >"$W/out" 2>&1 &
	local pid=$! i
	for i in $(seq 1200); do
		grep -qE 'unreachable|no usable toolchain' "$W/out" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
}

start
is "$(probes)" 1 "the first start probes the Python"
like "$(cat "$W/out")" 'toolchain fake: [0-9]+ variant' "and the toolchain is usable"
n=$(find "$W/work/w1/toolchain-probe" -name '*.json' 2>/dev/null | wc -l)
is "$n" 1 "the probe is kept in the work dir"
start
is "$(probes)" 1 "a second start reuses it: no Python run"
like "$(cat "$W/out")" 'probe reused from' "and says so"
like "$(cat "$W/out")" 'toolchain fake: [0-9]+ variant' "the toolchain is usable from the cached probe"

sleep 0.01
touch "$W/python"
start
is "$(probes)" 2 "touching the Python probes again"
start
is "$(probes)" 2 "and that probe is reused in turn"

toolchains ', "env": {"FOO": "1"}'
start
is "$(probes)" 3 "changing the toolchain's entry probes again"

sleep 0.01
printf '__version__ = "2.10.0"\n' >"$W/torch/version.py"
start
is "$(probes)" 4 "a changed torch (its version.py) probes again"

for f in "$W/work/w1/toolchain-probe/"*.json; do printf '{"torch_version_file": ' >"$f"; done
start
is "$(probes)" 5 "a damaged cache file is ignored: probed again"
like "$(cat "$W/out")" 'toolchain fake: [0-9]+ variant' "and the toolchain is usable"
start
is "$(probes)" 5 "and the rewritten cache is reused"

done_testing
