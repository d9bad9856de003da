#!/bin/bash
# t0110-pointer-leak.sh -- an LFS pointer naming another repo's object must
# never become a way to read that object. Two khub servers: "main" holds a
# private repo (secretorg/private) and a public one (puborg/public), each
# with an LFS file; "up" is a hostile upstream that main mirrors.
# Writers: an inline pointer in an NDJSON commit (own repo, base64 and
# utf-8; create_pr=1 on a public repo by an outsider), in the files of a repo
# creation, an lfsFile line, a git
# push and `khub import` of a pointer file are refused, refs untouched; a
# mirrored repo whose upstream tree names the private oid (bytes not served
# by the upstream) does not get it linked. Readers: for pointers planted in
# a repo's git history directly (legacy data), resolve, raw, HEAD, Range,
# the LFS batch download and git lfs pull never give the bytes of the
# private or of the public repo's object. Legit LFS still works, and
# `khub check lfs-pointers` reports the planted pointers.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 git curl; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
git lfs version >/dev/null 2>&1 || { echo "1..0 # SKIP git-lfs not installed"; exit 0; }

hubs_setup
hub_init main
hub_init up
M=$(hub_url main)
U=$(hub_url up)
hub_spawn main
hub_spawn up

sha256() { sha256sum "$1" | cut -d' ' -f1; }
pointer() { printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %s\n' "$1" "$2"; }
b64() { base64 -w0; }
H=$TEST_DIR/headers
B=$TEST_DIR/body	# for api, header (tests/lib/khub-test.sh)
body_sha() { sha256sum "$B" | cut -d' ' -f1; }
refs_of() {	# refs_of HUB NS/NAME: every ref of the bare repo
	git --git-dir="$(hub_data "$1")/repos/kernels/$2.git" for-each-ref --format='%(refname) %(objectname)'
}

# ---- seed main --------------------------------------------------------------------
hub_wait main
S=$TEST_DIR/src
mkdir -p "$S/secret" "$S/public" "$S/own"
head -c 300000 /dev/urandom >"$S/secret/secret.bin"
head -c 200000 /dev/urandom >"$S/public/public.bin"
head -c 100000 /dev/urandom >"$S/own/own.bin"
printf '# own\n' >"$S/own/README.md"
SECRET_OID=$(sha256 "$S/secret/secret.bin")
SECRET_SIZE=300000
PUB_OID=$(sha256 "$S/public/public.bin")
PUB_SIZE=200000
OWN_OID=$(sha256 "$S/own/own.bin")
seed=0
hub main import "$S/secret" --repo secretorg/private --private >/dev/null 2>>"$TEST_DIR/import.log" || seed=1
hub main import "$S/public" --repo puborg/public >/dev/null 2>>"$TEST_DIR/import.log" || seed=1
for u in sam mallory olga; do hub main admin user create $u >/dev/null 2>&1 || seed=1; done
hub main admin member set secretorg sam admin >/dev/null 2>&1 || seed=1
hub main import "$S/own" --repo mallory/own >/dev/null 2>>"$TEST_DIR/import.log" || seed=1
SAM=$(hub main admin token create sam --scope write 2>/dev/null | tail -n 1)
MAL=$(hub main admin token create mallory --scope write 2>/dev/null | tail -n 1)
OLGA=$(hub main admin token create olga --scope write 2>/dev/null | tail -n 1)
ok $seed "main: secretorg/private (private), puborg/public, mallory/own imported; users sam, mallory, olga"
like "$SAM/$MAL/$OLGA" '^hf_[A-Za-z0-9]+/hf_[A-Za-z0-9]+/hf_[A-Za-z0-9]+$' "write tokens for sam, mallory and olga"

# the secret is LFS and readable by its owner only
api GET "$M/kernels/secretorg/private/resolve/main/secret.bin" -H "Authorization: Bearer $SAM"
is "$STATUS/$(header ETag)/$(body_sha)" "200/\"$SECRET_OID\"/$SECRET_OID" "the owner reads the private LFS file (ETag = its sha256)"
api GET "$M/kernels/secretorg/private/resolve/main/secret.bin" -H "Authorization: Bearer $MAL"
is "$STATUS/$(header X-Error-Code)" "404/RepoNotFound" "mallory cannot read secretorg/private"
api GET "$M/kernels/mallory/own/resolve/main/own.bin"
is "$STATUS/$(body_sha)" "200/$OWN_OID" "mallory/own: its own LFS file is served"

# ---- writers: NDJSON commits ------------------------------------------------------------
ndjson_file() {	# ndjson_file PATH CONTENT_B64 [ENCODING]
	printf '{"key":"header","value":{"summary":"add %s","description":""}}\n' "$1"
	printf '{"key":"file","value":{"path":"%s","content":"%s","encoding":"%s"}}\n' "$1" "$2" "${3:-base64}"
}
commit() {	# commit REPO REV TOKEN BODY [query]
	api POST "$M/api/kernels/$1/commit/$2$5" -H "Authorization: Bearer $3" -H "Content-Type: application/x-ndjson" \
		--data-binary "$4"
}
error_of() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("error",""))' "$B" 2>/dev/null; }

