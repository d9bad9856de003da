#!/bin/bash
# t0262-build-matrix.sh -- the farm as a kernel author's CI (docs/build-farm.md,
# "The build matrix"): with two toolchains registered (cpu and CUDA 13.0), a
# git push of examples/relu is told its matrix URL in its remote: lines and
# gets the full matrix planned; GET .../builds?commit= answers it per variant
# (status, worker, duration, log URLs, job id) with what build.toml allows
# that no live worker builds (rocm) and the planner's reason; the builds page
# and the kernel page show the same states. A private repo's matrix: 401 to
# anonymous callers, 404 to a non-member and a revoked token, 200 to a read
# member and a read-scoped token; its pages 404 to anonymous callers and to
# non-members. A read member cannot cancel, retry or "build missing" (403),
# nor can anyone without the form's CSRF token; a writer of another repo
# cannot cancel this repo's build through his own repo's form (404). A log
# written by the build (`<script>`) is shown escaped. The admin page links
# each build's repo, builds page and log, and lists variants as text. A build
# its worker publishes shows published, with its branch and duration.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
khub_setup
log=$TEST_DIR/setup.log
for cmd in "org create acme" "user create alice" "user create bob" "user create eve" "user create root --site-admin" \
	"member set acme alice write" "member set acme bob read"; do
	khub admin $cmd >>"$log" 2>&1 || bail "khub admin $cmd failed"
done
ALICE=$(khub admin token create alice --scope write 2>>"$log" | tail -n 1)
ALICE_READ=$(khub admin token create alice --scope read 2>>"$log" | tail -n 1)
DEAD=$(khub admin token create alice --token-name dead --scope write 2>>"$log" | tail -n 1)
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
EVE=$(khub admin token create eve --scope write 2>>"$log" | tail -n 1)
ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
W1=$(khub admin worker add w1 2>>"$log" | tail -n 1)
W2=$(khub admin worker add w2 2>>"$log" | tail -n 1)
khub import "$KHUB_SRC/examples/relu" --repo acme/relu --type kernel >>"$log" 2>&1 || bail "import acme/relu"
khub import "$KHUB_SRC/examples/relu" --repo acme/secret --type kernel --private >>"$log" 2>&1 || bail "import acme/secret"
khub import "$KHUB_SRC/examples/relu" --repo eve/own --type kernel >>"$log" 2>&1 || bail "import eve/own"
dead_id=$(khub admin token list alice 2>>"$log" | grep -w dead | grep -oE '^[[:space:]]*[0-9]+' | tr -d ' ' | head -1)
khub admin token revoke "$dead_id" >>"$log" 2>&1
khub_start

B=$TEST_DIR/b
CU=torch211-cxx11-cu130-x86_64-linux
CPU=torch211-cxx11-cpu-x86_64-linux
api POST /api/workers/register -H "Authorization: Bearer $W1" --json "{\"name\":\"w1\",\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$CPU\"]}]}"
st1=$STATUS
api POST /api/workers/register -H "Authorization: Bearer $W2" --json "{\"name\":\"w2\",\"toolchains\":[{\"name\":\"cuda13\",\"variants\":[\"$CU\"]}]}"
is "$st1 $STATUS" "200 200" "two workers register two toolchains: cpu ($CPU) and CUDA 13.0 ($CU)"

# ---- a git push plans the full matrix and says where it is ------------------------------------------
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME" && git config --global user.name t && git config --global user.email t@example.com
git clone -q "http://x:$ALICE@127.0.0.1:$KHUB_PORT/kernels/acme/relu" "$TEST_DIR/relu" >>"$log" 2>&1
printf '\n# a source change\n' >>"$TEST_DIR/relu/torch-ext/relu/__init__.py"
git -C "$TEST_DIR/relu" commit -qam "a source change"
SHA=$(git -C "$TEST_DIR/relu" rev-parse HEAD)
git -C "$TEST_DIR/relu" push origin main >"$TEST_DIR/push.out" 2>&1
is "$?" 0 "git push of a source change to acme/relu"
grep -qF "remote: khub: refs/heads/main: builds of ${SHA:0:12} will be planned after this push: see $KHUB_URL/kernels/acme/relu/builds?commit=$SHA" \
	"$TEST_DIR/push.out"
