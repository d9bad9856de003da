#!/bin/bash
# t0100-mirror.sh -- `khub mirror` between two khub servers on loopback (an
# upstream and a mirror, each with its own data dir and embedded database;
# the mirror talks to the upstream through tests/integration/lib/
# fault_proxy.py in pass-through mode, whose access log keeps query strings).
# After a sync the mirror answers refs, tree, revision and resolve with the
# upstream's SHAs and bytes; the kernels lock hash (contract §6) is the same
# against both; the trust flag is copied; mirrored repos are read-only
# (commit API and git push); a variant outside the eager globs is in the
# tree but its LFS bytes arrive only on first request (a clear 5xx while the
# upstream is down); the admin API and /metrics report the sync; a trigger
# through the admin API is picked up by `khub mirror run`, while a second
# `khub mirror run` stands by (one pulls at a time; it takes over when the
# first stops); a re-sync with
# nothing new over 200 repos sends only ref advertisements (timed).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in /usr/bin/python3 git curl; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f\n", b - a }'; }
T_START=$(now)

hubs_setup
hub_init up
hub_init mirror
UP=$(hub_url up)
MI=$(hub_url mirror)
# Both embedded databases initialise at the same time.
hub_spawn up
hub_spawn mirror
hub_wait up

# ---- seed the upstream ---------------------------------------------------------
ORG=acme
NAMES=(relu gelu silu)
BRANCHES=(main v1 v2 dev)	# dev is outside the selection's refs
LAZY_VARIANT=torch211-cxx11-rocm71-x86_64-linux	# outside the eager globs
declare -A SHA
seed_fail=0
for name in "${NAMES[@]}"; do
	for b in "${BRANCHES[@]}"; do
		d=$TEST_DIR/src/$name-$b
		make_kernel_tree "$d" "$name"	# torch-cpu + torch211-cxx11-cu128 (.so = LFS)
		rv=$d/build/$LAZY_VARIANT
		mkdir -p "$rv/$name"
		printf 'from ._ops import ops\n' >"$rv/__init__.py"
		printf '{"id":"%s","version":1,"backend":{"type":"rocm","archs":["gfx942"]}}\n' "$name" >"$rv/metadata.json"
		head -c 400000 /dev/urandom >"$rv/_${name}_rocm.abi3.so"
		head -c 100000 /dev/urandom >"$rv/$name/_${name}_extra.so"
		printf '%s of %s\n' "$b" "$name" >"$d/BRANCH.txt"
		SHA[$name/$b]=$(hub up import "$d" --repo "$ORG/$name" --branch "$b" 2>>"$TEST_DIR/import.log") || seed_fail=1
	done
done
hub up admin trust set "$ORG" >/dev/null 2>&1 || seed_fail=1
hub up admin user create root --site-admin >/dev/null 2>&1
UP_ROOT=$(hub up admin token create root --scope admin 2>/dev/null | tail -n 1)
hub up admin org create bulk >/dev/null 2>&1
hub up admin member set bulk root admin >/dev/null 2>&1
ok $seed_fail "upstream: ${#NAMES[@]} repos x ${#BRANCHES[@]} branches imported, $ORG trusted"

# 200 small repos for the re-sync timing, created through the API, 8 at a
# time, by one curl (-Z; a curl per repo cost more CPU than the creation):
# bulk_create_config prints its config (curl -K), a transfer per repo.
NBULK=${NBULK:-200}
bulk_create_config() {
	local i d
	for i in $(seq 1 "$NBULK"); do
		[ "$i" -gt 1 ] && echo next
		printf 'url = "%s"\nrequest = "POST"\nheader = "Authorization: Bearer %s"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' \
			"$UP/api/repos/create" "$UP_ROOT"
		printf -v d '{"name":"k%s","organization":"bulk","type":"kernel","files":[{"path":"README.md","content":"kernel k%s\\n"},{"path":"build/torch-cpu/__init__.py","content":"x = %s\\n"}]}' \
			"$i" "$i" "$i"
		d=${d//\\/\\\\}
		printf 'data = "%s"\n' "${d//\"/\\\"}"	# the body, quoted for curl -K
	done
}
t=$(now)
codes=$(bulk_create_config | curl -s --no-progress-meter -Z --parallel-max 8 -K - |
	sort | uniq -c | tr -s ' ' | sed 's/^ //')
is "$codes" "$NBULK 200" "upstream: $NBULK bulk/k* repos created through the API"
diag "seeding $NBULK repos took $(since "$t") s"

# ---- the mirror configuration ---------------------------------------------------------
hub_wait mirror
proxy_start "$UP"
listing=$(curl -s -o /dev/null -w '%{http_code}' "$UP/api/kernels?author=$ORG&limit=1000")
if [ "$listing" = 200 ] &&
	curl -s "$UP/api/kernels?author=$ORG&limit=1000" | /usr/bin/python3 -c 'import json,sys; ids={r["id"] for r in json.load(sys.stdin)}; sys.exit(0 if {"acme/relu","acme/gelu","acme/silu"} <= ids else 1)'; then
	ACME_REPOS='["acme/*"]'
	BULK_REPOS='["bulk/*"]'
	diag "upstream has GET /api/kernels?author=ORG: selections use the globs acme/* and bulk/*"
else
	ACME_REPOS=$(printf '"acme/%s",' "${NAMES[@]}")
	ACME_REPOS="[${ACME_REPOS%,}]"
	BULK_REPOS=$(seq 1 "$NBULK" | sed 's/.*/"bulk\/k&"/' | paste -sd, -)
	BULK_REPOS="[$BULK_REPOS]"
	diag "upstream answers GET /api/kernels?author=$ORG with HTTP $listing: selections list repos by name"
fi
EAGER='["torch-*", "torch21*-cxx11-cu12*-x86_64-linux"]'
selection() {	# selection NAME REPOS_JSON
	printf '{"name": "%s", "upstream": "up", "type": "kernel", "repos": %s, "refs": ["main", "v*"],
	  "eager_variants": %s, "lazy": true, "interval": 3600, "policy": "mirror"}' "$1" "$2" "$EAGER"
}
upstream_json() { printf '{"name": "up", "url": "%s", "concurrency": 4, "max_retries": 2}' "$PROXY_URL"; }
CFG=$TEST_DIR/mirror.json
printf '{"upstreams": [%s],\n "selections": [%s,\n %s]}\n' "$(upstream_json)" \
	"$(selection acme "$ACME_REPOS")" "$(selection bulk "$BULK_REPOS")" >"$CFG"
