"""ReLU as a kernel: relu(x) returns max(x, 0) computed by this build's op."""
from typing import Optional

import torch

from ._ops import ops

__all__ = ["relu"]


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """max(x, 0) elementwise, into out when given (same shape and dtype)."""
    if out is None:
        out = torch.empty_like(x)
    ops.relu(out, x)
    return out
