#!/bin/bash
# t0056-permission-matrix.sh -- the permission matrix as one table-driven
# test: every caller against every write endpoint and every read endpoint,
# on a public and a private kernel repo of org acme; each answer (status and
# X-Error-Code) compared with what the Hub answers (write contract §2.1,
# §2.3, §3, §4; hub docs organizations-security and security-tokens):
#
#   anonymous                      401 (private repos: 401 + RepoNotFound)
#   expired / revoked / bogus hf_  401 "Invalid credentials in Authorization
#                                  header" everywhere, public repos included
#                                  (git and LFS: with a Basic challenge)
#   signed in, cannot see private  404 RepoNotFound
#   can see, lacks the role        403
#   org write role (write token)   writes, and (Hub docs) create, delete and
#                                  rename any repo of the org
#   read-scoped token              reads only, whatever the user's role
#   create_pr                      anyone who can read (with a token that may write)
#
#   read-scoped token of an org or  403 on every admin and write route
#   site admin                     (site-admin routes included)
#   build worker token (scope       403 everywhere but the build farm's
#   worker)                         worker routes, which refuse every
#                                  other caller (anonymous 401, others 403)
#
# One TAP line per cell: "caller × endpoint × repo → got …, want …"; there
# are no TODO cells. The matrix has two parts:
#  - generated: every row of the route tables (`khub routes --json`), every
#    method, every caller, on a public and a private repo (acme/gen-pub,
#    acme/gen-priv) where the pattern names one; the expected answer comes
#    from the row's access column: the refusal it implies for the caller,
#    or "past the access check" (not 401/403, no RepoNotFound, not 5xx).
#    Where the handler decides more (access_for, ROUTE_HANDLER_ACCESS, git),
#    only the refusals of the route's minimum are checked there;
#  - hand-written cells with real bodies and URLs, which must cover every
#    route whose handler decides more (the test fails otherwise).
# Destructive calls work on per-caller objects (a branch, a tag, a repo to
# move, a repo to delete) so that no cell depends on another.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

log=$TEST_DIR/setup.log
khub admin org create acme >>"$log" 2>&1
khub admin org create other >>"$log" 2>&1
for u in alice bob carol mallory root; do
	if [ $u = root ]; then khub admin user create $u --site-admin >>"$log" 2>&1; else khub admin user create $u >>"$log" 2>&1; fi
done
khub admin member set acme alice admin >>"$log" 2>&1
khub admin member set acme bob write >>"$log" 2>&1
khub admin member set acme carol read >>"$log" 2>&1
khub admin member set other mallory write >>"$log" 2>&1
mint() { khub admin token create "$@" 2>>"$log" | tail -n 1; }
declare -A TOK
TOK[anonymous]=
TOK[reader]=$(mint carol --scope write)
TOK[writer]=$(mint bob --scope write)
TOK[other-org]=$(mint mallory --scope write)
TOK[org-admin]=$(mint alice --scope write)
TOK[site-admin]=$(mint root --scope write)
TOK[read-scoped]=$(mint bob --scope read)
TOK[admin-read]=$(mint alice --scope read)
TOK[root-read]=$(mint root --scope read)
TOK[root-full]=$(mint root --scope admin)
TOK[expired]=$(mint bob --scope write --expires-in-days 0.00001)
EXPIRED_BY=$(( $(date +%s%N) / 1000000 + 900 ))	# ms: 0.00001 days is 864 ms
TOK[revoked]=$(khub admin token create bob --scope write 2>"$TEST_DIR/revoked.err" | tail -n 1)
REVOKED_ID=$(sed -n 's/^token id \([0-9]*\) .*/\1/p' "$TEST_DIR/revoked.err")
TOK[bogus]=hf_$(head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 34)
TOK[worker]=$(khub admin worker add matrix-worker 2>>"$log" | tail -n 1)
CALLERS=(anonymous reader writer other-org org-admin site-admin expired revoked read-scoped admin-read root-read bogus worker)
KHUB_TOKEN_CACHE_TTL_MS=200 khub_start	# token lookups reused for 200 ms, not the 2 s default

bad=0
for c in "${CALLERS[@]}"; do [ $c = anonymous ] || [[ "${TOK[$c]}" =~ ^(hf|khw)_[A-Za-z0-9]+$ ]] || bad=1; done
is "$bad" 0 "an hf_ token (khw_ for the worker) minted for every signed-in caller"
like "$REVOKED_ID" '^[0-9]+$' "the token to revoke has an id"

