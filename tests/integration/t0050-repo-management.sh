#!/bin/bash
# t0050-repo-management.sh -- repo management pinned with curl against a real
# server: create (crash leftovers moved aside, never adopted), delete (to the trash),
# move, settings, branches, tags and the commits list, with every error
# status and X-Error-Code, private repos staying hidden, and the audit log;
# then the real @huggingface/hub client (tests/js/manage_client.mjs).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

khub admin org create acme >/dev/null 2>&1
for u in alice bob carol mallory; do khub admin user create $u >/dev/null 2>&1; done
khub admin member set acme alice admin >/dev/null 2>&1
khub admin member set acme bob write >/dev/null 2>&1
khub admin member set acme carol read >/dev/null 2>&1
ALICE=$(khub admin token create alice --scope write 2>/dev/null | tail -n 1)
ALICE_READ=$(khub admin token create alice --scope read 2>/dev/null | tail -n 1)
BOB=$(khub admin token create bob --scope write 2>/dev/null | tail -n 1)
CAROL=$(khub admin token create carol --scope write 2>/dev/null | tail -n 1)
MALLORY=$(khub admin token create mallory --scope write 2>/dev/null | tail -n 1)
khub_start

like "$ALICE" '^hf_[A-Za-z0-9]+$' "write token minted"
REPOS=$KHUB_DATA_DIR/repos
H=$TEST_DIR/headers
B=$TEST_DIR/body
api() {	# api METHOD PATH TOKEN [JSON] -> $STATUS, headers in $H, body in $B
	local method=$1 path=$2 token=$3 data=${4-}
	local args=(-s -X "$method" -D "$H" -o "$B" -w '%{http_code}')
	[ -n "$token" ] && args+=(-H "Authorization: Bearer $token")
	[ -n "$data" ] && args+=(-H "Content-Type: application/json" --data-binary "$data")
	STATUS=$(curl "${args[@]}" "$KHUB_URL$path")
}
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$B')); print($1)" 2>/dev/null; }
code() { echo "$STATUS/$(header X-Error-Code)"; }
sha_of() { git --git-dir="$REPOS/$1.git" rev-parse -q --verify "$2" 2>/dev/null; }
audit() {	# audit ACTION TARGET -> number of rows
	psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc \
		"SELECT count(*) FROM audit_log WHERE action = '$1' AND target = '$2'" 2>/dev/null
}
# commit_on REPO BRANCH TITLE BODY: add a commit with git plumbing
commit_on() {
	local gd=$REPOS/$1.git parent tree c
	parent=$(git --git-dir="$gd" rev-parse "$2")
	tree=$(git --git-dir="$gd" rev-parse "$2^{tree}")
	c=$(printf '%s\n\n%s\n' "$3" "$4" | GIT_AUTHOR_NAME=alice GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=alice \
		GIT_COMMITTER_EMAIL=a@x git --git-dir="$gd" commit-tree "$tree" -p "$parent")
	git --git-dir="$gd" update-ref "refs/heads/$2" "$c" "$parent"
	echo "$c"
}

