"""Bug: combine_partials weighs each part by exp(lse_s) without subtracting the largest lse.

The weights exp(lse_s) / sum exp(lse_s) are right on paper, and the test inputs people try first
have small scores; an lse past 88 makes exp() infinite in float32 and the merge inf / inf = NaN.
"""

from __future__ import annotations

import torch

from reference.flash_attention import (
    _attention_forward,
    _check_inputs,
    flash_attention,
    flash_attention_with_lse,
    tiled_attention,
)


def combine_partials(outs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """outs (S, B, H, Nq, D), lses (S, B, H, Nq) -> out (B, H, Nq, D), lse (B, H, Nq)."""
    weights = torch.exp(lses.float())  # (S, B, H, Nq)
    total = weights.sum(dim=0)  # (B, H, Nq)
    out = (weights[..., None] * outs.float()).sum(dim=0)
    out = out / torch.where(total == 0, 1.0, total)[..., None]
    return out, torch.log(total)


def split_kv_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sm_scale: float | None = None,
    num_splits: int = 8,
) -> torch.Tensor:
    """q (B, H, 1, D); k, v (B, Hkv, Nk, D) -> (B, H, 1, D), merged with the combine above."""
    _check_inputs(q, k, v)
    if q.shape[2] != 1:
        raise ValueError(f"q must be (B, H, 1, D), got {tuple(q.shape)}")
    outs, lses = _attention_forward(q, k, v, False, sm_scale, num_splits)
    out, _ = combine_partials(outs, lses)
    return out.to(q.dtype)
