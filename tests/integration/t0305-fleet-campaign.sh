#!/bin/bash
# t0305-fleet-campaign.sh -- fleet rebuilds (docs/build-farm.md, "Fleet
# rebuilds"): with build_campaign_on_new_variant on, a worker registering a
# toolchain whose variant no live worker offered starts a campaign: of two
# kernels, the one whose build.toml allows the variant gets it queued, the
# other (backends = ["cuda"]) is skipped with build.toml's reason. After a
# real CPU build (Debian's python3-torch) the output is staged on refs/pr/N
# of the kernel, described with the variant and its ABI report; v1 does not
# move until a writer merges it (anonymous and read members refused), then v1
# holds the variant. The admin routes refuse anonymous, non-admin,
# read-scoped and revoked tokens; the CLI and /admin show the counts.
. "$(dirname "$0")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs	# $WORKER_BIN
KSRC=$KHUB_SRC/examples/relu

khub_setup
export KHUB_ABI_POLICY=warn KHUB_BUILD_CAMPAIGN_ON_NEW_VARIANT=1
W=$TEST_DIR/worker
mkdir -p "$W/work"
worker_toolchain "$W/toolchains.json" ', "cmake": "cmake", "ninja": "ninja", "env": {}'
worker_check "$W/toolchains.json"	# $VARIANT, or a skip
# every variant the toolchain offers, as the daemon registers them (a noarch torch-cpu too)
OFFERED=$(grep -E '^  torch[^ ]*$' "$W/check.out" | tr -d ' ' | jq -R . | jq -sc .)
[ -n "$VARIANT" ] || { echo "1..0 # SKIP the toolchain offers no CPU variant"; exit 0; }
diag "campaign of $VARIANT"

log=$TEST_DIR/setup.log
khub_accounts	# alice (admin of acme), $ALICE
for cmd in "user create bob" "member set acme bob read" "user create root --site-admin"; do
	khub admin $cmd >>"$log" 2>&1 || bail "khub admin $cmd failed"
done
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
ROOT=$(khub admin token create root --scope write 2>>"$log" | tail -n 1)
ROOT_READ=$(khub admin token create root --token-name ro --scope read 2>>"$log" | tail -n 1)
ROOT_DEAD=$(khub admin token create root --token-name dead --scope write 2>>"$log" | tail -n 1)
dead_id=$(khub admin token list root 2>>"$log" | grep -w dead | grep -oE '^[[:space:]]*[0-9]+' | tr -d ' ' | head -1)
khub admin token revoke "$dead_id" >>"$log" 2>&1 || bail "revoke"
khub admin worker add w1 2>>"$log" | tail -n 1 >"$W/w1.token"
chmod 600 "$W/w1.token"
# acme/relu builds cpu; acme/cudaonly is the same source whose build.toml lists cuda only
khub import "$KSRC" --repo acme/relu --type kernel >>"$log" 2>&1 || bail "import acme/relu"
cp -r "$KSRC" "$TEST_DIR/cudaonly"
cat >"$TEST_DIR/cudaonly/build.toml" <<'EOF'
[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.relu_cuda]
backend = "cuda"
depends = ["torch"]
src = ["relu_cuda/relu_kernel.cu", "relu_cuda/relu_kernel.h", "relu_cuda/relu_gpu.cpp"]
EOF
khub import "$TEST_DIR/cudaonly" --repo acme/cudaonly --type kernel >>"$log" 2>&1 || bail "import acme/cudaonly"
khub_start

