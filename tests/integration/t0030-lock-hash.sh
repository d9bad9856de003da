#!/bin/bash
# t0030-lock-hash.sh -- the `kernels lock` git_lfs_concat hash of every
# build/torch* variant (read contract §6, kernels locking.py) is the same
# whether computed from the paginated tree JSON (what `kernels lock` does) or
# from the bytes served by HEAD/GET resolve with the algorithm chosen by the
# ETag length (what kernels v0.15.2 `validate_kernel` does on download), and
# both agree with the files that were imported.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"

command -v /usr/bin/python3 >/dev/null 2>&1 || { echo "1..0 # SKIP /usr/bin/python3 not installed"; exit 0; }

khub_setup

SRC="$TEST_DIR/src"
make_kernel_tree "$SRC" relu
# A second CUDA variant with its own LFS .so and a nested LFS file.
cu=build/torch211-cxx11-cu128-x86_64-linux
cu2=build/torch210-cxx11-cu126-x86_64-linux
cp -r "$SRC/$cu" "$SRC/$cu2"
head -c 300000 /dev/urandom >"$SRC/$cu2/_relu_cuda.abi3.so"
head -c 70000 /dev/urandom >"$SRC/$cu2/relu/sub/_extra.so"
# Names whose bytewise order differs from a naive or locale-aware one:
# '-' (0x2d) < '.' (0x2e) < '/' (0x2f) < '_' (0x5f), upper before lower case.
printf 'a = 1\n' >"$SRC/$cu/relu-extra.py"
printf 'b = 2\n' >"$SRC/$cu/relu.py"
printf 'c = 3\n' >"$SRC/$cu/relu_ops.py"
printf 'd = 4\n' >"$SRC/$cu/README.md"
printf 'e = 5\n' >"$SRC/build/torch-cpu/a b+c.py"
printf 'f = 6\n' >"$SRC/build/torch-cpu/donn"$'\xc3\xa9'"es.py"
head -c 4096 /dev/urandom >"$SRC/build/torch-cpu/weights.bin"
# Not locked: only build/torch* variants are.
mkdir -p "$SRC/build/tvm-ffi01-cu128-x86_64-linux"
printf 'import tvm_ffi\n' >"$SRC/build/tvm-ffi01-cu128-x86_64-linux/__init__.py"

sha_v1=$(khub import "$SRC" --repo acme/relu --branch v1 2>>"$TEST_DIR/import.log")
ok $? "import acme/relu --branch v1"
like "$sha_v1" '^[0-9a-f]{40}$' "import prints the commit sha"

PAGE=3
khub_start --tree-page-size $PAGE