before=$(refs_of main mallory/own)
commit mallory/own main "$MAL" "$(ndjson_file leak/secret "$(pointer "$SECRET_OID" $SECRET_SIZE | b64)")"
is "$STATUS" 400 "inline base64 pointer to the private object in a commit to one's own repo: 400"
like "$(error_of)" "LFS pointer to $SECRET_OID.*does not have" "the JSON error says the pointer names an object this repo does not have"
commit mallory/own main "$MAL" "$(ndjson_file leak/secret.txt "$(pointer "$SECRET_OID" $SECRET_SIZE | /usr/bin/python3 -c 'import json,sys; print(json.dumps(sys.stdin.read())[1:-1], end="")')" utf-8)"
is "$STATUS" 400 "the same pointer as utf-8 content: 400"
commit mallory/own main "$MAL" "$(ndjson_file leak/public "$(pointer "$PUB_OID" $PUB_SIZE | b64)")"
is "$STATUS" 400 "inline pointer to the public repo's object (not linked to mallory/own): 400"
body=$(printf '{"key":"header","value":{"summary":"lfsFile"}}\n{"key":"lfsFile","value":{"path":"leak/lfs.bin","algo":"sha256","oid":"%s","size":%s}}\n' \
	"$SECRET_OID" $SECRET_SIZE)
commit mallory/own main "$MAL" "$body"
is "$STATUS" 422 "an lfsFile line naming the private oid: 422"
is "$(refs_of main mallory/own)" "$before" "mallory/own: no refused commit moved or created a ref"

before=$(refs_of main puborg/public)
commit puborg/public main "$OLGA" "$(ndjson_file leak/secret "$(pointer "$SECRET_OID" $SECRET_SIZE | b64)")" "?create_pr=1"
is "$STATUS" 400 "create_pr=1 on puborg/public by a non-member with an inline pointer to the private object: 400"
is "$(refs_of main puborg/public)" "$before" "puborg/public: no refs/pr/N was created"
api GET "$M/api/kernels/puborg/public/refs?include_prs=1"
like "$(cat "$B")" '"pullRequests":\[\]' "the refs API lists no pull request"

api POST "$M/api/repos/create" -H "Authorization: Bearer $MAL" -H "Content-Type: application/json" \
	--data "{\"name\":\"fresh\",\"type\":\"kernel\",\"files\":[{\"path\":\"leak/secret\",\"content\":\"$(pointer "$SECRET_OID" $SECRET_SIZE | b64)\",\"encoding\":\"base64\"}]}"
is "$STATUS" 400 "repo creation whose initial files hold a pointer to the private object: 400"
api GET "$M/api/kernels/mallory/fresh" -H "Authorization: Bearer $MAL"
is "$STATUS" 404 "... and the repo was not created"

# legit: an inline pointer to an object linked to the repo is accepted and served
commit mallory/own main "$MAL" "$(ndjson_file copy/own-again "$(pointer "$OWN_OID" 100000 | b64)")"
is "$STATUS" 200 "inline pointer to the repo's own linked object: 200"
api GET "$M/kernels/mallory/own/resolve/main/copy/own-again"
is "$STATUS/$(body_sha)" "200/$OWN_OID" "... and it resolves to the object's bytes"

