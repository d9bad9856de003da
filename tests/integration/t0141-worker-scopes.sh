#!/bin/bash
# t0141-worker-scopes.sh -- what a worker token may build (docs/build-farm.md,
# "Worker scopes"): a token scoped to public repos cannot claim a private
# repo's job, fetch its source, heartbeat, log, fail, release or upload an
# output for it, even with the job id guessed; a token scoped to a repo gets
# only that repo's jobs; a repo turned private after queueing, or a scope
# narrowed, takes the job back from the worker holding it; rotation (old
# token 401 at once, new one works, jobs and history kept); a worker token
# cannot sign in to the web UI nor use a user route (never a 5xx); the
# lease timer takes jobs back without waiting for the worker; the
# queue limits (variants per request, jobs per repo and per user: 429 with
# Retry-After and nothing queued) and the claim's round robin by repo.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

V=()
for t in 10 11 12 13 14 15 16 17 18 19; do V+=("torch2$t-cxx11-cpu-x86_64-linux"); done
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "${V[0]}" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json KHUB_BUILD_LEASE_SECONDS=600 KHUB_BUILD_HEARTBEAT_SECONDS=5 \
	KHUB_BUILD_QUEUE_PER_REPO=5 KHUB_BUILD_QUEUE_PER_USER=7 KHUB_BUILD_VARIANTS_PER_REQUEST=6 \
	KHUB_BUILD_LEASE_CHECK_MS=600000	# the heartbeats below find the jobs taken back, not the timer