H=$TEST_DIR/headers
B=$TEST_DIR/body
# call CALLER METHOD PATH [BODY [CONTENT-TYPE]] -> GOT="STATUS/X-Error-Code"
# (through http_request: one client process for the test's thousands of cells)
call() {
	local who=$1 method=$2 path=$3 data=${4-} ctype=${5:-application/json} hdrs=() req=-
	[ -n "${TOK[$who]}" ] && hdrs+=("Authorization: Bearer ${TOK[$who]}")
	if [ -n "$data" ]; then
		printf '%s' "$data" >"$TEST_DIR/request" && req=$TEST_DIR/request
		hdrs+=("Content-Type: $ctype")
	fi
	http_request "$method" "$KHUB_URL$path" "$H" "$B" "$req" "${hdrs[@]}"
	GOT="$HTTP_STATUS/$(header X-Error-Code)"
}
# git_call CALLER PATH: smart HTTP with Basic auth (any user, token as password)
declare -A BASIC
for c in "${CALLERS[@]}"; do BASIC[$c]=$(printf 'x:%s' "${TOK[$c]}" | base64 -w0); done
git_call() {
	local hdrs=()
	[ -n "${TOK[$1]}" ] && hdrs+=("Authorization: Basic ${BASIC[$1]}")
	http_request GET "$KHUB_URL$2" "$H" "$B" - "${hdrs[@]}"
	GOT="$HTTP_STATUS/$(header X-Error-Code)"
}
api_admin() { curl -s -o /dev/null -w '%{http_code}' -X "$1" -H "Authorization: Bearer ${TOK[org-admin]}" \
	-H 'Content-Type: application/json' --data-binary "$3" "$KHUB_URL$2"; }

