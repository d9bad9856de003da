# build_toml.py -- read a kernel's build.toml with a real TOML parser
# (tomllib, else tomli, else toml), check it against the edition 5 rules (an edition 4
# file, without `edition`, is upgraded in memory as kernel-builder does;
# older ones are refused), print it as JSON on stdout. Any problem: one
# line "build.toml: <key>: <what>" on stderr and exit status 2. Embedded in
# khub-worker, run by the toolchain's Python inside the build sandbox with
# the file's path; and in khub, run as `python3 -I -S -c <this> --plan`
# with build.toml on stdin, printing only what planning needs (a hostile
# file: the server bounds the child's CPU, memory, time and output).
import json
import re
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    try:
        import tomli as tomllib
    except ImportError:  # Debian 11's python3-toml (TOML 0.5: what build.toml uses)
        import toml as tomllib
        tomllib.TOMLDecodeError = tomllib.TomlDecodeError


class Bad(Exception):
    pass


def fail(key, what):
    raise Bad("build.toml: %s: %s" % (key, what))


BACKENDS = ["cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu"]
KERNEL_BACKENDS = ["cpu", "cuda", "metal", "rocm", "xpu"]
DEPENDS = ["torch", "cutlass_2_10", "cutlass_3_5", "cutlass_3_6", "cutlass_3_8", "cutlass_3_9",
           "cutlass_4_0", "cutlass_4_4", "cutlass_4_5", "sycl_tla", "metal-cpp"]
PYTHON_DEPENDS = {"general": ["einops", "helion", "tvm-ffi"], "cuda": ["nvidia-cutlass-dsl"],
                  "neuron": ["nki"], "xpu": ["onednn"], "tpu": []}
NAME_RE = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*$")
GIT_URL_RE = re.compile(r"^((https?|git|ssh|git\+ssh|git\+https?)://\S+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+)$")


def table(doc, key, allowed):
    if not isinstance(doc, dict):
        fail(key, "must be a table")
    for k in doc:
        if k not in allowed:
            fail("%s.%s" % (key, k) if key else k, "unknown key")
    return doc


def string(value, key):
    if not isinstance(value, str) or not value:
        fail(key, "must be a non-empty string")
    return value


def strings(value, key, choices=None):
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail(key, "must be an array of strings")
    for v in value:
        if choices is not None and v not in choices:
            fail(key, "%r is not one of %s" % (v, ", ".join(choices) if choices else "(none allowed)"))
    return value


def paths(value, key):
    """Files or directories of the source: relative, and inside it."""
    strings(value, key)
    for i, v in enumerate(value):
        parts = v.replace("\\", "/").split("/")
        if not v or v.startswith("/") or ".." in parts:
            fail("%s[%d]" % (key, i), "%r must be a relative path inside the source" % v)
    return value


def version(value, key):
    if not isinstance(value, str) or not VERSION_RE.match(value):
        fail(key, "must be a version string such as \"2.12\"")
    return value


def deps(value, key):
    if not isinstance(value, list):
        fail(key, "must be an array of {repo-id, version} or {repo-id, revision} tables")
    for i, d in enumerate(value):
        k = "%s[%d]" % (key, i)
        table(d, k, ["repo-id", "version", "revision"])
        string(d.get("repo-id"), k + ".repo-id")
        if ("version" in d) == ("revision" in d):
            fail(k, "needs exactly one of version and revision")
        if "version" in d and (type(d["version"]) is not int or d["version"] < 0):
            fail(k + ".version", "must be an integer ≥ 0")
        if "revision" in d:
            string(d["revision"], k + ".revision")
    return value


# Edition 4 (no general.edition): what v4 lacked against v5 (kernels-data
# config/v4.rs); such a file is read as edition 5 once it passes these.
V4_GENERAL = ["name", "version", "license", "backends", "upstream", "source", "python-depends", "hub",
              "cuda", "neuron", "xpu"]
V4_PER_BACKEND = {"cuda": ["minver", "maxver", "python-depends"], "neuron": ["python-depends"],
                  "xpu": ["python-depends"]}
UPGRADE_HINT = "migrate it with `kernel-builder update-build`"


