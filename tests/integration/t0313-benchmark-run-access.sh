#!/bin/bash
# t0313-benchmark-run-access.sh -- who may queue benchmark jobs by hand:
# POST /api/kernels/{ns}/{name}/benchmarks/run decides as POST …/builds
# does (a writer of the repo with a write token): anonymous, a revoked
# token, a non-member, a read-scoped token are refused with the same
# status as there (404 for a private repo to outsiders), and none of them
# queues anything; a writer gets an answer about the repo (422: nothing
# published yet); with the builds table gone the answer is a 5xx, never
# a 4xx.
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup
khub_accounts	# alice, admin of acme, $ALICE
log=$TEST_DIR/setup.log
khub admin user create bob >>"$log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
ALICE_READ=$(khub admin token create alice --token-name ro --scope read 2>>"$log" | tail -n 1)
REVOKED=$(khub admin token create alice --token-name gone --scope write 2>"$TEST_DIR/revoked.err" | tail -n 1)
[[ "$REVOKED" == hf_* ]] || bail "no token to revoke"
khub admin token revoke "$(sed -n 's/^token id \([0-9]*\) .*/\1/p' "$TEST_DIR/revoked.err")" >>"$log" 2>&1 ||
	bail "revoking a token failed"
khub_start

B=$TEST_DIR/b
call() {	# call TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch-noarch]\n' \
	>"$TEST_DIR/build.toml"
TOML=$(base64 -w0 "$TEST_DIR/build.toml")
for r in relu:false secret:true; do
	call "$ALICE" POST /api/repos/create "{\"name\":\"${r%%:*}\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":${r##*:},\"files\":[{\"path\":\"build.toml\",\"content\":\"$TOML\",\"encoding\":\"base64\"}]}"
	is "$ST" 200 "acme/${r%%:*} created (private: ${r##*:})"
done
# nothing a refused caller does may queue a job (no worker: builds would stay queued)
call "$ALICE" PUT /api/kernels/acme/relu/settings '{"buildOnPush": false}'
call "$ALICE" PUT /api/kernels/acme/secret/settings '{"buildOnPush": false}'

# ---- refused callers: as POST …/builds decides -------------------------------------------------------
refused() {	# refused NAME TOKEN REPO WANT
	call "$2" POST "/api/kernels/acme/$3/builds" '{"revision":"main"}'
	local builds=$ST
	call "$2" POST "/api/kernels/acme/$3/benchmarks/run" '{}'
	is "$ST $builds" "$4 $4" "$1 × acme/$3: benchmarks/run → $4, as POST …/builds"
}
refused "anonymous" "" relu 401
refused "anonymous" "" secret 401
refused "a revoked token" "$REVOKED" relu 401
refused "a non-member (write token)" "$BOB" relu 403
refused "a non-member (write token)" "$BOB" secret 404
refused "alice's read-scoped token" "$ALICE_READ" relu 403
refused "alice's read-scoped token" "$ALICE_READ" secret 403
call "$ALICE" GET "/api/kernels/acme/relu/builds?limit=1000"
is "$(jq '.builds | length' "$B")" 0 "none of them queued anything"

# ---- a writer -------------------------------------------------------------------------------------
call "$ALICE" POST /api/kernels/acme/secret/benchmarks/run '{}'
is "$ST" 422 "alice (writer) × acme/secret: 422, nothing published to benchmark yet"
like "$(jq -r .error "$B")" "published no variant" "… saying why"
call "$ALICE" POST /api/kernels/acme/secret/benchmarks/run '{"commit": "no-such-branch"}'
is "$ST" 404 "a commit that names nothing → 404"
call "$ALICE" POST /api/kernels/acme/secret/benchmarks/run '[1]'
is "$ST" 400 "a body that is no object → 400"

# ---- a database failure is a 5xx ------------------------------------------------------------------------
PSQL=(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qtAc)
"${PSQL[@]}" 'ALTER TABLE builds RENAME TO builds_away' >>"$log" 2>&1
ok $? "the builds table is taken away"
call "$ALICE" POST /api/kernels/acme/secret/benchmarks/run '{}'
like "$ST" "^5[0-9][0-9]$" "with the builds table gone, alice's request is a 5xx, not a 4xx ($ST)"
"${PSQL[@]}" 'ALTER TABLE builds_away RENAME TO builds' >>"$log" 2>&1
call "$ALICE" POST /api/kernels/acme/secret/benchmarks/run '{}'
is "$ST" 422 "the table back: 422 again"

done_testing
