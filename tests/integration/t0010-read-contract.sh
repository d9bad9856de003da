#!/bin/bash
# t0010-read-contract.sh -- the read API's header and JSON contract, pinned
# with curl against a real server: refs, tree (+ pagination), revision,
# resolve HEAD/GET, ETags, ranges, every X-Error-Code, private repos.
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
khub import "$SRC" --repo acme/relu --branch v1 >/dev/null 2>&1
V1=$(khub import "$SRC" --repo acme/relu --branch v1 2>/dev/null)
echo "changed" >>"$SRC/README.md"
MAIN=$(khub import "$SRC" --repo acme/relu --branch main --message "main commit" 2>/dev/null)
khub import "$SRC" --repo acme/secret --branch main --private >/dev/null 2>&1
khub admin trust set acme >/dev/null 2>&1
khub admin org create other >/dev/null 2>&1
khub admin user create alice >/dev/null 2>&1
khub admin user create mallory >/dev/null 2>&1
khub admin member set acme alice read >/dev/null 2>&1
ALICE=$(khub admin token create alice --scope read 2>/dev/null)
MALLORY=$(khub admin token create mallory 2>/dev/null)
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
git --git-dir="$GITDIR" tag release-1 "$V1"
git --git-dir="$GITDIR" update-ref refs/pr/1 "$MAIN"
khub_start --tree-page-size 4

like "$V1" '^[0-9a-f]{40}$' "import prints the commit sha"
like "$ALICE" '^hf_[A-Za-z]{34}$' "tokens start with hf_"

H=$TEST_DIR/headers
B=$TEST_DIR/body
# api, header and jget: tests/lib/khub-test.sh

# ---- agent harnesses, org overview ------------------------------------------
api GET "$KHUB_URL/api/agent-harnesses"
is "$STATUS" 200 "agent-harnesses answers 200 (cached by the client)"
api GET "$KHUB_URL/api/organizations/acme/overview"
is "$(jget .trustedKernelPublisher)" true "trusted org says trustedKernelPublisher: true"
api GET "$KHUB_URL/api/organizations/other/overview"
is "$(jget .trustedKernelPublisher)" false "untrusted org says false"
api GET "$KHUB_URL/api/organizations/nobody-here/overview"
is "$STATUS" 404 "unknown org is 404"
api GET "$KHUB_URL/api/users/alice/overview"
is "$STATUS/$(jget '"\(.name) \(.type) \(.trustedKernelPublisher)"')" "200/alice user false" \
	"user overview (kernels asks every namespace for its trust flag)"
api GET "$KHUB_URL/api/users/acme/overview"
is "$STATUS" 404 "an org is not a user"

# ---- refs -------------------------------------------------------------------
api GET "$KHUB_URL/api/kernels/acme/relu/refs"
is "$STATUS" 200 "refs 200"
is "$(jget 'keys | join(" ")')" "branches converts tags" "refs has exactly branches/converts/tags"
is "$(jget '[.branches[] | select(.name == "v1") | .targetCommit][0]')" "$V1" "v1 targetCommit"
is "$(jget '[.branches[] | select(.name == "main") | .ref][0]')" "refs/heads/main" "branch ref is the full ref"
is "$(jget '[.tags[] | "\(.name) \(.targetCommit)"] | join(";")')" "release-1 $V1" "tags listed"
api GET "$KHUB_URL/api/kernels/acme/relu/refs?include_prs=1"
is "$(jget '[.pullRequests[] | "\(.name) \(.ref) \(.targetCommit)"] | join(";")')" "1 refs/pr/1 $MAIN" "include_prs=1 lists pull requests"

# ---- revision -----------------------------------------------------------------
for rev in v1 refs%2Fheads%2Fv1 release-1 "$V1"; do
	api GET "$KHUB_URL/api/kernels/acme/relu/revision/$rev"
	is "$(jget .sha)" "$V1" "revision $rev resolves to v1's sha"
done
is "$(jget 'has("siblings")')" false "kernel revision info has no siblings"
is "$(jget .id)" "acme/relu" "revision info id"
api GET "$KHUB_URL/api/kernels/acme/relu/revision/nope"
is "$STATUS/$(header X-Error-Code)" "404/RevisionNotFound" "unknown revision: 404 RevisionNotFound"
api GET "$KHUB_URL/api/kernels/acme/relu/revision/0000000000000000000000000000000000000000"
is "$STATUS/$(header X-Error-Code)" "404/RevisionNotFound" "unknown sha: 404 RevisionNotFound"
api GET "$KHUB_URL/api/kernels/acme/nope/revision/main"
is "$STATUS/$(header X-Error-Code)" "401/RepoNotFound" "unknown repo (anonymous): 401 RepoNotFound"
api GET "$KHUB_URL/api/models/acme/relu/revision/v1"
is "$STATUS/$(jget .sha)" "200/$V1" "kernel repo reachable under the model prefix"
is "$(jget '.siblings | length > 0')" true "model-prefix info lists siblings"