# The first sync of the 200 bulk repos runs in four processes at once (to keep
# this test short); the timed re-sync uses the one "bulk" selection above.
CFG4=$TEST_DIR/mirror-bulk4.json
{
	printf '{"upstreams": [%s], "selections": [' "$(upstream_json)"
	for k in 0 1 2 3; do
		list=$(seq 1 "$NBULK" | awk -v k=$k '($1 - 1) % 4 == k { printf "%s\"bulk/k%s\"", (n++ ? "," : ""), $1 }')
		printf '%s%s' "$([ $k -gt 0 ] && echo ,)" "$(selection bulk$k "[$list]")"
	done
	printf ']}\n'
} >"$CFG4"
/usr/bin/python3 -m json.tool "$CFG" >/dev/null && /usr/bin/python3 -m json.tool "$CFG4" >/dev/null
ok $? "mirror configuration files are valid JSON"

# ---- first sync of acme/* ----------------------------------------------------------------
t=$(now)
hub mirror mirror sync acme --mirror-config "$CFG" >"$TEST_DIR/sync1.out" 2>"$TEST_DIR/sync1.err"
rc=$?
ok $rc "khub mirror sync acme exits 0"
summary=$(grep 'khub mirror: acme:' "$TEST_DIR/sync1.err")
like "$summary" "${#NAMES[@]} repos .* [0-9.]+ MiB in [0-9.]+ s .* 0 errors" "sync prints repos, MiB and seconds, no errors"
diag "first sync: $summary (wall $(since "$t") s)"
[ $rc -eq 0 ] || sed 's/^/#   /' "$TEST_DIR/sync1.err" | tail -20

# ---- fidelity: refs, revision, tree, resolve, lock hash (python) ---------------------------
out=$(UP="$UP" MI="$MI" ORG=$ORG NAMES="${NAMES[*]}" LAZY_VARIANT=$LAZY_VARIANT TEST_DIR="$TEST_DIR" /usr/bin/python3 - <<'PY' 2>&1
import hashlib, http.client, json, os, re, urllib.error, urllib.parse, urllib.request
from pathlib import PurePosixPath

UP, MI, ORG = os.environ["UP"], os.environ["MI"], os.environ["ORG"]
NAMES = os.environ["NAMES"].split()
LAZY = os.environ["LAZY_VARIANT"]
TD = os.environ["TEST_DIR"]
SELECTED = re.compile(r"^(main|v.*)$")


def ok(cond, desc, problems=()):
    print(("ok" if cond else "not ok") + " - " + desc)
    if not cond:
        for p in list(problems)[:15]:
            print("#   " + str(p))
    return cond


def diag(m):
    print("# " + m)


def get_json(url):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=60) as r:
            return r.status, r.headers, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers, None


def get_all(url):
    """A tree listing, following Link rel=next."""
    out = []
    while url:
        st, h, body = get_json(url)
        if st != 200 or not isinstance(body, list):
            return st, None
        out.extend(body)
        m = re.search(r'<([^>]*)>\s*;\s*rel="?next"?', h.get("Link") or "")
        url = m.group(1) if m else None
    return 200, out


def head(url):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        c.request("HEAD", u.path, headers={"Accept-Encoding": "identity"})
        r = c.getresponse()
        r.read()
        return r.status, r.headers
    finally:
        c.close()


