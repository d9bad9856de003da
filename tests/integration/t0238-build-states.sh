#!/bin/bash
# t0238-build-states.sh -- the build job has one owner (farm/build_states.c,
# docs/build-farm.md "The job's states"): `khub builds states --json`
# prints its table; every route of `khub routes --json` that changes a job
# is in the table and the table names no route that does not exist; each
# is driven through the real worker and user protocol with curl against a
# real hub, and every state change it makes is a row of the table, every
# event the table does not allow in the job's state is refused (409) with
# the state unchanged; and nothing outside farm/build_states.c calls
# storage's state-changing functions.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

# ---- the boundary --------------------------------------------------------------------------
CHANGERS='db_build_enqueue db_build_enqueue_benchmark db_build_claim db_build_expire_leases db_build_take_back_out_of_scope
db_build_lease_check db_build_heartbeat db_build_log_append db_build_fail db_build_release db_build_finish
db_build_cancel db_build_retry db_build_merged db_build_supersede_older'
for f in $CHANGERS; do
	hits=$(grep -rnE "\\b$f *\\(" --include='*.[ch]' api http server farm mirror sync web kernel common storage builder-worker \
		2>/dev/null | grep -v '^farm/build_states\.c:' | grep -v '^storage/db/db_builds\.[ch]:')
	is "$hits" "" "$f is called from farm/build_states.c only (and defined in storage/db/db_builds.c)"
done
hits=$(grep -rn "UPDATE builds\|INSERT INTO builds\|DELETE FROM builds" --include='*.[ch]' --exclude-dir=build-deb . 2>/dev/null |
	grep -v '^\./storage/db/db_builds\.c:' | grep -v '^\./tests/' | grep -v '^\./storage/db/migrations\.c:')
is "$hits" "" "no SQL changes the builds table outside storage/db/db_builds.c (and the schema's migrations, sql/)"

# ---- the table -------------------------------------------------------------------------------
khub_setup
STATES=$TEST_DIR/states.json
khub builds states --json >"$STATES"
ok $? "khub builds states --json"
is "$(jq -c '.states' "$STATES")" '["none","queued","running","succeeded","failed","canceled","staged","superseded"]' \
	"the states (staged and superseded: a fleet rebuild's pull request)"
is "$(jq '[.transitions[] | select((.from | IN("none","queued","running","succeeded","failed","canceled","staged",
	"superseded") | not) or (.to | IN("queued","running","succeeded","failed","canceled","staged","superseded") | not)
	or (.actors | length) == 0
	or (.guard | length) == 0)] | length' "$STATES")" 0 "every row: known states, who may trigger it, its guard"
khub builds states | grep -q '^running *release *queued *worker *POST /api/builds/{arg}/release'
ok $? "khub builds states prints the table as text"
khub builds states --bogus >/dev/null 2>&1
is "$?" 2 "khub builds states --bogus: usage, exit 2"

# the routes that change a job: every POST or PUT about a build, the claim, the enqueue
khub routes --json | jq -r '.[] | select((.methods | index("POST") or index("PUT")) and
	((.pattern | startswith("/api/builds/")) or .pattern == "/api/workers/claim"
	 or .pattern == "/api/kernels/{ns}/{name}/builds" or .pattern == "/api/kernels/{ns}/{name}/benchmarks/run")) | (.methods | map(select(. == "POST" or . == "PUT"))[0])
	+ " " + .pattern' | sort -u >"$TEST_DIR/changing.txt"
jq -r '.transitions[].routes[]' "$STATES" | sort -u >"$TEST_DIR/table-routes.txt"
khub routes --json | jq -r '.[] | .methods[] as $m | $m + " " + .pattern' | sort -u >"$TEST_DIR/all-routes.txt"
is "$(wc -l <"$TEST_DIR/changing.txt")" 12 \
	"12 routes change a job (claim, heartbeat, log, output, fail, release, cancel, retry, enqueue, benchmarks/run, measured; benchmark: its lease check)"
is "$(comm -23 "$TEST_DIR/changing.txt" "$TEST_DIR/table-routes.txt" | tr '\n' ' ')" "" \
	"every route that changes a job is in the state table"
is "$(comm -23 "$TEST_DIR/table-routes.txt" "$TEST_DIR/all-routes.txt" | tr '\n' ' ')" "" \
	"every route the state table names exists"

# allowed FROM EVENT TO ROUTE: the table has the row
allowed() {
	jq -e --arg f "$1" --arg e "$2" --arg t "$3" --arg r "$4" '[.transitions[] | select(.from == $f and
		.event == $e and .to == $t and ($r == "" or (.routes | index($r))))] | length > 0' "$STATES" >/dev/null
}
# refused_in STATE EVENT: the table has no row for EVENT in STATE
refused_in() {
	jq -e --arg f "$1" --arg e "$2" '[.transitions[] | select(.from == $f and .event == $e)] | length == 0' \
		"$STATES" >/dev/null
}