# ---- create: errors ---------------------------------------------------------
BODY='{"name":"relu","organization":"acme","type":"kernel","private":false}'
api POST /api/repos/create "" "$BODY"
is "$STATUS" 401 "create anonymous: 401"
api POST /api/repos/create hf_notarealtokennotarealtokennotarea "$BODY"
is "$STATUS" 401 "create with an unknown token: 401"
api POST /api/repos/create "$MALLORY" "$BODY"
is "$STATUS" 403 "create in an org one is not a member of: 403"
api POST /api/repos/create "$CAROL" "$BODY"
is "$STATUS" 403 "create as a read member: 403"
api POST /api/repos/create "$ALICE_READ" "$BODY"
is "$STATUS" 403 "create with a read-scoped token: 403"
api POST /api/repos/create "$ALICE" '{"name":"x","organization":"nobody-here","type":"kernel"}'
is "$STATUS" 403 "create in an unknown namespace: 403"
api POST /api/repos/create "$ALICE" '{"name":"bad name","organization":"acme","type":"kernel"}'
is "$STATUS" 400 "create with an invalid name: 400"
api POST /api/repos/create "$ALICE" '{"name":"x.git","organization":"acme","type":"kernel"}'
is "$STATUS" 400 "create with a name ending in .git: 400"
api POST /api/repos/create "$ALICE" '{"organization":"acme","type":"kernel"}'
is "$STATUS" 400 "create without a name: 400"
api POST /api/repos/create "$ALICE" '{"name":"x","organization":"acme","type":"widget"}'
is "$STATUS" 400 "create with an unknown type: 400"
api POST /api/repos/create "$ALICE" '{"name":"x","organization":"acme","type":"kernel","private":"yes"}'
is "$STATUS" 400 "create with a non-boolean private: 400"
api POST /api/repos/create "$ALICE" '{"name":"x","organization":"acme","type":"kernel","visibility":"secret"}'
is "$STATUS" 400 "create with an unknown visibility: 400"
api POST /api/repos/create "$ALICE" '{"name":'
is "$STATUS" 400 "create with malformed JSON: 400"
api POST /api/repos/create "$ALICE" '{"name":"x","organization":"acme","type":"kernel","files":[{"path":"../x","content":"aGk=","encoding":"base64"}]}'
is "$STATUS" 400 "create with a file path escaping the repo: 400"
api POST /api/repos/create "$ALICE" '{"name":"x","organization":"acme","type":"kernel","files":[{"path":"a","content":"!!!","encoding":"base64"}]}'
is "$STATUS" 400 "create with bad base64 content: 400"
api GET /api/kernels/acme/x "$ALICE"
is "$(code)" "404/RepoNotFound" "a refused create leaves no repo behind"

# ---- create: success ------------------------------------------------------------
api POST /api/repos/create "$BOB" "$BODY"
is "$STATUS" 200 "create as a write member: 200"
is "$(json 'd["url"]')" "$KHUB_URL/kernels/acme/relu" "url = {endpoint}/kernels/{id}"
is "$(json 'repr((d["id"], d["name"]))')" "('acme/relu', 'acme/relu')" "id and name"
is "$(audit repo.create kernels/acme/relu)" 1 "create is audited"
api GET /api/kernels/acme/relu ""
is "$STATUS/$(json 'd["private"]')" "200/False" "new public repo is readable anonymously"
MAIN0=$(sha_of kernels/acme/relu main)
like "$MAIN0" '^[0-9a-f]{40}$' "the git repo has main"
is "$(git --git-dir="$REPOS/kernels/acme/relu.git" ls-tree --name-only main)" ".gitattributes" "initial commit holds .gitattributes"
api POST /api/repos/create "$BOB" "$BODY"
is "$STATUS" 409 "create again: 409"
is "$(json 'd["error"]')" "You already created this kernel repo" "409 error text"
is "$(json 'd["url"]')" "$KHUB_URL/kernels/acme/relu" "409 body carries url"
api POST /api/repos/create "$BOB" '{"name":"RELU","organization":"ACME","type":"kernel"}'
is "$STATUS/$(json 'd["url"]')" "409/$KHUB_URL/kernels/acme/relu" "ids are case-insensitive"
api POST /api/repos/create "$ALICE" '{"name":"mine","organization":null}'
is "$STATUS/$(json 'd["url"]')" "200/$KHUB_URL/alice/mine" "organization null = own namespace, default type model"
api POST /api/repos/create "$ALICE" '{"name":"mine2","type":"dataset"}'
is "$STATUS/$(json 'd["url"]')" "200/$KHUB_URL/datasets/alice/mine2" "dataset url prefix"
api POST /api/repos/create "$ALICE" '{"name":"secret","organization":"acme","type":"kernel","visibility":"private"}'
is "$STATUS" 200 "create private (visibility)"
api POST /api/repos/create "$ALICE" '{"name":"secret2","organization":"acme","type":"kernel","private":true}'
is "$STATUS" 200 "create private (private: true)"
api GET /api/kernels/acme/secret ""
is "$(code)" "401/RepoNotFound" "private repo: anonymous gets 401 RepoNotFound"
api GET /api/kernels/acme/secret "$MALLORY"
is "$(code)" "404/RepoNotFound" "private repo: outsider gets 404 RepoNotFound"
api GET /api/kernels/acme/secret2 "$CAROL"
is "$STATUS/$(json 'd["private"]')" "200/True" "private repo: read member sees it"
api POST /api/repos/create "$ALICE" '{"name":"files","organization":"acme","type":"kernel","files":[{"path":"README.md","content":"aGVsbG8=","encoding":"base64"},{"path":"a/b.txt","content":"text"}]}'
is "$STATUS" 200 "create with files"
is "$(curl -s "$KHUB_URL/kernels/acme/files/resolve/main/README.md")" "hello" "base64 file committed at creation"
is "$(curl -s "$KHUB_URL/kernels/acme/files/resolve/main/a/b.txt")" "text" "utf-8 file committed at creation"