ok $? "the push's remote: lines give the matrix URL (the builds page of the pushed commit)"
for _ in $(seq 1 300); do
	api GET "/api/kernels/acme/relu/builds?commit=$SHA" -H "Authorization: Bearer $ALICE"
	[ "$(jq '.variants | length' "$B" 2>/dev/null)" = 2 ] && break
	sleep 0.2
done
cp "$B" "$TEST_DIR/matrix.json"
is "$STATUS $(jq -r '[.variants[] | .variant + ":" + .status] | join(" ")' "$B")" "200 $CPU:queued $CU:queued" \
	"GET .../builds?commit=: the pushed commit's matrix, both toolchains' variants queued"
is "$(jq -r '[.variants[] | (.id | type) + " " + .log + " " + .log_page + " " + (.duration_seconds | tostring)
	+ " " + (.worker | tostring)] | unique | length' "$B")" 2 "… each with its job id, log URLs, duration and worker"
CPU_ID=$(jq -r ".variants[] | select(.variant == \"$CPU\") | .id" "$B")
CU_ID=$(jq -r ".variants[] | select(.variant == \"$CU\") | .id" "$B")
is "$(jq -r ".variants[] | select(.variant == \"$CPU\") | .log + \" \" + .log_page" "$B")" \
	"/api/builds/$CPU_ID/log /kernels/acme/relu/builds/$CPU_ID/log" "… the log's API URL and page"
is "$(jq -r '.unbuildable[] | select(.variant == "torch<MM>-cxx11-rocm…") | .reason' "$B")" "no live worker builds rocm" \
	"… and rocm, which build.toml allows and no live worker builds, with the planner's reason"
is "$(jq -r '.plan.backends | join(",")' "$B")" "cpu,cuda,rocm" "… with the plan"
api GET "/api/kernels/acme/relu/builds" -H "Authorization: Bearer $ALICE"
is "$STATUS $(jq -r '.matrices[0].commit + " " + (.matrices[0].variants | length | tostring) + " " + (.commits_total | tostring)' "$B")" \
	"200 $SHA 2 1" "without commit: the newest commits' matrices, newest first"
is "$(jq -r '.builds | length' "$B")" 2 "… and the jobs, as before"
api GET "/api/kernels/acme/relu/builds?commit=nosuchbranch" -H "Authorization: Bearer $ALICE"
is "$STATUS" 404 "?commit= of no such revision: 404"

# ---- a private repo's matrix: the repo's rules ------------------------------------------------------
api POST /api/kernels/acme/secret/builds -H "Authorization: Bearer $ALICE" --json '{}'
is "$STATUS $(jq -r '.queued | sort | join(" ")' "$B")" "202 $CPU $CU" "acme/secret (private): its writer queues the default variants"
SECRET=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/secret.git" rev-parse main)
S_ID=$(jq -r ".builds[] | select(.variant == \"$CPU\") | .id" "$B")
for who in "anonymous::401" "eve (no member):$EVE:404" "a revoked token:$DEAD:401" "bob (read member):$BOB:200" \
	"alice's read-scoped token:$ALICE_READ:200"; do
	IFS=: read -r name tok want <<<"$who"
	api GET "/api/kernels/acme/secret/builds?commit=$SECRET" ${tok:+-H "Authorization: Bearer $tok"}
	is "$STATUS" "$want" "GET acme/secret's matrix as $name: $want"
done
api GET "/api/kernels/acme/secret/builds" -H "Authorization: Bearer $BOB"
is "$STATUS $(jq -r '.matrices[0].variants | length' "$B")" "200 2" "… its matrices list too (bob)"