# ---- a hub, a worker, a kernel ------------------------------------------------------------------
V1=torch211-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json KHUB_BUILD_LEASE_SECONDS=60 KHUB_BUILD_MAX_ATTEMPTS=3
log=$TEST_DIR/setup.log
khub admin org create acme >>"$log" 2>&1
khub admin user create alice >>"$log" 2>&1
khub admin member set acme alice admin >>"$log" 2>&1
khub admin org create other >>"$log" 2>&1
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
W1=$(khub admin worker add w1 2>>"$log" | tail -n 1)
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
api() {	# api TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
state_of() { curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$1" | jq -r .state; }

b64() { base64 -w0 "$@"; }
printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' \
	>"$TEST_DIR/build.toml"
printf 'from ._ops import ops\n' >"$TEST_DIR/init.py"
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[{\"path\":\"build.toml\",\"content\":\"$(b64 "$TEST_DIR/build.toml")\",\"encoding\":\"base64\"},{\"path\":\"torch-ext/relu/__init__.py\",\"content\":\"$(b64 "$TEST_DIR/init.py")\",\"encoding\":\"base64\"}]}"
is "$ST" 200 "acme/relu created with build.toml"
api "$W1" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
is "$ST" 200 "w1 registers"

# ---- driving every route ------------------------------------------------------------------------
# step NAME TOKEN METHOD PATH BODY WANT_STATUS EVENT: the route answers
# WANT_STATUS and the job's change (FROM before, TO after) is a row of the
# table for EVENT and this route; a refusal (4xx) leaves the job as it was
# and the table has no row for EVENT in FROM
J=
step() {
	local name=$1 token=$2 method=$3 path=$4 body=$5 want=$6 event=$7
	local from to route
	route="$method $(printf '%s' "$path" | sed "s|^/api/builds/$J/|/api/builds/{arg}/|; s|?.*||")"
	from=$(state_of "$J")
	api "$token" "$method" "$path" "$body"
	to=$(state_of "$J")
	if [ "$want" -lt 400 ]; then
		is "$ST" "$want" "$name: $route → $want"
		allowed "$from" "$event" "$to" "$route"
		ok $? "$name: $from --$event--> $to is a row of the table"
	else
		is "$ST $to" "$want $from" "$name: $route refused in $from ($want), the job still $from"
		refused_in "$from" "$event"
		ok $? "$name: the table has no $event from $from"
	fi
}
claim() { api "$W1" POST /api/workers/claim "{\"variants\":[\"$V1\"],\"wait_seconds\":${1:-0}}"; }

api "$ALICE" POST /api/kernels/acme/relu/builds "{\"variants\":[\"$V1\"]}"
is "$ST" 202 "enqueue → 202"
J=$(jq -r '(.builds[0].id // .skipped[0].build)' "$B")	# the push that created the repo may have queued it
is "$(state_of "$J")" queued "the job is queued"
allowed none enqueue queued "POST /api/kernels/{ns}/{name}/builds"
ok $? "none --enqueue--> queued is a row of the table"

step "heartbeat of a queued job" "$W1" POST "/api/builds/$J/heartbeat" '{}' 409 heartbeat
step "log of a queued job" "$W1" POST "/api/builds/$J/log?offset=0" 'x' 409 log
step "fail of a queued job" "$W1" POST "/api/builds/$J/fail" '{"error":"x"}' 409 fail
step "release of a queued job" "$W1" POST "/api/builds/$J/release" '{}' 409 release
step "retry of a queued job" "$ALICE" POST "/api/builds/$J/retry" '{}' 409 retry

from=$(state_of "$J")
claim
is "$ST $(jq -r .build.id "$B")" "200 $J" "w1 claims the job"
allowed "$from" claim "$(state_of "$J")" "POST /api/workers/claim"
ok $? "$from --claim--> running is a row of the table"
ATT=$(jq -r .build.attempt "$B")
step "heartbeat" "$W1" POST "/api/builds/$J/heartbeat" '{}' 200 heartbeat
step "log" "$W1" POST "/api/builds/$J/log?offset=0&attempt=$ATT" 'hello
' 200 log
step "retry of a running job" "$ALICE" POST "/api/builds/$J/retry" '{}' 409 retry
step "release" "$W1" POST "/api/builds/$J/release" '{}' 200 release

claim 30
is "$ST" 200 "claimed again (a release waits no backoff)"
step "fail, no retry" "$W1" POST "/api/builds/$J/fail" '{"error":"compile error","retry":false}' 200 fail
step "cancel of a failed job" "$ALICE" POST "/api/builds/$J/cancel" '{}' 409 cancel
step "heartbeat of a failed job" "$W1" POST "/api/builds/$J/heartbeat" '{}' 409 heartbeat
step "release of a failed job" "$W1" POST "/api/builds/$J/release" '{}' 409 release
step "output of a failed job" "$W1" PUT "/api/builds/$J/output" '' 409 publish
step "retry of a failed job" "$ALICE" POST "/api/builds/$J/retry" '{}' 200 retry

claim 30
is "$ST" 200 "claimed after the retry"
ATT=$(jq -r .build.attempt "$B")
step "cancel of a running job" "$ALICE" POST "/api/builds/$J/cancel" '{}' 200 cancel
step "heartbeat of a canceled job" "$W1" POST "/api/builds/$J/heartbeat" '{}' 200 heartbeat
is "$(jq -r .cancel "$B")" true "its worker is told to stop"
step "log of a canceled job" "$W1" POST "/api/builds/$J/log?offset=0&attempt=$ATT" 'bye
' 200 log
step "fail of a canceled job" "$W1" POST "/api/builds/$J/fail" '{"error":"x"}' 409 fail
step "release of a canceled job" "$W1" POST "/api/builds/$J/release" '{}' 409 release
step "cancel of a canceled job" "$ALICE" POST "/api/builds/$J/cancel" '{}' 409 cancel
step "retry of a canceled job" "$ALICE" POST "/api/builds/$J/retry" '{}' 200 retry
step "cancel of a queued job" "$ALICE" POST "/api/builds/$J/cancel" '{}' 200 cancel
step "retry again" "$ALICE" POST "/api/builds/$J/retry" '{}' 200 retry

claim 30
is "$ST" 200 "claimed"
step "fail, retry with attempts left" "$W1" POST "/api/builds/$J/fail" '{"error":"oom","retry":true}' 200 fail
step "cancel (waiting out its backoff)" "$ALICE" POST "/api/builds/$J/cancel" '{}' 200 cancel
step "retry" "$ALICE" POST "/api/builds/$J/retry" '{}' 200 retry

# outputs: refused (not a tar) and published
claim 30
is "$ST" 200 "claimed"
printf 'not a tar' >"$TEST_DIR/junk.tar"
from=$(state_of "$J")
ST=$(curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $W1" -H 'Content-Type: application/x-tar' \
	--data-binary "@$TEST_DIR/junk.tar" "$KHUB_URL/api/builds/$J/output")
is "$ST $(state_of "$J")" "422 failed" "an output that is no tar → 422, failed"
allowed "$from" refuse failed "PUT /api/builds/{arg}/output"
ok $? "$from --refuse--> failed is a row of the table"
step "retry" "$ALICE" POST "/api/builds/$J/retry" '{}' 200 retry
claim 30
is "$ST" 200 "claimed"
/usr/bin/python3 - "$TEST_DIR/good.tar" "$V1" <<'PY'
import io, json, os, sys, tarfile
out, variant = sys.argv[1], sys.argv[2]
meta = {"id": "_relu_cpu_0", "name": "relu", "version": 1, "license": "apache-2.0", "python-depends": [],
        "backend": {"type": "cpu"}, "provenance": {"build": 1}, "digest": "sha256:0"}
report = {"ok": True, "manylinux": "manylinux_2_28", "python_abi": "3.9", "text": "ok", "files": []}
files = {f"{variant}/__init__.py": b"from ._ops import ops\n", f"{variant}/_ops.py": b"ops = None\n",
         f"{variant}/_relu_cpu.abi3.so": b"\x7fELF" + os.urandom(2000),
         f"{variant}/metadata.json": json.dumps(meta).encode(), "abi-report.json": json.dumps(report).encode()}
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    d = tarfile.TarInfo(variant); d.type = tarfile.DIRTYPE; d.mode = 0o755; t.addfile(d)
    for n, data in files.items():
        ti = tarfile.TarInfo(n); ti.size = len(data); ti.mode = 0o644; t.addfile(ti, io.BytesIO(data))
PY
from=$(state_of "$J")
ST=$(curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $W1" -H 'Content-Type: application/x-tar' \
	--data-binary "@$TEST_DIR/good.tar" "$KHUB_URL/api/builds/$J/output")
is "$ST $(state_of "$J")" "200 succeeded" "a good output → 200, succeeded"
allowed "$from" publish succeeded "PUT /api/builds/{arg}/output"
ok $? "$from --publish--> succeeded is a row of the table"
for ev in cancel retry heartbeat fail release; do
	case $ev in cancel|retry) tok=$ALICE ;; *) tok=$W1 ;; esac
	step "$ev of a succeeded job" "$tok" POST "/api/builds/$J/$ev" '{}' 409 "$ev"
done

# take back: the worker's scope narrowed by the admin CLI
api "$ALICE" POST /api/kernels/acme/relu/builds "{\"variants\":[\"$V1\"],\"force\":true}"
J=$(jq -r '.builds[0].id' "$B")
claim 30
is "$ST $(state_of "$J")" "200 running" "a forced rebuild claimed"
out=$(khub admin worker scope w1 --org other 2>&1)
like "$out" "taken back" "khub admin worker scope w1 --org other takes the job back"
is "$(state_of "$J")" queued "the job is queued again"
allowed running take_back queued ""
ok $? "running --take_back--> queued is a row of the table"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
