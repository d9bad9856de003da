#!/usr/bin/env bash
# bench/big_commit.sh -- one NDJSON commit of many tiny files, and the first
# pages of a recursive tree listing of it, against a throw-away khub. Not part
# of the test suite. Target (security issue, item 9): 100,000 files committed
# in under 20 s on the 2-core machine, and tree pages whose time does not
# grow with the repo (first page of a 100,000-file tree ≈ the first page of a
# 1,000-file one).
#
# Environment (all optional):
#   BENCH_FILES     files in the big commit            (default 100000)
#   BENCH_SMALL     files in the small reference repo  (default 1000)
#   BENCH_RELEASE_BUILD  auto|1|0, as in read_path.sh (default auto)
#   KHUB_BIN        the khub binary (default ./khub)

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FILES=${BENCH_FILES:-100000}
SMALL=${BENCH_SMALL:-1000}
export KHUB_LOG_LEVEL=${KHUB_LOG_LEVEL:-warn}
# shellcheck source=../tests/lib/khub-test.sh
. "$ROOT/tests/lib/khub-test.sh"
khub_setup
. "$ROOT/bench/lib/release_build.sh"
bench_release_build

khub admin user create bench >/dev/null 2>&1
TOKEN=$(khub admin token create bench --scope write 2>/dev/null | tail -n 1)
khub_start
auth=(-H "Authorization: Bearer $TOKEN")
for repo in big small; do
	curl -sf "${auth[@]}" -H 'Content-Type: application/json' \
		-d "{\"name\":\"$repo\",\"organization\":\"bench\",\"type\":\"kernel\"}" \
		"$KHUB_URL/api/repos/create" >/dev/null || { echo "cannot create bench/$repo" >&2; exit 1; }
done

make_body() {	# make_body N FILE: header + N inline files in 100 folders
	python3 - "$1" "$2" <<'PY'
import base64, json, sys
n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    f.write(json.dumps({"key": "header", "value": {"summary": "many files", "description": ""}}) + "\n")
    for i in range(n):
        content = base64.b64encode(f"file {i}\n".encode()).decode()
        f.write(json.dumps({"key": "file", "value": {"path": f"d{i % 100:02d}/sub{i % 7}/f{i:06d}.txt",
                                                     "content": content, "encoding": "base64"}}) + "\n")
PY
}

commit() {	# commit REPO BODY -> seconds
	local t0 t1 status
	t0=$(date +%s.%N)
	status=$(curl -s -o "$TEST_DIR/commit.out" -w '%{http_code}' "${auth[@]}" \
		-H 'Content-Type: application/x-ndjson' --data-binary @"$2" \
		"$KHUB_URL/api/kernels/bench/$1/commit/main")
	t1=$(date +%s.%N)
	[ "$status" = 200 ] || { echo "commit to bench/$1: HTTP $status $(head -c 300 "$TEST_DIR/commit.out")" >&2; exit 1; }
	python3 -c "print(f'{$t1 - $t0:.2f}')"
}

page_ms() {	# page_ms REPO [QUERY] -> ms of the first (uncached: pages of a sha are cached) recursive listing
	curl -s -o /dev/null -w '%{time_total}\n' "$KHUB_URL/api/kernels/bench/$1/tree/main?recursive=true${2:-}" |
		python3 -c 'import sys; print(f"{float(sys.stdin.read())*1000:.1f}")'
}

make_body "$SMALL" "$TEST_DIR/small.ndjson"
make_body "$FILES" "$TEST_DIR/big.ndjson"
small_s=$(commit small "$TEST_DIR/small.ndjson")
big_s=$(commit big "$TEST_DIR/big.ndjson")
small_ms=$(page_ms small)
big_ms=$(page_ms big)
late_ms=$(page_ms big "&cursor=d97/sub3/f099997.txt")
deep_ms=$(curl -s -o /dev/null -w '%{time_total}\n' "$KHUB_URL/api/kernels/bench/big/tree/main/d42?recursive=true" |
	python3 -c 'import sys; print(f"{float(sys.stdin.read())*1000:.1f}")')

echo "# khub: $KHUB_BUILD"
printf '%-46s %10s\n' "measure" "value"
printf '%-46s %10s\n' "commit of $SMALL files (s)" "$small_s"
printf '%-46s %10s  %s\n' "commit of $FILES files (s)" "$big_s" \
	"$(python3 -c "print('PASS (< 20 s)' if $big_s < 20 else 'MISS (target < 20 s)')")"
printf '%-46s %10s\n' "first tree page, $SMALL files (ms)" "$small_ms"
printf '%-46s %10s  %s\n' "first tree page, $FILES files (ms)" "$big_ms" \
	"$(python3 -c "print('PASS (< 50 ms)' if $big_ms < 50 else 'MISS (target < 50 ms)')")"
big2_ms=$(page_ms big "&limit=999")
printf '%-46s %10s\n' "again, other limit (the pack index is warm) (ms)" "$big2_ms"
printf '%-46s %10s\n' "a page near the end of $FILES files (ms)" "$late_ms"
printf '%-46s %10s\n' "first page of one folder, recursive (ms)" "$deep_ms"