log=$TEST_DIR/setup.log
for u in alice bob carol dave; do khub admin user create $u >>"$log" 2>&1; done
khub admin org create acme >>"$log" 2>&1
khub admin member set acme alice admin >>"$log" 2>&1
tok() { khub admin token create "$@" 2>>"$log" | tail -n 1; }
ALICE=$(tok alice --scope write) ALICE_RO=$(tok alice --scope read) BOB=$(tok bob --scope write)
CAROL=$(tok carol --scope write) DAVE=$(tok dave --scope write)
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
# api TOKEN METHOD PATH [BODY] -> $ST (status), body in $B
api() {
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
j() { jq -rc "$1" "$B" 2>/dev/null; }	# j JQ-FILTER: on the last body
hdr() { header "$@"; }	# tests/lib/khub-test.sh
sql() { psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "$1"; }
b64() { printf '%s' "$1" | base64 -w0; }
# mkrepo TOKEN NS NAME private(true|false)
mkrepo() {
	local org="" toml='[general]\nname = "kk"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
	[ "$2" = acme ] && org=",\"organization\":\"acme\""
	api "$1" POST /api/repos/create "{\"name\":\"$3\"$org,\"type\":\"kernel\",\"private\":$4,\"files\":[{\"path\":\"build.toml\",\"content\":\"$(b64 "$(printf "$toml")")\",\"encoding\":\"base64\"}]}"
	is "$ST" 200 "$2/$3 created (private: $4)"
}
mkrepo "$ALICE" acme secret true
mkrepo "$ALICE" acme pub false
mkrepo "$BOB" bob other false
mkrepo "$CAROL" carol flood false
mkrepo "$CAROL" carol flood2 false
mkrepo "$DAVE" dave one false

# ---- khub admin worker add with scopes ------------------------------------------------
PUB=$(khub admin worker add pub 2>>"$log" | tail -n 1)
PRIV=$(khub admin worker add priv --org acme --private 2>>"$log" | tail -n 1)
SCOPED=$(khub admin worker add scoped --repo acme/pub 2>>"$log" | tail -n 1)
FAIR=$(khub admin worker add fair --org carol --org dave 2>>"$log" | tail -n 1)
like "$PUB $PRIV $SCOPED $FAIR" '^khw_\S{40} khw_\S{40} khw_\S{40} khw_\S{40}$' "four workers added, one token each"
khub admin worker add bad --org nosuchorg >>"$log" 2>&1
is "$?" 2 "--org of an unknown namespace is refused"
khub admin worker add bad --repo acme/nosuch >>"$log" 2>&1
is "$?" 2 "--repo of an unknown repo is refused"
khub admin worker add bad --bogus >>"$log" 2>&1
is "$?" 2 "an unknown option is refused"
list=$(khub admin worker list 2>&1)
like "$(grep '^pub' <<<"$list")" 'scope public repos only, every namespace' "worker list: pub builds public repos of every namespace"
like "$(grep '^priv' <<<"$list")" 'scope public and private repos of acme/\*' "worker list: priv builds acme's repos, private ones too"
like "$(grep '^scoped' <<<"$list")" 'scope public repos only of acme/pub' "worker list: scoped builds acme/pub only"
api "$ALICE" GET /api/admin/workers
is "$ST" 403 "GET /api/admin/workers: not for an org admin"
khub admin user create root --site-admin >>"$log" 2>&1
ROOT=$(tok root --scope write)
api "$ROOT" GET /api/admin/workers
is "$(j '[.workers[] | select(.name == "priv" or .name == "scoped") | [.name, .scope]]')" \
	'[["priv",{"orgs":["acme"],"repos":[],"private":true}],["scoped",{"orgs":[],"repos":["acme/pub"],"private":false}]]' \
	"GET /api/admin/workers shows each scope"

reg() {	# reg TOKEN: every variant, concurrency 10
	local list
	list=$(printf '"%s",' "${V[@]}")
	api "$1" POST /api/workers/register "{\"version\":\"t\",\"concurrency\":10,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[${list%,}]}]}"
}
for w in "$PUB" "$PRIV" "$SCOPED" "$FAIR"; do reg "$w"; [ "$ST" = 200 ] || bail "register: $ST $(cat "$B")"; done
claim() { api "$1" POST /api/workers/claim "{\"variants\":[$(printf '"%s",' "${V[@]}" | sed 's/,$//')]}"; }
enqueue() {	# enqueue TOKEN NS/NAME VARIANT... -> $ST, job ids in $IDS
	local list
	list=$(printf '"%s",' "${@:3}")
	api "$1" POST "/api/kernels/$2/builds" "{\"variants\":[${list%,}]}"
	IDS=$(j '[.builds[].id | tostring] | join(" ")')
}
state() { sql "SELECT state || ' ' || coalesce(w.name, '-') || ' ' || attempt FROM builds b LEFT JOIN workers w ON w.id = b.worker_id WHERE b.id = $1"; }

# ---- the stolen token: a public-only worker and a private repo's job ---------------------
enqueue "$ALICE" acme/secret "${V[0]}"
is "$ST" 202 "alice queues a build of acme/secret (private)"
JS=$IDS
claim "$PUB"
is "$ST" 204 "the public-only worker is not offered the private repo's job"
claim "$SCOPED"
is "$ST" 204 "nor is the worker scoped to acme/pub"
api "$PUB" GET /api/builds/$JS/source
is "$ST" 404 "guessed id: the public-only worker cannot fetch the private job's source (404)"
for r in heartbeat log?offset=0 fail release; do
	api "$PUB" POST "/api/builds/$JS/$r" '{}'
	is "$ST" 404 "guessed id: POST .../$r of the private job → 404"
done
printf 'a trojan' >"$TEST_DIR/trojan.tar"
st=$(curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $PUB" -H 'Content-Type: application/x-tar' \
	--data-binary @"$TEST_DIR/trojan.tar" "$KHUB_URL/api/builds/$JS/output")
is "$st" 404 "guessed id: PUT .../output of the private job → 404"
is "$(state $JS)" "queued - 0" "the private job is untouched: queued, no worker, no attempt"
claim "$PRIV"
is "$ST $(j '.build | "\(.id) \(.repo)"')" "200 $JS acme/secret" "the worker allowed acme's private repos claims it"
api "$PUB" GET /api/builds/$JS/source
is "$ST" 404 "while it runs, the public-only worker still cannot fetch its source"
st=$(curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $PUB" -H 'Content-Type: application/x-tar' \
	--data-binary @"$TEST_DIR/trojan.tar" "$KHUB_URL/api/builds/$JS/output")
is "$st" 404 "nor upload an output for it"
api "$PRIV" GET /api/builds/$JS/source
is "$ST $(hdr Content-Type)" "200 application/x-tar" "the lease holder gets the source"
is "$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/secret.git" branch --list 'v*' | wc -l)" 0 \
	"nothing was published on acme/secret"

# ---- a scoped worker only gets jobs in its scope -------------------------------------------
enqueue "$BOB" bob/other "${V[1]}"
JO=$IDS
enqueue "$ALICE" acme/pub "${V[1]}"
JP=$IDS
claim "$SCOPED"
is "$ST $(j '.build.id')" "200 $JP" "the worker scoped to acme/pub gets acme/pub's job, not bob/other's older one"
claim "$SCOPED"
is "$ST" 204 "and nothing else"
claim "$PUB"
is "$ST $(j '.build.id')" "200 $JO" "the public-only worker gets bob/other's"

# ---- a repo turned private after queueing: the public-only worker loses the job ----------
enqueue "$ALICE" acme/pub "${V[2]}"
JQ=$IDS
claim "$PUB"
is "$ST $(j '.build.id')" "200 $JQ" "the public-only worker claims acme/pub's new job"
api "$PUB" POST /api/builds/$JQ/heartbeat '{}'
is "$ST" 200 "its heartbeat passes while acme/pub is public"
api "$ALICE" PUT /api/kernels/acme/pub/settings '{"private": true}'
is "$ST" 200 "alice turns acme/pub private"
api "$PUB" POST /api/builds/$JQ/heartbeat '{}'
is "$ST $(j '.state')" "409 queued" "its next heartbeat: 409, the job was taken back (the worker stops)"
like "$(j '.error')" "scope no longer covers" "the answer says why"
is "$(state $JQ)" "queued - 0" "the job is queued again, its attempt not counted"
api "$PUB" GET /api/builds/$JQ/source
is "$ST" 404 "the public-only worker can no longer fetch its source"
api "$PUB" POST /api/builds/$JQ/log?offset=0 'x'
is "$ST" 404 "nor append to its log"
api "$SCOPED" POST /api/builds/$JP/heartbeat '{}'
is "$ST $(j '.state')" "409 queued" "the worker scoped to acme/pub (public only) loses its acme/pub job too"
api "$ALICE" GET /api/builds/$JQ
like "$(j '.error')" "taken back from worker pub" "the job's error says which worker lost it"
claim "$PRIV"
is "$ST $(j '.build.repo')" "200 acme/pub" "the worker allowed acme's private repos claims it"

# ---- a narrowed scope takes jobs back at once ---------------------------------------------
out=$(khub admin worker scope priv --org bob 2>&1)
like "$out" "taken back" "khub admin worker scope priv --org bob: its acme jobs are taken back"
is "$(state $JS)" "queued - 0" "acme/secret's job is queued again"
api "$PRIV" POST /api/builds/$JS/heartbeat '{}'
is "$ST" 404 "priv's heartbeat of it: 404 (out of its scope now)"
khub admin worker scope priv --org acme --private >>"$log" 2>&1

# ---- rotation --------------------------------------------------------------------------------
claim "$PUB"
is "$ST" 204 "pub has nothing new to claim"
api "$PUB" POST /api/builds/$JO/heartbeat '{}'
is "$ST" 200 "pub heartbeats bob/other's job with its token"
NEW=$(khub admin worker rotate pub 2>>"$log" | tail -n 1)
like "$NEW" '^khw_\S{40}$' "khub admin worker rotate pub prints a new token"
api "$PUB" POST /api/builds/$JO/heartbeat '{}'
is "$ST" 401 "the old token is dead at once (401)"
claim "$PUB"
is "$ST" 401 "the old token cannot claim"
api "$NEW" POST /api/builds/$JO/heartbeat '{}'
is "$ST" 200 "the new token holds the same lease: the worker's jobs stay its own"
api "$ALICE" GET /api/builds/$JQ
is "$(sql "SELECT count(*) FROM workers WHERE name = 'pub'")" 1 "no new worker row: the history stays attached"
is "$(sql "SELECT w.name FROM builds b JOIN workers w ON w.id = b.worker_id WHERE b.id = $JO")" pub "bob/other's job is pub's"
khub admin worker rotate nosuch >>"$log" 2>&1
is "$?" 1 "rotating an unknown worker fails"

# ---- who may call the worker routes and the enqueue route -------------------------------
khub admin worker add gone >>"$log" 2>&1
GONE=$(khub admin worker rotate gone 2>>"$log" | tail -n 1)
khub admin worker remove gone >>"$log" 2>&1
for route in "POST /api/workers/claim" "POST /api/builds/$JO/heartbeat" "GET /api/builds/$JO/source" \
	"POST /api/builds/$JO/log?offset=0" "POST /api/builds/$JO/fail" "POST /api/builds/$JO/release" \
	"PUT /api/builds/$JO/output"; do
	set -- $route
	api "" "$1" "$2" '{}'
	is "$ST" 401 "anonymous × $route → 401"
	api "$ALICE" "$1" "$2" '{}'
	is "$ST" 403 "a user's write token × $route → 403"
	api "$ALICE_RO" "$1" "$2" '{}'
	is "$ST" 403 "a read token × $route → 403"
	api "$GONE" "$1" "$2" '{}'
	is "$ST" 401 "a removed worker's token × $route → 401"
	api "$PUB" "$1" "$2" '{}'
	is "$ST" 401 "a rotated-out token × $route → 401"
done
api "" POST /api/kernels/carol/flood/builds "{\"variants\":[\"${V[0]}\"]}"
is "$ST" 401 "anonymous × enqueue → 401"
api "$BOB" POST /api/kernels/carol/flood/builds "{\"variants\":[\"${V[0]}\"]}"
is "$ST" 403 "a non-member × enqueue on a public repo → 403"
api "$(tok carol --scope read)" POST /api/kernels/carol/flood/builds "{\"variants\":[\"${V[0]}\"]}"
is "$ST" 403 "the owner's read token × enqueue → 403"
api "$GONE" POST /api/kernels/carol/flood/builds "{\"variants\":[\"${V[0]}\"]}"
is "$ST" 401 "a dead worker token × enqueue → 401"

# ---- a worker token on the web UI and on every other route ---------------------------------
jar=$TEST_DIR/jar
curl -s -c "$jar" -o "$TEST_DIR/login.html" "$KHUB_URL/login"
csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/login.html" | head -1 | sed 's/.*value="//; s/"//')
st=$(curl -s -b "$jar" -o "$B" -D "$H" -w '%{http_code}' --data-urlencode "csrf=$csrf" --data-urlencode "token=$PRIV" \
	"$KHUB_URL/login")
is "$st" 403 "POST /login with a worker token → 403"
like "$(cat "$B")" "build worker&#39;s token|build worker's token" "the page says it is a worker's token"
is "$(grep -ci 'set-cookie: khub_session' "$H")" 0 "no session is opened"
is "$(grep -ci 'foreign key\|violates' "$TEST_DIR/server.log")" 0 "no database error in the server log"
fives=""
while read -r methods path _; do
	m=${methods%%,*}
	p=$(sed 's|{type}|kernels|; s|{ns}|acme|; s|{name}|pub|; s|{org}|acme|; s|{arg}|1|; s|{rev}|main|; s|{path\*}|build.toml|; s|{[a-z*]*}|x|g' <<<"$path")
	api "$PRIV" "$m" "$p" '{}'
	case $ST in 5*) fives="$fives $m $p → $ST;" ;; esac
done < <(khub routes | grep -v ' worker')
is "$fives" "" "a worker token on every other route: never a 5xx"
api "$PRIV" GET /api/whoami-v2
is "$ST" 403 "a worker token × whoami → 403"

# ---- queue limits --------------------------------------------------------------------------
enqueue "$CAROL" carol/flood "${V[@]:0:7}"
is "$ST" 400 "7 variants in one request (build_variants_per_request 6) → 400"
like "$(j '.error')" "build_variants_per_request" "the error names the limit"
is "$(sql "SELECT count(*) FROM builds b JOIN repos r ON r.id = b.repo_id WHERE r.namespace = 'carol'")" 0 "nothing queued"
enqueue "$CAROL" carol/flood "${V[@]:0:5}"
is "$ST $(j '.builds | length')" "202 5" "5 variants of carol/flood queued (build_queue_per_repo 5)"
FLOOD1=${IDS%% *}
enqueue "$CAROL" carol/flood "${V[5]}" "${V[0]}"
is "$ST $(hdr Retry-After)" "429 60" "a sixth job for carol/flood → 429 with Retry-After"
like "$(j '.error')" "build_queue_per_repo" "the JSON error names the limit"
enqueue "$CAROL" carol/flood "${V[0]}"
is "$ST $(j '.skipped[0].reason')" "202 already queued or running" "a duplicate of a queued job is no new job: skipped, not refused"
enqueue "$CAROL" carol/flood2 "${V[0]}" "${V[1]}" "${V[2]}"
is "$ST $(j '.error')" "429 carol would have 8 build jobs queued; at most 7 may wait at once (build_queue_per_user): nothing was queued, retry when some have run" \
	"three more in another repo pass carol's 7 (build_queue_per_user) → 429"
is "$(sql "SELECT r.name, count(*) FROM builds b JOIN repos r ON r.id = b.repo_id WHERE r.namespace = 'carol' GROUP BY 1")" "flood|5" \
	"nothing over the limits was queued"
enqueue "$CAROL" carol/flood2 "${V[0]}" "${V[1]}"
is "$ST" 202 "two fit"
queued_flood() { sql "SELECT count(*) FROM builds b JOIN repos r ON r.id = b.repo_id WHERE r.name = 'flood' AND state = 'queued'"; }
printf '{"key":"header","value":{"summary":"src"}}\n{"key":"file","value":{"content":"%s","path":"torch-ext/k/more.py","encoding":"base64"}}\n' \
	"$(b64 'x = 1')" >"$TEST_DIR/src.ndjson"
code=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $CAROL" -H 'Content-Type: application/x-ndjson' \
	--data-binary "@$TEST_DIR/src.ndjson" "$KHUB_URL/api/kernels/carol/flood/commit/main")
is "$code $(queued_flood)" "200 5" "a source commit to carol/flood (at its limit) is kept, its builds are not queued"
for _ in $(seq 1 600); do	# a push is planned after the commit's answer
	grep -q 'build trigger.*not queued' "$TEST_DIR/server.log" && break
	sleep 0.1
done
like "$(grep 'build trigger.*not queued' "$TEST_DIR/server.log" | tail -1)" "not queued \(this repository would have 6 build jobs queued.*build_queue_per_repo" \
	"the server logs why"
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME" && git config --global user.name t && git config --global user.email t@example.com
git clone -q "http://x:$CAROL@127.0.0.1:$KHUB_PORT/kernels/carol/flood" "$TEST_DIR/clone" >>"$log" 2>&1
(cd "$TEST_DIR/clone" && printf 'x = 2\n' >torch-ext/k/more.py && git commit -qam "change" && git push -q origin main) >>"$log" 2>&1
is "$? $(queued_flood)" "0 5" "a git push to it (the hook, with the server's limits) is kept and queues nothing either"

# ---- fair claims: one job of dave/one is not starved by carol's flood -------------------------
enqueue "$DAVE" dave/one "${V[0]}"
JD=$IDS
claim "$FAIR"
is "$ST $(j '.build.id')" "200 $FLOOD1" "first claim: the oldest job (carol/flood's first)"
claim "$FAIR"
first2=$(j '.build.repo')
claim "$FAIR"
first3=$(j '.build.repo')
is "$(printf '%s\n' "$first2" "$first3" | sort | tr '\n' ' ')" "carol/flood2 dave/one " \
	"the next claims go to the repos never claimed (carol/flood2, dave/one) before carol/flood's 4 older jobs"
is "$(state $JD | cut -d' ' -f1,2)" "running fair" "dave/one's single job runs"
claim "$FAIR"
is "$(j '.build.repo')" "carol/flood" "then carol/flood, whose last claim is now the oldest"

# ---- the lease timer takes a job back without waiting for its worker ------------------------
khub_stop
export KHUB_BUILD_LEASE_CHECK_MS=200
khub_start
is "$(state $JO)" "running pub 1" "bob/other's job is still pub's (rotated token) after a restart"
api "$BOB" PUT /api/kernels/bob/other/settings '{"private": true}'
is "$ST" 200 "bob turns bob/other private"
for _ in $(seq 1 300); do [ "$(state $JO)" = "queued - 0" ] && break; sleep 0.1; done
is "$(state $JO)" "queued - 0" "the lease timer takes it back from the public-only worker, no call needed"
api "$NEW" POST /api/builds/$JO/heartbeat '{}'
is "$ST" 404 "pub's next heartbeat: 404 (no longer its job, out of its scope)"
done_testing
