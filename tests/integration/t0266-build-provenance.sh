#!/bin/bash
# t0266-build-provenance.sh -- every farm build records signed provenance
# (docs/build-farm.md, "Provenance"): a real CPU build of a private kernel
# by khub-worker publishes build/<variant>/ on v1; GET
# /api/builds/ID/provenance answers a reader with a DSSE envelope of an
# in-toto Statement v1 (SLSA provenance v1) signed with the hub's key (GET
# /api/signing-key; checked here with the openssl tool, not khub), 404 to
# non-members and 401 RepoNotFound to anonymous callers (as the log route
# answers), 401 to a revoked token; the publishing commit names it by
# sha256; its subjects are exactly the downloaded files' sha256;
# build/<variant>/ holds no extra file. `khub
# verify-build` passes on the downloaded variant and fails (exit 1 or 3,
# saying what) on a flipped byte in a file, an extra file, a missing file,
# a changed statement, and another key.
. "$(dirname "$0")/../lib/khub-test.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git not installed"; exit 0; }
. "$KHUB_SRC/tests/lib/worker_env.sh"
worker_needs	# $WORKER_BIN
KSRC=${KHUB_TEST_KERNEL_SRC:-$KHUB_SRC/examples/relu}
[ -f "$KSRC/build.toml" ] || { echo "1..0 # SKIP no kernel source with build.toml at $KSRC"; exit 0; }

khub_setup
export KHUB_ABI_POLICY=warn	# a Debian toolchain links symbols newer than manylinux allows (t0131)
W=$TEST_DIR/worker
mkdir -p "$W/work"
worker_toolchain "$W/toolchains.json" ', "cmake": "cmake", "ninja": "ninja", "env": {}'
worker_check "$W/toolchains.json"	# $VARIANT, or a skip
[ -n "$VARIANT" ] || { echo "1..0 # SKIP the toolchain builds no cpu variant"; exit 0; }
diag "building $VARIANT"

log=$TEST_DIR/setup.log
khub_accounts	# alice, acme (her org), $ALICE
khub admin user create bob >>"$log" 2>&1
BOB=$(khub admin token create bob --scope write 2>>"$log" | tail -n 1)
DEAD=$(khub admin token create alice --scope read 2>"$TEST_DIR/dead.err" | tail -n 1)
khub admin token revoke "$(sed -n 's/^token id \([0-9]*\) .*/\1/p' "$TEST_DIR/dead.err")" >>"$log" 2>&1 ||
	bail "cannot revoke a token"
WT=$(khub admin worker add w1 --private 2>>"$log" | tail -n 1)
printf '%s\n' "$WT" >"$W/w1.token"
chmod 600 "$W/w1.token"
cp -r "$KSRC" "$TEST_DIR/src" && rm -rf "$TEST_DIR/src/build"
SHA=$(khub import "$TEST_DIR/src" --repo acme/relu --type kernel --private 2>>"$log" | tail -n 1)
[[ "$SHA" =~ ^[0-9a-f]{40}$ ]] || { sed 's/^/# /' "$log"; bail "import failed"; }
khub_start

B=$TEST_DIR/body
H=$TEST_DIR/headers
worker() {
	"$WORKER_BIN" --url "$KHUB_URL" --token-file "$W/w1.token" --toolchains "$W/toolchains.json" --name w1 \
		--work-dir "$W/work" --once 2>>"$W/w1.log"
}

# ---- a real build publishes ---------------------------------------------------------------------
worker	# registers (nothing queued yet)
api POST /api/kernels/acme/relu/builds -H "Authorization: Bearer $ALICE" --json "{\"revision\": \"$SHA\", \"variants\": [\"$VARIANT\"]}"
ID=$(jq -r '.builds[0].id' "$B")
like "$STATUS $ID" '^20[02] [0-9]+$' "a build of $VARIANT is queued (#$ID)"
worker
is "$?" 0 "khub-worker --once builds and uploads it"
api GET "/api/builds/$ID" -H "Authorization: Bearer $ALICE"
is "$(jq -r .state "$B")" succeeded "build #$ID succeeded (published)" || { tail -20 "$W/w1.log" | sed 's/^/# /'; }

# ---- the provenance route ---------------------------------------------------------------------------
P=$TEST_DIR/provenance.json
api GET "/api/builds/$ID/provenance" -H "Authorization: Bearer $ALICE"
cp "$B" "$P"
is "$STATUS $(header Content-Type)" "200 application/json" "a reader gets the provenance (200, JSON)"
PSHA=$(sha256sum "$P" | cut -c1-64)
is "$(header X-Provenance-Sha256)" "$PSHA" "X-Provenance-Sha256 is the body's sha256"
# refusals as the build's log route answers them (the Hub's answers for a
# private repo: nothing says it exists)
for route in provenance log; do
	api GET "/api/builds/$ID/$route"
	is "$STATUS $(header X-Error-Code)" "401 RepoNotFound" "anonymous × $route: 401 RepoNotFound (the repo is private)"
	api GET "/api/builds/$ID/$route" -H "Authorization: Bearer $BOB"
	is "$STATUS $(header X-Error-Code)" "404 RepoNotFound" "a signed-in non-member × $route: 404 RepoNotFound"
	api GET "/api/builds/$ID/$route" -H "Authorization: Bearer $DEAD"
	is "$STATUS $(jq -r .error "$B")" "401 Invalid credentials in Authorization header" "a revoked token × $route: 401"