def upgrade_v4(doc):
    """Read a build.toml without general.edition as edition 4 and upgrade
    it in memory to 5; returns the warning kernel-builder prints."""
    g = doc.get("general")
    if not isinstance(g, dict) or "edition" in g:
        return None
    try:
        table(g, "general", V4_GENERAL)
        for key in ("name", "version", "license", "backends"):
            if key not in g:
                fail("general." + key, "missing")
        for b, allowed in V4_PER_BACKEND.items():
            if b in g:
                table(g[b], "general." + b, allowed)
        t = doc.get("torch")
        if isinstance(t, dict) and isinstance(t.get("stable-abi"), dict):
            fail("torch.stable-abi", "a per-backend table needs edition 5")
    except Bad as e:
        raise Bad("%s (no general.edition: not a valid edition 4 file; older formats are refused: %s)"
                  % (e, UPGRADE_HINT))
    g["edition"] = 5
    return ("build.toml uses the legacy edition 4 format; upgraded to edition 5 in memory. "
            "Run `kernel-builder update-build` to persist the upgrade.")


def check_general(g):
    table(g, "general", ["name", "version", "edition", "license", "backends", "upstream", "source",
                         "python-depends", "kernel-depends", "hub", "cuda", "neuron", "tpu", "xpu"])
    if "edition" not in g:
        fail("general.edition", "missing; " + UPGRADE_HINT)
    if type(g["edition"]) is not int or g["edition"] != 5:
        fail("general.edition", "unsupported build edition %r (want 5; upgrade kernel-builder)" % (g["edition"],))
    for key in ("name", "version", "license", "backends"):
        if key not in g:
            fail("general." + key, "missing")
    if not isinstance(g["name"], str) or not NAME_RE.match(g["name"]):
        fail("general.name", "must match ^[a-z][-a-z0-9]*[a-z0-9]$")
    if type(g["version"]) is not int or g["version"] < 0:
        fail("general.version", "must be an integer ≥ 0")
    string(g["license"], "general.license")
    strings(g["backends"], "general.backends", BACKENDS)
    if not g["backends"]:
        fail("general.backends", "must name at least one backend")
    for key in ("upstream", "source"):
        if key in g and (not isinstance(g[key], str) or not GIT_URL_RE.match(g[key])):
            fail("general." + key, "must be a git URL (https, http, git, ssh, git+ssh, git+https, git+http or user@host:path)")
    if "python-depends" in g:
        strings(g["python-depends"], "general.python-depends", PYTHON_DEPENDS["general"])
    if "kernel-depends" in g:
        deps(g["kernel-depends"], "general.kernel-depends")
    if "hub" in g:
        table(g["hub"], "general.hub", ["repo-id", "branch"])
        for k, v in g["hub"].items():
            string(v, "general.hub." + k)
    per_backend = {"cuda": ["minver", "maxver", "kernel-depends", "python-depends"],
                   "neuron": ["kernel-depends", "python-depends"], "tpu": ["python-depends"],
                   "xpu": ["kernel-depends", "python-depends"]}
    for b, allowed in per_backend.items():
        if b not in g:
            continue
        t = table(g[b], "general." + b, allowed)
        for k in ("minver", "maxver"):
            if k in t:
                version(t[k], "general.%s.%s" % (b, k))
        if "python-depends" in t:
            strings(t["python-depends"], "general.%s.python-depends" % b, PYTHON_DEPENDS[b])
        if "kernel-depends" in t:
            deps(t["kernel-depends"], "general.%s.kernel-depends" % b)


def check_torch(t):
    table(t, "torch", ["src", "include", "minver", "maxver", "pyext", "cxx-flags", "stable-abi"])
    for k in ("src", "include"):
        if k in t:
            paths(t[k], "torch." + k)
    for k in ("pyext", "cxx-flags"):
        if k in t:
            strings(t[k], "torch." + k)
    for k in ("minver", "maxver"):
        if k in t:
            version(t[k], "torch." + k)
    if "stable-abi" in t:
        s = t["stable-abi"]
        if isinstance(s, dict):
            table(s, "torch.stable-abi", BACKENDS)
            for b, v in s.items():
                version(v, "torch.stable-abi." + b)
        else:
            version(s, "torch.stable-abi")


KERNEL_KEYS = {"cpu": [], "cuda": ["cuda-capabilities", "cuda-flags", "cuda-minver"],
               "rocm": ["rocm-archs", "hip-flags"], "xpu": ["sycl-flags"], "metal": []}


