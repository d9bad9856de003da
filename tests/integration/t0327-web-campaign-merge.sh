#!/bin/bash
# t0327-web-campaign-merge.sh -- the web's Merge button (docs/build-farm.md,
# "Fleet rebuilds"): a staged campaign build shows a Merge form (CSRF
# field) on the kernel's builds page for a writer and on /admin for a site
# admin; a read member sees none and its POST is refused (403), as are a
# non-member's, an anonymous one (401) and a writer's without the CSRF token,
# v1 unmoved each time; the writer's POST (curl with a real session
# cookie) merges through the API's own operation: v1 moves to the pull
# request's head, the build is succeeded, the audit log says
# campaign.merge, and the form is gone.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
V1=torch211-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json KHUB_ABI_POLICY=warn
log=$TEST_DIR/setup.log
khub_accounts	# alice, admin of acme, $ALICE
for cmd in "user create bob" "member set acme bob read" "user create carol" "user create root --site-admin"; do
	khub admin $cmd >>"$log" 2>&1 || bail "khub admin $cmd failed"
done
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
CAROL=$(khub admin token create carol --scope write 2>>"$log" | tail -n 1)
W1=$(khub admin worker add w1 2>>"$log" | tail -n 1)
khub_start

B=$TEST_DIR/b
api() {	# api TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
b64() { base64 -w0 "$@"; }
head_of() {	# head_of REF: acme/relu's ref ("" none)
	api "$ALICE" GET "/api/kernels/acme/relu/refs?include_prs=1"
	jq -r --arg r "$1" '[.branches[], (.pullRequests // [])[]] | map(select(.ref == $r)) | .[0].targetCommit // ""' "$B"
}
kernel_field() {	# kernel_field CAMPAIGN FIELD: of acme/relu
	api "$ROOT" GET "/api/admin/campaigns/$1"
	jq -r ".kernels[] | select(.kernel == \"acme/relu\") | .$2 // \"\"" "$B"
}
printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' \
	>"$TEST_DIR/build.toml"
printf 'from ._ops import ops\n' >"$TEST_DIR/init.py"
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[{\"path\":\"build.toml\",\"content\":\"$(b64 "$TEST_DIR/build.toml")\",\"encoding\":\"base64\"},{\"path\":\"torch-ext/relu/__init__.py\",\"content\":\"$(b64 "$TEST_DIR/init.py")\",\"encoding\":\"base64\"}]}"
is "$ST" 200 "acme/relu created with build.toml"


api "$ALICE" POST /api/kernels/acme/relu/branch/v1 '{}'
V1_START=$(head_of refs/heads/v1)
like "$ST $V1_START" '^200 [0-9a-f]{40}$' "acme/relu has a v1 branch"
api "$W1" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
is "$ST" 200 "w1 registers"
# campaign_build: start a campaign of $V1, wait until acme/relu's build is queued or skipped; $CID, $J
campaign_build() {
	api "$ROOT" POST /api/admin/campaigns "{\"variant\":\"$V1\"}"
	CID=$(jq -r '.campaigns[0].id' "$B")
	for _ in $(seq 1 600); do
		case $(kernel_field "$CID" state) in queued|skipped) break ;; esac
		sleep 0.2
	done
	J=$(kernel_field "$CID" build)
}
# build_it: w1 claims $J and uploads an output
build_it() {
	api "$W1" POST /api/workers/claim "{\"variants\":[\"$V1\"],\"wait_seconds\":30}"
	is "$ST $(jq -r .build.id "$B")" "200 $J" "w1 claims build #$J"
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
	ST=$(curl -s -o "$B" -w '%{http_code}' -X PUT -H "Authorization: Bearer $W1" -H 'Content-Type: application/x-tar' \
		--data-binary "@$TEST_DIR/good.tar" "$KHUB_URL/api/builds/$J/output")
	is "$ST" 200 "w1 uploads build #$J's output" || diag "$(cat "$B")"
}
state_of() { api "$ALICE" GET "/api/builds/$1"; jq -r .state "$B"; }

campaign_build
build_it
is "$(state_of "$J")" staged "campaign #$CID's build #$J is staged"
PR=$(kernel_field "$CID" pr)
PR_HEAD=$(head_of "$PR")
ACTION="/kernels/acme/relu/campaigns/$CID/merge"

# login NAME TOKEN: a session in $TEST_DIR/NAME.jar; its CSRF token in $CSRF
login() {
	local jar=$TEST_DIR/$1.jar
	curl -s -c "$jar" -o "$TEST_DIR/login.html" "$KHUB_URL/login"
	CSRF=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/login.html" | head -1 | sed 's/.*value="//; s/"//')
	curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$CSRF" --data-urlencode "token=$2" "$KHUB_URL/login"
	curl -s -b "$jar" -o "$TEST_DIR/tokens.html" "$KHUB_URL/settings/tokens"
	CSRF=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/tokens.html" | head -1 | sed 's/.*value="//; s/"//')
}
page() { curl -s -b "$TEST_DIR/$1.jar" -o "$B" -w '%{http_code}' "$KHUB_URL$2"; }	# page NAME PATH -> body in $B
merge_as() {	# merge_as NAME [CSRF]: POST the Merge form -> $ST
	ST=$(curl -s -b "$TEST_DIR/$1.jar" -o "$B" -w '%{http_code}' --data-urlencode "csrf=${2-}" \
		--data-urlencode "back=/kernels/acme/relu/builds" "$KHUB_URL$ACTION")
}
has_form() { grep -q "<form method=\"post\" class=\"inline campaign-merge\" action=\"$ACTION\">" "$B"; }

# ---- who sees the button ------------------------------------------------------------------------
login alice "$ALICE"; ALICE_CSRF=$CSRF
is "$(page alice /kernels/acme/relu/builds)" 200 "alice's builds page"
has_form
ok $? "alice (a writer) sees the Merge form of $PR"
grep -A3 "campaign-merge\" action=\"$ACTION" "$B" | grep -q "name=\"csrf\" value=\"$ALICE_CSRF\""
ok $? "… with her CSRF token"
login bob "$BOB"; BOB_CSRF=$CSRF
page bob /kernels/acme/relu/builds >/dev/null
has_form
is "$?" 1 "bob (a read member) sees no Merge form"
login root "$ROOT"
page root /admin >/dev/null
has_form
ok $? "/admin shows the site admin the Merge form of acme/relu's staged build"

# ---- refused ------------------------------------------------------------------------------------
merge_as bob "$BOB_CSRF"
is "$ST" 403 "bob's POST: 403"
login carol "$CAROL"
merge_as carol "$CSRF"
is "$ST" 403 "a non-member's POST: 403"
ST=$(curl -s -o "$B" -w '%{http_code}' --data-urlencode "back=/" "$KHUB_URL$ACTION")
is "$ST" 401 "an anonymous POST: 401"
merge_as alice ""
is "$ST" 403 "alice's POST without the CSRF token: 403"
merge_as alice "$BOB_CSRF"
is "$ST" 403 "alice's POST with another session's token: 403"
is "$(head_of refs/heads/v1) $(state_of "$J")" "$V1_START staged" "v1 did not move; the build is still staged"

# ---- the writer merges ----------------------------------------------------------------------------
ST=$(curl -s -b "$TEST_DIR/alice.jar" -o "$B" -D "$TEST_DIR/merge.h" -w '%{http_code}' --data-urlencode "csrf=$ALICE_CSRF" \
	--data-urlencode "back=/kernels/acme/relu/builds" "$KHUB_URL$ACTION")
is "$ST $(grep -i '^location:' "$TEST_DIR/merge.h" | tr -d '\r' | sed 's/^[^:]*: *//')" "303 /kernels/acme/relu/builds" \
	"alice's Merge: 303 back to the builds page"
is "$(head_of refs/heads/v1)" "$PR_HEAD" "v1 moved to $PR's head"
is "$(state_of "$J")" succeeded "build #$J succeeded"
is "$(kernel_field "$CID" merged)" true "the campaign's kernel is merged"
is "$(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc \
	"SELECT actor_name || ' ' || action FROM audit_log WHERE action = 'campaign.merge'" 2>/dev/null)" "alice campaign.merge" \
	"the audit log has alice's campaign.merge (the API's action), once"
page alice /kernels/acme/relu/builds >/dev/null
has_form
is "$?" 1 "the Merge form is gone"
merge_as alice "$ALICE_CSRF"
is "$ST" 409 "a second Merge: 409"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
