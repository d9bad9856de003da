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

. deploy/demo-seed.sh
echo "==> seeding the demo kernel khub-demo/relu into $KHUB_DATA_DIR"
demo_import ./khub

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
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER' INT TERM EXIT
URL=http://127.0.0.1:$PORT
for _ in $(seq 1 300); do
	curl -sf "$URL/api/health" >/dev/null 2>&1 && break
	kill -0 $SERVER 2>/dev/null || { echo "khub serve exited" >&2; exit 1; }
	sleep 0.1
done

# Demo benchmark runs and downloads, once, through the real API
# (deploy/demo-seed.sh).
if [ ! -e "$KHUB_DATA_DIR/demo-seeded" ]; then
	echo "==> seeding demo benchmark results and downloads for khub-demo/relu"
	demo_seed "$URL" "$TOKEN" && touch "$KHUB_DATA_DIR/demo-seeded"
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
