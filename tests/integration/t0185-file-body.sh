#!/bin/bash
# t0185-file-body.sh -- an LFS file's body goes out in sendfile calls of up to
# 2 MiB (http/file_body.c widens libmicrohttpd's 128 KiB calls and leaves it
# the last 128 KiB): every byte is right for the whole file and for ranges
# that start, end and straddle those edges, several downloads in a row on one
# keep-alive connection each come whole, and a 20 MiB download takes a few
# dozen sendfile calls where libmicrohttpd alone makes 160. Every file body
# is made by http_file_response (an unregistered one would still be right,
# in 128 KiB calls).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }
# the tracked sources (a build directory may hold copies of the tree)
hits=$(cd "$KHUB_SRC" && { git ls-files '*.c' 2>/dev/null || find . -name '*.c' -not -path './build*'; } |
	sed 's|^\./||' | xargs grep -n 'MHD_create_response_from_fd' | grep -v '^http/file_body.c:')
is "$hits" "" "every file body is made by http_file_response (http/file_body.c)"

khub_setup
khub admin org create acme >/dev/null 2>&1
KHUB_THREADS=2 khub_start

S=$TEST_DIR/src
make_kernel_tree "$S" relu
F=$S/build/torch-cpu/big.bin
SIZE=$((20 * 1024 * 1024 + 12345))
head -c "$SIZE" /dev/urandom >"$F"
khub import "$S" --repo acme/relu --branch main >/dev/null 2>"$TEST_DIR/import.err" || bail "import failed"
SHA=$(curl -sf "$KHUB_URL/api/kernels/acme/relu/revision/main" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
like "$SHA" '^[0-9a-f]{40}$' "imported acme/relu with a 20 MiB LFS file"
U="$KHUB_URL/kernels/acme/relu/resolve/$SHA/build/torch-cpu/big.bin"

# ---- the whole file ---------------------------------------------------------------
curl -sf "$U" -o "$TEST_DIR/whole"
ok "$(cmp -s "$F" "$TEST_DIR/whole"; echo $?)" "the whole file, byte for byte"

# ---- ranges around the 128 KiB and 2 MiB edges, at the start and at the end --------
# "FROM-TO" (TO empty: to the end; FROM empty: the last TO bytes), then 8 at random
K=131072 M=2097152
/usr/bin/python3 - "$SIZE" "$K" "$M" >"$TEST_DIR/ranges" <<'EOF'
import random, sys
size, k, m = (int(a) for a in sys.argv[1:])
fixed = [(0, 0), (0, k - 1), (0, k), (0, 2 * k), (0, 2 * k + 1), (0, m + k), (1, m + k + 1),
         (k - 1, 5 * m + 3), (m - 1, size - 2), (size - 2 * k - 1, size - 1), (size - 2 * k, size - 1),
         (size - 2 * k + 1, None), (size - k - 1, size - 1), (size - k, None), (size - 1, None),
         (7777777, None), (None, 300000), (None, 2 * k + 1)]
rnd = random.Random(185)
for _ in range(8):
    a = rnd.randrange(size)
    fixed.append((a, rnd.randrange(a, size)))
for a, b in fixed:
    print(f"{'' if a is None else a}-{'' if b is None else b}")
EOF
bad=0 n=0
while read -r r; do
	n=$((n + 1))
	curl -sf -H "Range: bytes=$r" "$U" -o "$TEST_DIR/part" -D "$TEST_DIR/part.h" || { bad=$((bad + 1)); echo "# $r: curl failed"; continue; }
	/usr/bin/python3 - "$F" "$r" "$TEST_DIR/part" "$TEST_DIR/part.h" <<'EOF' || bad=$((bad + 1))
import os, sys
path, spec, got_path, head_path = sys.argv[1:]
size = os.path.getsize(path)
a, b = spec.split("-")
if a == "":
    start, end = size - int(b), size - 1
else:
    start, end = int(a), (size - 1 if b == "" else int(b))
with open(path, "rb") as f:
    f.seek(start)
    want = f.read(end - start + 1)
got = open(got_path, "rb").read()
head = open(head_path, "rb").read().decode("latin-1").lower()
if got != want or f"content-range: bytes {start}-{end}/{size}" not in head or " 206 " not in head.split("\r\n")[0] + " ":
    print(f"# {spec}: {len(got)} bytes, want {len(want)} from {start}; headers: {head.splitlines()[:1]}")
    sys.exit(1)
EOF
done <"$TEST_DIR/ranges"
is "$bad/$n" "0/26" "26 ranges at and across the sendfile call edges: 206, the right Content-Range, the right bytes"

# ---- one keep-alive connection: whole, a range, whole again --------------------------
curl -sf -w '%{num_connects}\n' "$U" -o "$TEST_DIR/k1" -H 'X-Probe: 1' \
	--next -sf -w '%{num_connects}\n' -H "Range: bytes=$((K + 7))-$((3 * M))" "$U" -o "$TEST_DIR/k2" \
	--next -sf -w '%{num_connects}\n' "$U" -o "$TEST_DIR/k3" >"$TEST_DIR/connects"
is "$(tr '\n' ' ' <"$TEST_DIR/connects")" "1 0 0 " "three downloads on one connection"
ok "$(cmp -s "$F" "$TEST_DIR/k1" && cmp -s "$F" "$TEST_DIR/k3"; echo $?)" "... both whole downloads byte for byte"
ok "$(cmp -s <(tail -c +$((K + 8)) "$F" | head -c $((3 * M - K - 6))) "$TEST_DIR/k2"; echo $?)" "... and the range between them"

# ---- how many sendfile calls a download takes -----------------------------------------
skip3() { for d in "a traced download" "its sendfile calls" "2 MiB calls"; do ok 0 "$d # SKIP $1"; done; }
if command -v strace >/dev/null 2>&1; then
	strace -f -e trace=sendfile -o "$TEST_DIR/strace.out" -p "$KHUB_PID" 2>"$TEST_DIR/strace.err" &
	STRACE=$!
	for _ in $(seq 100); do
		grep -q 'attached' "$TEST_DIR/strace.err" 2>/dev/null && break
		kill -0 "$STRACE" 2>/dev/null || break
		sleep 0.1
	done
	if grep -q 'attached' "$TEST_DIR/strace.err" 2>/dev/null; then
		sleep 0.5	# every thread attached
		curl -sf "$U" -o "$TEST_DIR/traced"
		kill "$STRACE" 2>/dev/null
		wait "$STRACE" 2>/dev/null
		calls=$(grep -c 'sendfile(' "$TEST_DIR/strace.out")
		wide=$(grep -c 'sendfile(.*, 2097152)' "$TEST_DIR/strace.out")
		ok "$(cmp -s "$F" "$TEST_DIR/traced"; echo $?)" "a download while traced: byte for byte"
		ok "$([ "$calls" -gt 0 ] && [ "$calls" -le 40 ]; echo $?)" "20 MiB in $calls sendfile calls (libmicrohttpd's 128 KiB alone: 160)"
		ok "$([ "$wide" -ge 5 ]; echo $?)" "... $wide of them asking for 2 MiB"
	else
		kill "$STRACE" 2>/dev/null
		wait "$STRACE" 2>/dev/null
		diag "strace could not trace khub here: $(head -c 300 "$TEST_DIR/strace.err")"
		skip3 "strace cannot attach here"
	fi
else
	skip3 "strace not installed"
fi

khub_stop
done_testing
