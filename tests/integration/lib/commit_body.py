#!/usr/bin/env python3
"""commit_body.py -- build what kernel-builder (hf-hub RS) sends, streaming,
so that bodies of hundreds of MiB never sit in memory.

  tree DIR --big N --big-mib M --small K
      write a kernel build tree: N random M-MiB .so files under
      build/torch211-cxx11-cu128-x86_64-linux/ and K small .py/.json files
      spread over several variants.
  manifest DIR                 -> TSV: path, size, sha256, git blob sha1
  preupload DIR [--prefix P]   -> {"files":[{path,size,sample}]} (one request)
  ndjson [--summary S] [--description D] [--parent SHA] [--dir DIR [--prefix P]]
         [--file REPO_PATH=LOCAL]... [--lfs REPO_PATH=LOCAL]... [--delete REPO_PATH]...
      -> NDJSON commit body on stdout: header first, then one line per
         operation; file contents are base64-encoded chunk by chunk.
  batch PREUPLOAD_RESPONSE MANIFEST [--ref R] [--hash-algo A]
      -> the RS LFS batch body for the files preupload answered "lfs".
  tree-get URL [TOKEN] -> every entry of a paginated tree listing (follows Link).
"""
import base64
import hashlib
import json
import os
import random
import re
import sys
import urllib.request

CHUNK = 3 * 256 * 1024  # a multiple of 3: concatenated base64 stays valid


def walk(d):
    out = []
    for root, dirs, files in os.walk(d):
        dirs.sort()
        for f in sorted(files):
            full = os.path.join(root, f)
            out.append((os.path.relpath(full, d).replace(os.sep, "/"), full))
    out.sort()
    return out


def cmd_tree(args):
    d = args[0]
    opts = dict(zip(args[1::2], args[2::2]))
    nbig = int(opts.get("--big", 20))
    big_mib = int(opts.get("--big-mib", 10))
    nsmall = int(opts.get("--small", 980))
    rng = random.Random(60)
    cu = "build/torch211-cxx11-cu128-x86_64-linux"
    for i in range(nbig):
        p = os.path.join(d, cu, "relu" if i % 2 else "", f"_relu_cuda_{i:02d}.abi3.so")
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            # ELF magic then random bytes (NULs in the first 8000 bytes).
            f.write(b"\x7fELF\x02\x01\x01\x00" + os.urandom(big_mib * 1024 * 1024 - 8))
    variants = ["build/torch-cpu", cu, "build/torch211-cxx11-cu126-x86_64-linux",
                "build/torch210-cxx11-cu128-x86_64-linux", "build/torch211-cxx11-rocm63-x86_64-linux",
                "build/torch211-metal-aarch64-darwin", "build/torch210-xpu20251-x86_64-linux"]
    words = "import torch def return tensor kernel relu cuda launch grid block self x y out".split()
    for i in range(nsmall):
        v = variants[i % len(variants)]
        if i < len(variants):
            rel, text = f"{v}/metadata.json", json.dumps(
                {"id": "relu", "version": 1, "license": "apache-2.0", "python-depends": [],
                 "backend": {"type": "cuda" if "cu" in v else "cpu"}}) + "\n"
        elif i % 3 == 0:
            rel = f"{v}/relu/cfg/cfg_{i:04d}.json"
            text = json.dumps({"i": i, "tile": [rng.randrange(1, 256) for _ in range(rng.randrange(4, 200))]})
        else:
            rel = f"{v}/relu/mod{i % 10}/m_{i:04d}.py"
            text = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randrange(3, 12)))
                             for _ in range(rng.randrange(2, 150))) + "\n"
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)