# Results come back as "ok - desc" / "not ok - desc" / "# diag" lines.
out=$(KHUB_URL="$KHUB_URL" REPO=acme/relu REV=v1 SRC_DIR="$SRC" PAGE_SIZE=$PAGE \
	EXPECT_SHA="$sha_v1" /usr/bin/python3 - <<'PY' 2>&1
import hashlib, http.client, json, math, os, re, sys, urllib.error, urllib.parse, urllib.request
from pathlib import PurePosixPath

E = os.environ["KHUB_URL"].rstrip("/")
REPO = os.environ["REPO"]
REV = os.environ["REV"]
SRC = os.environ["SRC_DIR"]
PAGE_SIZE = int(os.environ["PAGE_SIZE"])
EXPECT_SHA = os.environ["EXPECT_SHA"]
LFS_RE = re.compile(r"\.(so|bin)$")


def ok(cond, desc, problems=()):
    print(("ok" if cond else "not ok") + " - " + desc)
    if not cond:
        for p in problems:
            print("#   " + str(p))
    return cond


def diag(msg):
    print("# " + msg)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


def get_json(url):
    """GET url, return (status, headers, parsed body or None)."""
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers, None


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lock_hash(files):
    """files: list of (relname_bytes, hash_hex) -> "sha256-..." (locking.py)."""
    m = hashlib.sha256()
    for name, hx in sorted(files):
        m.update(name)
        m.update(bytes.fromhex(hx))
    return "sha256-" + m.hexdigest()


def variant_key(path):
    """(variant, relname bytes) for a lockable path, else None (locking.py)."""
    if not path.startswith("build/torch"):
        return None
    if path.endswith(".pyc") or "__pycache__" in path.split("/"):
        return None
    p = PurePosixPath(path)
    return p.parts[1], PurePosixPath(*p.parts[2:]).as_posix().encode("utf-8")


# ---- the commit: refs -> targetCommit -> revision/{sha} (kernels lock) -------
status, _, info = get_json(f"{E}/api/kernels/{REPO}/revision/{urllib.parse.quote(REV, safe='')}")
sha = (info or {}).get("sha", "")
ok(status == 200 and re.fullmatch(r"[0-9a-f]{40}", sha or "") is not None and sha == EXPECT_SHA,
   f"GET revision/{REV} gives the imported sha", [f"status {status}, body {info}, want sha {EXPECT_SHA}"])
status, _, refs = get_json(f"{E}/api/kernels/{REPO}/refs")
target = next((b.get("targetCommit") for b in (refs or {}).get("branches", []) if b.get("name") == REV), None)
ok(target == sha, f"refs: branch {REV} targetCommit is the same sha", [f"status {status}, refs {refs}"])
status, _, info2 = get_json(f"{E}/api/kernels/{REPO}/revision/{sha}")
ok(status == 200 and (info2 or {}).get("sha") == sha, "GET revision/{sha} echoes the sha",
   [f"status {status}, body {info2}"])
diag(f"{REPO}@{REV} = {sha}")

# ---- (a) tree JSON, following Link pages ----------------------------------------
url = f"{E}/api/kernels/{REPO}/tree/{sha}?recursive=true&expand=false"
base = urllib.parse.urlsplit(E)
entries, pages, link_problems, page_problems = [], 0, [], []
while url:
    pages += 1
    if pages > 1000:
        link_problems.append("more than 1000 pages, giving up")
        break
    status, headers, body = get_json(url)
    if status != 200 or not isinstance(body, list):
        page_problems.append(f"page {pages}: status {status} for {url}")
        break
    if len(body) > PAGE_SIZE:
        page_problems.append(f"page {pages}: {len(body)} entries > page size {PAGE_SIZE}")
    if not body and headers.get("Link"):
        page_problems.append(f"page {pages}: empty page with a next link")
    entries.extend(body)
    link = headers.get("Link")
    url = None
    if link:
        m = re.search(r'<([^>]*)>\s*;\s*rel="?next"?', link)
        if not m:
            link_problems.append(f"page {pages}: Link without rel=next: {link}")
            break
        url = m.group(1)
        u = urllib.parse.urlsplit(url)
        q = urllib.parse.parse_qs(u.query)
        if u.scheme not in ("http", "https") or not u.netloc:
            link_problems.append(f"page {pages}: Link URL is not absolute: {url}")
            url = urllib.parse.urljoin(E + "/", url)   # keep going to find more problems
        elif (u.scheme, u.netloc) != (base.scheme, base.netloc):
            link_problems.append(f"page {pages}: Link URL on another origin: {url}")
        if q.get("recursive") != ["true"] or q.get("expand") != ["false"]:
            link_problems.append(f"page {pages}: Link URL lost recursive/expand: {url}")
ok(not page_problems and pages >= 2, f"tree pages answered ({len(entries)} entries in {pages} pages of <= {PAGE_SIZE})",
   page_problems + ([] if pages >= 2 else ["no pagination happened"]))
ok(pages == max(1, math.ceil(len(entries) / PAGE_SIZE)), "tree pages are full except the last",
   [f"{pages} pages for {len(entries)} entries"])
ok(not link_problems, "every Link next URL is absolute, same origin, keeps recursive/expand", link_problems)
paths = [e.get("path") for e in entries]
ok(len(paths) == len(set(paths)), "no entry listed twice across pages",
   sorted({p for p in paths if paths.count(p) > 1}))

tree_files = {e["path"]: e for e in entries if e.get("type") == "file"}
tree_variants = {}
problems = []
for path, e in sorted(tree_files.items()):
    k = variant_key(path)
    if not k:
        continue
    if not e.get("oid"):
        problems.append(f"Cannot get blob ID for {path}")
        continue
    lfs = e.get("lfs")
    hx = lfs["oid"] if lfs is not None else e["oid"]
    tree_variants.setdefault(k[0], []).append((k[1], hx))
ok(not problems, "every build/torch* tree entry has an oid", problems)
lock_a = {v: lock_hash(f) for v, f in tree_variants.items()}

# ---- local files (what was imported) ----------------------------------------------
local = {}
for root, dirs, files in os.walk(SRC):
    for name in files:
        full = os.path.join(root, name)
        local[os.path.relpath(full, SRC).replace(os.sep, "/")] = full
local_lockable = {p for p in local if variant_key(p)}
tree_lockable = {p for p in tree_files if variant_key(p)}
ok(local_lockable == tree_lockable, "tree lists exactly the imported build/torch* files",
   [f"missing {p}" for p in sorted(local_lockable - tree_lockable)]
   + [f"extra {p}" for p in sorted(tree_lockable - local_lockable)])
local_variants = {}
for p in local_lockable:
    with open(local[p], "rb") as f:
        data = f.read()
    hx = hashlib.sha256(data).hexdigest() if LFS_RE.search(p) else git_blob_sha1(data)
    v, rel = variant_key(p)
    local_variants.setdefault(v, []).append((rel, hx))
lock_local = {v: lock_hash(f) for v, f in local_variants.items()}

# ---- (b) HEAD/GET resolve, algorithm from the ETag length (v0.15.2) ---------------
def head(url):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
    try:
        conn.request("HEAD", u.path + (("?" + u.query) if u.query else ""),
                     headers={"Accept-Encoding": "identity"})
        r = conn.getresponse()
        r.read()
        return r.status, r.headers
    finally:
        conn.close()


byte_variants = {}
for path in sorted(tree_lockable):
    problems = []
    url = f"{E}/kernels/{REPO}/resolve/{sha}/{urllib.parse.quote(path)}"
    try:
        status, h = head(url)
    except OSError as e:
        ok(False, f"HEAD/GET {path}", [f"HEAD failed: {e}"])
        continue
    etag = (h.get("X-Linked-Etag") or h.get("ETag") or "")
    etag = re.sub(r'^W/', "", etag).strip('"')
    size = h.get("X-Linked-Size") or h.get("Content-Length")
    if status not in (200, 301, 302, 303, 307, 308):
        problems.append(f"HEAD status {status} ({h.get('X-Error-Code')})")
    if h.get("X-Repo-Commit") != sha:
        problems.append(f"X-Repo-Commit {h.get('X-Repo-Commit')}, want {sha}")
    get_url = url
    if 300 <= status < 400:
        loc = h.get("Location") or ""
        if not urllib.parse.urlsplit(loc).scheme:
            problems.append(f"relative Location on a 3xx: {loc!r}")
        get_url = urllib.parse.urljoin(url, loc)
    try:
        with urllib.request.urlopen(get_url, timeout=60) as r:
            data = r.read()
    except (OSError, urllib.error.HTTPError) as e:
        ok(False, f"HEAD/GET {path}", problems + [f"GET {get_url} failed: {e}"])
        continue
    if size is None or not size.isdigit() or int(size) != len(data):
        problems.append(f"HEAD size {size}, GET gave {len(data)} bytes")
    if len(etag) == 40:
        hx, algo = git_blob_sha1(data), "git-sha1"
    elif len(etag) == 64:
        hx, algo = hashlib.sha256(data).hexdigest(), "sha256"
    else:
        hx, algo = None, "?"
        problems.append(f"ETag {etag!r} is neither 40 nor 64 hex (ValueError in validate_kernel)")
    if hx is not None and hx != etag:
        problems.append(f"ETag {etag} != {algo} of the bytes {hx}")
    is_lfs = tree_files[path].get("lfs") is not None
    if is_lfs != (len(etag) == 64):
        problems.append(f"tree says lfs={is_lfs} but ETag has {len(etag)} hex")
    with open(local[path], "rb") as f:
        if f.read() != data:
            problems.append("bytes differ from the imported file")
    ok(not problems, f"HEAD/GET {path}: ETag is the {algo} of the served bytes", problems)
    if hx is not None:
        v, rel = variant_key(path)
        byte_variants.setdefault(v, []).append((rel, hx))
lock_b = {v: lock_hash(f) for v, f in byte_variants.items()}

# ---- compare -----------------------------------------------------------------------
want_variants = sorted(local_variants)
ok(sorted(lock_a) == want_variants and sorted(lock_b) == want_variants,
   f"locked variants are the {len(want_variants)} build/torch* ones",
   [f"tree {sorted(lock_a)}", f"bytes {sorted(lock_b)}", f"want {want_variants}"])
for v in want_variants:
    a, b, c = lock_a.get(v), lock_b.get(v), lock_local.get(v)
    diag(f"{v}: tree {a}")
    diag(f"{v}: bytes {b}")
    ok(a is not None and a == b, f"{v}: git_lfs_concat from tree == from downloaded bytes", [f"tree {a}", f"bytes {b}"])
    ok(a is not None and a == c, f"{v}: git_lfs_concat from tree == from the imported files", [f"tree {a}", f"local {c}"])
PY
)
py_rc=$?
while IFS= read -r line; do
	if [[ "$line" =~ ^ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
		ok 0 "${BASH_REMATCH[1]}"
	elif [[ "$line" =~ ^not\ ok\ [0-9]*\ *-?\ *(.*)$ ]]; then
		ok 1 "${BASH_REMATCH[1]}"
	elif [[ "$line" =~ ^# ]]; then
		echo "$line"
	elif [ -n "$line" ]; then
		echo "# python: $line"
	fi
done <<<"$out"
ok $py_rc "the python checks ran to the end (exit status $py_rc)"

done_testing
