#!/bin/bash
# quickstart.sh -- from a fresh Debian machine to a running khub: install
# what is missing, build, start the embedded database, seed the demo kernel
# khub-demo/relu (branches main and v1, trusted org), mint an admin token,
# and serve on 127.0.0.1:8080 (KHUB_LISTEN overrides). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

. deploy/install-deps.sh
install_deps build

if [ ! -x ./khub ] || [ -n "$(find . -newer ./khub \( -name '*.c' -o -name '*.h' -o -name '*.sql' -o -name '*.am' -o -name '*.ac' \) -print -quit 2>/dev/null)" ]; then
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

cat <<EOT

khub is starting on http://$KHUB_LISTEN  (data: $KHUB_DATA_DIR)

  export HF_ENDPOINT=http://127.0.0.1:$PORT
  python3 -c 'import torch; from kernels import get_kernel; \\
    k = get_kernel("khub-demo/relu", version=1); print(k.relu(torch.tensor([-1.0, 2.0])))'

  curl -s \$HF_ENDPOINT/api/kernels/khub-demo/relu/refs
  admin token (site admin; keep it secret): $TOKEN
    HF_TOKEN=$TOKEN  — for publishing with huggingface_hub, @huggingface/hub or kernel-builder

Stop with Ctrl-C.
EOT
exec ./khub serve
