#!/bin/bash
# t0202-source-url-credentials.sh -- a password in an external source URL
# is never shown (docs/build-farm.md, "External sources"): a URL with
# user:password@ is refused without repeating it, whether its fetch would
# work or fail; no build answer, error or log line holds it (a row queued
# before the rule included, read anonymously); a host that wants
# credentials gets the server's, from the netrc file named by
# build_source_credentials.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
V=torch211-cxx11-cpu-x86_64-linux
SECRET=hunter2-s3cr3t-pw
log=$TEST_DIR/setup.log
khub admin user create alice >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
ALICE_READ=$(khub admin token create alice --scope read 2>>"$log" | tail -n 1)
printf 'machine 127.0.0.1\nlogin alice\npassword %s\n' "$ALICE_READ" >"$TEST_DIR/netrc"
chmod 600 "$TEST_DIR/netrc"
export KHUB_BUILD_SOURCE_ALLOW=127.0.0.1 KHUB_BUILD_SOURCE_CREDENTIALS=$TEST_DIR/netrc
khub_start

B=$TEST_DIR/b
api() {
	local args=(-s -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
b64() { base64 -w0 "$@"; }
TOML='[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
files=$(printf '{"path":"build.toml","content":"%s","encoding":"base64"}' "$(printf "$TOML" | b64)")
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"type\":\"kernel\",\"files\":[$files]}"
is "$ST" 200 "alice/relu (a public kernel repo: anyone reads its builds)"
api "$ALICE" POST /api/repos/create "{\"name\":\"upstream\",\"type\":\"model\",\"private\":true,\"files\":[$files]}"
is "$ST" 200 "alice/upstream: a private git source only alice's credentials fetch"
HOSTPORT=${KHUB_URL#http://}

# ---- a URL with credentials: refused, never repeated ------------------------------------------
for url in "http://alice:$SECRET@$HOSTPORT/alice/upstream" "http://alice:$SECRET@$HOSTPORT/alice/nothing-here" \
	"http://$SECRET@$HOSTPORT/alice/upstream"; do
	api "$ALICE" POST /api/kernels/alice/relu/builds "{\"source\":{\"url\":\"$url\",\"revision\":\"main\"},\"variants\":[\"$V\"]}"
	is "$ST" 400 "enqueue from ${url/$SECRET/<password>} → 400"
	like "$(jq -r .error "$B")" "must not hold credentials" "… saying why"
	ok "$(grep -qF "$SECRET" "$B"; [ $? -eq 1 ]; echo $?)" "… and the answer does not hold the password"
done
api "" GET /api/kernels/alice/relu/builds
is "$ST $(jq '.builds | length' "$B")" "200 0" "nothing was queued"

# ---- the server's credentials, from build_source_credentials ----------------------------------
api "$ALICE" POST /api/kernels/alice/relu/builds "{\"source\":{\"url\":\"$KHUB_URL/alice/upstream\",\"revision\":\"main\"},\"variants\":[\"$V\"]}"
is "$ST" 202 "enqueue from the private upstream's plain URL → 202: the fetch used the netrc file's credentials"
JOB=$(jq -r '.builds[0].id' "$B")
is "$(jq -r '.builds[0].source.url' "$B")" "$KHUB_URL/alice/upstream" "… the job shows the URL as given"
api "$ALICE" POST /api/repos/create "{\"name\":\"upstream2\",\"type\":\"model\",\"private\":true,\"files\":[$files]}"
printf 'machine 127.0.0.1\nlogin alice\npassword wrong\n' >"$TEST_DIR/netrc"	# read at each fetch
api "$ALICE" POST /api/kernels/alice/relu/builds "{\"source\":{\"url\":\"$KHUB_URL/alice/upstream2\",\"revision\":\"main\"},\"variants\":[\"$V\"]}"
is "$ST" 422 "with a wrong password in the file, another private upstream cannot be fetched (422): the file's credentials are what fetched it"

# ---- a row queued before the rule: shown without its userinfo ---------------------------------
PSQL=(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -qAt)
"${PSQL[@]}" -c "UPDATE builds SET source_url = 'http://alice:$SECRET@$HOSTPORT/alice/upstream' WHERE id = $JOB" >>"$log" 2>&1
is "$("${PSQL[@]}" -c "SELECT count(*) FROM builds WHERE source_url LIKE '%$SECRET%'")" 1 "(a job's row now holds a URL with a password)"
api "" GET "/api/builds/$JOB"
is "$ST $(jq -r .source.url "$B")" "200 http://$HOSTPORT/alice/upstream" "anonymous GET /api/builds/{id}: source.url without its userinfo"
ok "$(grep -qF "$SECRET" "$B"; [ $? -eq 1 ]; echo $?)" "… nowhere in the answer"
api "" GET /api/kernels/alice/relu/builds
ok "$(grep -qF "$SECRET" "$B"; [ $? -eq 1 ]; echo $?)" "anonymous list of the repo's builds: no password"
curl -s -o "$B" "$KHUB_URL/api/builds/$JOB/log"
ok "$(grep -qF "$SECRET" "$B"; [ $? -eq 1 ]; echo $?)" "anonymous build log: no password"

# ---- and never in the server's log (the failed fetch's line included) --------------------------
ok "$(grep -qF "$SECRET" "$TEST_DIR/server.log"; [ $? -eq 1 ]; echo $?)" "the server's log never holds the password"
done_testing