# ---- pages: sessions of each ------------------------------------------------------------------------
session() {	# session NAME TOKEN: a browser session in $TEST_DIR/NAME.jar; its CSRF token printed
	local jar=$TEST_DIR/$1.jar csrf
	curl -s -c "$jar" -o "$TEST_DIR/$1.html" "$KHUB_URL/login"
	csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/$1.html" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$2" "$KHUB_URL/login"
	curl -s -b "$jar" "$KHUB_URL/settings/tokens" | grep -o 'name="csrf" value="[0-9a-f]*"' | head -1 |
		sed 's/.*value="//; s/"//'
}
page() {	# page JAR PATH [curl args] -> $PST, body in $B
	local jar=$1 path=$2; shift 2
	PST=$(curl -s -b "$jar" -o "$B" -w '%{http_code}' "$@" "$KHUB_URL$path")
}
CSRF_ALICE=$(session alice "$ALICE")
CSRF_BOB=$(session bob "$BOB")
CSRF_EVE=$(session eve "$EVE")
session root "$ROOT" >/dev/null
: >"$TEST_DIR/anon.jar"
like "$CSRF_ALICE $CSRF_BOB $CSRF_EVE" '^[0-9a-f]{64} [0-9a-f]{64} [0-9a-f]{64}$' "alice, bob and eve sign in"
for who in anon:404 eve:404 bob:200; do
	page "$TEST_DIR/${who%:*}.jar" /kernels/acme/secret/builds
	is "$PST" "${who#*:}" "/kernels/acme/secret/builds as ${who%:*}: ${who#*:}"
	page "$TEST_DIR/${who%:*}.jar" "/kernels/acme/secret/builds/$S_ID/log"
	is "$PST" "${who#*:}" "acme/secret's log page as ${who%:*}: ${who#*:}"
done
page "$TEST_DIR/bob.jar" "/kernels/acme/secret/builds?commit=$SECRET"
grep -q "data-variant=\"$CPU\" data-build=\"$S_ID\"" "$B" && grep -q 'data-status="queued"' "$B"
ok $? "bob sees acme/secret's matrix page: $CPU queued as build $S_ID"
! grep -q 'build-cancel\|Build missing' "$B"
ok $? "… without the writers' forms"
page "$TEST_DIR/alice.jar" "/kernels/acme/relu/builds?commit=$SHA"
grep -q "class=\"build-cancel\"" "$B" && grep -q "Build missing" "$B" && grep -qF 'no live worker builds rocm' "$B"
ok $? "alice (a writer) gets cancel and Build missing; the page lists rocm with its reason"
page "$TEST_DIR/anon.jar" /kernels/acme/relu
is "$PST $(grep -o "data-status=\"[a-z ]*\"" "$B" | sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
	'200  2 data-status="queued";' "the kernel page's variant table: both variants of main's head queued (anonymous, public repo)"
grep -q "<p id=\"build-column\" data-commit=\"$SHA\"" "$B"
ok $? "… for the newest commit, $SHA"

