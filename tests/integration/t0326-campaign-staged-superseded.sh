#!/bin/bash
# t0326-campaign-staged-superseded.sh -- a fleet rebuild's states
# (farm/build_states.c; docs/build-farm.md, "The job's states"): a
# campaign's build, claimed and uploaded through the real worker routes,
# ends staged on refs/pr/N (not succeeded: v1 has not got it); after a new
# commit on main a second campaign stages a build of it, and the first
# build becomes superseded ("superseded by build #N"), its campaign's
# kernel says so, and merging its pull request is refused (409) with v1
# unchanged; a third campaign at the same commit builds nothing (the staged
# build counts as built); merging the second moves v1 and makes its build
# succeeded. `khub builds states` has the three rows.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup
V1=torch211-cxx11-cpu-x86_64-linux
printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json KHUB_ABI_POLICY=warn
log=$TEST_DIR/setup.log
khub_accounts	# alice, admin of acme, $ALICE
for cmd in "user create bob" "member set acme bob read" "user create root --site-admin"; do
	khub admin $cmd >>"$log" 2>&1 || bail "khub admin $cmd failed"
done
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
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


# ---- the table ------------------------------------------------------------------------------------
khub builds states >"$TEST_DIR/states.txt" 2>&1
for row in 'running *stage *staged *worker' 'staged *merge *succeeded *owner' 'staged *supersede *superseded *system'; do
	grep -qE "^$row" "$TEST_DIR/states.txt"
	ok $? "khub builds states: $row"
done

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

# ---- the first campaign: staged ----------------------------------------------------------------------
campaign_build
C1=$CID J1=$J
is "$(kernel_field "$C1" state)" queued "campaign #$C1 queued build #$J1 of acme/relu"
build_it
is "$(state_of "$J1")" staged "build #$J1 is staged, not succeeded"
PR1=$(kernel_field "$C1" pr)
like "$PR1" '^refs/pr/[0-9]+$' "on a pull request ($PR1)"
is "$(kernel_field "$C1" state)" staged "the campaign's kernel says staged"
is "$(head_of refs/heads/v1)" "$V1_START" "v1 did not move"

# ---- a new commit, a second campaign: the first is superseded -------------------------------------------
api "$ALICE" POST /api/kernels/acme/relu/commit/main "$(printf '{"key":"header","value":{"summary":"readme"}}\n{"key":"file","value":{"content":"%s","path":"README.md","encoding":"base64"}}\n' "$(printf hi | b64)")"
is "$ST" 200 "a new commit on main"
campaign_build
C2=$CID J2=$J
is "$(kernel_field "$C2" state)" queued "campaign #$C2 queued build #$J2 of the new commit"
build_it
is "$(state_of "$J2")" staged "build #$J2 is staged"
PR2=$(kernel_field "$C2" pr)
PR2_HEAD=$(head_of "$PR2")
like "$PR2" '^refs/pr/[0-9]+$' "on its own pull request ($PR2)"
api "$ALICE" GET "/api/builds/$J1"
is "$(jq -r '.state + ": " + .error' "$B")" "superseded: superseded by build #$J2" "build #$J1 is superseded by build #$J2"
is "$(kernel_field "$C1" state)" superseded "campaign #$C1's kernel says superseded"
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$C1/merge"
is "$ST" 409 "merging the superseded $PR1: 409"
like "$(jq -r .error "$B")" "superseded by a newer build" "… saying why"
is "$(head_of refs/heads/v1)" "$V1_START" "v1 did not move"
campaign_build
is "$(kernel_field "$CID" state)" skipped "a third campaign at the same commit builds nothing"
like "$(kernel_field "$CID" skipped)" "build #$J2" "… build #$J2 (staged) counts as built"

# ---- the merge of the newer one -----------------------------------------------------------------------
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$C2/merge"
is "$ST $(jq -r .targetCommit "$B")" "200 $PR2_HEAD" "merging $PR2 moves v1 to its head"
is "$(head_of refs/heads/v1)" "$PR2_HEAD" "the refs API agrees"
is "$(state_of "$J2") $(state_of "$J1")" "succeeded superseded" "build #$J2 succeeded, #$J1 stays superseded"
api "$ROOT" GET "/api/admin/campaigns/$C1"
is "$(jq -r '[.built, .merged] | map(tostring) | join(" ")' "$B")" "1 0" "campaign #$C1: 1 built, none merged"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