B=$TEST_DIR/b
api() {	# api TOKEN METHOD PATH [BODY] -> $ST, body in $B
	local args=(-s -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
head_of() {	# head_of REPO REF: the ref's commit ("" none)
	api "$ALICE" GET "/api/kernels/acme/$1/refs?include_prs=1"
	jq -r --arg r "$2" '[.branches[], (.pullRequests // [])[]] | map(select(.ref == $r)) | .[0].targetCommit // ""' "$B"
}
kernel_field() {	# kernel_field CAMPAIGN REPO FIELD
	api "$ROOT" GET "/api/admin/campaigns/$1"
	jq -r --arg k "acme/$2" ".kernels[] | select(.kernel == \$k) | .$3 // \"\"" "$B"
}

api "$ALICE" POST /api/kernels/acme/relu/branch/v1 '{}'
V1=$(head_of relu refs/heads/v1)
like "$ST $V1" '^200 [0-9a-f]{40}$' "acme/relu has a v1 branch (without builds) at ${V1:0:12}"
api "$ROOT" GET /api/admin/campaigns
is "$ST $(jq '.campaigns | length' "$B")" "200 0" "no campaign before the toolchain registers"

# ---- the policy: a toolchain with a new variant starts a campaign ------------------------------------
api "$(cat "$W/w1.token")" POST /api/workers/register \
	"{\"name\":\"w1\",\"toolchains\":[{\"name\":\"cpu-debian\",\"variants\":$OFFERED}]}"
is "$ST" 200 "worker w1 registers the toolchain cpu-debian offering $OFFERED"
NOFFERED=$(jq length <<<"$OFFERED")
for _ in $(seq 1 600); do
	api "$ROOT" GET /api/admin/campaigns
	CID=$(jq -r --arg v "$VARIANT" '.campaigns[] | select(.variant == $v) | .id' "$B")
	[ -n "$CID" ] && [ "$(kernel_field "$CID" cudaonly state)" = skipped ] &&
		[ "$(kernel_field "$CID" relu state)" = queued ] && break
	sleep 0.2
done
api "$ROOT" GET /api/admin/campaigns
is "$(jq -r '.campaigns | length' "$B") $(jq -r '[.campaigns[].requested_by] | unique | join(" ")' "$B")" \
	"$NOFFERED policy" "the policy started one campaign per new variant ($NOFFERED)"
like "$(jq -r --arg v "$VARIANT" '.campaigns[] | select(.variant == $v) | .reason' "$B")" \
	"^policy: a toolchain of worker" "… the one of $VARIANT saying why"
is "$(kernel_field "$CID" relu state)" queued "acme/relu (build.toml allows cpu): its build queued"
BID=$(kernel_field "$CID" relu build)
is "$(kernel_field "$CID" cudaonly state) $(kernel_field "$CID" cudaonly build)" "skipped " \
	"acme/cudaonly (backends = [\"cuda\"]): nothing queued"
like "$(kernel_field "$CID" cudaonly skipped)" "^build.toml does not build it" "… with build.toml's reason"
api "$ALICE" GET /api/kernels/acme/cudaonly/builds
is "$ST $(jq '.builds | length' "$B")" "200 0" "acme/cudaonly has no build"
api "$ALICE" GET "/api/builds/$BID"
is "$(jq -r '.variant + " " + .requested_by' "$B")" "$VARIANT campaign #$CID" "build #$BID is the campaign's"
api "$ROOT" GET "/api/admin/campaigns/$CID"
is "$(jq -r '[.total, .waiting, .built, .skipped] | map(tostring) | join(" ")' "$B")" "2 1 0 1" \
	"the campaign counts 2 kernels: 1 waiting, 0 built, 1 skipped"

# ---- a real CPU build, staged on refs/pr/N ------------------------------------------------------------
"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
	--work-dir "$W/work" --once 2>>"$W/w1.log"
is "$?" 0 "khub-worker --once built the queue"
api "$ALICE" GET "/api/builds/$BID"
is "$(jq -r .state "$B")" staged "build #$BID staged" || sed 's/^/#   /' "$W/w1.log" | tail -20
PR=$(kernel_field "$CID" relu pr)
like "$PR" '^refs/pr/[0-9]+$' "the output is staged on a pull request ref ($PR)"
PR_HEAD=$(head_of relu "$PR")
like "$PR_HEAD" '^[0-9a-f]{40}$' "… which the refs API lists at ${PR_HEAD:0:12}"
DESC=$(kernel_field "$CID" relu description)
like "$DESC" "Variants: $VARIANT" "its description names the variant"
like "$DESC" "ABI reports: $VARIANT: .*GET /api/builds/$BID" "… and its ABI report"
is "$(head_of relu refs/heads/v1)" "$V1" "v1 did not move"
md="build/$VARIANT/metadata.json"
ST=$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/kernels/acme/relu/resolve/v1/$md")
is "$ST" 404 "v1 has no $md yet"
ST=$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/kernels/acme/relu/resolve/${PR//\//%2F}/$md")
is "$ST $(jq -r .version "$B")" "200 1" "$PR holds $md"
api "$ROOT" GET "/api/admin/campaigns/$CID"
is "$(jq -r '[.waiting, .built, .failed] | map(tostring) | join(" ")' "$B")" "0 1 0" "the campaign counts it built"

# ---- the merge -----------------------------------------------------------------------------------------
api "" POST "/api/kernels/acme/relu/campaigns/$CID/merge"
st_anon=$ST
api "$BOB" POST "/api/kernels/acme/relu/campaigns/$CID/merge"
is "$st_anon $ST" "401 403" "the merge: anonymous 401, a read member 403"
api "$ALICE" POST "/api/kernels/acme/cudaonly/campaigns/$CID/merge"
is "$ST" 404 "acme/cudaonly has nothing to merge: 404"
is "$(head_of relu refs/heads/v1)" "$V1" "v1 still where it was"
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$CID/merge"
is "$ST $(jq -r '.branch + " " + .targetCommit' "$B")" "200 v1 $PR_HEAD" "a writer merges $PR: v1 moves to its head"
is "$(head_of relu refs/heads/v1)" "$PR_HEAD" "the refs API agrees"
api "$ALICE" GET "/api/builds/$BID"
is "$(jq -r .state "$B")" succeeded "build #$BID succeeded (merged)"
ST=$(curl -s -o "$B" -w '%{http_code}' "$KHUB_URL/kernels/acme/relu/resolve/v1/$md")
is "$ST $(jq -r .version "$B")" "200 1" "v1 now holds $md"
api "$ALICE" POST "/api/kernels/acme/relu/campaigns/$CID/merge"
is "$ST" 409 "a second merge: 409"
api "$ROOT" GET "/api/admin/campaigns/$CID"
is "$(jq -r '.merged' "$B")" 1 "the campaign counts it merged"

# ---- admin-only routes ---------------------------------------------------------------------------------
for who in ":401" "$ALICE:403" "$ROOT_READ:403" "$ROOT_DEAD:401"; do
	api "${who%:*}" POST /api/admin/campaigns "{\"variant\":\"$VARIANT\"}"
	s1=$ST
	api "${who%:*}" GET /api/admin/campaigns
	is "$s1 $ST" "${who#*:} ${who#*:}" "POST and GET /api/admin/campaigns refused: ${who#*:}"
done
api "$ROOT" GET /api/admin/campaigns
is "$(jq '.campaigns | length' "$B")" "$NOFFERED" "… and none of them started one"
api "$ROOT" POST /api/admin/campaigns '{"variant":"not a variant"}'
is "$ST" 400 "a site admin's start with a bad variant: 400"
api "$ROOT" POST /api/admin/campaigns '{"toolchain":"cpu-debian"}'
is "$ST $(jq -r '[.campaigns[].variant] | sort | join(" ")' "$B")" "201 $(jq -r 'sort | join(" ")' <<<"$OFFERED")" \
	"a site admin starts campaigns by toolchain (one per variant): 201"
C2=$(jq -r --arg v "$VARIANT" '.campaigns[] | select(.variant == $v) | .id' "$B")
for _ in $(seq 1 600); do
	[ "$(kernel_field "$C2" relu state)" = skipped ] && [ "$(kernel_field "$C2" cudaonly state)" = skipped ] && break
	sleep 0.2
done
like "$(kernel_field "$C2" relu skipped)" "already built" "… acme/relu skipped: the variant is built at that commit"

# ---- the CLI and the admin page ------------------------------------------------------------------------
khub builds --help >"$TEST_DIR/help.out" 2>&1
grep -q "khub builds campaign start --variant VARIANT | --toolchain NAME" "$TEST_DIR/help.out"
ok $? "khub builds --help shows campaign"
khub builds campaign show "$CID" >"$TEST_DIR/cli.out" 2>>"$log"
like "$(grep -E "^$CID " "$TEST_DIR/cli.out")" "^$CID +$VARIANT +2 +1 +0 +0 +1 +1\$" \
	"khub builds campaign show: 2 kernels, 1 built, 0 failed, 0 waiting, 1 skipped, 1 merged"
jar=$TEST_DIR/root.jar
curl -s -c "$jar" -o "$TEST_DIR/login.html" "$KHUB_URL/login"
csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$TEST_DIR/login.html" | head -1 | sed 's/.*value="//; s/"//')
curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "csrf=$csrf" --data-urlencode "token=$ROOT" "$KHUB_URL/login"
ST=$(curl -s -b "$jar" -o "$B" -w '%{http_code}' "$KHUB_URL/admin")
tr -d '\n' <"$B" | grep -oE "<tr class=\"campaign\" data-campaign=\"$CID\">.*" | sed 's|</tr>.*||' >"$TEST_DIR/row.html"
grep -qF '<td class="num campaign-built">1</td><td class="num campaign-failed">0</td><td class="num campaign-waiting">0</td><td class="num campaign-skipped">1</td>' \
	"$TEST_DIR/row.html"
ok $? "/admin shows campaign #$CID: 1 built, 0 failed, 0 waiting, 1 skipped"
grep -qF 'href="/kernels/acme/relu"' "$TEST_DIR/row.html" && grep -qF "href=\"/kernels/acme/relu/builds/$BID/log\"" \
	"$TEST_DIR/row.html" && grep -qF 'href="/kernels/acme/cudaonly"' "$TEST_DIR/row.html"
ok $? "… with each kernel linked, and the build's log"
done_testing
