"""Float64 oracles shared by several katas. Slow, dense and obviously right.

Conventions: q (B, H, Nq, D); k, v (B, Hkv, Nk, D) with H % Hkv == 0; query head h reads kv head
h // (H // Hkv). `causal` aligns bottom-right: query i sees keys j <= i + Nk - Nq. `mask` is a
bool tensor broadcastable to (B, H, Nq, Nk), True where a key may be seen; it is combined with
`causal`.
"""

from __future__ import annotations

import math

import torch

from grading.model import causal_mask


def attention_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Scaled scores q·k in float64, -inf where a key may not be seen: (B, H, Nq, Nk)."""
    q, k = (t.detach().to("cpu", torch.float64) for t in (q, k))
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    k = k.repeat_interleave(H // k.shape[1], dim=1)  # (B, H, Nk, D)
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    scores = (q @ k.transpose(-1, -2)) * scale  # (B, H, Nq, Nk)
    allowed = torch.ones(Nq, Nk, dtype=torch.bool)
    if causal:
        allowed = causal_mask(Nq, Nk)
    if mask is not None:
        allowed = allowed & mask.to("cpu", torch.bool)
    return scores.masked_fill(~allowed.expand(B, H, Nq, Nk), float("-inf"))


def attention_oracle(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dense attention in float64: (B, H, Nq, Dv). A query that sees no key gets zeros."""
    scores = attention_scores(q, k, causal=causal, sm_scale=sm_scale, mask=mask)
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # rows with no visible key -> zeros
    v = v.detach().to("cpu", torch.float64).repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    return probs @ v


def log_sum_exp_oracle(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """float64 (B, H, Nq): log of the sum of exp(score) over each query's visible keys
    (-inf for a query that sees none)."""
    scores = attention_scores(q, k, causal=causal, sm_scale=sm_scale, mask=mask)
    return torch.logsumexp(scores, dim=-1)
