"""Float64 oracles shared by several katas. Slow, dense and obviously right."""

from __future__ import annotations

import math

import torch


def attention_oracle(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dense attention in float64 with the repository's conventions.

    q (B, H, Nq, D); k, v (B, Hkv, Nk, D) with H % Hkv == 0; query head h reads kv head
    h // (H // Hkv). `causal` aligns bottom-right: query i sees keys j <= i + Nk - Nq.
    `mask` is a bool tensor broadcastable to (B, H, Nq, Nk), True where a key may be seen; it is
    combined with `causal`. A query that sees no key gets zeros. Returns float64 (B, H, Nq, Dv).
    """
    q, k, v = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    group = H // k.shape[1]
    k = k.repeat_interleave(group, dim=1)  # (B, H, Nk, D)
    v = v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    scores = (q @ k.transpose(-1, -2)) * scale  # (B, H, Nq, Nk)
    allowed = torch.ones(Nq, Nk, dtype=torch.bool)
    if causal:
        allowed = torch.arange(Nk)[None, :] <= torch.arange(Nq)[:, None] + (Nk - Nq)
    if mask is not None:
        allowed = allowed & mask.to("cpu", torch.bool)
    allowed = allowed.expand(B, H, Nq, Nk)
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # rows with no visible key -> zeros
    return probs @ v