# Crash leftovers: a directory without a row is never adopted (it may be a
# deleted repo's content): it goes to the trash and the repo starts afresh.
mkdir -p "$REPOS/kernels/acme"
git init -q --bare "$REPOS/kernels/acme/half.git"
api POST /api/repos/create "$ALICE" '{"name":"half","organization":"acme","type":"kernel"}'
is "$STATUS" 200 "create over a leftover repo without commits"
is "$(git --git-dir="$REPOS/kernels/acme/half.git" ls-tree --name-only main)" ".gitattributes" "the new repo has its initial commit"
git init -q --bare "$REPOS/kernels/acme/whole.git"
WHOLE=$(git --git-dir="$REPOS/kernels/acme/whole.git" commit-tree "$(git --git-dir="$REPOS/kernels/acme/whole.git" mktree </dev/null)" -m kept)
git --git-dir="$REPOS/kernels/acme/whole.git" update-ref refs/heads/main "$WHOLE"
api POST /api/repos/create "$ALICE" '{"name":"whole","organization":"acme","type":"kernel"}'
is "$STATUS/$(git --git-dir="$REPOS/kernels/acme/whole.git" ls-tree --name-only main)" "200/.gitattributes" \
	"create does not adopt a complete leftover: the repo starts afresh"
check "the complete leftover went to the trash, whole" -- bash -c \
	"git --git-dir=\"\$(ls -d '$KHUB_DATA_DIR'/repos/.trash/kernels/acme/whole.git.* | head -n 1)\" rev-parse main | grep -qx $WHOLE"
is "$(psql "host=$KHUB_DATA_DIR/pg/run dbname=khub user=khub" -tAc "SELECT details::json->>'quarantined' LIKE '%/.trash/kernels/acme/whole.git.%' FROM audit_log WHERE action = 'repo.create' AND target = 'kernels/acme/whole'" 2>/dev/null)" "t" \
	"the audit entry names where the leftover went"
mkdir -p "$REPOS/kernels/acme/junk.git" && echo junk >"$REPOS/kernels/acme/junk.git/x"
api POST /api/repos/create "$ALICE" '{"name":"junk","organization":"acme","type":"kernel"}'
is "$STATUS" 200 "create replaces an unusable leftover"
check "the unusable leftover went to the trash" -- ls -d "$KHUB_DATA_DIR"/repos/.trash/kernels/acme/junk.git.*

