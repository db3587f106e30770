"""Bug: the scores for all keys are computed at once, an (Nq, Nk) matrix per head, then softmaxed.

The numbers are right, which is what makes it tempting; the memory is what FlashAttention exists
to save, and only the cost test notices.
"""

from __future__ import annotations

import torch

from reference.flash_attention import (
    _check_inputs,
    _softmax_scale,
    combine_partials,
    flash_attention,
    flash_attention_with_lse,
    split_kv_decode,
)


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
    block_size: int = 64,
) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v, all keys at once.

    q (B, H, Nq, D); k, v (B, Hkv, Nk, D). Returns (B, H, Nq, D) in q's dtype.
    """
    _check_inputs(q, k, v)
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    group = H // Hkv
    scale = _softmax_scale(sm_scale, D)

    # The `group` query heads that share kv head h sit together: (B, Hkv, group, Nq, D).
    qg = q.float().reshape(B, Hkv, group, Nq, D)
    last_key = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)  # (Nq, 1): causal limit

    s = (qg @ k[:, :, None].float().transpose(-1, -2)) * scale  # (B, Hkv, group, Nq, Nk)
    if causal:
        s = s.masked_fill(torch.arange(Nk, device=q.device) > last_key, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - m.masked_fill(m == float("-inf"), 0.0))
    l = p.sum(dim=-1, keepdim=True)
    acc = p @ v[:, :, None].float()

    out = acc / torch.where(l == 0, 1.0, l)  # a query that saw no key keeps acc == 0
    return out.reshape(B, H, Nq, D).to(q.dtype)