done
api GET "/api/builds/999999/provenance" -H "Authorization: Bearer $ALICE"
is "$STATUS" 404 "no such build: 404"

api GET "/api/kernels/acme/relu/commits/v1?limit=100" -H "Authorization: Bearer $ALICE"
MSG=$(jq -r --arg t "(build #$ID)" '[.[] | select(.title | contains($t))][0].message' "$B")
like "$MSG" "Provenance: /api/builds/$ID/provenance sha256:$PSHA" \
	"the publishing commit names the provenance and its sha256 (a trailer)"

# ---- what is signed ----------------------------------------------------------------------------------
jq -r .payload "$P" | base64 -d >"$TEST_DIR/statement.json"
is "$(jq -r .payloadType "$P")" application/vnd.in-toto+json "a DSSE envelope of an in-toto payload"
S=$TEST_DIR/statement.json
is "$(jq -r '._type + " " + .predicateType' "$S")" "https://in-toto.io/Statement/v1 https://slsa.dev/provenance/v1" \
	"an in-toto Statement v1 with SLSA provenance v1"
TOML_SHA=$(sha256sum "$TEST_DIR/src/build.toml" | cut -c1-64)
is "$(jq -r '.predicate.buildDefinition.externalParameters | [.source.commit, .variant, .buildToml.sha256] | join(" ")' "$S")" \
	"$SHA $VARIANT $TOML_SHA" "buildDefinition: the source commit, the variant, build.toml's sha256"
like "$(jq -r '.predicate.buildDefinition.externalParameters.source.repository' "$S")" '/kernels/acme/relu$' \
	"buildDefinition: the source repository"
RD=$(jq -c '.predicate.runDetails' "$S")
is "$(jq -r '.builder.builderDependencies[0] | [.name, (.annotations.sandbox | type), (.annotations.toolchain.torch | type)] | join(" ")' <<<"$RD")" \
	"w1 string string" "runDetails: the worker, its sandbox kind and toolchain probe (torch)"
like "$(jq -r '[.builder.id, .metadata.startedOn, .metadata.finishedOn] | join(" ")' <<<"$RD")" \
	'^http://127\.0\.0\.1:[0-9]+ 20[0-9-]+T[0-9:.]+Z 20[0-9-]+T[0-9:.]+Z$' "runDetails: the hub as builder id, start and end times"

