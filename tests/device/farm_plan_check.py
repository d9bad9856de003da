#!/usr/bin/env python3
"""farm_plan_check.py -- load one kernel the farm built with the REAL
`kernels` loader (get_kernel(repo, version=1)) against HF_ENDPOINT and check
its op against torch on the GPU.

  farm_plan_check.py REPO OP [--backend cpu]

OP is relu or silu. Prints one JSON line {"repo", "variant", "max_abs_err",
"ok"}; exit 0 when the op matched torch on random float32 tensors.
"""
import json
import os
import sys

import torch
from kernels import get_kernel


def main():
    repo, op = sys.argv[1], sys.argv[2]
    backend = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--backend" else None
    kernel = get_kernel(repo, version=1, **({"backend": backend} if backend else {}))
    variant = os.path.basename(os.path.dirname(os.path.abspath(kernel.__file__)))
    device = "cpu" if backend == "cpu" else "cuda"
    x = torch.randn(1 << 20, device=device, dtype=torch.float32)
    want = torch.relu(x) if op == "relu" else x * torch.sigmoid(x)
    got = getattr(kernel, op)(x)
    if device == "cuda":
        torch.cuda.synchronize()
    err = (got - want).abs().max().item()
    ok = got.device.type == device and err <= 1e-5
    print(json.dumps({"repo": repo, "variant": variant, "device": device, "max_abs_err": err, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
