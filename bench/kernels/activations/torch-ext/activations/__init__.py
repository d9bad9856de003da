"""Five elementwise activations, each computed by this build's op."""
from typing import Optional

import torch

from ._ops import ops

__all__ = ["relu", "silu", "gelu", "sigmoid", "softplus"]


def _apply(op, x: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
    if out is None:
        out = torch.empty_like(x)
    op(out, x)
    return out


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """max(x, 0)."""
    return _apply(ops.relu, x, out)


def silu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """x * sigmoid(x)."""
    return _apply(ops.silu, x, out)


def gelu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """GELU, tanh approximation."""
    return _apply(ops.gelu, x, out)


def sigmoid(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """1 / (1 + exp(-x))."""
    return _apply(ops.sigmoid, x, out)


def softplus(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """log(1 + exp(x))."""
    return _apply(ops.softplus, x, out)