# ---- the repos ------------------------------------------------------------------------
README=$(printf '# matrix\n' | base64 -w0)
created=0
for r in pub priv; do
	priv=false; [ $r = priv ] && priv=true
	[ "$(api_admin POST /api/repos/create "{\"name\":\"$r\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":$priv,\"files\":[{\"path\":\"README.md\",\"content\":\"$README\",\"encoding\":\"base64\"}]}")" = 200 ] &&
		created=$((created + 1))
	for c in "${CALLERS[@]}"; do
		for kind in del mv; do
			[ "$(api_admin POST /api/repos/create "{\"name\":\"$kind-$r-$c\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":$priv}")" = 200 ] &&
				created=$((created + 1))
		done
		# a branch and a tag per caller, to delete
		gd=$KHUB_DATA_DIR/repos/kernels/acme/$r.git
		git --git-dir="$gd" update-ref "refs/heads/d-$c" main && git --git-dir="$gd" update-ref "refs/tags/dt-$c" main
	done
done
is "$created" $((2 + 4 * ${#CALLERS[@]})) "acme/pub, acme/priv and $((4 * ${#CALLERS[@]})) per-caller repos (to move, to delete) created"

# ---- tokens that stop working -------------------------------------------------------------
call revoked GET /api/whoami-v2
is "$GOT" "200/" "the token to revoke works before it is revoked (and is now cached)"
khub admin token revoke "$REVOKED_ID" >>"$log" 2>&1
ok $? "khub admin token revoke $REVOKED_ID"
sleep 0.3	# token lookups are cached for up to token_cache_ttl_ms (200 ms: khub_start above)
call revoked GET /api/whoami-v2
is "$GOT" "401/" "revoked: whoami 401 once the token cache has expired"
while [ $(( $(date +%s%N) / 1000000 )) -lt "$EXPIRED_BY" ]; do sleep 0.1; done
call expired GET /api/whoami-v2
is "$GOT" "401/" "expired (--expires-in-days 0.00001): whoami 401"

# git and git-lfs only send credentials after a challenge
git_call anonymous "/kernels/acme/priv.git/info/refs?service=git-upload-pack"
like "$GOT $(header WWW-Authenticate)" '^401/ Basic' "anonymous git read of a private repo: 401 with WWW-Authenticate: Basic"
call anonymous POST /kernels/acme/pub.git/info/lfs/objects/batch '{"operation":"upload","objects":[]}' application/vnd.git-lfs+json
like "$GOT $(header LFS-Authenticate)" '^401/ Basic' "anonymous LFS upload batch: 401 with LFS-Authenticate: Basic"

# ---- expectations ----------------------------------------------------------------------
# class of a caller: A anonymous, X a token that is no longer (or never was)
# valid, O signed in outside the org, R read member, S read-scoped token (of
# a write member, an org admin or a site admin: each may read acme/priv and
# may write nothing), W write member, D org admin, Z site admin, K a build
# worker's token (refused 403 by every route but the worker routes)
class() {
	case $1 in
	anonymous) echo A ;; expired|revoked|bogus) echo X ;; other-org) echo O ;; reader) echo R ;;
	read-scoped|admin-read|root-read) echo S ;; writer) echo W ;; org-admin) echo D ;; site-admin) echo Z ;;
	worker) echo K ;;
	esac
}
# want KIND VIS CALLER -> "STATUS[/X-Error-Code]"; without "/" only the
# status is compared (git and git-lfs answer in their own formats)
want() {
	local kind=$1 vis=$2 k
	k=$(class "$3")
	if [ $k = K ]; then echo 403; return; fi
	case $kind in
	provenance)	# a build's provenance: as read, but a job never built has none (a reader: 404, no code)
		k=$(want read "$2" "$3"); [ "${k%%/*}" = 200 ] && k=404/; echo "$k" ;;
	read)	# JSON API reads and resolve
		if [ $k = X ]; then echo 401/
		elif [ $vis = pub ]; then echo 200/
		else case $k in A) echo 401/RepoNotFound ;; O) echo 404/RepoNotFound ;; *) echo 200/ ;; esac; fi ;;
	gitread)
		if [ $k = X ]; then echo 401
		elif [ $vis = pub ]; then echo 200
		else case $k in A) echo 401 ;; O) echo 404 ;; *) echo 200 ;; esac; fi ;;
	whoami)
		case $k in A|X) echo 401/ ;; *) echo 200/ ;; esac ;;
	create)
		case $k in A|X) echo 401 ;; O|R|S) echo 403 ;; *) echo 200/ ;; esac ;;
	write|admin)	# admin: settings, move, delete (the Hub's write role may)
		case $k$vis in
		Apub) echo 401 ;; Apriv) echo 401/RepoNotFound ;; X*) echo 401/ ;;
		Opub) echo 403 ;; Opriv) echo 404/RepoNotFound ;;
		[RS]*) echo 403 ;; *) echo 200/ ;;
		esac ;;
	pr)	# create_pr: anyone who can read, with a token that may write
		case $k$vis in
		Apub) echo 401 ;; Apriv) echo 401/RepoNotFound ;; X*) echo 401/ ;;
		Opriv) echo 404/RepoNotFound ;; S*) echo 403 ;; *) echo 200/ ;;
		esac ;;
	gitwrite|lfswrite)
		case $k$vis in
		[AX]*) echo 401 ;; Opub) echo 403 ;; Opriv) echo 404 ;; [RS]*) echo 403 ;; *) echo 200 ;;
		esac ;;
	contribute)	# benchmark upload of an invalid payload: 400 once past the access check
		case $k$vis in
		Apub) echo 401/ ;; Apriv) echo 401/RepoNotFound ;; X*) echo 401/ ;;
		Opriv) echo 404/RepoNotFound ;; S*) echo 403/ ;; *) echo 400/ ;;
		esac ;;
	lfspr)
		case $k$vis in
		[AX]*) echo 401 ;; Opriv) echo 404 ;; S*) echo 403 ;; *) echo 200 ;;
		esac ;;
	esac
}
# Routes whose cells are hand-written (pattern -> 1): every route whose
# handler decides more than its access column needs at least one.
declare -A HAND
COVERS=()
covers() { COVERS=("$@"); }
INVALID_TOKEN_BODY='{"error":"Invalid credentials in Authorization header"}'
XBODY_BAD=()
cell() {	# cell CALLER ENDPOINT VIS KIND: compare $GOT with want
	local who=$1 ep=$2 vis=$3 kind=$4 w g desc p
	w=$(want "$kind" "$vis" "$who")
	g=$GOT
	[[ "$w" == */* ]] || g=${GOT%%/*}
	desc="$who × $ep × $vis → got ${g%/}, want ${w%/}"
	for p in "${COVERS[@]}"; do [ -n "$p" ] && HAND[$p]=1; done
	COVERS=()
	if [ "$(class "$who")" = X ] && [[ "$ep" != HEAD* ]] && [ "$(cat "$B")" != "$INVALID_TOKEN_BODY" ]; then
		XBODY_BAD+=("$who × $ep × $vis: $(head -c 100 "$B")")
	fi
	if [ "$g" = "$w" ]; then
		ok 0 "$desc"
	else
		ok 1 "$desc"
		[ -s "$B" ] && diag "  body: $(head -c 200 "$B")"
	fi
}

# ---- reads (private and public), whoami -----------------------------------------------------
for c in "${CALLERS[@]}"; do
	call "$c" GET /api/whoami-v2
	cell "$c" "GET whoami-v2" - whoami
done
for r in pub priv; do
	R=/api/kernels/acme/$r
	for c in "${CALLERS[@]}"; do
		call "$c" GET "$R";					cell "$c" "GET repo info" $r read
		call "$c" GET "$R/refs";				cell "$c" "GET refs" $r read
		call "$c" GET "$R/tree/main";				cell "$c" "GET tree/main" $r read
		call "$c" GET "$R/revision/main";			cell "$c" "GET revision/main" $r read
		call "$c" HEAD "/kernels/acme/$r/resolve/main/README.md";	cell "$c" "HEAD resolve" $r read
		call "$c" GET "/kernels/acme/$r/resolve/main/README.md";	cell "$c" "GET resolve" $r read
		call "$c" POST "$R/paths-info/main" '{"paths":["README.md"],"expand":true}'
		cell "$c" "POST paths-info/main" $r read
		call "$c" GET "$R/commits/main";			cell "$c" "GET commits/main" $r read
		for pre in /kernels ""; do	# the kernel prefix, and the model prefix's fallback to kernels
			git_call "$c" "$pre/acme/$r.git/info/refs?service=git-upload-pack"
			pfx=; [ -n "$pre" ] && pfx='/{tprefix}'
			covers "$pfx/{ns}/{gname}/info/refs"
			cell "$c" "git $pre/…/info/refs upload-pack" $r gitread
			call "$c" POST "$pre/acme/$r.git/info/lfs/objects/batch" \
				'{"operation":"download","transfers":["basic"],"objects":[{"oid":"'"$(printf x | sha256sum | cut -c1-64)"'","size":1}]}' \
				application/vnd.git-lfs+json
			covers "$pfx/{ns}/{gname}/info/lfs/objects/batch"
			cell "$c" "LFS batch download ($pre/…)" $r gitread
		done
	done
done

# ---- writes ------------------------------------------------------------------------------------------
b64() { printf '%s' "$1" | base64 -w0; }
ndjson() {	# ndjson PATH TEXT
	printf '{"key":"header","value":{"summary":"%s","description":""}}\n{"key":"file","value":{"content":"%s","path":"%s","encoding":"base64"}}\n' \
		"add $1" "$(b64 "$2")" "$1"
}
OID=$(printf 'matrix object' | sha256sum | cut -c1-64)
declare -A PRS=([pub]=0 [priv]=0)
for r in pub priv; do
	R=/api/kernels/acme/$r
	priv=false; [ $r = priv ] && priv=true
	for c in "${CALLERS[@]}"; do
		call "$c" POST /api/repos/create "{\"name\":\"new-$r-$c\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":$priv}"
		covers /api/repos/create
		cell "$c" "POST repos/create (private=$priv)" "acme/new-$r-$c" create
		call "$c" PUT "$R/settings" "{\"private\":$priv}"
		cell "$c" "PUT settings" $r admin
		call "$c" POST "$R/branch/b-$c" '{}';			cell "$c" "POST branch/{new}" $r write
		call "$c" DELETE "$R/branch/d-$c";			cell "$c" "DELETE branch/{b}" $r write
		call "$c" POST "$R/tag/main" "{\"tag\":\"t-$c\"}";	cell "$c" "POST tag/main" $r write
		call "$c" DELETE "$R/tag/dt-$c";			cell "$c" "DELETE tag/{t}" $r write
		covers "/api/{type}/{ns}/{name}/preupload/{rev}"
		call "$c" POST "$R/preupload/main" '{"files":[{"path":"x.txt","size":1,"sample":"eA=="}]}'
		cell "$c" "POST preupload/main" $r write
		covers "/api/{type}/{ns}/{name}/commit/{rev}"
		call "$c" POST "$R/commit/main" "$(ndjson "c-$c.txt" "$c")" application/x-ndjson
		cell "$c" "POST commit/main" $r write
		covers "/api/{type}/{ns}/{name}/preupload/{rev}"
		call "$c" POST "$R/preupload/main?create_pr=1" '{"files":[{"path":"x.txt","size":1,"sample":"eA=="}]}'
		cell "$c" "POST preupload/main?create_pr=1" $r pr
		covers "/api/{type}/{ns}/{name}/commit/{rev}"
		call "$c" POST "$R/commit/main?create_pr=1" "$(ndjson "pr-$c.txt" "$c")" application/x-ndjson
		cell "$c" "POST commit/main?create_pr=1" $r pr
		[ "${GOT%%/*}" = 200 ] && PRS[$r]=$((PRS[$r] + 1))
		call "$c" POST "/kernels/acme/$r.git/info/lfs/objects/batch" \
			"{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"hash_algo\":\"sha256\",\"ref\":{\"name\":\"main\"},\"objects\":[{\"oid\":\"$OID\",\"size\":13}]}" \
			application/vnd.git-lfs+json
		covers "/{tprefix}/{ns}/{gname}/info/lfs/objects/batch"
		cell "$c" "LFS batch upload (ref main)" $r lfswrite
		call "$c" POST "/kernels/acme/$r.git/info/lfs/objects/batch" \
			"{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"hash_algo\":\"sha256\",\"objects\":[{\"oid\":\"$OID\",\"size\":13}]}" \
			application/vnd.git-lfs+json
		covers "/{tprefix}/{ns}/{gname}/info/lfs/objects/batch"
		cell "$c" "LFS batch upload (no ref: PR)" $r lfspr
		git_call "$c" "/kernels/acme/$r.git/info/refs?service=git-receive-pack"
		covers "/{tprefix}/{ns}/{gname}/info/refs"
		cell "$c" "git info/refs receive-pack" $r gitwrite
	done
done

# ---- routes whose handler decides more: by hand ------------------------------------------------
for r in pub priv; do
	for c in "${CALLERS[@]}"; do
		covers "/api/kernels/{ns}/{name}/benchmarks"
		call "$c" POST "/api/kernels/acme/$r/benchmarks" '{"results":[]}'
		cell "$c" "POST benchmarks (invalid payload)" $r contribute
	done
done
# build jobs (/api/builds/{id}): the job's repo decides, as the repo's own
# routes do (read; write for cancel and retry); one job per caller and repo
BT=$(printf '[general]\nname = "mm"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' | base64 -w0)
declare -A JOB
i=0
for r in pub priv; do
	priv=false; [ $r = priv ] && priv=true
	api_admin POST /api/repos/create "{\"name\":\"b$r\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":$priv,\"files\":[{\"path\":\"build.toml\",\"content\":\"$BT\",\"encoding\":\"base64\"}]}" >/dev/null
	for c in "${CALLERS[@]}"; do
		i=$((i + 1))
		JOB[$r-$c]=$(curl -s -H "Authorization: Bearer ${TOK[org-admin]}" -H 'Content-Type: application/json' \
			--data-binary "{\"variants\":[\"torch2$((10 + i))-cxx11-cpu-x86_64-linux\"]}" "$KHUB_URL/api/kernels/acme/b$r/builds" |
			/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["builds"][0]["id"])' 2>/dev/null)
	done
done
for r in pub priv; do
	for c in "${CALLERS[@]}"; do
		id=${JOB[$r-$c]}
		covers "/api/builds/{arg}"; call "$c" GET "/api/builds/$id"; cell "$c" "GET builds/$id" $r read
		covers "/api/builds/{arg}/log"; call "$c" GET "/api/builds/$id/log"; cell "$c" "GET builds/$id/log" $r read
		covers "/api/builds/{arg}/provenance"; call "$c" GET "/api/builds/$id/provenance"
		cell "$c" "GET builds/$id/provenance (never built: none)" $r provenance
		covers "/api/builds/{arg}/cancel"; call "$c" POST "/api/builds/$id/cancel" '{}'
		cell "$c" "POST builds/$id/cancel" $r write
		covers "/api/builds/{arg}/retry"; call "$c" POST "/api/builds/$id/retry" '{}'
		cell "$c" "POST builds/$id/retry (after the cancel)" $r write
	done
done
# /metrics: site admins (a read is enough: any scope); anyone else 401/403
for c in "${CALLERS[@]}"; do
	call "$c" GET /metrics
	case $c in anonymous|expired|revoked|bogus) w=401 ;; site-admin|root-read) w=200 ;; *) w=403 ;; esac	# worker: 403
	HAND[/metrics]=1
	is "${GOT%%/*}" "$w" "$c × GET /metrics → got ${GOT%%/*}, want $w"
done
# trusted publishers: a site admin's admin-scoped token only
for c in "${CALLERS[@]}" root-full; do
	for m in PUT DELETE; do
		call "$c" $m /api/admin/trusted-publishers/other
		case $c in anonymous|expired|revoked|bogus) w=401 ;; root-full) w=200 ;; *) w=403 ;; esac
		HAND["/api/admin/trusted-publishers/{org}"]=1
		is "${GOT%%/*}" "$w" "$c × $m /api/admin/trusted-publishers/other → got ${GOT%%/*}, want $w"
	done
done

# ---- every route of the tables, from its access column --------------------------------------------
khub routes --json >"$TEST_DIR/routes.json" 2>>"$log"
ok $? "khub routes --json (every row has an access value)"
/usr/bin/python3 - "$TEST_DIR/routes.json" >"$TEST_DIR/routes.tsv" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    for m in r["methods"]:
        if m != "HEAD":
            print("\t".join([m, r["pattern"], r["access"] or "-", "1" if r["dynamic"] else "0", "1" if r["noAuth"] else "0"]))
PY
nroutes=$(/usr/bin/python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$TEST_DIR/routes.json")
like "$nroutes" '^[5-9][0-9]$' "the route tables have $nroutes rows"
grep -q $'\t/api/admin/mirror/config\tsite-admin' "$TEST_DIR/routes.tsv"
ok $? "the dump has the admin routes, with their access"
for r in pub priv; do
	[ "$(api_admin POST /api/repos/create "{\"name\":\"gen-$r\",\"organization\":\"acme\",\"type\":\"kernel\",\"private\":$([ $r = priv ] && echo true || echo false),\"files\":[{\"path\":\"README.md\",\"content\":\"$README\",\"encoding\":\"base64\"}]}")" = 200 ]
	ok $? "acme/gen-$r created for the generated matrix"
done
# gwant ACCESS VIS CALLER NOAUTH -> a refusal "STATUS/X-Error-Code" (or a bare
# status), "sig" (a signed URL refuses without reading Authorization: 4xx,
# not 401), or "pass" (past the access check)
gwant() {
	local access=$1 vis=$2 who=$3 noauth=$4 k w
	k=$(class "$who")
	[ "$noauth" = 1 ] && { [ $k = X ] || [ $k = K ]; } && k=A	# Authorization is not read
	if [ $k = K ] && [ "$access" != worker ]; then echo 403; return; fi
	case $access in
	worker) case $k in A|X) echo 401/ ;; K) echo pass ;; *) echo 403/ ;; esac ;;
	public) [ $k = X ] && echo 401/ || echo pass ;;
	signed-in) case $k in A|X) echo 401/ ;; *) echo pass ;; esac ;;
	site-admin) case $k in A|X) echo 401/ ;; Z) echo pass ;; *) echo 403/ ;; esac ;;
	signed-url) echo sig ;;
	git) [ $k = X ] && echo 401 || echo pass ;;
	namespace-create) case $k in A|X) echo 401/ ;; S) echo 403/ ;; *) echo pass ;; esac ;;
	namespace-write) case $k in A) echo 401/RepoNotFound ;; X) echo 401/ ;; S) echo 403/ ;; *) echo pass ;; esac ;;
	repo-read|repo-contribute|repo-write|repo-manage)
		local kind=${access#repo-}
		case $kind in contribute) kind=pr ;; manage) kind=admin ;; esac
		w=$(want "$kind" "$vis" "$who")
		[ "${w%%/*}" = 200 ] && w=pass
		echo "$w" ;;
	*) echo "no expectation for access '$access'" ;;
	esac
}
declare -A EXERCISED
RO_REFUSED=()
while IFS=$'\t' read -r method pattern access dynamic noauth; do
	repo_level=0
	[[ "$pattern" == *"{ns}"* ]] && repo_level=1
	for r in $([ $repo_level = 1 ] && echo pub priv || echo -); do
		url=$pattern
		rev=main; [ "$method" != GET ] && rev=gen-x
		url=${url//\{type\}/kernels}; url=${url//\{tprefix\}/kernels}; url=${url//\{ns\}/acme}
		url=${url//\{name\}/gen-$r}; url=${url//\{gname\}/gen-$r.git}; url=${url//\{rev\}/$rev}
		url=${url//\{path\*\}/README.md}; url=${url//\{org\}/other}; url=${url//\{arg\}/x}
		[[ "$url" == */info/refs ]] && url+="?service=git-upload-pack"
		for c in "${CALLERS[@]}"; do
			call "$c" "$method" "$url"
			w=$(gwant "$access" "$r" "$c" "$noauth")
			st=${GOT%%/*}
			desc="$c × $method $pattern ($access) × $r → got ${GOT%/}"
			case $w in
			pass)
				if [ "$dynamic" = 1 ]; then
					ok 0 "$desc: past the route's minimum (the handler decides; cells above)"
				elif [ "$st" != 401 ] && [ "$st" != 403 ] && [ "$st" -lt 500 ] && [[ "$GOT" != */RepoNotFound ]]; then
					ok 0 "$desc, past the access check"
				else
					ok 1 "$desc, want past the access check"
					[ -s "$B" ] && diag "  body: $(head -c 200 "$B")"
				fi ;;
			sig)
				[[ "$st" == 4* ]] && [ "$st" != 401 ]
				ok $? "$desc, want a 4xx refusal of the signature, not 401" ;;
			*/*|[0-9]*)
				g=$GOT; [[ "$w" == */* ]] || g=$st
				is "$g" "$w" "$desc, want ${w%/}"
				if [ "$(class "$c")" = S ] && [ "${w%%/*}" = 403 ] && [ "$g" != "$w" ]; then RO_REFUSED+=("$c $method $pattern"); fi ;;
			*)
				ok 1 "$desc: $w" ;;
			esac
		done
		EXERCISED["$method $pattern"]=1
	done
