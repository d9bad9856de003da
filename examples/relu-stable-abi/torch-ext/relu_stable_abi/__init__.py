"""ReLU through the torch stable ABI: relu(x) returns max(x, 0)."""
from typing import Optional

import torch

from ._ops import ops

__all__ = ["relu"]


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """max(x, 0) elementwise (float32 or float64), into out when given."""
    src = x.contiguous()
    dst = torch.empty_like(src) if out is None or not out.is_contiguous() else out
    ops.relu(dst, src)
    if out is not None and dst is not out:
        out.copy_(dst)
        return out
    return dst