# ---- tree ---------------------------------------------------------------------
api GET "$KHUB_URL/api/kernels/acme/relu/tree/$V1/build?recursive=false&expand=false"
is "$(jget '[.[] | [.type, .path]] | sort | map(join(" ")) | join(",")')" \
	"directory build/torch-cpu,directory build/torch211-cxx11-cu128-x86_64-linux" \
	"non-recursive tree of build lists the variant directories only"
api GET "$KHUB_URL/api/kernels/acme/relu/tree/refs%2Fheads%2Fv1/build%2Ftorch-cpu?recursive=false&expand=false"
is "$(jget '[.[].path] | sort | join(",")')" "build/torch-cpu/__init__.py,build/torch-cpu/metadata.json" \
	"encoded full ref and encoded path (split, then decode)"

# Follow Link pages (page size 4) and compare with git's own listing.
collect_tree() {	# collect_tree URL -> all entries in $TEST_DIR/all.json, pages in $PAGES
	local url=$1
	PAGES=0
	LINKS_ABSOLUTE=yes
	echo '[]' >"$TEST_DIR/all.json"
	while [ -n "$url" ]; do
		api GET "$url"
		PAGES=$((PAGES + 1))
		jq -s add "$TEST_DIR/all.json" "$B" >"$TEST_DIR/all.json.new" && mv "$TEST_DIR/all.json.new" "$TEST_DIR/all.json"
		url=$(header Link | sed -n 's/^<\(.*\)>; rel="next"$/\1/p')
		if [ -n "$url" ] && [[ ! "$url" =~ ^http://127\.0\.0\.1:$KHUB_PORT/ ]]; then LINKS_ABSOLUTE=no; fi
		if [ -n "$url" ] && [[ ! "$url" =~ recursive=true ]]; then LINKS_ABSOLUTE=no; fi
	done
}
collect_tree "$KHUB_URL/api/kernels/acme/relu/tree/v1?recursive=true&expand=false"
ok $([ "$PAGES" -gt 2 ]; echo $?) "recursive tree is paginated ($PAGES pages of 4)"
is "$LINKS_ABSOLUTE" yes "every Link is absolute and keeps recursive=true"
GOT=$(jget "$TEST_DIR/all.json" '[.[] | select(.type == "file") | .path] | sort[]')
WANT=$(git --git-dir="$GITDIR" ls-tree -r --name-only "$V1" | sort)
is "$GOT" "$WANT" "paginated listing has exactly git's files"
GOT=$(jget "$TEST_DIR/all.json" '[.[] | select(.type == "directory") | .path] | sort[]')
WANT=$(git --git-dir="$GITDIR" ls-tree -r -d --name-only "$V1" | sort)
is "$GOT" "$WANT" "and exactly git's directories"
DIRS_OK=$(/usr/bin/python3 - "$TEST_DIR/all.json" "$GITDIR" "$V1" <<'PY'
import json, subprocess, sys
entries, gitdir, sha = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
bad = 0
for e in entries:
    if e["type"] == "directory":
        want = subprocess.check_output(["git", "--git-dir", gitdir, "rev-parse", f"{sha}:{e['path']}"]).decode().strip()
        bad += e["oid"] != want or e["size"] != 0
print("yes" if bad == 0 else "no")
PY
)
is "$DIRS_OK" yes "directory oids are the real git tree shas"
api GET "$KHUB_URL/api/kernels/acme/relu/tree/v1/missing-dir"
is "$STATUS/$(header X-Error-Code)" "404/EntryNotFound" "tree of a missing path: 404 EntryNotFound"
api GET "$KHUB_URL/api/kernels/acme/relu/tree/nope"
is "$STATUS/$(header X-Error-Code)" "404/RevisionNotFound" "tree of a missing revision: RevisionNotFound"
api GET "$KHUB_URL/api/kernels/acme/relu/tree/refs/pr/1"
is "$STATUS" 200 "unencoded refs/pr/1 revision in a tree URL"

# ---- resolve: HEAD --------------------------------------------------------------
PY_FILE=build/torch-cpu/__init__.py
SO_FILE=build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so
api HEAD "$KHUB_URL/kernels/acme/relu/resolve/v1/$PY_FILE"
is "$STATUS" 200 "HEAD regular file"
is "$(header X-Repo-Commit)" "$V1" "X-Repo-Commit is the resolved sha"
is "$(header ETag)" "\"$(git hash-object "$SRC/$PY_FILE")\"" "regular file ETag = git blob sha1"
is "$(header Content-Length)" "$(stat -c %s "$SRC/$PY_FILE")" "HEAD carries the real Content-Length"
BODY_BYTES=$(curl -s -I -w '%{size_download}' -o /dev/null "$KHUB_URL/kernels/acme/relu/resolve/v1/$PY_FILE")
is "$BODY_BYTES" 0 "HEAD sends no body"

api HEAD "$KHUB_URL/kernels/acme/relu/resolve/$V1/$SO_FILE"
SO_SHA=$(sha256sum "$SRC/$SO_FILE" | cut -d' ' -f1)
is "$(header ETag)" "\"$SO_SHA\"" "LFS file ETag = sha256 of the content"
is "$(header X-Linked-Etag)" "\"$SO_SHA\"" "LFS file X-Linked-Etag"
is "$(header Content-Length)" "$(stat -c %s "$SRC/$SO_FILE")" "LFS HEAD has the real size"
is "$(header X-Linked-Size)" "$(stat -c %s "$SRC/$SO_FILE")" "LFS X-Linked-Size"
is "$(header X-Repo-Commit)" "$V1" "X-Repo-Commit equals the sha in the URL"
ok $(grep -qi '^x-xet' "$H"; [ $? -ne 0 ]; echo $?) "no Xet header"

# ---- resolve: GET and ranges -------------------------------------------------------
api GET "$KHUB_URL/kernels/acme/relu/resolve/v1/$SO_FILE"
is "$(sha256sum <"$B" | cut -d' ' -f1)" "$SO_SHA" "LFS GET is byte-identical"
api GET "$KHUB_URL/kernels/acme/relu/resolve/refs%2Fheads%2Fv1/$PY_FILE"
ok $(cmp -s "$B" "$SRC/$PY_FILE"; echo $?) "regular GET is byte-identical (revision refs%2Fheads%2Fv1)"
api GET "$KHUB_URL/kernels/acme/relu/resolve/v1/$SO_FILE" -H 'Range: bytes=1000-'
SIZE=$(stat -c %s "$SRC/$SO_FILE")
is "$STATUS" 206 "Range → 206"
is "$(header Content-Range)" "bytes 1000-$((SIZE - 1))/$SIZE" "Content-Range of an open range"
ok $(tail -c +1001 "$SRC/$SO_FILE" | cmp -s - "$B"; echo $?) "range bytes match"
api GET "$KHUB_URL/kernels/acme/relu/resolve/v1/$PY_FILE" -H 'Range: bytes=0-0'
is "$STATUS/$(header Content-Range)" "206/bytes 0-0/$(stat -c %s "$SRC/$PY_FILE")" "bytes=0-0 probe (JS fileDownloadInfo)"
api GET "$KHUB_URL/kernels/acme/relu/resolve/v1/$PY_FILE" -H "Range: bytes=$((SIZE * 10))-"
is "$STATUS" 416 "unsatisfiable range → 416"
api GET "$KHUB_URL/acme/relu/resolve/$V1/$PY_FILE"
is "$STATUS" 200 "kernel file reachable under the model prefix (kernels benchmark)"

# ---- resolve errors ------------------------------------------------------------------
api HEAD "$KHUB_URL/kernels/acme/relu/resolve/$V1/kernel-status.toml"
is "$STATUS/$(header X-Error-Code)/$(header X-Repo-Commit)" "404/EntryNotFound/$V1" \
	"missing file: 404 EntryNotFound with X-Repo-Commit (kernel-status.toml probe)"
api HEAD "$KHUB_URL/kernels/acme/relu/resolve/nope/$PY_FILE"
is "$STATUS/$(header X-Error-Code)" "404/RevisionNotFound" "HEAD with a missing revision"
api HEAD "$KHUB_URL/kernels/acme/nope/resolve/main/$PY_FILE"
is "$STATUS/$(header X-Error-Code)" "401/RepoNotFound" "HEAD on a missing repo"
api HEAD "$KHUB_URL/kernels/acme/relu/resolve/v1/build"
is "$STATUS/$(header X-Error-Code)" "404/EntryNotFound" "a directory is not a file"
for evil in "..%2F..%2Fetc%2Fpasswd" ".git/config" "build/..%2F..%2Fconfig" "%2Fetc%2Fpasswd"; do
	api GET "$KHUB_URL/kernels/acme/relu/resolve/v1/$evil"
	is "$STATUS/$(header X-Error-Code)" "404/EntryNotFound" "path '$evil' is refused as not found"
done

# ---- private repos ----------------------------------------------------------------------
api GET "$KHUB_URL/api/kernels/acme/secret/refs"
is "$STATUS/$(header X-Error-Code)" "401/RepoNotFound" "private repo is invisible anonymously"
api GET "$KHUB_URL/api/kernels/acme/secret/refs" -H "Authorization: Bearer $MALLORY"
is "$STATUS/$(header X-Error-Code)" "404/RepoNotFound" "private repo is invisible to a non-member"
api GET "$KHUB_URL/api/kernels/acme/secret/refs" -H "Authorization: Bearer $ALICE"
is "$STATUS" 200 "a member reads the private repo"
api HEAD "$KHUB_URL/kernels/acme/secret/resolve/main/$PY_FILE" -u "git:$ALICE"
is "$STATUS" 200 "Basic auth with the token as password works too"
api HEAD "$KHUB_URL/kernels/acme/secret/resolve/main/$PY_FILE" -H "Authorization: Bearer hf_unknownunknownunknown"
is "$STATUS/$(header X-Error-Code)" "401/" "an unknown token sees nothing private (401, as on the Hub: invalid credentials)"
api GET "$KHUB_URL/api/kernels/acme/relu/refs" -H "Authorization: Bearer hf_unknownunknownunknown"
is "$STATUS $(cat "$B")" '401 {"error":"Invalid credentials in Authorization header"}' \
	"an unknown token gets 401 on public reads too (the Hub's answer)"
api GET "$KHUB_URL/api/organizations/acme/overview" -H "Authorization: Bearer hf_unknownunknownunknown"
is "$STATUS" 401 "overview with an unknown token: 401"

# ---- paths-info ----------------------------------------------------------------------------
api POST "$KHUB_URL/api/kernels/acme/relu/paths-info/v1" --data-urlencode "paths=$SO_FILE" --data-urlencode "paths=README.md" --data-urlencode "paths=nope"
is "$(jget '[.[].path] | sort | join(",")')" "README.md,$SO_FILE" "paths-info (form) answers the existing paths"
is "$(jget '[.[] | select(has("lfs")) | .lfs.oid] | join(",")')" "$SO_SHA" "paths-info carries lfs.oid"
api POST "$KHUB_URL/api/kernels/acme/relu/paths-info/v1" -H 'Content-Type: application/json' -d "{\"paths\":[\"$PY_FILE\"],\"expand\":true}"
is "$(jget '[.[].oid] | join(",")')" "$(git hash-object "$SRC/$PY_FILE")" "paths-info (JSON body)"

# ---- whoami --------------------------------------------------------------------------------
api GET "$KHUB_URL/api/whoami-v2" -H "Authorization: Bearer $ALICE"
is "$(jget '"\(.name) \(.auth.accessToken.role) \([.orgs[].name] | join(","))"')" "alice read acme" "whoami-v2"
api GET "$KHUB_URL/api/whoami-v2" -H "Authorization: Bearer hf_unknownunknownunknown"
is "$STATUS" 401 "whoami with an unknown token is 401"

# ---- request ids in logs ----------------------------------------------------------------------
RID=$(curl -s -D - -o /dev/null "$KHUB_URL/api/kernels/acme/relu/refs" | grep -i '^x-request-id:' | cut -d' ' -f2 | tr -d '\r')
sleep 0.2
check "the access log line carries the request id" -- grep -q "\[$RID\]" "$TEST_DIR/server.log"
# one Date header, in the IMF-fixdate form, within a few seconds of now
curl -s -D "$TEST_DIR/date.h" -o /dev/null "$KHUB_URL/api/kernels/acme/relu/refs"
is "$(grep -ci '^date:' "$TEST_DIR/date.h")" 1 "one Date header"
DATE=$(grep -i '^date:' "$TEST_DIR/date.h" | cut -d' ' -f2- | tr -d '\r')
like "$DATE" '^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$' "Date is an IMF-fixdate"
skew=$(( $(date -u +%s) - $(date -u -d "$DATE" +%s) ))
ok $([ "${skew#-}" -le 5 ]; echo $?) "Date is the current time (off by ${skew}s)"

done_testing