# ---- changes: writers only, with the form's CSRF token ----------------------------------------------
state_of() { curl -s -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/builds/$1" | jq -r .state; }
page "$TEST_DIR/bob.jar" "/kernels/acme/secret/builds/$S_ID/cancel" --data-urlencode "csrf=$CSRF_BOB"
is "$PST $(state_of "$S_ID")" "403 queued" "bob (read member) cannot cancel: 403, still queued"
page "$TEST_DIR/bob.jar" "/kernels/acme/secret/builds" --data-urlencode "csrf=$CSRF_BOB" --data-urlencode "commit=$SECRET"
is "$PST" 403 "… nor build missing"
page "$TEST_DIR/eve.jar" "/kernels/acme/secret/builds/$S_ID/cancel" --data-urlencode "csrf=$CSRF_EVE"
is "$PST $(state_of "$S_ID")" "404 queued" "eve (no member) cannot cancel acme/secret's build: 404"
page "$TEST_DIR/eve.jar" "/kernels/eve/own/builds/$S_ID/cancel" --data-urlencode "csrf=$CSRF_EVE"
is "$PST $(state_of "$S_ID")" "404 queued" "… nor through her own repo's form: 404, still queued"
page "$TEST_DIR/alice.jar" "/kernels/acme/secret/builds/$S_ID/cancel" --data-urlencode "back=/"
is "$PST $(state_of "$S_ID")" "403 queued" "alice's cancel without the CSRF token: 403, still queued"
page "$TEST_DIR/alice.jar" "/kernels/acme/secret/builds/$S_ID/cancel" --data-urlencode "csrf=${CSRF_BOB}"
is "$PST $(state_of "$S_ID")" "403 queued" "… with another session's CSRF token: 403"
page "$TEST_DIR/alice.jar" "/kernels/acme/secret/builds/$S_ID/cancel" --data-urlencode "csrf=$CSRF_ALICE" \
	--data-urlencode "back=/kernels/acme/secret/builds?commit=$SECRET" -D "$TEST_DIR/h"
is "$PST $(state_of "$S_ID")" "303 canceled" "alice cancels with the form: canceled"
like "$(tr -d '\r' <"$TEST_DIR/h" | grep -i '^location:')" "builds\\?commit=$SECRET$" "… and is sent back to the matrix"
page "$TEST_DIR/bob.jar" "/kernels/acme/secret/builds/$S_ID/retry" --data-urlencode "csrf=$CSRF_BOB"
is "$PST $(state_of "$S_ID")" "403 canceled" "bob cannot retry: 403"
page "$TEST_DIR/alice.jar" "/kernels/acme/secret/builds" --data-urlencode "csrf=$CSRF_ALICE" \
	--data-urlencode "commit=$SECRET"
api GET "/api/kernels/acme/secret/builds?commit=$SECRET" -H "Authorization: Bearer $ALICE"
is "$PST $(jq -r '[.variants[] | .status] | join(" ")' "$B")" "303 queued queued" \
	"alice's Build missing queues the canceled variant again (the matrix: both queued)"
page "$TEST_DIR/alice.jar" "/kernels/acme/secret/builds/$S_ID/retry" --data-urlencode "csrf=$CSRF_ALICE"
is "$PST" 409 "retrying the canceled job while its variant is queued again: 409"

# ---- a hostile log, escaped ---------------------------------------------------------------------------
api POST /api/workers/claim -H "Authorization: Bearer $W1" --json "{\"variants\":[\"$CPU\"],\"wait_seconds\":0}"
is "$STATUS $(jq -r .build.id "$B")" "200 $CPU_ID" "w1 claims acme/relu's $CPU build"
ATT=$(jq -r .build.attempt "$B")
printf 'compiling\n<script>window.__pwned=1</script><img src=x onerror=alert(1)>\n\033[31mred\033[0m\n' >"$TEST_DIR/hostile.log"
STATUS=$(curl -s -o "$B" -w '%{http_code}' -X POST -H "Authorization: Bearer $W1" --data-binary "@$TEST_DIR/hostile.log" \
	"$KHUB_URL/api/builds/$CPU_ID/log?offset=0&attempt=$ATT")
is "$STATUS" 200 "… its log says <script> and <img onerror>"
api POST "/api/builds/$CPU_ID/fail" -H "Authorization: Bearer $W1" --json '{"error":"compile error <b>x</b>","retry":false}'
is "$STATUS" 200 "… and it fails"
page "$TEST_DIR/anon.jar" "/kernels/acme/relu/builds/$CPU_ID/log"
is "$PST" 200 "the log page of a public repo's build"
grep -qF '&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;' "$B"
ok $? "… shows the log's <script> and <img> escaped"
! grep -q '<script>window\|<img src=x' "$B"
ok $? "… never as markup"
page "$TEST_DIR/anon.jar" /kernels/acme/relu
grep -q "href=\"/kernels/acme/relu/builds/$CPU_ID/log\">log</a>" "$B" && grep -q 'data-status="failed"' "$B"
ok $? "the kernel page shows $CPU failed with a link to its log"
page "$TEST_DIR/anon.jar" /kernels/acme/relu/builds/999999/log
is "$PST" 404 "no such build: 404"
page "$TEST_DIR/bob.jar" "/kernels/acme/relu/builds/$S_ID/log"
is "$PST" 404 "a private repo's build through a public repo's log page: 404"

# ---- the admin page ------------------------------------------------------------------------------------
page "$TEST_DIR/root.jar" /admin
grep -qF "href=\"/kernels/acme/relu/builds/$CPU_ID/log\"" "$B" && grep -qF 'href="/kernels/acme/relu"' "$B" &&
	grep -qF "href=\"/kernels/acme/relu/builds?commit=$SHA\"" "$B"
ok $? "/admin#builds links each build's log, repo and builds page"
grep -qF "<td class=\"worker-variants\">$CPU</td>" "$B" && ! grep -q '\[&quot;' "$B"
ok $? "… and lists a worker's variants as text, not a JSON array"

# ---- a published build ------------------------------------------------------------------------------
api POST "/api/builds/$CPU_ID/retry" -H "Authorization: Bearer $ALICE" --json '{}'
st1=$STATUS
api POST /api/workers/claim -H "Authorization: Bearer $W1" --json "{\"variants\":[\"$CPU\"],\"wait_seconds\":0}"
is "$st1 $STATUS $(jq -r .build.id "$B")" "200 200 $CPU_ID" "the failed build retried and claimed again"
/usr/bin/python3 - "$TEST_DIR/good.tar" "$CPU" <<'PY'
import io, json, os, sys, tarfile
out, variant = sys.argv[1], sys.argv[2]
meta = {"id": "_relu_cpu_0", "name": "relu", "version": 1, "license": "apache-2.0", "python-depends": [],
        "backend": {"type": "cpu"}}
report = {"ok": True, "manylinux": "manylinux_2_28", "python_abi": "3.9", "text": "ok", "files": []}
files = {f"{variant}/__init__.py": b"from ._ops import ops\n", f"{variant}/_ops.py": b"ops = None\n",
         f"{variant}/_relu_cpu.abi3.so": b"\x7fELF" + os.urandom(2000),
         f"{variant}/metadata.json": json.dumps(meta).encode(), "abi-report.json": json.dumps(report).encode()}
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    d = tarfile.TarInfo(variant); d.type = tarfile.DIRTYPE; d.mode = 0o755; t.addfile(d)
    for n, data in files.items():
        ti = tarfile.TarInfo(n); ti.size = len(data); ti.mode = 0o644; t.addfile(ti, io.BytesIO(data))
PY
STATUS=$(curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $W1" -H 'Content-Type: application/x-tar' \
	--data-binary "@$TEST_DIR/good.tar" "$KHUB_URL/api/builds/$CPU_ID/output")
is "$STATUS" 200 "w1 uploads its output: published"
api GET "/api/kernels/acme/relu/builds?commit=$SHA" -H "Authorization: Bearer $ALICE"
is "$(jq -r ".variants[] | select(.variant == \"$CPU\") | .status + \" \" + .published.branch + \" \" + .worker
	+ \" \" + (.duration_seconds | type)" "$B")" "published v1 w1 number" \
	"the matrix: $CPU published on v1 by w1, with its duration"
page "$TEST_DIR/anon.jar" /kernels/acme/relu
grep -q "<tr data-variant=\"$CPU\">.*data-status=\"published\"" "$B"
ok $? "the kernel page: $CPU's row (published on v1) shows its build published"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
