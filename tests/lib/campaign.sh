# tests/lib/campaign.sh -- a hub for the fleet rebuild tests (sourced
# after khub-test.sh; docs/build-farm.md, "Fleet rebuilds"): campaign_fixture
# starts a hub with the variant $V1, accounts alice (admin of acme, $ALICE),
# bob (read member, $BOB), carol (no member, $CAROL), root (site admin,
# $ROOT), worker w1 ($W1, registered for $V1), and acme/relu (build.toml,
# cpu) with a v1 branch at $V1_START; then a campaign's build is started
# (campaign_build) and built through the real worker routes with a made-up
# output (build_it).
V1=torch211-cxx11-cpu-x86_64-linux
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
# campaign_fixture [SETTING-JSON]: the hub above; SETTING-JSON (acme/relu's settings) before w1 registers
campaign_fixture() {
	khub_setup
	B=$TEST_DIR/b
	printf '{"x86_64-linux": {"cpu": ["%s"]}}\n' "$V1" >"$TEST_DIR/variants.json"
	export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json KHUB_ABI_POLICY=warn
	local log=$TEST_DIR/setup.log
	khub_accounts
	for cmd in "user create bob" "member set acme bob read" "user create carol" "user create root --site-admin"; do
		khub admin $cmd >>"$log" 2>&1 || bail "khub admin $cmd failed"
	done
	BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
	ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
	CAROL=$(khub admin token create carol --scope write 2>>"$log" | tail -n 1)
	W1=$(khub admin worker add w1 2>>"$log" | tail -n 1)
	khub_start
	printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' \
		>"$TEST_DIR/build.toml"
	printf 'from ._ops import ops\n' >"$TEST_DIR/init.py"
	# no push plans it (buildOnPush off before build.toml lands): only the campaigns queue builds
	api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[{\"path\":\"torch-ext/relu/__init__.py\",\"content\":\"$(b64 "$TEST_DIR/init.py")\",\"encoding\":\"base64\"}]}"
	[ "$ST" = 200 ] || bail "acme/relu not created: $ST $(cat "$B")"
	api "$ALICE" PUT /api/kernels/acme/relu/settings '{"buildOnPush":false}'
	[ "$ST" = 200 ] || bail "buildOnPush not turned off: $ST"
	api "$ALICE" POST /api/kernels/acme/relu/commit/main "$(printf '{"key":"header","value":{"summary":"build.toml"}}\n{"key":"file","value":{"content":"%s","path":"build.toml","encoding":"base64"}}\n' "$(b64 "$TEST_DIR/build.toml")")"
	[ "$ST" = 200 ] || bail "build.toml not committed: $ST"
	api "$ALICE" POST /api/kernels/acme/relu/branch/v1 '{}'
	V1_START=$(head_of refs/heads/v1)
	[ "$ST" = 200 ] || bail "no v1 branch: $ST"
	if [ -n "${1-}" ]; then
		api "$ALICE" PUT /api/kernels/acme/relu/settings "$1"
		[ "$ST" = 200 ] || bail "settings $1: $ST"
	fi
	api "$W1" POST /api/workers/register "{\"version\":\"0.1\",\"concurrency\":1,\"toolchains\":[{\"name\":\"cpu\",\"variants\":[\"$V1\"]}]}"
	[ "$ST" = 200 ] || bail "w1 did not register: $ST"
}
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

