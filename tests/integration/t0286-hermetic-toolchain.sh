#!/bin/bash
# t0286-hermetic-toolchain.sh -- a toolchain with a "root": the build farm
# builds in an unpacked Debian 11 (bullseye) root file system, made with
# debootstrap (tests/lib/debian-root.sh, cached under /var/cache/khub-tests)
# with its gcc, python3 and python3-torch. With abi_policy = enforce and
# abi_manylinux = 2_31, examples/relu's CPU variant built in that root links
# nothing newer than GLIBC_2.31 (checked again with readelf on the published
# library) and is published; the same kernel built with the host's toolchain
# (Debian 12) needs GLIBC_2.32 or newer and is refused, the build's error
# and its ABI report naming the symbols. The probe runs inside the root, and
# the root's digest, registered with the worker's toolchains, is in the
# build record's report.
. "$(dirname "$0")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
command -v bwrap >/dev/null || { echo "1..0 # SKIP bubblewrap is not installed"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP debootstrap needs root"; exit 0; }
/usr/bin/python3 -c 'import torch, tomllib' 2>/dev/null ||
	{ echo "1..0 # SKIP the host's python3-torch (the toolchain compared with the root's) is not installed"; exit 0; }
WORKER_BIN=${KHUB_WORKER_BIN:-$(dirname "$KHUB_BIN")/khub-worker}
[ -x "$WORKER_BIN" ] || bail "khub-worker not built ($WORKER_BIN)"
KSRC=$KHUB_SRC/examples/relu

PKGS="gcc g++ python3 python3-dev python3-torch python3-toml libtorch-dev"
# shellcheck disable=SC2086
ROOT=$("$KHUB_SRC/tests/lib/debian-root.sh" bullseye $PKGS 2>/tmp/khub-t0286-root.$$)
rc=$?
why=$(tail -1 /tmp/khub-t0286-root.$$)
sed 's/^#*/#/' /tmp/khub-t0286-root.$$
rm -f /tmp/khub-t0286-root.$$
[ $rc = 77 ] && { echo "1..0 # SKIP no Debian bullseye root: $why"; exit 0; }
[ $rc = 0 ] && [ -d "$ROOT/usr" ] || bail "building the bullseye root failed: $why"

khub_setup
export KHUB_ABI_POLICY=enforce KHUB_ABI_MANYLINUX=2_31
W=$TEST_DIR/worker
mkdir -p "$W/work" "$TEST_DIR/readme"
cat >"$W/toolchains.json" <<EOF
{"toolchains": [{"name": "bullseye", "root": "$ROOT", "python": "/usr/bin/python3", "cxx": "g++"},
                {"name": "host", "python": "/usr/bin/python3", "cxx": "g++"}]}
EOF

# ---- the probe runs in the root ---------------------------------------------------------------------
"$WORKER_BIN" --check --toolchains "$W/toolchains.json" >"$W/check.out" 2>&1
sed 's/^/#   /' "$W/check.out"
section() { awk -v name="$1:" '$1 == name { on = 1; print; next } /^[^ ]/ { on = 0 } on' "$W/check.out"; }
BULLSEYE=$(section bullseye)
HOST=$(section host)
like "$BULLSEYE" '^bullseye: torch 1\.7\.' "the root's toolchain is probed inside it: bullseye's torch 1.7"
DIGEST=$(grep -oE "root $ROOT, sha256:[0-9a-f]{64}" <<<"$BULLSEYE" | sed 's/.*, //')
like "$DIGEST" '^sha256:[0-9a-f]{64}$' "--check names the root and its digest"
VB=$(grep -oE 'torch[0-9]+-cxx[0-9a-z]+-cpu-x86_64-linux' <<<"$BULLSEYE" | head -1)
VH=$(grep -oE 'torch[0-9]+-cxx[0-9a-z]+-cpu-x86_64-linux' <<<"$HOST" | head -1)
like "$VB/$VH" '^torch17-.*/torch[0-9]+-' "the root builds $VB, the host $VH"
[ -n "$VB" ] && [ -n "$VH" ] && [ "$VB" != "$VH" ] || bail "no two distinct CPU variants to build"
like "$BULLSEYE" 'sandbox bubblewrap: .*namespaces: user own, pid own, net own' "the root's builds get the whole sandbox"

# ---- the farm: one worker, both variants ---------------------------------------------------------------
khub_accounts
TOKEN=$(khub admin worker add w1 2>/dev/null | tail -n 1)
[ -n "$TOKEN" ] || bail "khub admin worker add failed"
printf '%s\n' "$TOKEN" >"$W/w1.token"
chmod 600 "$W/w1.token"
printf '# relu\n' >"$TEST_DIR/readme/README.md"
khub import "$TEST_DIR/readme" --repo acme/relu --branch main >/dev/null 2>>"$TEST_DIR/import.log"
khub_start
worker() {
	"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" \
		--name w1 --work-dir "$W/work" "$@" 2>>"$W/w1.log"
}
worker --once
is "$?" 0 "the worker registers its two toolchains"
AUTH=(-H "Authorization: Bearer $ALICE")
api PUT /api/kernels/acme/relu/settings "${AUTH[@]}" -H 'Content-Type: application/json' -d '{"buildOnPush": false}'
is "$STATUS" 200 "buildOnPush off: the test enqueues its builds"

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
git clone -q "http://alice:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu" "$TEST_DIR/clone" 2>"$TEST_DIR/git.err" ||
	bail "git clone failed: $(cat "$TEST_DIR/git.err")"
cd "$TEST_DIR/clone" || bail "no clone"
cp -r "$KSRC"/. .
git add -A >/dev/null && git commit -qm "relu source" && git push -q origin main 2>"$TEST_DIR/git.err"
ok $? "git push of examples/relu" || sed 's/^/#   /' "$TEST_DIR/git.err"
SHA=$(git rev-parse HEAD)
cd "$TEST_DIR" || bail "no test dir"
api POST /api/kernels/acme/relu/builds "${AUTH[@]}" -H 'Content-Type: application/json' \
	-d "{\"revision\": \"$SHA\", \"variants\": [\"$VB\", \"$VH\"]}"
IDB=$(jq -r --arg v "$VB" '.builds[] | select(.variant == $v) | .id' "$B")
IDH=$(jq -r --arg v "$VH" '.builds[] | select(.variant == $v) | .id' "$B")
like "$IDB/$IDH" '^[0-9]+/[0-9]+$' "builds #$IDB ($VB) and #$IDH ($VH) enqueued" || sed 's/^/#   /' "$B"
worker --once
is "$?" 0 "the worker builds both and the queue runs dry"
sed -n '/bullseye\|host\|refused\|published/p' "$W/w1.log" | tail -6 | sed 's/^/#   /'

# ---- built in the root: GLIBC_2.31 at most, published --------------------------------------------------
api GET "/api/builds/$IDB" "${AUTH[@]}"
cp "$B" "$TEST_DIR/build-root.json"
is "$(jq -r .state "$B")" succeeded "the root's build #$IDB succeeded"
is "$(jq -r .abi_report.manylinux "$B")" manylinux_2_31 "its ABI report checked manylinux_2_31"
NEWEST=$(jq -r .abi_report.glibc.newest "$B")
like "$NEWEST" '^2\.([0-9]|[12][0-9]|3[01])$' "the newest glibc its symbols need is $NEWEST (<= 2.31)"
is "$(jq -r .abi_report.glibc.passes "$B")" true "the report says it passes the target"
is "$(jq -r .abi_report.build.toolchain.root_digest "$B")" "$DIGEST" "the build record names the root's digest"
api GET "/api/kernels/acme/relu/tree/v1/build/$VB" "${AUTH[@]}"
SO=$(jq -r '.[].path | select(endswith(".so"))' "$B" | head -1)
like "$SO" "^build/$VB/_relu_.*\.so$" "published on v1: $SO"
curl -sf "${AUTH[@]}" -o "$TEST_DIR/root.so" "$KHUB_URL/kernels/acme/relu/resolve/v1/$SO"
MAXV=$(readelf -V --wide "$TEST_DIR/root.so" 2>/dev/null | grep -oE 'GLIBC_2\.[0-9]+' | sort -t. -k2,2n | tail -1)
like "$MAXV" '^GLIBC_2\.([0-9]|[12][0-9]|3[01])$' "readelf: the published library needs $MAXV at most"

# ---- the same kernel with the host's toolchain: refused under enforce ---------------------------------
api GET "/api/builds/$IDH" "${AUTH[@]}"
cp "$B" "$TEST_DIR/build-host.json"
STATE=$(jq -r .state "$B")
ok "$([ "$STATE" != succeeded ] && [ "$(jq -r .published "$B")" = null ]; echo $?)" \
	"the host's build #$IDH is not published (state $STATE)"
ERR=$(jq -r .error "$B")
like "$ERR" 'newer than manylinux_2_31 allows.*@GLIBC_2\.(3[2-9]|[4-9][0-9])' "its error names the symbols over 2.31: $ERR"
like "$(jq -r .abi_report.glibc.newest "$B")" '^2\.(3[2-9]|[4-9][0-9])$' "its report: the newest glibc needed is over 2.31"
is "$(jq -r .abi_report.glibc.passes "$B")" false "and it does not pass the target"
like "$(jq -r '.abi_report.glibc.needs | join(" ")' "$B")" '@GLIBC_2\.(3[2-9]|[4-9][0-9])' \
	"the report lists each symbol with the glibc it needs"
like "$(jq -r .abi_report.text "$B")" 'needs [^ ]+@GLIBC_2\.(3[2-9]|[4-9][0-9])' "the report's text names them too"
is "$(jq -r '.abi_report.build.toolchain.root // "none"' "$B")" none "the host's build has no root"

khub_teardown
done_testing