api GET /api/signing-key
cp "$B" "$TEST_DIR/hub.pub"
is "$STATUS $(header X-Key-Id)" "200 $(jq -r '.signatures[0].keyid' "$P")" "GET /api/signing-key: the key the envelope names"
# DSSE: the signature is over PAE(payloadType, payload); checked with openssl, not khub
PT=application/vnd.in-toto+json
{ printf 'DSSEv1 %d %s %d ' ${#PT} "$PT" "$(stat -c %s "$S")"; cat "$S"; } >"$TEST_DIR/pae.bin"
jq -r '.signatures[0].sig' "$P" | base64 -d >"$TEST_DIR/sig.bin"
openssl pkeyutl -verify -pubin -inkey "$TEST_DIR/hub.pub" -rawin -in "$TEST_DIR/pae.bin" \
	-sigfile "$TEST_DIR/sig.bin" >"$TEST_DIR/openssl.out" 2>&1
ok $? "openssl verifies the Ed25519 signature over DSSE's PAE under /api/signing-key's key"

# ---- the download, file by file --------------------------------------------------------------------
DL=$TEST_DIR/dl/$VARIANT
mkdir -p "$DL"
api GET "/api/kernels/acme/relu/tree/v1/build/$VARIANT?recursive=true" -H "Authorization: Bearer $ALICE"
jq -r '.[] | select(.type == "file") | .path' "$B" >"$TEST_DIR/paths"
like "$(wc -l <"$TEST_DIR/paths")" '^[1-9][0-9]*$' "build/$VARIANT/ on v1 has $(wc -l <"$TEST_DIR/paths") files"
while read -r path; do
	mkdir -p "$(dirname "$TEST_DIR/dl/${path#build/}")"
	curl -sfL -H "Authorization: Bearer $ALICE" -o "$TEST_DIR/dl/${path#build/}" "$KHUB_URL/kernels/acme/relu/resolve/v1/$path" ||
		echo "$path" >>"$TEST_DIR/failed"
done <"$TEST_DIR/paths"
check "every file downloads" -- test ! -e "$TEST_DIR/failed"
(cd "$DL" && find . -type f | sed 's|^\./||' | sort | while read -r f; do echo "$(sha256sum "$f" | cut -c1-64) $f"; done) >"$TEST_DIR/have"
jq -r '.subject[] | .digest.sha256 + " " + .name' "$S" | sort -k2 >"$TEST_DIR/want"
is "$(cat "$TEST_DIR/want")" "$(cat "$TEST_DIR/have")" "the subjects are exactly the published files with their sha256"
check "nothing but the variant's files in build/$VARIANT/ (metadata.json among them)" -- \
	grep -qx "[0-9a-f]* metadata.json" "$TEST_DIR/have"

# ---- khub verify-build ------------------------------------------------------------------------------
vb() {	# vb DIR [args]: khub verify-build's exit in $VRC, its output in $VOUT
	VOUT=$("$KHUB_BIN" verify-build "$@" 2>&1)
	VRC=$?
}
vb "$DL" --provenance "$P" --key "$TEST_DIR/hub.pub"
is "$VRC" 0 "verify-build passes on the downloaded variant"
like "$VOUT" "^verified: the [0-9]+ files of .* are build #$ID of .*/kernels/acme/relu at $SHA \\(variant $VARIANT\\)" \
	"  and says which build it is"
vb "$DL" --provenance "$P"
is "$VRC" 0 "on the hub's host, without --key: the hub's own key"

copy() { rm -rf "$TEST_DIR/c"; cp -r "$DL" "$TEST_DIR/c"; }
copy
F=$(find "$TEST_DIR/c" -name '*.so' | head -1)
[ -n "$F" ] || F=$TEST_DIR/c/metadata.json
/usr/bin/python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=1; open(p,'wb').write(b)" "$F"
vb "$TEST_DIR/c" --provenance "$P" --key "$TEST_DIR/hub.pub"
is "$VRC" 1 "a flipped byte in ${F#$TEST_DIR/c/}: exit 1"
like "$VOUT" "changed file: ${F#$TEST_DIR/c/} \\(sha256 [0-9a-f]{64}, the provenance says" "  naming the file"
copy
echo extra >"$TEST_DIR/c/extra.py"
vb "$TEST_DIR/c" --provenance "$P" --key "$TEST_DIR/hub.pub"
is "$VRC" 1 "an extra file: exit 1"
like "$VOUT" "extra file: extra.py \\(the provenance does not list it\\)" "  naming it"
copy
rm "$TEST_DIR/c/metadata.json"
vb "$TEST_DIR/c" --provenance "$P" --key "$TEST_DIR/hub.pub"
is "$VRC" 1 "a missing file: exit 1"
like "$VOUT" "missing file: metadata.json \\(the provenance lists it\\)" "  naming it"

# the statement altered: one subject's digest changed, the envelope re-encoded
jq -c '.subject[0].digest.sha256 = ("0" * 64)' "$S" | tr -d '\n' | base64 -w0 >"$TEST_DIR/payload2"
jq --rawfile p "$TEST_DIR/payload2" '.payload = ($p | rtrimstr("\n"))' "$P" >"$TEST_DIR/altered.json"
vb "$DL" --provenance "$TEST_DIR/altered.json" --key "$TEST_DIR/hub.pub"
is "$VRC" 3 "a changed statement: exit 3"
like "$VOUT" "signature does not verify under key" "  the signature does not verify"
# one byte of the envelope flipped in place
/usr/bin/python3 -c "import sys,json; p=sys.argv[1]; d=json.load(open(p)); s=d['payload']; i=len(s)//2; d['payload']=s[:i]+('A' if s[i]!='A' else 'B')+s[i+1:]; open(sys.argv[2],'w').write(json.dumps(d))" "$P" "$TEST_DIR/flipped.json"
vb "$DL" --provenance "$TEST_DIR/flipped.json" --key "$TEST_DIR/hub.pub"
is "$VRC" 3 "a flipped byte in the statement: exit 3"
khub sync keygen --out "$TEST_DIR/other" >>"$log" 2>&1
vb "$DL" --provenance "$P" --key "$TEST_DIR/other.pub"
is "$VRC" 3 "another key: exit 3"
like "$VOUT" "does not verify under key [0-9a-f]{16} \\(signed by key $(jq -r '.signatures[0].keyid' "$P")\\)" \
	"  naming both keys"
vb "$DL" --provenance "$TEST_DIR/nope.json" --key "$TEST_DIR/hub.pub"
is "$VRC" 2 "a provenance file that is not there: exit 2"

khub_stop
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"
done_testing