def check_kernel(name, k):
    key = "kernel." + name
    if not isinstance(k, dict):
        fail(key, "must be a table")
    if "backend" not in k:
        fail(key + ".backend", "missing")
    if k["backend"] not in KERNEL_BACKENDS:
        fail(key + ".backend", "%r is not one of %s" % (k["backend"], ", ".join(KERNEL_BACKENDS)))
    table(k, key, ["backend", "depends", "src", "include", "cxx-flags"] + KERNEL_KEYS[k["backend"]])
    for req in ("depends", "src"):
        if req not in k:
            fail("%s.%s" % (key, req), "missing")
    strings(k["depends"], key + ".depends", DEPENDS)
    paths(k["src"], key + ".src")
    if "include" in k:
        paths(k["include"], key + ".include")
    for opt in ("cxx-flags", "cuda-capabilities", "cuda-flags", "rocm-archs", "hip-flags", "sycl-flags"):
        if opt in k:
            strings(k[opt], "%s.%s" % (key, opt))
    if "cuda-minver" in k:
        version(k["cuda-minver"], key + ".cuda-minver")


def parse(data):
    """The checked document of build.toml bytes, and a warning or None."""
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise Bad("build.toml: not UTF-8 text (byte %d)" % e.start)
    except tomllib.TOMLDecodeError as e:
        raise Bad("build.toml: not valid TOML: %s" % e)
    except (RecursionError, MemoryError):
        raise Bad("build.toml: too deeply nested or too large to read")
    table(doc, "", ["general", "torch", "torch-noarch", "tvm-ffi", "kernel"])
    if "general" not in doc:
        fail("general", "missing")
    warning = upgrade_v4(doc)
    check_general(doc["general"])
    frameworks = [f for f in ("torch", "torch-noarch", "tvm-ffi") if f in doc]
    if not frameworks:
        fail("torch", "a framework table is required: one of [torch], [torch-noarch], [tvm-ffi]")
    if len(frameworks) > 1:
        fail(frameworks[1], "only one framework table may be given (also found [%s])" % frameworks[0])
    if "torch" in doc:
        check_torch(doc["torch"])
    if "torch-noarch" in doc:
        t = table(doc["torch-noarch"], "torch-noarch", ["pyext", "cuda_capabilities", "rocm_archs"])
        for k in t:
            strings(t[k], "torch-noarch." + k)
    if "tvm-ffi" in doc:
        t = table(doc["tvm-ffi"], "tvm-ffi", ["src", "include", "pyext", "cxx-flags"])
        if "src" not in t:
            fail("tvm-ffi.src", "missing")
        for k in t:
            (paths if k in ("src", "include") else strings)(t[k], "tvm-ffi." + k)
    kernels = doc.get("kernel", {})
    if not isinstance(kernels, dict):
        fail("kernel", "must be a table of [kernel.<name>] tables")
    for name, k in kernels.items():
        check_kernel(name, k)
    return doc, warning


def plan(doc):
    """What the server plans variants from (docs/build-farm.md, Planning)."""
    g = doc["general"]
    kernels = doc.get("kernel", {})
    framework = [f for f in ("torch", "torch-noarch", "tvm-ffi") if f in doc][0]
    fw = doc[framework]
    stable = fw.get("stable-abi") if framework == "torch" else None
    if isinstance(stable, str):
        stable = {b: stable for b in g["backends"]}
    cuda = [k for k in kernels.values() if k["backend"] == "cuda"]
    # a ROCm build hipifies these first (as kernel-builder does)
    rocm_src = list(fw.get("src", [])) if framework == "torch" else []
    for k in kernels.values():
        rocm_src += k.get("src", []) if k["backend"] == "rocm" else []
    return {
        "name": g["name"], "version": g["version"], "framework": framework, "backends": g["backends"],
        "compiled": bool(fw.get("src")) or any(k.get("src") for k in kernels.values()),
        "kernel-backends": sorted(set(k["backend"] for k in kernels.values())),
        "torch": {k: fw[k] for k in ("minver", "maxver") if framework == "torch" and k in fw},
        "stable-abi": stable or {},
        "cuda": {k: g.get("cuda", {})[k] for k in ("minver", "maxver") if k in g.get("cuda", {})},
        "cuda-kernels": [{"capabilities": k.get("cuda-capabilities", []), "minver": k.get("cuda-minver")}
                         for k in cuda],
        "rocm-cuda-sources": sorted(set(s for s in rocm_src if s.endswith(".cu")))
        if "rocm" in g["backends"] else [],
    }


def main():
    if sys.argv[1:] == ["--plan"]:
        doc, warning = parse(sys.stdin.buffer.read())
        out = plan(doc)
        out["warning"] = warning
    else:
        try:
            with open(sys.argv[1], "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise Bad("build.toml: missing at the top of the source")
        out, warning = parse(data)
        if warning:
            sys.stderr.write("%s\n" % warning)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    try:
        main()
    except Bad as e:
        sys.stderr.write("%s\n" % e)
        sys.exit(2)