def hashes(full):
    size = os.path.getsize(full)
    s256 = hashlib.sha256()
    s1 = hashlib.sha1(b"blob %d\0" % size)
    with open(full, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            s256.update(b)
            s1.update(b)
    return size, s256.hexdigest(), s1.hexdigest()


def cmd_manifest(args):
    for rel, full in walk(args[0]):
        size, s256, s1 = hashes(full)
        print(f"{rel}\t{size}\t{s256}\t{s1}")


def cmd_preupload(args):
    d = args[0]
    prefix = args[args.index("--prefix") + 1] if "--prefix" in args else ""
    files = []
    for rel, full in walk(d):
        with open(full, "rb") as f:
            sample = f.read(512)
        files.append({"path": prefix + rel, "size": os.path.getsize(full),
                      "sample": base64.b64encode(sample).decode()})
    json.dump({"files": files}, sys.stdout)


def write_file_line(out, path, local):
    # The key order of hf-hub's serde struct: content, path, encoding.
    out.write(b'{"key":"file","value":{"content":"')
    with open(local, "rb") as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                break
            out.write(base64.b64encode(b))
    out.write(b'","path":' + json.dumps(path).encode() + b',"encoding":"base64"}}\n')


def cmd_ndjson(args):
    summary, description, parent, d, prefix = "Uploaded using `kernel-builder`.", "", None, None, ""
    files, lfs, deletes = [], [], []
    i = 0
    while i < len(args):
        a, v = args[i], args[i + 1]
        i += 2
        if a == "--summary":
            summary = v
        elif a == "--description":
            description = v
        elif a == "--parent":
            parent = v
        elif a == "--dir":
            d = v
        elif a == "--prefix":
            prefix = v
        elif a == "--file":
            files.append(v.split("=", 1))
        elif a == "--lfs":
            lfs.append(v.split("=", 1))
        elif a == "--delete":
            deletes.append(v)
        else:
            sys.exit(f"unknown option {a}")
    out = sys.stdout.buffer
    header = {"summary": summary, "description": description}
    if parent:
        header["parentCommit"] = parent
    out.write(json.dumps({"key": "header", "value": header}).encode() + b"\n")
    if d:
        for rel, full in walk(d):
            write_file_line(out, prefix + rel, full)
    for path, local in files:
        write_file_line(out, path, local)
    for path, local in lfs:
        size, s256, _ = hashes(local)
        out.write(json.dumps({"key": "lfsFile", "value": {"path": path, "algo": "sha256", "oid": s256,
                                                          "size": size}}).encode() + b"\n")
    for path in deletes:
        out.write(json.dumps({"key": "deletedFile", "value": {"path": path}}).encode() + b"\n")


def cmd_batch(args):
    resp = json.load(open(args[0]))
    ref = args[args.index("--ref") + 1] if "--ref" in args else None
    algo = args[args.index("--hash-algo") + 1] if "--hash-algo" in args else "sha256"
    man = {}
    for line in open(args[1]):
        p, size, s256, _ = line.rstrip("\n").split("\t")
        man[p] = (int(size), s256)
    objs = [{"oid": man[f["path"]][1], "size": man[f["path"]][0]} for f in resp["files"]
            if f["uploadMode"] == "lfs" and man[f["path"]][0] > 0]
    body = {"operation": "upload", "transfers": ["basic", "multipart", "xet"], "objects": objs, "hash_algo": algo}
    if ref:
        body["ref"] = {"name": ref}
    json.dump(body, sys.stdout)


def cmd_tree_get(args):
    url, token = args[0], args[1] if len(args) > 1 else None
    entries = []
    while url:
        req = urllib.request.Request(url)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        with urllib.request.urlopen(req) as r:
            entries += json.load(r)
            m = re.match(r'<([^>]+)>;\s*rel="next"', r.headers.get("Link") or "")
            url = m.group(1) if m else None
    json.dump(entries, sys.stdout)


if __name__ == "__main__":
    cmds = {"tree": cmd_tree, "manifest": cmd_manifest, "preupload": cmd_preupload, "ndjson": cmd_ndjson,
            "batch": cmd_batch, "tree-get": cmd_tree_get}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](sys.argv[2:])
