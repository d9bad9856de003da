#!/usr/bin/env bash
# run_sync_check.sh -- on the GPU device machine (no network, none of khub's
# C dependencies), from the repo root: the air-gap path end to end with the
# REAL `kernels` package. Unpacks .device/bundle.tar.xz (tests/device/
# make_bundle.sh), starts two khubs that share nothing (A "outside", B
# "inside": own data dirs, embedded PostgreSQL clusters and ports), seeds a
# demo kernel on A (v1 with an LFS weights file, then main), exports a
# signed bundle from A, verifies it and imports it into B, then:
#   - kernels' get_kernel_locks(repo, 1) against A and against B: equal;
#   - kernels' get_kernel(repo, version=1) against B loads v1 and its relu
#     runs (on the GPU when there is one), its LFS weights byte-identical;
#   - get_kernel(repo, revision=<the locked sha>) against B loads too.
# Prints PASS/FAIL lines; RESULT PASS when every check passed.
#
#   bash tests/device/run_sync_check.sh
set -u

ROOT=$(pwd)
BUNDLE=${BUNDLE:-$ROOT/.device/bundle.tar.xz}
SHIM=$ROOT/tests/device/kernels_data_shim
FAILS=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

T=$(mktemp -d /tmp/ksync.XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	[ -n "${OUT:-}" ] && cp "$T"/*.log "$OUT"/ 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

mkdir "$T/b"
tar -xJf "$BUNDLE" -C "$T/b" || { fail "unpack bundle"; exit 1; }
chmod 755 "$T/b"
PGBIN=$T/b/usr/lib/postgresql/15/bin
hub() {	# hub A|B ARGS...
	local name=$1; shift
	KHUB_DATA_DIR=$T/$name KHUB_PG_BINDIR=$PGBIN KHUB_LISTEN=127.0.0.1:${PORT[$name]} \
		PATH=$PGBIN:$PATH LD_LIBRARY_PATH=$T/b/lib "$T/b/bin/khub" "$@"
}
declare -A PORT=([A]=18081 [B]=18082)
unset KHUB_DATABASE_URL KHUB_CONFIG
export KHUB_LOG_LEVEL=info TZ=UTC

# ---- the demo kernel on A ---------------------------------------------------------
SRC=$T/src
mkdir -p "$SRC/build/torch-cpu" "$SRC/build/torch-cuda"
python3 -c 'import sys; open(sys.argv[1], "wb").write(b"\x00KHUBSYNC\x00" + bytes(range(256)) * 400)' "$T/weights.bin"
WEIGHTS_SHA256=$(sha256sum "$T/weights.bin" | cut -d' ' -f1)
printf '# relu demo kernel carried by a khub sync bundle\n' >"$SRC/README.md"
for v in torch-cpu torch-cuda; do
	printf '{"id": "_relu_sync_%s", "name": "relu", "version": 1, "license": "apache-2.0", "python-depends": [], "backend": {"type": "%s"}}\n' \
		"${v//-/_}" "${v#torch-}" >"$SRC/build/$v/metadata.json"
	cp "$T/weights.bin" "$SRC/build/$v/weights.bin"
	cat >"$SRC/build/$v/__init__.py" <<PY
import hashlib
from pathlib import Path

import torch

BRANCH = "v1"
WEIGHTS_SHA256 = hashlib.sha256((Path(__file__).parent / "weights.bin").read_bytes()).hexdigest()


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x, torch.zeros_like(x))
PY
done
sha_v1=$(hub A import "$SRC" --repo khub-demo/relu --branch v1 2>>"$T/import.log") &&
	pass "A: khub import khub-demo/relu v1 ($sha_v1)" || { fail "import v1"; tail "$T/import.log"; exit 1; }
sed -i 's/^BRANCH = "v1"/BRANCH = "main"/' "$SRC"/build/*/__init__.py
hub A import "$SRC" --repo khub-demo/relu --branch main >/dev/null 2>>"$T/import.log" && pass "A: main" || fail "import main"
hub A admin trust set khub-demo >>"$T/import.log" 2>&1 && pass "A: khub-demo trusted" || fail "trust set"

# ---- export, carry, verify, import -------------------------------------------------------
hub A sync keygen --out "$T/airgap" >"$T/keygen.log" 2>&1 && pass "sync keygen: $(cat "$T/keygen.log" | cut -c1-40)" || fail "keygen"
mkdir -p "$T/carry"
hub A sync export --key "$T/airgap.key" --out "$T/carry/week1.khub" --repos 'khub-demo/*' >"$T/export.log" 2>&1
[ -s "$T/carry/week1.khub" ] && pass "sync export: $(cat "$T/export.log")" || { fail "export: $(cat "$T/export.log")"; exit 1; }
hub B sync verify "$T/carry/week1.khub" --key "$T/airgap.pub" >"$T/verify.log" 2>&1 && pass "sync verify (offline, --key)" ||
	fail "verify: $(cat "$T/verify.log")"
sed 's/^/   /' "$T/verify.log"
KHUB_SYNC_TRUSTED_KEYS=$T/airgap.pub hub B sync import "$T/carry/week1.khub" >"$T/synclog.log" 2>&1 &&
	pass "B: sync import" || { fail "import: $(cat "$T/synclog.log")"; exit 1; }

# ---- serve both -------------------------------------------------------------------------
for name in A B; do
	hub "$name" serve >"$T/server-$name.log" 2>&1 &
	PIDS+=($!)
done
for name in A B; do
	up=
	for _ in $(seq 1 120); do
		python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${PORT[$name]}/api/health', timeout=2)" 2>/dev/null && { up=1; break; }
		sleep 0.25
	done
	[ -n "$up" ] && pass "$name serves on port ${PORT[$name]}" || { fail "$name did not come up"; tail "$T/server-$name.log"; exit 1; }
done

# ---- the real kernels package -------------------------------------------------------------
if ! python3 -c 'import kernels' 2>/dev/null; then
	export PYTHONPATH=$T/b/py${PYTHONPATH:+:$PYTHONPATH}
	python3 -c 'import kernels_data' 2>/dev/null || export PYTHONPATH=$PYTHONPATH:$SHIM
fi
export HF_HUB_DISABLE_XET=1 PYTHONUNBUFFERED=1
unset HF_TOKEN HF_HUB_OFFLINE KERNELS_CACHE LOCAL_KERNELS
locks() {	# locks A|B -> the lock of khub-demo/relu version 1 as JSON
	HF_ENDPOINT=http://127.0.0.1:${PORT[$1]} HF_HUB_CACHE=$T/hf-$1 HF_HOME=$T/hfh-$1 python3 -c '
import json
from kernels.lockfile import get_kernel_locks
l = get_kernel_locks("khub-demo/relu", 1)
print(json.dumps({"sha": l.sha, "variants": {k: v.hash for k, v in sorted(l.variants.items())}}, sort_keys=True))'
}
la=$(locks A 2>"$T/locks-A.log"); lb=$(locks B 2>"$T/locks-B.log")
echo "   lock against A: $la"
echo "   lock against B: $lb"
[ -n "$la" ] && [ "$la" = "$lb" ] && pass "kernels get_kernel_locks(khub-demo/relu, 1): A == B" ||
	fail "locks differ or failed: $(tail -3 "$T/locks-B.log")"
SHA=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["sha"])' "$lb" 2>/dev/null)
[ "$SHA" = "$sha_v1" ] && pass "the lock's sha is A's v1 commit" || fail "lock sha $SHA, A's v1 $sha_v1"

