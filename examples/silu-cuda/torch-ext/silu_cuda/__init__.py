"""SiLU as a CUDA kernel: silu(x) returns x * sigmoid(x)."""
from typing import Optional

import torch

from ._ops import ops

__all__ = ["silu"]


def silu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """x * sigmoid(x) elementwise (float32, CUDA), into out when given."""
    if out is None:
        out = torch.empty_like(x)
    ops.silu(out, x)
    return out
