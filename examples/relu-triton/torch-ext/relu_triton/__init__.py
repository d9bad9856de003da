"""ReLU in Triton: relu(x) returns max(x, 0) for a CUDA tensor."""
from typing import Optional

import torch
import triton
import triton.language as tl

__all__ = ["relu"]


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """max(x, 0) elementwise on the GPU, into out when given."""
    if out is None:
        out = torch.empty_like(x)
    n = x.numel()
    block = 1024
    _relu_kernel[(triton.cdiv(n, block),)](x.contiguous(), out, n, BLOCK=block)
    return out