done <"$TEST_DIR/routes.tsv"
nrows=$(wc -l <"$TEST_DIR/routes.tsv")
is "${#EXERCISED[@]}" "$nrows" "every route and method of the tables was exercised by every caller"
is "${#RO_REFUSED[@]}" 0 "read-scoped tokens (of a write member, an org admin, a site admin) are refused 403 by every admin and write route"
for x in "${RO_REFUSED[@]:0:10}"; do diag "  accepted or answered otherwise: $x"; done

is "${#XBODY_BAD[@]}" 0 "every answer to an expired, revoked or bogus token is the Hub's JSON error"
for x in "${XBODY_BAD[@]:0:5}"; do diag "  $x"; done

# git push itself (smart HTTP receive-pack), per caller: a new branch
export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
unset GIT_DIR GIT_WORK_TREE GIT_CONFIG_GLOBAL
mkdir -p "$HOME" && git config --global user.name t && git config --global user.email t@example.com
HOSTPORT=127.0.0.1:$KHUB_PORT
for r in pub priv; do
	W=$TEST_DIR/clone-$r
	if ! git clone -q "http://x:${TOK[org-admin]}@$HOSTPORT/kernels/acme/$r" "$W" >>"$log" 2>&1; then
		ok 1 "clone acme/$r to push from"
		continue
	fi
	(cd "$W" && echo push >push.txt && git add push.txt && git commit -qm push) >>"$log" 2>&1
	for c in "${CALLERS[@]}"; do
		url=http://$HOSTPORT/kernels/acme/$r
		[ -n "${TOK[$c]}" ] && url=http://x:${TOK[$c]}@$HOSTPORT/kernels/acme/$r
		if (cd "$W" && git push -q "$url" "HEAD:refs/heads/push-$c") >"$TEST_DIR/push.err" 2>&1; then
			g=pushed
		else
			g=refused
		fi
		sha=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/$r.git" rev-parse -q --verify "refs/heads/push-$c")
		[ $g = pushed ] && [ -z "$sha" ] && g="pushed?(no ref)"
		[ $g = refused ] && [ -n "$sha" ] && g="refused?(ref exists)"
		case $(class "$c") in W|D|Z) w=pushed ;; *) w=refused ;; esac
		is "$g" "$w" "$c × git push (new branch) × $r → got $g, want $w"
	done
	HAND["/{tprefix}/{ns}/{gname}/git-upload-pack"]=1	# the clone above
	HAND["/{tprefix}/{ns}/{gname}/git-receive-pack"]=1
	# the model prefix: reads fall back to the kernel repo, writes never do
	rm -rf "$TEST_DIR/mclone-$r"
	git clone -q "http://x:${TOK[reader]}@$HOSTPORT/acme/$r" "$TEST_DIR/mclone-$r" >>"$log" 2>&1
	ok $? "reader × git clone through the model prefix (/acme/$r) → cloned"
	HAND["/{ns}/{gname}/git-upload-pack"]=1
	if (cd "$W" && git push -q "http://x:${TOK[org-admin]}@$HOSTPORT/acme/$r" "HEAD:refs/heads/mpush") >>"$log" 2>&1; then g=pushed; else g=refused; fi
	is "$g" refused "org-admin × git push through the model prefix (/acme/$r: no model of that id) → got $g, want refused"
	HAND["/{ns}/{gname}/git-receive-pack"]=1
