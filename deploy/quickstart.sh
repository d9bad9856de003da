#!/bin/bash
# quickstart.sh -- from a fresh Debian machine to a running khub: install
# what is missing, build, start the embedded database, seed the demo kernel
# khub-demo/relu (branches main and v1, trusted org), mint an admin token,
# serve on 127.0.0.1:8080 (KHUB_LISTEN overrides), seed a few demo benchmark
# runs and downloads through the API (so the web UI's charts show something),
# and print the web UI's address. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

. deploy/install-deps.sh
install_deps build

if [ ! -d web/node_modules/uplot ]; then
	echo "==> installing the web UI's chart library (uPlot, pinned in web/package-lock.json)"
	(cd web && npm ci --no-audit --no-fund --loglevel=error) || echo "    (failed: the UI's charts will say the library is missing)"
fi
if [ ! -x ./khub ] || [ -n "$(find . -newer ./khub -not -path '*/node_modules/*' \( -name '*.c' -o -name '*.h' -o -name '*.sql' -o -name '*.am' -o -name '*.ac' -o -path './web/*' \) -print -quit 2>/dev/null)" ]; then
	echo "==> building khub"
	[ -x configure ] || ./autogen.sh >/dev/null
	[ -f Makefile ] || ./configure -q
	make -s -j"$(nproc)" khub
fi

# PostgreSQL (which khub runs for us) refuses root; as root the cluster runs
# as 'postgres', so keep the data where that user can reach it.
if [ "$(id -u)" -eq 0 ]; then
	DEFAULT_DATA=/var/lib/khub
else
	DEFAULT_DATA=$ROOT/var
fi
export KHUB_DATA_DIR=${KHUB_DATA_DIR:-$DEFAULT_DATA}
export KHUB_LISTEN=${KHUB_LISTEN:-127.0.0.1:8080}
mkdir -p "$KHUB_DATA_DIR"
chmod 755 "$KHUB_DATA_DIR"

echo "==> seeding the demo kernel khub-demo/relu into $KHUB_DATA_DIR"
DEMO=$(mktemp -d)
trap 'rm -rf "$DEMO"' EXIT
cp -r deploy/demo-kernel/. "$DEMO/"
# A deterministic 2 MiB binary table: big and binary, so it is stored as LFS.
python3 - "$DEMO/build/torch-cpu/relu_table.bin" <<'PY'
import hashlib, sys
out, block = bytearray(), b"khub-demo"
while len(out) < 2 * 1024 * 1024:
    block = hashlib.sha256(block).digest()
    out += block
open(sys.argv[1], "wb").write(bytes(out))
PY
# The same pure-Python code as torch-cuda, so a machine with a CUDA build of
# torch loads it without backend="cpu".
cp -r "$DEMO/build/torch-cpu" "$DEMO/build/torch-cuda"
sed -i 's/"type": "cpu"/"type": "cuda"/' "$DEMO/build/torch-cuda/metadata.json"
./khub import "$DEMO" --repo khub-demo/relu --branch main --message "khub demo kernel" >/dev/null
./khub import "$DEMO" --repo khub-demo/relu --branch v1 --message "khub demo kernel v1" >/dev/null
./khub admin trust set khub-demo >/dev/null

TOKEN_FILE=$KHUB_DATA_DIR/admin-token
if [ ! -s "$TOKEN_FILE" ]; then
	./khub admin user create admin --site-admin >/dev/null 2>&1 || true
	./khub admin member set khub-demo admin admin >/dev/null
	(umask 077; ./khub admin token create admin --scope admin --token-name quickstart 2>/dev/null >"$TOKEN_FILE")
fi
TOKEN=$(cat "$TOKEN_FILE")
PORT=${KHUB_LISTEN##*:}

./khub serve &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER; rm -rf "$DEMO"' INT TERM EXIT
URL=http://127.0.0.1:$PORT
for _ in $(seq 1 300); do
	curl -sf "$URL/api/health" >/dev/null 2>&1 && break
	kill -0 $SERVER 2>/dev/null || { echo "khub serve exited" >&2; exit 1; }
	sleep 0.1
done

# Demo benchmark runs and downloads, once, through the real API: the runs say
# "demo" in their GPU names and script path, so nobody takes them for
# measurements.
if [ ! -e "$KHUB_DATA_DIR/demo-seeded" ]; then
	echo "==> seeding demo benchmark results and downloads for khub-demo/relu"
	python3 - "$URL" "$TOKEN" <<'PY' && touch "$KHUB_DATA_DIR/demo-seeded"
import json, sys, urllib.request
url, token = sys.argv[1], sys.argv[2]
def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")
v1 = call("GET", "/api/kernels/khub-demo/relu/revision/v1")["sha"]
main = call("GET", "/api/kernels/khub-demo/relu/revision/main")["sha"]
for sha, gpu, backend, scale in ((v1, "demo GPU A", "CUDA 12.8", 1.0), (main, "demo GPU A", "CUDA 12.8", 0.85),
                                 (main, "demo GPU B", "CUDA 12.8", 1.4), (main, "demo CPU", "CPU", 6.0)):
    results = []
    for i, w in enumerate(("ReluBenchmark.small", "ReluBenchmark.large", "ReluBenchmark.reference")):
        m = round((i + 1) * 0.11 * scale, 4)
        results.append({"workload": w, "timingResults": {"mean_ms": m, "std_ms": round(m * 0.02, 4), "min_ms": m * 0.95,
                        "max_ms": m * 1.1, "q1_ms": m * 0.98, "q3_ms": m * 1.02, "iqr_ms": m * 0.04, "outliers": 0,
                        "iterations": 100}})
    call("POST", "/api/kernels/khub-demo/relu/benchmarks", {"results": results, "kernelCommitSha": sha,
         "machineInfo": {"gpu": gpu, "backend": backend, "pytorchVersion": "2.11.0", "os": "Linux", "cpu": "demo"},
         "benchmarkScriptPath": "benchmarks/demo_seeded_by_quickstart.py"})
for variant, n in (("torch-cpu", 5), ("torch-cuda", 3)):
    for _ in range(n):
        urllib.request.urlopen(f"{url}/kernels/khub-demo/relu/resolve/v1/build/{variant}/metadata.json").read()
PY
fi

cat <<EOT

khub is running on http://$KHUB_LISTEN  (data: $KHUB_DATA_DIR)

  web UI:  $URL/kernels   (demo kernel: $URL/kernels/khub-demo/relu; sign in with the token below)

  export HF_ENDPOINT=$URL
  python3 -c 'import torch; from kernels import get_kernel; \\
    k = get_kernel("khub-demo/relu", version=1); print(k.relu(torch.tensor([-1.0, 2.0])))'

  curl -s \$HF_ENDPOINT/api/kernels/khub-demo/relu/refs
  admin token (site admin; keep it secret): $TOKEN
    HF_TOKEN=$TOKEN  — for publishing with huggingface_hub, @huggingface/hub or kernel-builder

Stop with Ctrl-C.
EOT
wait $SERVER
