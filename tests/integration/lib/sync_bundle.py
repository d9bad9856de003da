#!/usr/bin/env python3
"""sync_bundle.py -- helpers of t0150-sync-bundles.sh (khub sync bundles).

  tamper IN OUT PREFIX    rewrite a bundle (tar + zstd, through the zstd
                          CLI) flipping one byte in the first entry whose
                          name starts with PREFIX; everything else as is
  list BUNDLE             the entry names, one a line
  compare A B REPO REV... TAP lines: refs, recursive trees, every file's
                          bytes (resolve) and the kernels lock hashes
                          (contract section 6) equal on hubs A and B
  lock URL REPO REV VARIANT...   a kernels.lock for those variants
  lockhash URL REPO REV   {variant: hash} as JSON
  get URL                 "STATUS BODY-PREFIX"
  loaderlock URL REPO N   the lock `kernels lock` makes of version N against URL:
                          the real loader's get_kernel_locks when `kernels` is
                          importable (HF_ENDPOINT=URL), else its steps by hand
                          (kernel-status.toml read at main first, so a hub
                          without main fails as the loader does)
"""
import hashlib, io, json, re, subprocess, sys, tarfile, urllib.error, urllib.request
from pathlib import PurePosixPath


def tar_bytes(path):
    return subprocess.run(["zstd", "-dc", path], check=True, stdout=subprocess.PIPE).stdout


def tamper(src, dst, prefix):
    raw = tar_bytes(src)
    tin = tarfile.open(fileobj=io.BytesIO(raw))
    out = io.BytesIO()
    tout = tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT)
    done = False
    for m in tin.getmembers():
        data = tin.extractfile(m).read()
        if not done and m.name.startswith(prefix) and data:
            b = bytearray(data)
            # a byte inside the "hub" value keeps the manifest valid JSON
            i = data.find(b'"hub": "') + 9 if prefix == "manifest" and b'"hub": "' in data else len(b) // 2
            b[i] ^= 0x01
            data = bytes(b)
            done = True
        tout.addfile(m, io.BytesIO(data))
    tout.close()
    assert done, "no entry " + prefix
    subprocess.run(["zstd", "-q", "-f", "-o", dst], input=out.getvalue(), check=True)


def get(url):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def get_json(url):
    st, h, body = get(url)
    return st, h, (json.loads(body) if st == 200 else None)


def tree(url, repo, rev):
    out, u = [], f"{url}/api/kernels/{repo}/tree/{rev}?recursive=true&expand=false"
    while u:
        st, h, body = get_json(u)
        if st != 200:
            return None
        out.extend(body)
        m = re.search(r'<([^>]*)>\s*;\s*rel="?next"?', h.get("Link") or "")
        u = m.group(1) if m else None
    return out


def lock_of(entries):
    variants = {}
    for e in entries:
        p = e.get("path", "")
        if e.get("type") != "file" or not p.startswith("build/torch"):
            continue
        parts = PurePosixPath(p).parts
        hx = e["lfs"]["oid"] if e.get("lfs") else e["oid"]
        variants.setdefault(parts[1], []).append((PurePosixPath(*parts[2:]).as_posix().encode(), hx))
    res = {}
    for v, files in variants.items():
        m = hashlib.sha256()
        for name, hx in sorted(files):
            m.update(name)
            m.update(bytes.fromhex(hx))
        res[v] = "sha256-" + m.hexdigest()
    return res


def ok(cond, desc, problems=()):
    print(("ok" if cond else "not ok") + " - " + desc)
    if not cond:
        for p in list(problems)[:10]:
            print("#   " + str(p))


def compare(a, b, repo, revs):
    sa, _, ra = get_json(f"{a}/api/kernels/{repo}/refs")
    sb, _, rb = get_json(f"{b}/api/kernels/{repo}/refs")
    ok(sa == sb == 200 and ra == rb, f"{repo}: refs on B = refs on A", [ra, rb])
    for rev in revs:
        ta, tb = tree(a, repo, rev), tree(b, repo, rev)
        ok(ta is not None and ta == tb, f"{repo}@{rev}: recursive tree identical ({len(ta or [])} entries)",
           [f"A {ta}", f"B {tb}"])
        problems, nbytes = [], 0
        for e in ta or []:
            if e.get("type") != "file":
                continue
            ua = f"{a}/kernels/{repo}/resolve/{rev}/{e['path']}"
            s1, _, d1 = get(ua)
            s2, _, d2 = get(ua.replace(a, b, 1))
            nbytes += len(d1)
            if s1 != 200 or s2 != 200 or d1 != d2:
                problems.append(f"{e['path']}: A {s1} {len(d1)} B, {s2} {len(d2)} B")
        ok(not problems, f"{repo}@{rev}: every file byte-identical from both hubs ({nbytes} bytes)", problems)
        la, lb = lock_of(ta or []), lock_of(tb or [])
        ok(la and la == lb, f"{repo}@{rev}: kernels lock hashes equal ({len(la)} variants)", [la, lb])


def loader_lock(url, repo, version):
    try:
        import os
        os.environ["HF_ENDPOINT"] = url
        from kernels.lockfile import get_kernel_locks
    except Exception:
        get_kernel_locks = None
    if get_kernel_locks is not None:
        lock = get_kernel_locks(repo, int(version))
        return {"loader": "kernels", "sha": lock.sha, "variants": {v: l.hash for v, l in lock.variants.items()}}
    st, h, body = get(f"{url}/kernels/{repo}/resolve/main/kernel-status.toml")
    if st == 200:
        raise SystemExit("kernel-status.toml redirects are not followed here")
    code = h.get("X-Error-Code") or ""
    if code != "EntryNotFound":
        raise SystemExit(f"{code or st} on main (the loader reads kernel-status.toml there first)")
    st, _, refs = get_json(f"{url}/api/kernels/{repo}/refs")
    branch = [b for b in refs["branches"] if b["name"] == f"v{version}"]
    if not branch:
        raise SystemExit(f"Version {version} not found")
    sha = branch[0]["targetCommit"]
    st, _, info = get_json(f"{url}/api/kernels/{repo}/revision/{sha}")
    return {"loader": "by hand", "sha": info["sha"], "variants": lock_of(tree(url, repo, info["sha"]))}


def main():
    cmd = sys.argv[1]
    if cmd == "tamper":
        tamper(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "list":
        for m in tarfile.open(fileobj=io.BytesIO(tar_bytes(sys.argv[2]))).getmembers():
            print(m.name)
    elif cmd == "compare":
        compare(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif cmd in ("lock", "lockhash"):
        url, repo, rev = sys.argv[2:5]
        st, _, info = get_json(f"{url}/api/kernels/{repo}/revision/{rev}")
        locks = lock_of(tree(url, repo, info["sha"]))
        if cmd == "lockhash":
            print(json.dumps(locks, sort_keys=True))
            return
        want = sys.argv[5:]
        print(json.dumps([{"repo_id": repo, "sha": info["sha"],
                           "variants": {v: {"hash": locks[v], "hash_type": "git_lfs_concat"} for v in want}}], indent=2))
    elif cmd == "loaderlock":
        print(json.dumps(loader_lock(sys.argv[2], sys.argv[3], sys.argv[4]), sort_keys=True))
    elif cmd == "get":
        st, _, body = get(sys.argv[2])
        print(st, body[:300].decode("utf-8", "replace").replace("\n", " "))


if __name__ == "__main__":
    main()
