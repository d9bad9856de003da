# smoke_check.py -- the smoke import of a built variant directory, run by
# the toolchain's Python inside the build sandbox (embedded in khub-worker).
# Proves that what is published works the way the kernels loader uses it:
#   1. kernel-builder's torch ops check: every torch.library registration
#      decorator (custom_op, triton_op, register_kernel, register_fake,
#      register_vmap, register_torch_dispatch) names its op through
#      add_op_namespace_prefix(...), and no file names another build's op
#      namespace (torch.ops._x_cpu_1234567, "_x_cpu_1234567::op");
#   2. the import itself (kernels.get_local_kernel when the toolchain has
#      kernels, else the loader's own steps: spec_from_file_location(id));
#   3. the ops it registered are all in the variant's namespace (_ops.ops;
#      for an arch build that is the metadata id), an arch build registered
#      at least one, and every ops.<name> the Python calls is registered.
# Any failure: lines "ops check: ..." on stderr and exit status 1.
#
# argv: STAGE ID MODULE arch|noarch loader|direct
import ast
import importlib.util
import os
import re
import sys

stage, kid, module, kind, how = sys.argv[1:6]

DECORATORS = {"custom_op", "triton_op", "register_kernel", "register_fake", "register_vmap",
              "register_torch_dispatch"}
# The op namespace of a kernel build: _<module>_<backend>_<7 hex>[_dirty].
BUILD_NAMESPACE = re.compile(r"^_[a-z0-9_]+_(cpu|cuda|rocm|metal|xpu|neuron|tpu|npu|cann)_[0-9a-f]{7}(_dirty)?$")
problems = []


def problem(msg):
    problems.append(msg)


def stop():
    for p in problems:
        print("ops check: " + p, file=sys.stderr)
    sys.exit(1)


def call_name(node):
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):
            return node.func.id
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
    return None


def python_files():
    for root, dirs, files in os.walk(stage):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                yield os.path.relpath(path, stage), path


def ops_aliases(tree):
    """Names bound by `from ._ops import ops [as x]` (any depth of dots)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1 and node.module == "_ops":
            for a in node.names:
                if a.name == "ops":
                    names.add(a.asname or "ops")
    return names


def scan(rel, tree, used):
    """Step 1 for one file; the ops.<name> it calls into used."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and d.args and call_name(d) in DECORATORS \
                        and call_name(d.args[0]) != "add_op_namespace_prefix":
                    problem("%s:%d: @%s on %s does not name its op with add_op_namespace_prefix(...) "
                            "(the op would not be in this build's namespace)" % (rel, node.lineno, call_name(d), node.name))
    aliases = ops_aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in aliases:
                used.setdefault(node.attr, "%s:%d" % (rel, node.lineno))
            if isinstance(node.value, ast.Attribute) and node.value.attr == "ops" \
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "torch" \
                    and BUILD_NAMESPACE.match(node.attr) and node.attr != kid:
                problem("%s:%d: torch.ops.%s is another build's op namespace (this build's is %s)"
                        % (rel, node.lineno, node.attr, kid))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "::" in node.value:
            ns = node.value.split("::", 1)[0]
            if BUILD_NAMESPACE.match(ns) and ns != kid:
                problem("%s:%d: \"%s\" names another build's op namespace (this build's is %s)"
                        % (rel, node.lineno, node.value[:80], kid))


used = {}
for rel, path in python_files():
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=rel)
    except SyntaxError as e:
        problem("%s:%s: syntax error: %s" % (rel, e.lineno, e.msg))
        continue
    scan(rel, tree, used)
if problems:
    stop()

import torch  # noqa: E402


def schemas():
    return {s.name for s in torch._C._jit_get_all_schemas()}


before = schemas()
try:
    import kernels
except Exception:
    kernels = None
if how == "loader" and kernels is not None and hasattr(kernels, "get_local_kernel"):
    from pathlib import Path
    try:
        mod = kernels.get_local_kernel(Path(os.path.dirname(stage)))
    except TypeError:  # older kernels also wanted the package name
        mod = kernels.get_local_kernel(Path(os.path.dirname(stage)), module)
    print("smoke import: kernels.get_local_kernel loaded", getattr(mod, "__name__", mod), flush=True)
else:
    spec = importlib.util.spec_from_file_location(kid, os.path.join(stage, "__init__.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[kid] = mod
    spec.loader.exec_module(mod)
    print("smoke import: loaded", kid, "from", stage, "(the loader's import logic)", flush=True)
added = schemas() - before

# The namespace _ops.py gave the kernel (noarch: chosen at import time).
ops_file = os.path.realpath(os.path.join(stage, "_ops.py"))
namespace = None
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and os.path.realpath(f) == ops_file and hasattr(m, "ops"):
        namespace = getattr(m.ops, "name", None)
if namespace is None:
    if used or kind == "arch":
        problem("_ops.py was not imported or has no ops namespace: the kernel's __init__.py must use "
                "`from ._ops import ops`")
        stop()
    print("smoke import: no ops (a Python-only kernel that registers none)")
    sys.exit(0)
if kind == "arch" and namespace != kid:
    problem("_ops.py's namespace is %s, not the variant's %s" % (namespace, kid))
foreign = sorted({n.split("::", 1)[0] for n in added} - {namespace})
if foreign:
    problem("the import registered ops in namespace%s %s, not in this build's %s (TORCH_LIBRARY must use "
            "TORCH_EXTENSION_NAME; Python ops must use add_op_namespace_prefix)"
            % ("s" if len(foreign) > 1 else "", ", ".join(foreign), namespace))
registered = sorted({n.split("::", 1)[1] for n in schemas() if n.startswith(namespace + "::")})
if kind == "arch" and not registered:
    problem("no op registered in namespace " + namespace)
for name, where in sorted(used.items(), key=lambda kv: kv[1]):
    if name not in registered and name != "name":
        problem("%s: ops.%s is called, but %s registers no op %s (it registers: %s)"
                % (where, name, namespace, name, ", ".join(registered) or "nothing"))
for name in registered:
    try:
        getattr(getattr(torch.ops, namespace), name)
    except Exception as e:
        problem("%s::%s is registered but cannot be resolved: %s" % (namespace, name, e))
if problems:
    stop()
print("smoke import: ops", ", ".join(namespace + "::" + n for n in registered) or "(none)")
