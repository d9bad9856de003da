#!/bin/bash
# t0325-campaign-publish-direct.sh -- the repo setting that publishes a
# fleet rebuild's results directly (docs/build-farm.md, "Fleet rebuilds";
# PUT …/settings {"campaignPublish"}): a read member may not set it, a
# value other than "pr" or "direct" is refused; with "direct" a campaign's
# build (claimed and uploaded through the real worker routes) lands on v1
# itself: no refs/pr/N, the campaign's kernel says publish "direct" with no
# pull request, v1 holds the variant, and there is nothing to merge.
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

# ---- the setting ---------------------------------------------------------------------------------
api "$BOB" PUT /api/kernels/acme/relu/settings '{"campaignPublish":"direct"}'
is "$ST" 403 "a read member may not set campaignPublish"
api "$ALICE" PUT /api/kernels/acme/relu/settings '{"campaignPublish":"sometimes"}'
is "$ST" 400 "campaignPublish \"sometimes\" is refused: 400"
api "$ALICE" PUT /api/kernels/acme/relu/settings '{"campaignPublish":"direct"}'
is "$ST" 200 "a writer sets campaignPublish to direct"

# ---- a campaign, built through the worker routes ------------------------------------------------
api "$W1" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
is "$ST" 200 "w1 registers"
api "$ROOT" POST /api/admin/campaigns "{\"variant\":\"$V1\"}"
CID=$(jq -r '.campaigns[0].id' "$B")
is "$ST" 201 "a site admin starts a campaign of $V1 (#$CID)"
for _ in $(seq 1 600); do
	[ "$(kernel_field "$CID" state)" = queued ] && break
	sleep 0.2
done
is "$(kernel_field "$CID" state) $(kernel_field "$CID" publish)" "queued direct" "acme/relu's build is queued, to publish directly"
J=$(kernel_field "$CID" build)
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
is "$ST" 200 "w1 uploads its output"
api "$ALICE" GET "/api/builds/$J"
is "$(jq -r '.state + " " + .published.branch' "$B")" "succeeded v1" "build #$J succeeded, published on v1"
PUBLISHED=$(jq -r .published.commit "$B")
V1_HEAD=$(head_of refs/heads/v1)
like "$V1_HEAD" '^[0-9a-f]{40}$' "v1 exists at ${V1_HEAD:0:12}"
is "$PUBLISHED" "$V1_HEAD" "… at the build's publishing commit"
api "$ALICE" GET "/api/kernels/acme/relu/refs?include_prs=1"
is "$(jq '(.pullRequests // []) | length' "$B")" 0 "no pull request ref was made"
is "$(kernel_field "$CID" pr)" "" "the campaign's kernel names no pull request"
ST=$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/kernels/acme/relu/resolve/v1/build/$V1/metadata.json")
is "$ST $(jq -r .version "$B")" "200 1" "v1 holds build/$V1/metadata.json"
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$CID/merge"
is "$ST" 404 "nothing to merge: 404"
is "$(head_of refs/heads/v1)" "$V1_HEAD" "v1 did not move"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
