"""ReLU through the Torch stable ABI: relu(x) returns max(x, 0)."""
from typing import Optional

import torch

from ._ops import ops

__all__ = ["relu"]


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """max(x, 0) elementwise (float32), into out when given."""
    if out is None:
        out = torch.empty_like(x)
    ops.relu(out, x)
    return out