HF_ENDPOINT=http://127.0.0.1:${PORT[B]} HF_HUB_CACHE=$T/hf-load HF_HOME=$T/hfh-load \
	EXPECT_SHA=$SHA EXPECT_WEIGHTS=$WEIGHTS_SHA256 python3 - >"$T/load.log" 2>&1 <<'PY'
import os, torch
from kernels import get_kernel
ok = True
def check(name, cond, why=""):
    global ok
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else ": " + why), flush=True)
    ok &= bool(cond)
dev = "cuda" if torch.cuda.is_available() else "cpu"
k = get_kernel("khub-demo/relu", version=1)
check("get_kernel(version=1) against B loads branch v1", k.BRANCH == "v1", k.BRANCH)
x = torch.tensor([-1.0, 0.0, 2.5], device=dev)
check(f"its relu runs on {dev}", k.relu(x).tolist() == [0.0, 0.0, 2.5], str(k.relu(x).tolist()))
check("its LFS weights are byte-identical", k.WEIGHTS_SHA256 == os.environ["EXPECT_WEIGHTS"], k.WEIGHTS_SHA256)
k2 = get_kernel("khub-demo/relu", revision=os.environ["EXPECT_SHA"])
check("get_kernel(revision=locked sha) against B", k2.BRANCH == "v1", k2.BRANCH)
raise SystemExit(0 if ok else 1)
PY
rc=$?
cat "$T/load.log"
[ $rc -eq 0 ] || FAILS=$((FAILS + 1))
echo "== summary: harness failures $FAILS"
[ "$FAILS" -eq 0 ] && echo "RESULT PASS" || echo "RESULT FAIL"
[ "$FAILS" -eq 0 ]
