"""Pure-Python stand-in for the `kernels_data` extension (Rust/pyo3 in the
real kernels project), used only by tests/device/run_loader_check.sh on a
machine that cannot install the real wheel.

It provides what `import kernels` / `get_kernel` of kernels v0.16.0 use:
`Metadata.read_from_file`, `Metadata.from_bytes`, and the properties `.id`,
`.name` (a `KernelName` with `str()` and `.python_name`), `.version`,
`.license`, `.upstream`, `.source`, `.python_depends`, `.backend`, `.digest`
(always None here: no digest support). Parsing follows kernels-data's
`metadata.rs`: kebab-case JSON with required name, id, version, license,
python-depends and backend.type.
"""

import json
import os
import re

__version__ = "0.16.0+khub-shim"

_NAME_RE = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
_BACKENDS = {"cann": "CANN", "cpu": "CPU", "cuda": "CUDA", "metal": "Metal",
             "neuron": "Neuron", "rocm": "ROCm", "xpu": "XPU"}


class KernelName:
    def __init__(self, name):
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"invalid kernel name: {name!r}")
        self._name = name

    @property
    def python_name(self):
        return self._name.replace("-", "_")

    def __str__(self):
        return self._name

    def __repr__(self):
        return f"KernelName({self._name!r})"

    def __eq__(self, other):
        return isinstance(other, KernelName) and other._name == self._name

    def __hash__(self):
        return hash(self._name)


class BackendInfo:
    def __init__(self, backend_type, archs):
        self._type = backend_type
        self._archs = archs

    @property
    def backend_type(self):
        return self._type

    @property
    def archs(self):
        return self._archs

    def __repr__(self):
        return f"BackendInfo(backend_type={self._type!r}, archs={self._archs!r})"


class Metadata:
    def __init__(self, data):
        if not isinstance(data, dict):
            raise ValueError("metadata.json: expected a JSON object")
        try:
            self._name = KernelName(data["name"])
            self._id = data["id"]
            self._version = data["version"]
            self._license = data["license"]
            self._python_depends = list(data["python-depends"])
            backend = data["backend"]
            btype = backend["type"]
        except KeyError as e:
            raise ValueError(f"metadata.json: missing field {e.args[0]!r}") from None
        if not isinstance(self._id, str):
            raise ValueError("metadata.json: 'id' must be a string")
        if not isinstance(self._version, int) or self._version < 0:
            raise ValueError("metadata.json: 'version' must be a non-negative integer")
        if not isinstance(self._license, str):
            raise ValueError("metadata.json: 'license' must be a string")
        if btype not in _BACKENDS:
            raise ValueError(f"metadata.json: unknown backend type {btype!r}")
        self._backend = BackendInfo(_BACKENDS[btype], backend.get("archs"))
        self._upstream = data.get("upstream")
        self._source = data.get("source")

    @staticmethod
    def from_bytes(data):
        try:
            return Metadata(json.loads(bytes(data)))
        except json.JSONDecodeError as e:
            raise ValueError(f"metadata.json: {e}") from None

    @staticmethod
    def read_from_file(metadata_path):
        try:
            with open(os.fspath(metadata_path), "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"cannot read {metadata_path}: {e}") from None
        return Metadata.from_bytes(data)

    id = property(lambda self: self._id)
    name = property(lambda self: self._name)
    version = property(lambda self: self._version)
    license = property(lambda self: self._license)
    upstream = property(lambda self: self._upstream)
    source = property(lambda self: self._source)
    python_depends = property(lambda self: list(self._python_depends))
    backend = property(lambda self: self._backend)
    digest = property(lambda self: None)

    def __repr__(self):
        return f"Metadata(id={self._id!r}, name={str(self._name)!r}, version={self._version!r})"
