#!/usr/bin/env python3
"""load_kernel.py -- load a kernel from a khub server the way `get_kernel`
does and check its relu against torch.relu on random tensors.

  load_kernel.py KHUB_URL REPO VERSION [--expect-variant NAME] [--token T]
                 [--backend cpu] [--device cuda]

With the real `kernels` package importable (PYTHONPATH made by
tests/lib/real_loader.sh), this is `kernels.get_kernel(REPO, version=N)`
against HF_ENDPOINT=KHUB_URL. Without it (CI has no PyPI), the steps the
loader takes are done here with the standard library: resolve the version
branch v<N>, list build/ of that revision non-recursively, pick this
interpreter's arch variant by the loader's naming rule
(torch<MM>-cxx11|cxx98-<cpu>-<arch>-linux), else the backend's noarch
variant (torch-cpu, torch-cuda...) or torch-universal, download the variant's files,
and import <variant>/__init__.py under the metadata id, as
kernels/importer.py does. Prints one JSON line: {"loader", "variant",
"max_abs_err", "ok"}; exit 0 when relu matched.
"""
import importlib.util
import json
import os
import platform
import sys
import tempfile
import urllib.parse
import urllib.request

import torch


def this_variant(backend=None):
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    if backend == "cpu":
        compute = "cpu"
    elif torch.version.cuda:
        compute = "cu" + "".join(torch.version.cuda.split(".")[:2])
    elif getattr(torch.version, "hip", None):
        compute = "rocm" + "".join(torch.version.hip.split(".")[:2])
    else:
        compute = "cpu"
    return f"torch{major}{minor}-{abi}-{compute}-{platform.machine()}-linux"


def get(url, token):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req) as r:
        return r.read()


def by_hand(base, repo, version, token, backend):
    branch = urllib.parse.quote(f"refs/heads/v{version}", safe="")
    info = json.loads(get(f"{base}/api/kernels/{repo}/revision/{branch}", token))
    sha = info["sha"]
    listing = json.loads(get(f"{base}/api/kernels/{repo}/tree/{sha}/build", token))
    names = [e["path"].split("/", 1)[1] for e in listing if e["type"] == "directory"]
    # the loader's order: this interpreter's arch variant, then the noarch
    # variant of its backend (torch-cpu, torch-cuda...), then torch-universal
    arch = this_variant(backend)
    kind = arch.split("-")[2]
    kind = "cpu" if kind == "cpu" else "cuda" if kind.startswith("cu") else "rocm" if kind.startswith("rocm") else kind
    found = [v for v in (arch, f"torch-{kind}", "torch-universal") if v in names]
    if not found:
        raise SystemExit(f"no variant {arch}, torch-{kind} or torch-universal in build/ of v{version}: {names}")
    want = found[0]
    files = json.loads(get(f"{base}/api/kernels/{repo}/tree/{sha}/build/{want}?recursive=true", token))
    root = tempfile.mkdtemp(prefix="khub-load-")
    for e in files:
        if e["type"] != "file":
            continue
        dest = os.path.join(root, e["path"])
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(get(f"{base}/kernels/{repo}/resolve/{sha}/{urllib.parse.quote(e['path'])}", token))
    vdir = os.path.join(root, "build", want)
    meta = json.load(open(os.path.join(vdir, "metadata.json")))
    spec = importlib.util.spec_from_file_location(meta["id"], os.path.join(vdir, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[meta["id"]] = module
    spec.loader.exec_module(module)
    return module, want


def main():
    base, repo, version = sys.argv[1].rstrip("/"), sys.argv[2], int(sys.argv[3])
    args = sys.argv[4:]
    expect = args[args.index("--expect-variant") + 1] if "--expect-variant" in args else None
    token = args[args.index("--token") + 1] if "--token" in args else None
    backend = args[args.index("--backend") + 1] if "--backend" in args else None
    device = args[args.index("--device") + 1] if "--device" in args else "cpu"
    # huggingface_hub reads HF_ENDPOINT when it is imported
    os.environ["HF_ENDPOINT"] = base
    if token:
        os.environ["HF_TOKEN"] = token
    try:
        import kernels  # noqa: F401 -- the real loader, when it is on PYTHONPATH
        loader = "kernels " + getattr(kernels, "__version__", "?")
    except ImportError:
        loader = None
    if loader:
        module = kernels.get_kernel(repo, version=version, backend=backend)
        variant = os.path.basename(os.path.dirname(module.__file__))
    else:
        loader = "by hand (the loader's import steps)"
        module, variant = by_hand(base, repo, version, token, backend)
    torch.manual_seed(0)
    worst = 0.0
    for shape in ((1024,), (33, 17), (4, 8, 16)):
        x = torch.randn(*shape, device=device)
        y = module.relu(x)
        worst = max(worst, (y - torch.relu(x)).abs().max().item())
    ok = worst == 0.0 and (expect is None or variant == expect)
    print(json.dumps({"loader": loader, "variant": variant, "device": device, "max_abs_err": worst, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