# ---- commits --------------------------------------------------------------------
C1=$(commit_on kernels/acme/relu main "first change" "body one")
C2=$(commit_on kernels/acme/relu main "second change" "")
C3=$(commit_on kernels/acme/relu main "third change" "line a
line b")
api GET /api/kernels/acme/relu/commits/main ""
is "$STATUS" 200 "commits 200"
is "$(header X-Total-Count)" 4 "X-Total-Count = all reachable commits"
is "$(json '[c["id"] for c in d]')" "['$C3', '$C2', '$C1', '$MAIN0']" "newest first"
is "$(json 'repr((d[0]["title"], d[0]["message"]))')" "('third change', 'line a\nline b')" "title = first line, message = the rest"
is "$(json 'repr((d[2]["message"], d[3]["title"], d[3]["message"]))')" "('body one', 'initial commit', '')" "messages of other commits"
is "$(json 'repr((d[0]["parents"], d[3]["parents"]))')" "(['$C2'], [])" "parents"
is "$(json 'd[0]["authors"]')" "[{'user': 'alice', 'avatar': ''}]" "authors [{user, avatar}]"
like "$(json 'd[0]["date"]')" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.000Z$' "date is ISO-8601 UTC"
is "$(header Link)" "" "no Link on the last page"
api GET "/api/kernels/acme/relu/commits/main?limit=3" ""
is "$(json 'len(d)')/$(header X-Total-Count)" "3/4" "limit=3: three commits, total 4"
NEXT=$(header Link | sed -n 's/^<\(.*\)>; rel="next"$/\1/p')
is "$NEXT" "$KHUB_URL/api/kernels/acme/relu/commits/$C3?p=1&limit=3" "absolute Link to the next page keeps limit"
STATUS=$(curl -s -D "$H" -o "$B" -w '%{http_code}' "$NEXT")
is "$STATUS/$(json '[c["id"] for c in d]')" "200/['$MAIN0']" "next page holds the rest"
is "$(header Link)" "" "last page has no Link"
api GET "/api/kernels/acme/relu/commits/main?limit=1&p=1" ""
is "$(json '[c["id"] for c in d]')" "['$C2']" "p=1 with limit=1"
api GET "/api/kernels/acme/relu/commits/main?limit=2&p=7" ""
is "$STATUS/$(json 'd')" "200/[]" "a page past the end is empty"
api GET "/api/kernels/acme/relu/commits/main?limit=5000" ""
is "$STATUS/$(json 'len(d)')" "200/4" "limit above 1000 is capped"
for bad in "limit=0" "limit=abc" "p=-1" "p=x"; do
	api GET "/api/kernels/acme/relu/commits/main?$bad" ""
	is "$STATUS" 400 "commits ?$bad: 400"
done
api GET "/api/kernels/acme/relu/commits/main?expand%5B%5D=formatted" ""
is "$STATUS/$(json 'len(d)')" "200/4" "expand[]=formatted accepted"
api GET "/api/kernels/acme/relu/commits/$C2" ""
is "$(json '[c["id"] for c in d]')" "['$C2', '$C1', '$MAIN0']" "commits of a sha"
api GET "/api/kernels/acme/relu/commits/refs/heads/main" ""
is "$STATUS/$(header X-Total-Count)" "200/4" "commits of a raw full ref"
api GET "/api/kernels/acme/relu/commits/nope" ""
is "$(code)" "404/RevisionNotFound" "commits of an unknown revision"
api GET "/api/kernels/acme/nope/commits/main" "$ALICE"
is "$(code)" "404/RepoNotFound" "commits of an unknown repo"
api GET "/api/kernels/acme/secret/commits/main" ""
is "$(code)" "401/RepoNotFound" "commits of a private repo, anonymous"
api GET "/api/kernels/acme/secret/commits/main" "$MALLORY"
is "$(code)" "404/RepoNotFound" "commits of a private repo, outsider"
api GET "/api/kernels/acme/secret/commits/main" "$CAROL"
is "$STATUS/$(header X-Total-Count)" "200/1" "commits of a private repo, member"
api GET "/api/models/acme/relu/commits/main" ""
is "$STATUS/$(header X-Total-Count)" "200/4" "kernel commits reachable under the model prefix"

# ---- branches ---------------------------------------------------------------------
api POST /api/kernels/acme/relu/branch/v1 "$BOB" '{}'
is "$STATUS" 200 "create branch v1 ({}): 200"
is "$(sha_of kernels/acme/relu v1)" "$C3" "a branch without startingPoint starts at main's head"
is "$(audit branch.create kernels/acme/relu)" 1 "branch creation is audited"
api POST /api/kernels/acme/relu/branch/v1 "$BOB" ''
is "$STATUS" 409 "existing branch: 409"
is "$(json 'd["error"]')" "Reference refs/heads/v1 already exists" "409 text"
api POST /api/kernels/acme/relu/branch/v1 "$BOB" '{"overwrite":true}'
is "$STATUS/$(sha_of kernels/acme/relu v1)" "200/$C3" "overwrite alone keeps the branch"
api POST /api/kernels/acme/relu/branch/v1 "$BOB" "{\"startingPoint\":\"$C1\",\"overwrite\":true}"
is "$STATUS/$(sha_of kernels/acme/relu v1)" "200/$C1" "overwrite with startingPoint moves it"
api POST /api/kernels/acme/relu/branch/v2 "$BOB" "{\"startingPoint\":\"$C2\"}"
is "$STATUS/$(sha_of kernels/acme/relu v2)" "200/$C2" "startingPoint = full sha"
api POST /api/kernels/acme/relu/branch/v3 "$BOB" "{\"startingPoint\":\"${C1:0:7}\"}"
is "$STATUS/$(sha_of kernels/acme/relu v3)" "200/$C1" "startingPoint = short sha"
api POST /api/kernels/acme/relu/branch/v4 "$BOB" '{"startingPoint":"v2"}'
is "$STATUS/$(sha_of kernels/acme/relu v4)" "200/$C2" "startingPoint = branch"
api POST /api/kernels/acme/relu/branch/v5 "$BOB" '{"startingPoint":"refs/heads/v3"}'
is "$STATUS/$(sha_of kernels/acme/relu v5)" "200/$C1" "startingPoint = full ref"
api POST /api/kernels/acme/relu/branch/v6 "$BOB" '{"startingPoint":"nope"}'
is "$(code)" "404/RevisionNotFound" "unknown startingPoint: 404 RevisionNotFound"
api POST /api/kernels/acme/relu/branch/feature%2Fx "$BOB" '{}'
is "$STATUS/$(sha_of kernels/acme/relu refs/heads/feature/x)" "200/$C3" "branch with a slash (encoded)"
api POST /api/kernels/acme/relu/branch/empty "$BOB" '{"emptyBranch":true}'
is "$STATUS/$(git --git-dir="$REPOS/kernels/acme/relu.git" rev-list --count empty)" "200/1" "emptyBranch: one root commit"
is "$(git --git-dir="$REPOS/kernels/acme/relu.git" ls-tree empty | wc -l)" 0 "emptyBranch: empty tree"
for bad in refs%2Fpr%2F5 refs%2Fheads%2Fx refs/pr/5 bad%20name a..b x.lock "$C1"; do
	api POST "/api/kernels/acme/relu/branch/$bad" "$BOB" '{}'
	is "$STATUS/$(json 'd["error"]' | cut -c1-30)" "400/Invalid reference for a branch" "branch name $bad: 400"
done
api POST /api/kernels/acme/relu/branch/v7 "$BOB" '{"startingPoint":5}'
is "$STATUS" 400 "non-string startingPoint: 400"
api POST /api/kernels/acme/relu/branch/v7 "$BOB" '{"overwrite":"yes"}'
is "$STATUS" 400 "non-boolean overwrite: 400"
api POST /api/kernels/acme/relu/branch/v7 "" '{}'
is "$STATUS" 401 "create branch anonymous: 401"
api POST /api/kernels/acme/relu/branch/v7 "$MALLORY" '{}'
is "$STATUS" 403 "create branch as an outsider on a public repo: 403"
api POST /api/kernels/acme/relu/branch/v7 "$CAROL" '{}'
is "$STATUS" 403 "create branch as a read member: 403"
api POST /api/kernels/acme/secret/branch/v7 "$MALLORY" '{}'
is "$(code)" "404/RepoNotFound" "create branch on a private repo as an outsider: 404 RepoNotFound"
api POST /api/kernels/acme/secret/branch/v7 "" '{}'
is "$STATUS" 401 "create branch on a private repo anonymously: 401"
api POST /api/kernels/acme/nope/branch/v7 "$BOB" '{}'
is "$(code)" "404/RepoNotFound" "create branch on a missing repo: 404 RepoNotFound"

api DELETE /api/kernels/acme/relu/branch/main "$ALICE"
is "$STATUS/$(json 'd["error"]')" "403/Cannot delete refs/heads/main" "delete main: 403"
api DELETE /api/kernels/acme/relu/branch/v6 "$BOB"
is "$(code)" "404/RevisionNotFound" "delete a missing branch: 404 RevisionNotFound"
api DELETE /api/kernels/acme/relu/branch/v2 ""
is "$STATUS" 401 "delete branch anonymous: 401"
api DELETE /api/kernels/acme/relu/branch/v2 "$MALLORY"
is "$STATUS" 403 "delete branch as an outsider: 403"
api DELETE /api/kernels/acme/relu/branch/v2 "$CAROL"
is "$STATUS" 403 "delete branch as a read member: 403"
api DELETE /api/kernels/acme/relu/branch/v2 "$BOB"
is "$STATUS/$(sha_of kernels/acme/relu refs/heads/v2)" "200/" "delete branch v2"
api DELETE /api/kernels/acme/relu/branch/feature%2Fx "$BOB"
is "$STATUS" 200 "delete branch with a slash"
is "$(audit branch.delete kernels/acme/relu)" 2 "branch deletion is audited"
api GET /api/kernels/acme/relu/refs ""
is "$(json 'sorted(b["name"] for b in d["branches"])')" "['empty', 'main', 'v1', 'v3', 'v4', 'v5']" "refs list the branches left"

# ---- tags ---------------------------------------------------------------------------
api POST /api/kernels/acme/relu/tag/main "$BOB" '{"tag":"t1"}'
is "$STATUS/$(git --git-dir="$REPOS/kernels/acme/relu.git" cat-file -t refs/tags/t1)" "200/commit" "lightweight tag"
api POST /api/kernels/acme/relu/tag/v1 "$BOB" '{"tag":"t2","message":"release two"}'
is "$STATUS/$(git --git-dir="$REPOS/kernels/acme/relu.git" cat-file -t refs/tags/t2)" "200/tag" "annotated tag when a message is given"
is "$(git --git-dir="$REPOS/kernels/acme/relu.git" cat-file -p refs/tags/t2 | tail -n 1)" "release two" "tag message"
api POST "/api/kernels/acme/relu/tag/${C2:0:8}" "$BOB" '{"tag":"t3"}'
is "$STATUS/$(sha_of kernels/acme/relu 't3^{commit}')" "200/$C2" "tag on a short sha"
api POST /api/kernels/acme/relu/tag/t2 "$BOB" '{"tag":"t4"}'
is "$STATUS/$(sha_of kernels/acme/relu 't4^{commit}')" "200/$C1" "tag on an annotated tag peels to its commit"
api GET /api/kernels/acme/relu/refs ""
is "$(json 'sorted((t["name"], t["targetCommit"]) for t in d["tags"])')" "[('t1', '$C3'), ('t2', '$C1'), ('t3', '$C2'), ('t4', '$C1')]" "refs list the tags"
api POST /api/kernels/acme/relu/tag/main "$BOB" '{"tag":"t1"}'
is "$STATUS" 409 "duplicate tag: 409"
api POST /api/kernels/acme/relu/tag/main "$BOB" '{"tag":"bad tag"}'
is "$STATUS" 400 "tag name with a space: 400"
api POST /api/kernels/acme/relu/tag/main "$BOB" '{"tag":"refs/tags/x"}'
is "$STATUS" 400 "tag name that is a full ref: 400"
api POST /api/kernels/acme/relu/tag/main "$BOB" '{}'
is "$STATUS" 400 "tag without a name: 400"
api POST /api/kernels/acme/relu/tag/main "$BOB" '{"tag":"t5","message":7}'
is "$STATUS" 400 "non-string message: 400"
api POST /api/kernels/acme/relu/tag/nope "$BOB" '{"tag":"t5"}'
is "$(code)" "404/RevisionNotFound" "tag on an unknown revision: 404 RevisionNotFound"
api POST /api/kernels/acme/relu/tag/main "" '{"tag":"t5"}'
is "$STATUS" 401 "create tag anonymous: 401"
api POST /api/kernels/acme/relu/tag/main "$CAROL" '{"tag":"t5"}'
is "$STATUS" 403 "create tag as a read member: 403"
api POST /api/kernels/acme/secret/tag/main "$MALLORY" '{"tag":"t5"}'
is "$(code)" "404/RepoNotFound" "create tag on a private repo as an outsider"
api DELETE /api/kernels/acme/relu/tag/t1 "$MALLORY"
is "$STATUS" 403 "delete tag as an outsider: 403"
api DELETE /api/kernels/acme/relu/tag/t1 "$BOB"
is "$STATUS/$(sha_of kernels/acme/relu refs/tags/t1)" "200/" "delete tag"
api DELETE /api/kernels/acme/relu/tag/t1 "$BOB"
is "$(code)" "404/RevisionNotFound" "delete a missing tag: 404 RevisionNotFound"
api DELETE /api/kernels/acme/relu/branch/t2 "$BOB"
is "$(code)" "404/RevisionNotFound" "deleting a tag as a branch: 404 RevisionNotFound"
is "$(audit tag.create kernels/acme/relu)/$(audit tag.delete kernels/acme/relu)" "4/1" "tag changes are audited"

# ---- settings ---------------------------------------------------------------------------
api PUT /api/kernels/acme/relu/settings "$CAROL" '{"private":true}'
is "$STATUS" 403 "settings as a read member: 403"
api PUT /api/kernels/acme/relu/settings "" '{"private":true}'
is "$STATUS" 401 "settings anonymous: 401"
api PUT /api/kernels/acme/relu/settings "$ALICE" '{"private":"yes"}'
is "$STATUS" 400 "settings with a non-boolean private: 400"
api PUT /api/kernels/acme/relu/settings "$ALICE" '{"gated":"sometimes"}'
is "$STATUS" 400 "settings with an unknown gated value: 400"
api PUT /api/kernels/acme/relu/settings "$ALICE" '{"private":true,"gated":false,"description":"d"}'
is "$STATUS/$(json 'd["private"]')" "200/True" "settings private: true"
is "$(audit repo.settings kernels/acme/relu)" 1 "settings change is audited"
api GET /api/kernels/acme/relu/refs ""
is "$(code)" "401/RepoNotFound" "now private: anonymous refs 401 RepoNotFound"
api GET /api/kernels/acme/relu/commits/main "$MALLORY"
is "$(code)" "404/RepoNotFound" "now private: outsider commits 404 RepoNotFound"
api PUT /api/kernels/acme/relu/settings "$MALLORY" '{"private":false}'
is "$(code)" "404/RepoNotFound" "settings of a private repo as an outsider: 404 RepoNotFound"
api POST /api/kernels/acme/relu/branch/v9 "$MALLORY" '{}'
is "$(code)" "404/RepoNotFound" "now private: outsider branch create 404 RepoNotFound"
api PUT /api/kernels/acme/relu/settings "$ALICE" '{"visibility":"public","gated":"auto"}'
is "$STATUS/$(json 'd["private"]')" "200/False" "settings visibility public (gated accepted)"
api GET /api/kernels/acme/relu/refs ""
is "$STATUS" 200 "public again: anonymous refs 200"
api PUT /api/kernels/acme/nope/settings "$ALICE" '{"private":true}'
is "$(code)" "404/RepoNotFound" "settings of a missing repo: 404 RepoNotFound"

# ---- move -------------------------------------------------------------------------------------
RELU_MAIN=$(sha_of kernels/acme/relu main)
api POST /api/repos/move "$CAROL" '{"fromRepo":"acme/relu","toRepo":"acme/relu-moved","type":"kernel"}'
is "$STATUS" 403 "move as a read member: 403"
api POST /api/repos/move "" '{"fromRepo":"acme/relu","toRepo":"acme/relu-moved","type":"kernel"}'
is "$STATUS" 401 "move anonymous: 401"
api POST /api/repos/move "$MALLORY" '{"fromRepo":"acme/secret","toRepo":"mallory/stolen","type":"kernel"}'
is "$(code)" "404/RepoNotFound" "move a private repo as an outsider: 404 RepoNotFound"
api POST /api/repos/move "$ALICE" '{"fromRepo":"acme","toRepo":"acme/x","type":"kernel"}'
is "$STATUS" 400 "move with a malformed id: 400"
api POST /api/repos/move "$ALICE" '{"fromRepo":"acme/relu","toRepo":"acme/bad name","type":"kernel"}'
is "$STATUS" 400 "move to an invalid name: 400"
api POST /api/repos/move "$ALICE" '{"fromRepo":"acme/nope","toRepo":"acme/x","type":"kernel"}'
is "$(code)" "404/RepoNotFound" "move a missing repo: 404 RepoNotFound"
api POST /api/repos/move "$ALICE" '{"fromRepo":"acme/relu","toRepo":"mallory/relu","type":"kernel"}'
is "$STATUS" 403 "move into a namespace one cannot write: 403"
api POST /api/repos/move "$ALICE" '{"fromRepo":"acme/relu","toRepo":"acme/secret","type":"kernel"}'
is "$STATUS" 409 "move onto an existing repo: 409"
api POST /api/repos/move "$ALICE" '{"fromRepo":"acme/relu","toRepo":"acme/relu-moved","type":"kernel"}'
is "$STATUS/$(json 'd["url"]')" "200/$KHUB_URL/kernels/acme/relu-moved" "move within the org"
api GET /api/kernels/acme/relu "$ALICE"
is "$(code)" "404/RepoNotFound" "old id is gone"
api GET /api/kernels/acme/relu-moved/revision/main ""
is "$STATUS/$(json 'd["sha"]')" "200/$RELU_MAIN" "new id serves the same history"
api GET /api/kernels/acme/relu-moved/refs ""
is "$(json 'sorted(t["name"] for t in d["tags"])')" "['t2', 't3', 't4']" "refs moved too"
check "the git directory was renamed" -- test -d "$REPOS/kernels/acme/relu-moved.git" -a ! -e "$REPOS/kernels/acme/relu.git"
api POST /api/repos/move "$ALICE" '{"fromRepo":"acme/relu-moved","toRepo":"alice/relu","type":"kernel"}'
is "$STATUS/$(json 'd["url"]')" "200/$KHUB_URL/kernels/alice/relu" "move into one's own namespace"
api GET /api/kernels/alice/relu/commits/main ""
is "$STATUS/$(header X-Total-Count)" "200/4" "moved repo's commits"
is "$(audit repo.move kernels/acme/relu)" 1 "move is audited"
api POST /api/repos/move "$ALICE" '{"fromRepo":"alice/relu","toRepo":"acme/relu","type":"kernel"}'
is "$STATUS" 200 "move back"

# ---- delete -------------------------------------------------------------------------------------
DEL='{"name":"relu","organization":"acme","type":"kernel"}'
api DELETE /api/repos/delete "" "$DEL"
is "$STATUS" 401 "delete anonymous: 401"
api DELETE /api/repos/delete "$CAROL" "$DEL"
is "$STATUS" 403 "delete as a read member: 403"
api DELETE /api/repos/delete "$ALICE_READ" "$DEL"
is "$STATUS" 403 "delete as an admin with a read-scoped token: 403"
api DELETE /api/repos/delete "$MALLORY" '{"name":"secret","organization":"acme","type":"kernel"}'
is "$(code)" "404/RepoNotFound" "delete a private repo as an outsider: 404 RepoNotFound"
api DELETE /api/repos/delete "$ALICE" '{"organization":"acme","type":"kernel"}'
is "$STATUS" 400 "delete without a name: 400"
api DELETE /api/repos/delete "$ALICE" "$DEL"
is "$STATUS/$(cat "$B")" "200/OK" "delete: 200 OK"
like "$(header Content-Type)" '^text/plain' "delete answers text/plain"
is "$(audit repo.delete kernels/acme/relu)" 1 "delete is audited"
api GET /api/kernels/acme/relu "$ALICE"
is "$(code)" "404/RepoNotFound" "deleted repo is gone"
api DELETE /api/repos/delete "$ALICE" "$DEL"
is "$(code)" "404/RepoNotFound" "delete again: 404 RepoNotFound"
check "the git directory went to the trash" -- ls -d "$KHUB_DATA_DIR"/repos/.trash/kernels/acme/relu.git.*
check "and is gone from the repo root" -- test ! -e "$REPOS/kernels/acme/relu.git"
api POST /api/repos/create "$ALICE" '{"name":"relu","organization":"acme","type":"kernel"}'
is "$STATUS" 200 "re-create a deleted name"
api GET /api/kernels/acme/relu/commits/main ""
is "$STATUS/$(header X-Total-Count)" "200/1" "the re-created repo starts empty"
api GET /api/kernels/acme/relu/refs ""
is "$(json 'repr(([b["name"] for b in d["branches"]], d["tags"]))')" "(['main'], [])" "no branches or tags survive"
api DELETE /api/repos/delete "$ALICE" '{"name":"mine","organization":null}'
is "$STATUS" 200 "delete in one's own namespace (organization null, type model)"

# ---- the JS client ------------------------------------------------------------------------------
if ! command -v node >/dev/null 2>&1 || [ ! -d "$KHUB_SRC/tests/js/node_modules/@huggingface/hub" ]; then
	diag "skipping the JS client: node or tests/js/node_modules missing"
else
	out=$(cd "$KHUB_SRC" && env KHUB_URL="$KHUB_URL" TOKEN="$ALICE" NS=acme node tests/js/manage_client.mjs 2>&1)
	rc=$?
	results=0 plan=
	while IFS= read -r line; do
		if [[ "$line" =~ ^ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1)); ok 0 "js: ${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^not\ ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
			results=$((results + 1)); ok 1 "js: ${BASH_REMATCH[1]}"
		elif [[ "$line" =~ ^1\.\.([0-9]+) ]]; then
			plan=${BASH_REMATCH[1]}
		elif [ -n "$line" ]; then
			echo "# node: $line"
		fi
	done <<<"$out"
	is "$plan" "$results" "js: node script ran its whole plan"
	[ "$rc" -ne 0 ] && diag "node exited with status $rc"
fi

server_and_sanitizer_logs | grep -E 'ERROR|runtime error|AddressSanitizer' | head -5 | sed 's/^/# server: /'
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"

done_testing
