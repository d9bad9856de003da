"""Calls ops.relu through _ops (this build's namespace), where the library registered nothing."""
import torch

from ._ops import ops


def relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    ops.relu(out, x)
    return out
