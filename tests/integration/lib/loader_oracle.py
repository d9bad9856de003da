#!/usr/bin/env python3
"""loader_oracle.py -- run the kernels loader's OWN variant resolution
(kernels/src/kernels/variants.py `_resolve_variant_for_system` and
backends.py) on given variant names and client environments, for comparing
khub's compatible=true answers with it. The loader's source is read at run
time from a git checkout of huggingface/kernels (nothing of it is kept in
this repo); huggingface_hub, torch and tvm_ffi are stubbed out, only
`packaging` is needed.

  loader_oracle.py KERNELS_GIT_DIR [REF] < cases.json > answers.json

cases.json: [{"variants": [names], "env": {"backend": "cuda", "version": "12.8",
"cpu": "x86_64", "os": "linux", "torch": "2.11" | null, "cxx11": true | null,
"tvm_ffi": "0.1" | null, "macos": "26.0" | null}}, ...]
answers.json: [{"accepted": [names, best first], "rejected": {name: reason}}, ...]
"""
import json
import subprocess
import sys
import types


def load(git_dir, ref):
    def source(path):
        return subprocess.run(["git", "--git-dir", git_dir, "show", f"{ref}:{path}"], check=True,
                              capture_output=True, text=True).stdout

    hub = types.ModuleType("huggingface_hub")
    hub.HfApi = object
    hub.constants = types.SimpleNamespace(HF_HUB_OFFLINE=False)
    dataclasses_mod = types.ModuleType("huggingface_hub.dataclasses")
    dataclasses_mod.strict = lambda cls=None, **kw: cls if cls is not None else (lambda c: c)
    hf_api = types.ModuleType("huggingface_hub.hf_api")
    hf_api.RepoFolder = type("RepoFolder", (), {})
    kernels = types.ModuleType("kernels")
    kernels.__path__ = []
    versions = types.ModuleType("kernels._versions")
    versions.select_revision_or_version = lambda *a, **kw: None
    compat = types.ModuleType("kernels.compat")
    compat.has_torch = False
    compat.has_tvm_ffi = False
    for name, mod in (("huggingface_hub", hub), ("huggingface_hub.dataclasses", dataclasses_mod),
                      ("huggingface_hub.hf_api", hf_api), ("kernels", kernels), ("kernels._versions", versions),
                      ("kernels.compat", compat)):
        sys.modules[name] = mod
    for name, path in (("kernels.backends", "kernels/src/kernels/backends.py"),
                       ("kernels.variants", "kernels/src/kernels/variants.py")):
        mod = types.ModuleType(name)
        sys.modules[name] = mod
        exec(compile(source(path), path, "exec"), mod.__dict__)
    return sys.modules["kernels.backends"], sys.modules["kernels.variants"]


def main():
    git_dir = sys.argv[1]
    ref = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    backends, variants = load(git_dir, ref)
    from packaging.version import Version

    answers = []
    for case in json.load(sys.stdin):
        env = case["env"]
        kind = env["backend"]
        if kind == "cuda":
            backend = backends.CUDA(version=Version(env["version"]))
        elif kind == "rocm":
            backend = backends.ROCm(version=Version(env["version"]))
        elif kind == "xpu":
            backend = backends.XPU(version=Version(env["version"]))
        elif kind == "cann":
            backend = backends.CANN(version=Version(env["version"]))
        else:
            backend = {"cpu": backends.CPU, "metal": backends.Metal, "neuron": backends.Neuron,
                       "tpu": backends.TPU}[kind]()
        parsed = []
        for name in case["variants"]:
            try:
                parsed.append(variants.parse_variant(name))
            except ValueError:
                pass  # the loader logs and skips it
        v = lambda key: Version(env[key]) if env.get(key) else None
        accepted, trace = variants._resolve_variant_for_system(
            variants=parsed, selected_backend=backend, cpu=env["cpu"], os=env["os"], torch_version=v("torch"),
            torch_cxx11_abi=env.get("cxx11"), tvm_ffi_version=v("tvm_ffi"), macos_version=v("macos"))
        answers.append({"accepted": [a.variant_str for a in accepted],
                        "rejected": {d.variant.variant_str: d.reason for d in trace
                                     if isinstance(d, variants.VariantRejected)}})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