done

# last: move and delete, each caller on its own repos
for r in pub priv; do
	for c in "${CALLERS[@]}"; do
		call "$c" POST /api/repos/move "{\"fromRepo\":\"acme/mv-$r-$c\",\"toRepo\":\"acme/mv-$r-$c-moved\",\"type\":\"kernel\"}"
		covers /api/repos/move
		cell "$c" "POST repos/move" $r admin
		call "$c" DELETE /api/repos/delete "{\"name\":\"del-$r-$c\",\"organization\":\"acme\",\"type\":\"kernel\"}"
		covers /api/repos/delete
		cell "$c" "DELETE repos/delete" $r admin
	done
done

# The refusals changed nothing: only the allowed callers' branches, tags, commits and PRs exist.
refs_of() { git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/$1.git" for-each-ref --format='%(refname)' | sort | tr '\n' ' '; }
for r in pub priv; do
	got=$(refs_of $r)
	wantrefs=""
	for c in "${CALLERS[@]}"; do
		case $(class "$c") in
		W|D|Z) wantrefs+="refs/heads/b-$c refs/heads/push-$c refs/tags/t-$c " ;;
		*) wantrefs+="refs/heads/d-$c refs/tags/dt-$c " ;;
		esac
	done
	wantrefs=$(echo "refs/heads/main $wantrefs" | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
	is "$(echo "$got" | tr ' ' '\n' | grep -v '^refs/pr/' | grep . | sort | tr '\n' ' ')" "$wantrefs" \
		"acme/$r: exactly the allowed callers' branches and tags were created or deleted"
	files=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/$r.git" ls-tree --name-only main | tr '\n' ' ')
	is "$files" ".gitattributes README.md c-org-admin.txt c-site-admin.txt c-writer.txt " \
		"acme/$r main: only the allowed callers' commits"
	npr=$(echo "$got" | tr ' ' '\n' | grep -c '^refs/pr/')
	is "$npr" "${PRS[$r]}" "acme/$r: one refs/pr/N per create_pr commit that answered 200, none for the refused"
	deleted=$(for c in "${CALLERS[@]}"; do [ -d "$KHUB_DATA_DIR/repos/kernels/acme/del-$r-$c.git" ] || printf '%s ' $c; done)
	moved_by=$(for c in "${CALLERS[@]}"; do [ -d "$KHUB_DATA_DIR/repos/kernels/acme/mv-$r-$c-moved.git" ] && printf '%s ' $c; done)
	is "$moved_by" "$deleted" "acme: the same callers moved and deleted their $r repos"
	like "$moved_by" '^(writer )?org-admin site-admin $' "acme: only allowed callers moved and deleted their $r repos"
done

# ---- LFS objects belong to repos ------------------------------------------------------------------
# An LFS object committed to the private repo must not be reachable from a
# repo of someone who cannot read it, by oid alone (GitHub's LFS scopes
# objects to repositories; the Hub's LFS storage paths are per repo too,
# inferred): no existence oracle in the upload batch, no download batch, no
# lfsFile commit that adopts an object that was never uploaded to the repo.
head -c 4000 /dev/urandom >"$TEST_DIR/secret.so"
SOID=$(sha256sum "$TEST_DIR/secret.so" | cut -c1-64)
printf '{"key":"header","value":{"summary":"secret"}}\n{"key":"file","value":{"content":"%s","path":"secret.so","encoding":"base64"}}\n' \
	"$(base64 -w0 "$TEST_DIR/secret.so")" >"$TEST_DIR/secret.ndjson"
call org-admin POST /api/kernels/acme/priv/commit/main "$(cat "$TEST_DIR/secret.ndjson")" application/x-ndjson
is "$GOT" "200/" "org admin commits a binary to acme/priv (stored as LFS)"
call other-org POST /api/repos/create '{"name":"own","type":"kernel"}'
is "$GOT" "200/" "other-org creates a repo of its own"
lfs_objs() {	# lfs_objs OPERATION -> "oid-prefix:actions|error" for the secret object
	call other-org POST /kernels/mallory/own.git/info/lfs/objects/batch \
		"{\"operation\":\"$1\",\"transfers\":[\"basic\"],\"ref\":{\"name\":\"main\"},\"objects\":[{\"oid\":\"$SOID\",\"size\":4000}]}" \
		application/vnd.git-lfs+json
	/usr/bin/python3 -c "import json; o=json.load(open('$B'))['objects'][0]; print('error' if 'error' in o else ','.join(sorted(o.get('actions', {}))) or 'none')" 2>/dev/null
}
g=$(lfs_objs upload)
if [ "$g" = "upload,verify" ]; then ok 0 "other-org × LFS upload batch of acme/priv's oid on its own repo → asked to upload"
else ok 1 "other-org × LFS upload batch of acme/priv's oid on its own repo → got '$g' (the object exists), want 'upload,verify'"; fi
g=$(lfs_objs download)
if [ "$g" = error ]; then ok 0 "other-org × LFS download batch of acme/priv's oid on its own repo → per-object error"
else ok 1 "other-org × LFS download batch of acme/priv's oid on its own repo → got '$g', want a per-object error"; fi
call other-org POST /api/kernels/mallory/own/commit/main \
	"$(printf '{"key":"header","value":{"summary":"s"}}\n{"key":"lfsFile","value":{"path":"x.so","algo":"sha256","oid":"%s","size":4000}}' "$SOID")" \
	application/x-ndjson
if [[ "$GOT" == 4* ]]; then ok 0 "other-org × lfsFile commit of acme/priv's oid (never uploaded) on its own repo → $GOT"
else
	dl=$(curl -s -L -H "Authorization: Bearer ${TOK[other-org]}" "$KHUB_URL/kernels/mallory/own/resolve/main/x.so" | sha256sum | cut -c1-64)
	ok 1 "other-org × lfsFile commit of acme/priv's oid (never uploaded) on its own repo → got ${GOT%/}$( [ "$dl" = "$SOID" ] && echo ", and then downloads the private bytes"), want 4xx"
fi

# (after the pushes, moves and deletes, which are hand-written cells too)
missing=$(while IFS=$'\t' read -r method pattern access dynamic noauth; do
	[ "$dynamic" = 1 ] && [ -z "${HAND[$pattern]:-}" ] && echo "$method $pattern"; done <"$TEST_DIR/routes.tsv" | sort -u | tr '\n' ';')
is "$missing" "" "every route whose handler decides more has hand-written cells"

server_and_sanitizer_logs | grep -E 'runtime error|AddressSanitizer' | head -5 | sed 's/^/# server: /'
ok $(server_and_sanitizer_logs | grep -qE 'runtime error|AddressSanitizer'; [ $? -ne 0 ]; echo $?) "server log has no sanitizer reports"

done_testing
