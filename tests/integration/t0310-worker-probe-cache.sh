#!/bin/bash
# t0310-worker-probe-cache.sh -- khub-worker keeps each toolchain's Python
# probe (an `import torch`: seconds) in its work dir and reuses it at the
# next start; touching the interpreter, changing the toolchain's entry,
# torch's version.py or a directory on the Python's sys.path (a package
# installed) probes again, and a damaged cache file is ignored. A toolchain
# with a root (a tiny one: bash and a fake Python) is probed inside it, and
# a change to the root's packages (its digest), its Python or its torch
# probes again.
. "$(dirname "$0")/../lib/khub-test.sh"

WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
[ -x "$WORKER_BIN" ] || bail "khub-worker not built ($WORKER_BIN)"
KHUB_TEST_FRESH_CLUSTER=1 khub_setup	# its temp dir only: no server, the worker finds no khub

W=$TEST_DIR/worker
mkdir -p "$W/torch" "$W/work" "$W/site"
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
	printf "\"site_dirs\": [\"%s/site\"], \"kernels\": false, \"tomllib\": true}'\n" "$W"
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

start
is "$(probes)" 4 "unchanged, it is reused"
sleep 0.01
mkdir "$W/site/newpkg"
start
is "$(probes)" 5 "a package installed on sys.path probes again"

for f in "$W/work/w1/toolchain-probe/"*.json; do printf '{"torch_version_file": ' >"$f"; done
start
is "$(probes)" 6 "a damaged cache file is ignored: probed again"
like "$(cat "$W/out")" 'toolchain fake: [0-9]+ variant' "and the toolchain is usable"
start
is "$(probes)" 6 "and the rewritten cache is reused"

# A toolchain with a root: bash and its libraries, a fake Python and torch
# inside it. Probes are counted by what the worker says (the root's Python
# cannot write outside the root).
if ! command -v bwrap >/dev/null; then
	for i in 1 2 3 4 5 6; do ok 0 "# SKIP bubblewrap is not installed (root probes)"; done
	done_testing
	exit 0
fi
R=$W/root
mkdir -p "$R/usr/bin" "$R/usr/lib64" "$R/usr/lib/python3/torch" "$R/etc" "$R/usr/lib/os"
ln -s usr/bin "$R/bin"
ln -s usr/lib "$R/lib"
ln -s usr/lib64 "$R/lib64"
cp /bin/bash "$R/usr/bin/bash"
for lib in $(ldd /bin/bash | grep -o '/[^ ]*'); do
	mkdir -p "$R/usr$(dirname "${lib#/usr}")"
	cp -L "$lib" "$R/usr${lib#/usr}"
done
printf 'ID=tiny\nVERSION_ID=1\n' >"$R/etc/os-release"
printf '__version__ = "2.9.0"\n' >"$R/usr/lib/python3/torch/version.py"
{
	printf '#!/bin/bash\n'
	printf "echo '{\"python\": \"3.11.2\", \"machine\": \"x86_64\", \"python_include\": \"/usr/include/python3.11\", "
	printf "\"torch\": \"2.9.0\", \"cuda\": null, \"hip\": null, \"cxx11_abi\": true, \"torch_include\": [], "
	printf "\"torch_lib\": \"/usr/lib\", \"torch_version_file\": \"/usr/lib/python3/torch/version.py\", "
	printf "\"site_dirs\": [\"/usr/lib/python3\"], \"kernels\": false, \"tomllib\": true}'\n"
} >"$R/usr/bin/python3"
chmod 755 "$R/usr/bin/python3"
printf '{"toolchains": [{"name": "tiny", "root": "%s", "python": "/usr/bin/python3"}]}\n' "$R" >"$W/toolchains.json"
# rstart: a start; "probed" when the root's Python ran (its answer cached), "reused" when not
rstart() {
	start
	if grep -q 'toolchain probe cached in' "$W/out"; then echo probed
	elif grep -q 'probe reused from' "$W/out"; then echo reused
	else sed 's/^/# /' "$W/out"; echo neither; fi
}
is "$(rstart)" probed "a toolchain with a root is probed (inside it)"
is "$(rstart)" reused "and its probe is reused"
sleep 0.01
printf 'ID=tiny\nVERSION_ID=2\n' >"$R/etc/os-release"
is "$(rstart)" probed "another root (its digest: os-release, packages) probes again"
sleep 0.01
touch "$R/usr/bin/python3"
is "$(rstart)" probed "touching the root's Python probes again"
sleep 0.01
printf '__version__ = "2.10.0"\n' >"$R/usr/lib/python3/torch/version.py"
is "$(rstart)" probed "another torch in the root probes again"
is "$(rstart)" reused "and that probe is reused"

done_testing