# ---- writers: git push --------------------------------------------------------------------
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
unset GIT_DIR GIT_WORK_TREE GIT_CONFIG_GLOBAL GIT_LFS_SKIP_SMUDGE GIT_LFS_SKIP_PUSH
mkdir -p "$HOME"
git config --global user.name "Mallory"
git config --global user.email mallory@example.com
git config --global init.defaultBranch main
git config --global advice.detachedHead false
git lfs install >/dev/null 2>&1
HOSTPORT=${M#http://}
AS_MAL=http://mallory:$MAL@$HOSTPORT/kernels/mallory/own
W=$TEST_DIR/work
mkdir -p "$W"
GIT_LFS_SKIP_SMUDGE=1 git clone -q "$AS_MAL" "$W/push" >"$TEST_DIR/git.err" 2>&1
mkdir -p "$W/push/pushed"
pointer "$SECRET_OID" $SECRET_SIZE >"$W/push/pushed/secret.bin"
git -C "$W/push" add pushed/secret.bin >/dev/null 2>&1
git -C "$W/push" commit -qm "pointer to the private object" >/dev/null 2>&1
before=$(refs_of main mallory/own)
# --no-verify: no git-lfs pre-push hook, what a hostile client sends
git -C "$W/push" push --no-verify origin main >"$TEST_DIR/push.err" 2>&1
rc=$?
ok $((!rc)) "git push of a commit with a pointer to the private object is refused"
like "$(cat "$TEST_DIR/push.err")" "LFS pointer to $SECRET_OID" "the push error names the object"
is "$(refs_of main mallory/own)" "$before" "mallory/own: the refused push changed no ref"

# ---- writers: khub import -------------------------------------------------------------------
mkdir -p "$S/imp"
printf '# imported\n' >"$S/imp/README.md"
pointer "$SECRET_OID" $SECRET_SIZE >"$S/imp/secret.txt"
before=$(refs_of main mallory/own)
hub main import "$S/imp" --repo mallory/own --branch main >/dev/null 2>"$TEST_DIR/imp.err"
rc=$?
ok $((!rc)) "khub import of a directory holding a pointer to the private object fails"
like "$(cat "$TEST_DIR/imp.err")" "secret.txt is an LFS pointer to $SECRET_OID" "khub import says which file and why"
is "$(refs_of main mallory/own)" "$before" "mallory/own: nothing was committed"
rm "$S/imp/secret.txt"
pointer "$OWN_OID" 100000 >"$S/imp/own.txt"
hub main import "$S/imp" --repo mallory/own --branch imported >/dev/null 2>"$TEST_DIR/imp2.err"
ok $? "khub import of a pointer to the repo's own object is accepted"
api GET "$M/kernels/mallory/own/resolve/imported/own.txt"
is "$STATUS/$(body_sha)" "200/$OWN_OID" "... and serves the object"

# ---- readers: pointers planted in the git history (legacy data) -----------------------------
GD=$(hub_data main)/repos/kernels/mallory/own.git
plant() {	# plant BRANCH PATH=OID:SIZE...: a commit on main adding pointer blobs
	local branch=$1 idx=$TEST_DIR/plant.index spec path oid size blob tree commit; shift
	rm -f "$idx"
	GIT_INDEX_FILE=$idx git --git-dir="$GD" read-tree refs/heads/main
	for spec in "$@"; do
		path=${spec%%=*} oid=${spec#*=}
		size=${oid#*:} oid=${oid%%:*}
		blob=$(pointer "$oid" "$size" | git --git-dir="$GD" hash-object -w --stdin)
		GIT_INDEX_FILE=$idx git --git-dir="$GD" update-index --add --cacheinfo "100644,$blob,$path"
	done
	tree=$(GIT_INDEX_FILE=$idx git --git-dir="$GD" write-tree)
	commit=$(git --git-dir="$GD" commit-tree "$tree" -p refs/heads/main -m "planted")
	git --git-dir="$GD" update-ref "refs/heads/$branch" "$commit"
	echo "$commit"
}
PLANTED=$(plant planted "leak/secret.bin=$SECRET_OID:$SECRET_SIZE" "leak/public.bin=$PUB_OID:$PUB_SIZE")
like "$PLANTED" '^[0-9a-f]{40}$' "planted a commit with pointers to the private and the public object in mallory/own"

never_served() {	# never_served NAME FILE OID SIZE
	local name=$1 file=$2 oid=$3 size=$4 leaks="" kind auth
	for auth in "" "Authorization: Bearer $MAL"; do
		for kind in resolve raw; do
			api GET "$M/kernels/mallory/own/$kind/planted/$file" ${auth:+-H "$auth"}
			[ "$(body_sha)" = "$oid" ] && leaks="$leaks $kind"
			[ "$STATUS/$(header X-Error-Code)" = "404/EntryNotFound" ] || leaks="$leaks $kind:$STATUS"
		done
		api GET "$M/kernels/mallory/own/resolve/planted/$file" -H "Range: bytes=0-99" ${auth:+-H "$auth"}
		[ "$STATUS" = 206 ] || [ "$STATUS" = 200 ] && leaks="$leaks range:$STATUS"
		api GET "$M/mallory/own/resolve/planted/$file" ${auth:+-H "$auth"}
		[ "$(body_sha)" = "$oid" ] || [ "$STATUS" = 200 ] && leaks="$leaks model-prefix:$STATUS"
		api HEAD "$M/kernels/mallory/own/resolve/planted/$file" ${auth:+-H "$auth"}
		[ "$STATUS" = 404 ] || leaks="$leaks head:$STATUS"
	done
	is "${leaks:-none}" none "$name: resolve, raw, Range, the model prefix and HEAD answer 404 EntryNotFound, never the bytes"
	api GET "$M/kernels/mallory/own/resolve/planted/$file"
	like "$(error_of)" "not available in this repo" "$name: the JSON error says the LFS object is not available in this repo"
	api POST "$M/kernels/mallory/own.git/info/lfs/objects/batch" -u "mallory:$MAL" \
		-H "Content-Type: application/vnd.git-lfs+json" \
		--data "{\"operation\":\"download\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$oid\",\"size\":$size}]}"
	like "$STATUS $(cat "$B")" '^200 .*"error":\{"code":404' "$name: the LFS batch download through mallory/own answers 404 for the object"
	if grep -q '"href"' "$B"; then
		ok 1 "$name: the batch handed out a download URL"
	else
		ok 0 "$name: the batch hands out no download URL"
	fi
}
never_served "private object" leak/secret.bin "$SECRET_OID" $SECRET_SIZE
never_served "public repo's object" leak/public.bin "$PUB_OID" $PUB_SIZE

GIT_LFS_SKIP_SMUDGE=1 git clone -q -b planted "$AS_MAL" "$W/pull" >"$TEST_DIR/git.err" 2>&1
ok $? "git clone of the planted branch (no smudge)"
(cd "$W/pull" && git lfs pull) >"$TEST_DIR/lfs-pull.err" 2>&1
got_secret=$(sha256 "$W/pull/leak/secret.bin")
got_public=$(sha256 "$W/pull/leak/public.bin")
ok $([ "$got_secret" != "$SECRET_OID" ] && [ "$got_public" != "$PUB_OID" ]; echo $?) \
	"git lfs pull gets neither the private nor the public object through mallory/own"
is "$(sha256 "$W/pull/own.bin")" "$OWN_OID" "git lfs pull still gets mallory/own's own object"

# the owners still read their files
api GET "$M/kernels/secretorg/private/resolve/main/secret.bin" -H "Authorization: Bearer $SAM"
is "$STATUS/$(body_sha)" "200/$SECRET_OID" "secretorg/private: the owner still reads the secret"
api GET "$M/kernels/puborg/public/resolve/main/public.bin"
is "$STATUS/$(body_sha)" "200/$PUB_OID" "puborg/public: its own object is served to anyone"

# ---- mirror: a hostile upstream whose tree names the private oid ------------------------------
hub_wait up
mkdir -p "$S/hostile/build/torch-cpu"
printf 'x = 1\n' >"$S/hostile/build/torch-cpu/__init__.py"
head -c 50000 /dev/urandom >"$S/hostile/build/torch-cpu/legit.bin"
LEGIT_OID=$(sha256 "$S/hostile/build/torch-cpu/legit.bin")
hub up import "$S/hostile" --repo hostile/kern >/dev/null 2>>"$TEST_DIR/import.log"
ok $? "up: hostile/kern imported (one legit LFS file)"
GD=$(hub_data up)/repos/kernels/hostile/kern.git
LAZY_PATH=build/torch211-cxx11-rocm71-x86_64-linux/secret.so
plant main "$LAZY_PATH=$SECRET_OID:$SECRET_SIZE" >/dev/null	# outside the eager globs: lazy
plant v1 "build/torch-cpu/secret.bin=$SECRET_OID:$SECRET_SIZE" >/dev/null	# eager
CFG=$TEST_DIR/mirror.json
cat >"$CFG" <<EOF
{"upstreams": [{"name": "up", "url": "$U", "concurrency": 2, "max_retries": 1}],
 "selections": [{"name": "hostile", "upstream": "up", "type": "kernel", "repos": ["hostile/kern"],
                 "refs": ["main", "v*"], "eager_variants": ["torch-*"], "lazy": true, "policy": "mirror"}]}
EOF
hub main mirror sync hostile --mirror-config "$CFG" >"$TEST_DIR/sync.out" 2>"$TEST_DIR/sync.err"
diag "mirror sync: exit $?: $(grep 'khub mirror: hostile:' "$TEST_DIR/sync.err")"
api GET "$M/kernels/hostile/kern/resolve/main/build/torch-cpu/legit.bin"
is "$STATUS/$(body_sha)" "200/$LEGIT_OID" "mirror: the upstream's own LFS file is mirrored and served"
api GET "$M/kernels/hostile/kern/resolve/main/$LAZY_PATH"
ok $([ "$(body_sha)" != "$SECRET_OID" ] && [ "$STATUS" = 404 ]; echo $?) \
	"mirror: a lazily mirrored pointer to the private oid is not served (404; the upstream has no such bytes)"
api HEAD "$M/kernels/hostile/kern/resolve/main/$LAZY_PATH"
is "$STATUS" 404 "mirror: HEAD of it: 404"
api GET "$M/kernels/hostile/kern/resolve/v1/build/torch-cpu/secret.bin"
ok $([ "$(body_sha)" != "$SECRET_OID" ] && [ "$STATUS" = 404 ]; echo $?) \
	"mirror: an eagerly mirrored pointer to the private oid is not served (v1 is not mirrored: its object cannot be fetched)"
api POST "$M/kernels/hostile/kern.git/info/lfs/objects/batch" -H "Content-Type: application/vnd.git-lfs+json" \
	--data "{\"operation\":\"download\",\"objects\":[{\"oid\":\"$SECRET_OID\",\"size\":$SECRET_SIZE}]}"
like "$STATUS $(cat "$B")" '^200 .*"error":\{"code":404' "mirror: the LFS batch download through hostile/kern answers 404"

# ---- khub check lfs-pointers ----------------------------------------------------------------
hub main check lfs-pointers >"$TEST_DIR/check.out" 2>"$TEST_DIR/check.err"
rc=$?
is "$rc" 1 "khub check lfs-pointers exits 1 when it finds pointers to unlinked objects"
grep -v '^#' "$TEST_DIR/check.out" | sed 's/^/#   /'
check_line=$(grep -P "^kernels/mallory/own\trefs/heads/planted\t$PLANTED\tleak/secret.bin\t$SECRET_OID\tin-store$" "$TEST_DIR/check.out")
ok $([ -n "$check_line" ]; echo $?) "it reports the planted pointer: repo, ref, commit, path, oid, in the store"
like "$(cat "$TEST_DIR/check.out")" "kernels/mallory/own.*leak/public.bin	$PUB_OID	in-store" "it reports the planted pointer to the public object"
like "$(cat "$TEST_DIR/check.out")" "kernels/hostile/kern	refs/heads/main	[0-9a-f]{40}	$LAZY_PATH	$SECRET_OID" \
	"it reports the mirrored pointer (the object was not linked to the mirror)"
if grep -q "secretorg/private\|puborg/public\|copy/own-again\|own.txt" "$TEST_DIR/check.out"; then
	ok 1 "it reports no legit pointer"
else
	ok 0 "it reports no legit pointer"
fi
hub main check lfs-pointers --fix >"$TEST_DIR/fix.out" 2>"$TEST_DIR/fix.err"
rc=$?
is "$rc" 1 "khub check lfs-pointers --fix exits 1 too"
like "$(cat "$TEST_DIR/fix.err")" "audit log" "--fix says it recorded them in the audit log"
api GET "$M/kernels/secretorg/private/resolve/main/secret.bin" -H "Authorization: Bearer $SAM"
is "$STATUS/$(body_sha)" "200/$SECRET_OID" "after --fix the owner still reads the secret"

done_testing
