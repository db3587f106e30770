"""Bug: the scores q k^T are computed in the input dtype and only then converted to float32.

Upcasting after the matmul looks equivalent; in float16 scores in the hundreds are rounded to
a multiple of 0.125 or 0.25 before the softmax sees them.
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
    """softmax(q k^T * sm_scale) v, one block of `block_size` keys at a time.

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
    qg = q.reshape(B, Hkv, group, Nq, D)
    last_key = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)  # (Nq, 1): causal limit
    m = torch.full((B, Hkv, group, Nq, 1), float("-inf"), device=q.device)  # running max
    l = torch.zeros((B, Hkv, group, Nq, 1), device=q.device)  # running sum of exp(s - m)
    acc = torch.zeros((B, Hkv, group, Nq, D), device=q.device)  # running sum of exp(s - m) v

    for start in range(0, Nk, block_size):
        kb = k[:, :, None, start : start + block_size]  # (B, Hkv, 1, n, D)
        vb = v[:, :, None, start : start + block_size].float()
        s = (qg @ kb.transpose(-1, -2)).float() * scale  # (B, Hkv, group, Nq, n)
        if causal:
            keys = torch.arange(start, start + kb.shape[-2], device=q.device)  # (n,)
            s = s.masked_fill(keys > last_key, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)  # rows that saw no key yet
        p = torch.exp(s - m_safe)  # (B, Hkv, group, Nq, n), each <= 1
        alpha = torch.exp(m - m_safe)  # how much the old max overestimated: rescale the past
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m = m_new

    out = acc / torch.where(l == 0, 1.0, l)  # a query that saw no key keeps acc == 0
    return out.reshape(B, H, Nq, D).to(q.dtype)