def get_bytes(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def lock_hash(files):
    m = hashlib.sha256()
    for name, hx in sorted(files):
        m.update(name)
        m.update(bytes.fromhex(hx))
    return "sha256-" + m.hexdigest()


def lock_of(tree):
    """contract §6: {variant: "sha256-…"} from a recursive tree listing."""
    variants = {}
    for e in tree:
        p = e.get("path", "")
        if e.get("type") != "file" or not p.startswith("build/torch"):
            continue
        if p.endswith(".pyc") or "__pycache__" in p.split("/"):
            continue
        parts = PurePosixPath(p).parts
        hx = e["lfs"]["oid"] if e.get("lfs") else e["oid"]
        variants.setdefault(parts[1], []).append((PurePosixPath(*parts[2:]).as_posix().encode(), hx))
    return {v: lock_hash(f) for v, f in variants.items()}


lazy_rows, eager_rows = [], []
for name in NAMES:
    repo = f"{ORG}/{name}"
    # refs: the mirror has exactly the selected branches, at the upstream shas
    st_u, _, ru = get_json(f"{UP}/api/kernels/{repo}/refs")
    st_m, _, rm = get_json(f"{MI}/api/kernels/{repo}/refs")
    want = sorted((b["name"], b["targetCommit"]) for b in (ru or {}).get("branches", []) if SELECTED.match(b["name"]))
    got = sorted((b["name"], b["targetCommit"]) for b in (rm or {}).get("branches", []))
    ok(st_u == st_m == 200 and got == want and len(want) == 3,
       f"{repo}: refs on the mirror = the upstream's main, v1, v2 (same shas; dev not mirrored)",
       [f"upstream {st_u} {ru}", f"mirror {st_m} {rm}"])
    ok((rm or {}).get("tags") == [] and (rm or {}).get("converts", []) == [],
       f"{repo}: no tags, no converts, no staging refs listed", [rm])
    for branch, sha in want:
        # revision by name and by sha
        problems = []
        for rev in (branch, sha):
            su, _, iu = get_json(f"{UP}/api/kernels/{repo}/revision/{rev}")
            sm, _, im = get_json(f"{MI}/api/kernels/{repo}/revision/{rev}")
            if su != 200 or sm != 200 or (iu or {}).get("sha") != sha or (im or {}).get("sha") != sha:
                problems.append(f"revision/{rev}: upstream {su} {(iu or {}).get('sha')}, mirror {sm} {(im or {}).get('sha')}")
            for key in ("id", "author", "private", "gated", "disabled", "versions", "siblings"):
                if (iu or {}).get(key) != (im or {}).get(key):
                    problems.append(f"revision/{rev}: '{key}' upstream {(iu or {}).get(key)!r} mirror {(im or {}).get(key)!r}")
        ok(not problems, f"{repo}@{branch}: revision (by name and sha) = upstream {sha[:12]}", problems)
        # tree, recursive, both expand modes
        trees, utrees = {}, {}
        for expand in ("false", "true"):
            su, tu = get_all(f"{UP}/api/kernels/{repo}/tree/{sha}?recursive=true&expand={expand}")
            sm, tm = get_all(f"{MI}/api/kernels/{repo}/tree/{sha}?recursive=true&expand={expand}")
            diff = []
            if su != 200 or sm != 200:
                diff.append(f"status upstream {su} mirror {sm}")
            else:
                du = {e["path"]: e for e in tu}
                dm = {e["path"]: e for e in tm}
                for p in sorted(set(du) | set(dm)):
                    if du.get(p) != dm.get(p):
                        diff.append(f"{p}: upstream {du.get(p)} mirror {dm.get(p)}")
            ok(not diff and tu, f"{repo}@{branch}: recursive tree (expand={expand}) identical ({len(tu or [])} entries)", diff)
            trees[expand], utrees[expand] = tm or [], tu or []
        tree = trees["false"]
        lazy_files = [e for e in tree if e.get("type") == "file" and e["path"].startswith(f"build/{LAZY}/")]
        ok(any(e.get("lfs") for e in lazy_files),
           f"{repo}@{branch}: the lazy variant {LAZY} is listed in the mirror's tree with its LFS files",
           [f"{len(lazy_files)} files"])
        # locks
        lu, lm = lock_of(utrees["false"]), lock_of(tree)
        ok(lu == lm and len(lu) == 3, f"{repo}@{branch}: git_lfs_concat lock hashes upstream == mirror ({len(lu)} variants)",
           [f"upstream {lu}", f"mirror {lm}"])
        if branch == "main":
            for v in sorted(lm):
                diag(f"{repo}@main {v}: {lm[v]}")
        # resolve: HEAD headers and GET bytes, except the lazy variant (not fetched yet)
        problems, nfiles, mirror_bytes_lock = [], 0, {}
        for e in tree:
            if e.get("type") != "file":
                continue
            p = e["path"]
            if p.startswith(f"build/{LAZY}/"):
                if e.get("lfs"):
                    lazy_rows.append((repo, branch, sha, p, e["lfs"]["oid"], e["lfs"]["size"]))
                continue
            if e.get("lfs"):
                eager_rows.append((repo, branch, sha, p, e["lfs"]["oid"], e["lfs"]["size"]))
            nfiles += 1
            q = urllib.parse.quote(p)
            hu = head(f"{UP}/kernels/{repo}/resolve/{branch}/{q}")
            hm = head(f"{MI}/kernels/{repo}/resolve/{branch}/{q}")
            for hdr in ("X-Repo-Commit", "ETag", "X-Linked-Etag", "X-Linked-Size", "Content-Length", "Content-Type"):
                if hu[1].get(hdr) != hm[1].get(hdr):
                    problems.append(f"HEAD {p}: {hdr} upstream {hu[1].get(hdr)!r} mirror {hm[1].get(hdr)!r}")
            if hu[0] != 200 or hm[0] != 200 or hm[1].get("X-Repo-Commit") != sha:
                problems.append(f"HEAD {p}: status upstream {hu[0]} mirror {hm[0]}, commit {hm[1].get('X-Repo-Commit')}")
            try:
                bu = get_bytes(f"{UP}/kernels/{repo}/resolve/{sha}/{q}")
                bm = get_bytes(f"{MI}/kernels/{repo}/resolve/{sha}/{q}")
            except (OSError, urllib.error.HTTPError) as ex:
                problems.append(f"GET {p}: {ex}")
                continue
            if bu != bm:
                problems.append(f"GET {p}: bytes differ ({len(bu)} vs {len(bm)})")
            etag = (hm[1].get("ETag") or "").strip('"')
            calc = hashlib.sha256(bm).hexdigest() if len(etag) == 64 else hashlib.sha1(b"blob %d\0" % len(bm) + bm).hexdigest()
            if calc != etag:
                problems.append(f"GET {p}: ETag {etag} is not the hash of the mirror's bytes ({calc})")
            if p.startswith("build/torch"):
                parts = PurePosixPath(p).parts
                mirror_bytes_lock.setdefault(parts[1], []).append((PurePosixPath(*parts[2:]).as_posix().encode(), calc))
        ok(not problems and nfiles >= 8,
           f"{repo}@{branch}: HEAD (X-Repo-Commit, ETag, sizes) and GET bytes identical for {nfiles} files", problems)
        lb = {v: lock_hash(f) for v, f in mirror_bytes_lock.items()}
        ok(all(lb[v] == lm.get(v) for v in lb) and len(lb) == 2,
           f"{repo}@{branch}: lock hash from the mirror's downloaded bytes == from the tree (eager variants)",
           [f"bytes {lb}", f"tree {lm}"])

with open(os.path.join(TD, "lazy.tsv"), "w") as f:
    for r in lazy_rows:
        f.write("\t".join(map(str, r)) + "\n")
with open(os.path.join(TD, "eager.tsv"), "w") as f:
    for r in eager_rows:
        f.write("\t".join(map(str, r)) + "\n")
PY
)
py_rc=$?
while IFS= read -r line; do
	if [[ "$line" =~ ^ok\ -\ (.*)$ ]]; then
		ok 0 "${BASH_REMATCH[1]}"
	elif [[ "$line" =~ ^not\ ok\ -\ (.*)$ ]]; then
		ok 1 "${BASH_REMATCH[1]}"
	elif [[ "$line" =~ ^# ]]; then
		echo "$line"
	elif [ -n "$line" ]; then
		echo "# python: $line"
	fi
done <<<"$out"
ok $py_rc "the fidelity checks ran to the end (exit status $py_rc)"

# ---- eager vs lazy LFS objects in the mirror's store -----------------------------------
missing=0
while IFS=$'\t' read -r repo branch sha path oid size; do
	[ -f "$(lfs_object mirror "$oid")" ] || { missing=$((missing + 1)); diag "eager object missing: $repo@$branch $path"; }
done <"$TEST_DIR/eager.tsv"
ok $missing "every eager LFS object ($(wc -l <"$TEST_DIR/eager.tsv") files) is in the mirror's store"
present=0
while IFS=$'\t' read -r repo branch sha path oid size; do
	[ -f "$(lfs_object mirror "$oid")" ] && present=$((present + 1))
	[ -f "$(lfs_object up "$oid")" ] || present=$((present + 100))
done <"$TEST_DIR/lazy.tsv"
ok $present "no lazy-variant LFS object ($(wc -l <"$TEST_DIR/lazy.tsv") files) is in the mirror's store before a request (all are upstream)"

lazy_row() { sed -n "${1}p" "$TEST_DIR/lazy.tsv"; }
IFS=$'\t' read -r L1_REPO L1_BRANCH L1_SHA L1_PATH L1_OID L1_SIZE < <(lazy_row 1)
n0=$(lines "$PROXY_LOG")
t=$(now)
code=$(curl -s -o "$TEST_DIR/lazy1" -w '%{http_code}' "$MI/kernels/$L1_REPO/resolve/$L1_BRANCH/$L1_PATH")
diag "first request of $L1_REPO@$L1_BRANCH $L1_PATH ($L1_SIZE bytes): HTTP $code in $(since "$t") s"
is "$code/$(sha256sum <"$TEST_DIR/lazy1" | cut -d' ' -f1)" "200/$L1_OID" "first GET of a lazy file on the mirror: 200 with the upstream's bytes"
check "the lazy object is now in the mirror's store" -- test -f "$(lfs_object mirror "$L1_OID")"
fetched=$(lines_since "$PROXY_LOG" "$n0" | grep -c "GET /kernels/$L1_REPO/resolve/$L1_SHA/$L1_PATH ")
is "$fetched" 1 "the mirror fetched it from the upstream once (by commit sha)"
n0=$(lines "$PROXY_LOG")
code=$(curl -s -o "$TEST_DIR/lazy1b" -w '%{http_code}' "$MI/kernels/$L1_REPO/resolve/$L1_SHA/$L1_PATH")
is "$code/$(lines_since "$PROXY_LOG" "$n0" | wc -l)" "200/0" "a second GET is served from the mirror's store (no upstream request)"

# ---- the upstream down -----------------------------------------------------------------------
IFS=$'\t' read -r L2_REPO L2_BRANCH L2_SHA L2_PATH L2_OID L2_SIZE < <(lazy_row 2)
IFS=$'\t' read -r L3_REPO L3_BRANCH L3_SHA L3_PATH L3_OID L3_SIZE < <(lazy_row 3)
IFS=$'\t' read -r E_REPO E_BRANCH E_SHA E_PATH E_OID E_SIZE < <(sed -n 1p "$TEST_DIR/eager.tsv")
hub_stop up
down_check() {	# down_check LABEL PATH_URL
	local t code ctype body
	t=$(now)
	code=$(curl -s -D "$TEST_DIR/down.h" -o "$TEST_DIR/down.b" -w '%{http_code}' "$2")
	local took
	took=$(since "$t")
	ctype=$(grep -i '^content-type:' "$TEST_DIR/down.h" | tr -d '\r' | cut -d' ' -f2-)
	body=$(cat "$TEST_DIR/down.b")
	diag "$1: HTTP $code in $took s: $body"
	like "$code $ctype" '^5[0-9][0-9] application/json' "$1: a 5xx JSON answer"
	like "$body" '"error":".*(not mirrored|upstream).*(unreachable|could not)' "$1: the error says the upstream could not provide the file"
	like "$took" '^[0-9]\.' "$1: answered within 10 s"
}
down_check "upstream khub stopped (proxy up, 502 from it)" "$MI/kernels/$L2_REPO/resolve/$L2_BRANCH/$L2_PATH"
proxy_stop
down_check "upstream and proxy stopped (connection refused)" "$MI/kernels/$L3_REPO/resolve/$L3_BRANCH/$L3_PATH"
code=$(curl -s -I -o /dev/null -w '%{http_code}' "$MI/kernels/$L3_REPO/resolve/$L3_BRANCH/$L3_PATH")
diag "HEAD of a not-yet-fetched lazy file while the upstream is down: HTTP $code (HEAD fetches the bytes too)"
code=$(curl -s -o "$TEST_DIR/eager1" -w '%{http_code}' "$MI/kernels/$E_REPO/resolve/$E_BRANCH/$E_PATH")
is "$code/$(sha256sum <"$TEST_DIR/eager1" | cut -d' ' -f1)" "200/$E_OID" "an eager file is served while the upstream is down"
check "the failed lazy objects are not in the store" -- test ! -f "$(lfs_object mirror "$L2_OID")" -a ! -f "$(lfs_object mirror "$L3_OID")"
hub_start up
proxy_start "$UP"	# same port as before
code=$(curl -s -o "$TEST_DIR/lazy2" -w '%{http_code}' "$MI/kernels/$L2_REPO/resolve/$L2_BRANCH/$L2_PATH")
is "$code/$(sha256sum <"$TEST_DIR/lazy2" | cut -d' ' -f1)" "200/$L2_OID" "upstream back: the same lazy file now answers 200 with the right bytes"

# ---- read-only, trust ------------------------------------------------------------------------
hub mirror admin user create root --site-admin >/dev/null 2>&1
ROOT=$(hub mirror admin token create root --scope admin 2>/dev/null | tail -n 1)
like "$ROOT" '^hf_' "mirror: site admin token"
printf '%s\n' '{"key":"header","value":{"summary":"try to write to a mirror"}}' \
	'{"key":"file","value":{"path":"NEW.txt","content":"aGk=","encoding":"base64"}}' >"$TEST_DIR/commit.ndjson"
code=$(curl -s -o "$TEST_DIR/commit.out" -w '%{http_code}' -H "Authorization: Bearer $ROOT" \
	-H 'Content-Type: application/x-ndjson' --data-binary @"$TEST_DIR/commit.ndjson" "$MI/api/kernels/$ORG/relu/commit/main")
is "$code" 403 "commit API on a mirrored repo (as a site admin): 403"
like "$(cat "$TEST_DIR/commit.out")" 'read-only' "the 403 says the repo is read-only"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ROOT" -X POST \
	-d '{"files":[{"path":"x.so","size":3,"sample":"eA=="}]}' "$MI/api/kernels/$ORG/relu/preupload/main")
is "$code" 403 "preupload on a mirrored repo: 403"

export HOME=$TEST_DIR/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=
export GIT_LFS_SKIP_SMUDGE=1
mkdir -p "$HOME"
git config --global user.name "Test User"
git config --global user.email test@example.com
MIRROR_GIT=$(hub_data mirror)/repos/kernels/$ORG/relu.git
refs_before=$(git --git-dir="$MIRROR_GIT" for-each-ref --format='%(refname) %(objectname)')
git clone -q "$MI/kernels/$ORG/relu" "$TEST_DIR/clone" 2>"$TEST_DIR/clone.err"
ok $? "git clone from the mirror"
( cd "$TEST_DIR/clone" && echo hi >PUSHED.txt && git add PUSHED.txt && git commit -qm push-to-mirror ) >/dev/null 2>&1
push_out=$(cd "$TEST_DIR/clone" && git push "http://root:$ROOT@127.0.0.1:${HUB_PORT[mirror]}/kernels/$ORG/relu" HEAD:main 2>&1)
push_rc=$?
ok $((push_rc == 0)) "git push to the mirror (as a site admin) is refused"
diag "push: $(echo "$push_out" | grep -iE 'error|fatal|denied|read-only|403' | head -2 | tr '\n' ' ')"
is "$(git --git-dir="$MIRROR_GIT" for-each-ref --format='%(refname) %(objectname)')" "$refs_before" "the mirror's refs are unchanged by the refused push"
ls_remote=$(git ls-remote "$MI/kernels/$ORG/relu" 2>&1)
ok $(echo "$ls_remote" | grep -c 'khub-upstream') "git ls-remote on the mirror does not advertise the staging refs"

trust() { curl -s "$1/api/organizations/$2/overview" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("trustedKernelPublisher"))'; }
is "$(trust "$UP" $ORG)/$(trust "$MI" $ORG)" "True/True" "trustedKernelPublisher of $ORG copied to the mirror"

# ---- admin API and metrics -----------------------------------------------------------------
code=$(curl -s -o /dev/null -w '%{http_code}' "$MI/api/admin/mirror")
like "$code" '^40[13]$' "GET /api/admin/mirror anonymously: $code"
curl -s -H "Authorization: Bearer $ROOT" "$MI/api/admin/mirror" >"$TEST_DIR/status.json"
status_row=$(/usr/bin/python3 - "$TEST_DIR/status.json" "$ORG/relu" <<'PY'
import json, sys
rows = {r["id"]: r for r in json.load(open(sys.argv[1]))}
r = rows.get(sys.argv[2], {})
print(f'{bool(r.get("lastSuccess"))} {r.get("bytes")} {r.get("objects")} {r.get("refsBehind")} {r.get("lastError")} {r.get("upstreamRepo")} {r.get("selection")} {r.get("lazy")}')
PY
)
diag "admin API row for $ORG/relu: lastSuccess? bytes objects refsBehind lastError upstreamRepo selection lazy = $status_row"
like "$status_row" "^True [1-9][0-9]* [1-9][0-9]* 0 None $ORG/relu acme True$" \
	"GET /api/admin/mirror: $ORG/relu with lastSuccess, bytes, no error, 0 refs behind"
RELU_BYTES=$(echo "$status_row" | cut -d' ' -f2)
curl -s -H "Authorization: Bearer $ROOT" "$MI/metrics" >"$TEST_DIR/metrics.txt"
metric=$(grep "^khub_mirror_bytes_total{repo=\"$ORG/relu\"" "$TEST_DIR/metrics.txt")
like "$metric" "^khub_mirror_bytes_total\\{repo=\"$ORG/relu\",selection=\"acme\"\\} $RELU_BYTES\$" "/metrics: khub_mirror_bytes_total for $ORG/relu = the admin API's bytes"
check "/metrics has HELP/TYPE for khub_mirror_bytes_total" -- grep -q '^# TYPE khub_mirror_bytes_total counter' "$TEST_DIR/metrics.txt"
# Bytes fetched lazily (on first request) cross the network from the
# upstream too, but only sync bytes are counted.
lazy_total=$((L1_SIZE + L2_SIZE))
eager_total=$(awk -F'\t' '!seen[$5]++ { s += $6 } END { print s }' "$TEST_DIR/eager.tsv")
acme_bytes=$(/usr/bin/python3 -c "import json; print(sum(r['bytes'] for r in json.load(open('$TEST_DIR/status.json')) if r['id'].startswith('$ORG/')))")
diag "bytes: eager objects $eager_total, fetched lazily so far $lazy_total, admin API total for $ORG/* $acme_bytes"
ok $([ "$acme_bytes" = $((eager_total + lazy_total)) ]; echo $?) "admin API bytes include the lazily fetched bytes ($acme_bytes = $eager_total + $lazy_total)"

# ---- a trigger through the admin API, picked up by khub mirror run -------------------------------
CFGD=$TEST_DIR/mirror-daemon.json
printf '{"upstreams": [%s], "selections": [%s]}\n' "$(upstream_json)" "$(selection acme "$ACME_REPOS")" >"$CFGD"
hub_bg mirror "$TEST_DIR/daemon.out" "$TEST_DIR/daemon.err" mirror run --mirror-config "$CFGD"
DAEMON=$BG_PID
for _ in $(seq 1 300); do grep -q 'khub mirror: acme:' "$TEST_DIR/daemon.err" && break; sleep 0.1; done
is "$(grep -c 'khub mirror: acme:' "$TEST_DIR/daemon.err")" 1 "khub mirror run: first pass over the selection done"
# Another node's `khub mirror run` on the same database stands by while the
# first holds the mirror-run lock, and takes over when it stops.
hub_bg mirror "$TEST_DIR/standby.out" "$TEST_DIR/standby.err" mirror run --mirror-config "$CFGD"
STANDBY=$BG_PID
for _ in $(seq 1 300); do grep -q 'standing by' "$TEST_DIR/standby.err" && break; sleep 0.1; done
check "a second khub mirror run stands by while the first holds the mirror-run lock" -- \
	grep -q 'another khub mirror run holds the mirror-run lock; standing by' "$TEST_DIR/standby.err"
mirror_sha() {	# mirror_sha REPO BRANCH ('' when the mirror does not answer)
	curl -s -m 5 "$MI/api/kernels/$1/revision/$2" | jq -r '.sha // ""' 2>/dev/null
}
wait_for_sha() {	# wait_for_sha REPO BRANCH SHA: up to 30 s, while the mirror server lives
	local got=
	for _ in $(seq 1 100); do
		kill -0 "${HUB_PID[mirror]}" 2>/dev/null || break
		got=$(mirror_sha "$1" "$2")
		[ "$got" = "$3" ] && break
		sleep 0.2
	done
	echo "$got"
}
trigger() {	# trigger BODY LABEL: POST /api/admin/mirror/sync, check the server survives
	local code
	code=$(curl -s -o "$TEST_DIR/trigger.json" -w '%{http_code}' -H "Authorization: Bearer $ROOT" -X POST \
		-d "$1" "$MI/api/admin/mirror/sync")
	sleep 0.2
	if kill -0 "${HUB_PID[mirror]}" 2>/dev/null; then
		ok 0 "the mirror server survives POST /api/admin/mirror/sync $1"
	else
		ok 1 "the mirror server survives POST /api/admin/mirror/sync $1"
		grep -E 'ERROR: AddressSanitizer|^    #[0-9] .* (api|server|storage|mirror)/' "$(hub_log mirror)" | head -6 | sed 's/^/#   /'
		HUB_PID[mirror]=
		hub_start mirror	# the embedded database is still running: adopted
	fi
	like "$code $(cat "$TEST_DIR/trigger.json" 2>/dev/null)" '^202 .*"trigger":' "$2: 202 with a trigger id"
}
for pass in 1 2; do
	if [ $pass = 1 ]; then name=relu body='{"selection":"acme"}'; else name=gelu body='{}'; fi
	d=$TEST_DIR/src/$name-new
	make_kernel_tree "$d" $name
	NEW=$(hub up import "$d" --repo "$ORG/$name" --branch main 2>>"$TEST_DIR/import.log")
	sleep 2.5
	is "$(mirror_sha "$ORG/$name" main)" "${SHA[$name/main]}" \
		"$ORG/$name: without a trigger the daemon (interval 3600 s) leaves the new upstream commit alone"
	t=$(now)
	trigger "$body" "POST /api/admin/mirror/sync $body"
	is "$(wait_for_sha "$ORG/$name" main "$NEW")" "$NEW" "$ORG/$name: the daemon picked up the trigger $body: main is the new upstream commit"
	diag "trigger $body to visible: $(since "$t") s"
done
is "$(grep -c 'khub mirror: acme:' "$TEST_DIR/standby.err")" 0 "the standby pulled nothing meanwhile (one mirror run at a time)"
kill -TERM $DAEMON
for _ in $(seq 1 100); do kill -0 $DAEMON 2>/dev/null || break; sleep 0.1; done
kill -0 $DAEMON 2>/dev/null && { kill -KILL $DAEMON; ok 1 "khub mirror run stops on SIGTERM"; } || ok 0 "khub mirror run stops on SIGTERM"
wait $DAEMON 2>/dev/null
for _ in $(seq 1 600); do grep -q 'khub mirror: acme:' "$TEST_DIR/standby.err" && break; sleep 0.1; done
check "the standby takes the lock once the first stopped" -- grep -q 'this khub mirror run pulls now' "$TEST_DIR/standby.err"
is "$(grep -c 'khub mirror: acme:' "$TEST_DIR/standby.err")" 1 "and makes its first pass over the selection"
kill -TERM $STANDBY
for _ in $(seq 1 100); do kill -0 $STANDBY 2>/dev/null || break; sleep 0.1; done
kill -0 $STANDBY 2>/dev/null && { kill -KILL $STANDBY; ok 1 "the standby stops on SIGTERM"; } || ok 0 "the standby stops on SIGTERM"
wait $STANDBY 2>/dev/null

# ---- 200 repos: first sync, then a re-sync with nothing new ----------------------------------
t=$(now)
pids=()
for k in 0 1 2 3; do
	hub_bg mirror /dev/null "$TEST_DIR/bulk$k.err" mirror sync bulk$k --mirror-config "$CFG4"
	pids+=($BG_PID)
done
bulk_rc=0
for p in "${pids[@]}"; do wait "$p" || bulk_rc=1; done
ok $bulk_rc "first sync of $NBULK repos (4 selections in 4 processes) exits 0"
diag "first sync of $NBULK repos in 4 parallel processes: $(since "$t") s"
grep -h 'khub mirror: bulk' "$TEST_DIR"/bulk?.err | sed 's/^/#   /'
curl -s -H "Authorization: Bearer $ROOT" "$MI/api/admin/mirror" >"$TEST_DIR/status.json"
nsynced=$(/usr/bin/python3 -c "import json; print(sum(1 for r in json.load(open('$TEST_DIR/status.json')) if r['id'].startswith('bulk/') and r['lastSuccess'] and not r['lastError']))")
is "$nsynced" "$NBULK" "the admin API shows $NBULK bulk repos with lastSuccess"

np=$(lines "$PROXY_LOG")
nu=$(lines "$(hub_log up)")
t=$(now)
hub mirror mirror sync bulk --mirror-config "$CFG" >/dev/null 2>"$TEST_DIR/resync.err"
rc=$?
RESYNC=$(since "$t")
sleep 0.5	# the last access-log lines
ok $rc "re-sync of $NBULK unchanged repos exits 0"
summary=$(grep 'khub mirror: bulk:' "$TEST_DIR/resync.err")
like "$summary" "$NBULK repos \\($NBULK unchanged\\), 0 refs moved.* 0 LFS objects, 0.0 MiB" "re-sync: every repo unchanged, nothing moved or fetched"
diag "re-sync of $NBULK unchanged repos: $RESYNC s ($summary)"
lines_since "$PROXY_LOG" "$np" >"$TEST_DIR/resync.proxy"
lines_since "$(hub_log up)" "$nu" >"$TEST_DIR/resync.up"
diag "requests the upstream saw during the re-sync (fault proxy log, by kind):"
awk '{print $2, $3, $4}' "$TEST_DIR/resync.proxy" | sed -E 's#/bulk/k[0-9]+/#/bulk/kN/#' | sort | uniq -c | sed 's/^/#   /'
refs_adv=$(grep -cE "^[0-9.]+ GET /kernels/bulk/k[0-9]+/info/refs\\?service=git-upload-pack 200 " "$TEST_DIR/resync.proxy")
others=$(grep -vE "^[0-9.]+ GET /kernels/bulk/k[0-9]+/info/refs\\?service=git-upload-pack 200 " "$TEST_DIR/resync.proxy")
is "$refs_adv" "$NBULK" "re-sync: exactly one ref advertisement (GET info/refs?service=git-upload-pack) per repo"
per_org=$(echo "$others" | grep -cE ' GET /api/(organizations|users)/bulk/overview | GET /api/kernels\?author=bulk')
non_meta=$(echo "$others" | grep -vcE '^$| GET /api/(organizations|users)/bulk/overview | GET /api/kernels\?author=bulk')
is "$non_meta" 0 "re-sync: no other request than ref advertisements and the org's listing/overview"
ok $((per_org > 2)) "re-sync: at most one listing and one overview request for the org ($per_org)"
diag "upstream khub access log during the re-sync (by kind):"
grep -oE '(GET|POST|HEAD|PUT) [^ ]+ [0-9]{3} ' "$TEST_DIR/resync.up" | sed -E 's#/bulk/k[0-9]+/#/bulk/kN/#' | sort | uniq -c | sed 's/^/#   /'
up_us=$(grep 'info/refs' "$TEST_DIR/resync.up" | grep -oE '[0-9]+ us' | awk '{s += $1} END {printf "%.2f", s / 1e6}')
diag "upstream time serving those ref advertisements (sum of its access-log durations): $up_us s of $RESYNC s"
like "$RESYNC" '^([0-9]|[12][0-9])\.' "re-sync of $NBULK unchanged repos finishes in under 30 s ($RESYNC s)"

diag "t0100 total $(since "$T_START") s"
done_testing
