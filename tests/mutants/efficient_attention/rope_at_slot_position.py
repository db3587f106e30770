"""Bug: the rolling cache rotates each token by its slot in the ring (p % window), not by p.

Inside the first window the two agree; once the ring wraps, relative distances between the
query and the cached keys come out wrong.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from reference.efficient_attention import (  # noqa: F401
    _LINEAR_CHUNK,
    _MAX_QUERY_CHUNK,
    RollingKVCache,
    _causal_linear,
    _check_attention_inputs,
    _check_int,
    _compute_dtype,
    _exclusive_cumsum,
    _expand_kv,
    _key_span,
    _phi,
    _rope,
    _softmax_or_zeros,
    _softmax_scale,
    block_sparse_attention,
    global_block_mask,
    linear_attention,
    linear_attention_step,
    local_block_mask,
    random_block_mask,
    sliding_window_attention,
)


def sliding_window_decode_step(q_t, k_t, v_t, cache, *, rope_base=10000.0, sm_scale=None):
    """Decode one token with sliding-window attention over `cache`.

    q_t (B, H, D), k_t and v_t (B, Hkv, D), before RoPE. The token's absolute position is
    cache.seq_len: q_t and k_t are rotated there, k_t and v_t are appended, and q_t attends over
    the window. Returns (B, H, D) in q_t's dtype, equal to row p of sliding_window_attention.
    """
    shapes_fit = q_t.dim() == k_t.dim() == 3 and q_t.shape[1] % k_t.shape[1] == 0
    if not shapes_fit or q_t.shape[-1] != k_t.shape[-1] or q_t.shape[-1] % 2:
        raise ValueError(
            f"q_t must be [B, H, D] and k_t [B, Hkv, D] with Hkv dividing H and D even (RoPE "
            f"rotates pairs), got {tuple(q_t.shape)} and {tuple(k_t.shape)}"
        )
    H, D = q_t.shape[1], q_t.shape[2]
    acc = _compute_dtype(q_t.dtype)
    # BUG: changed from the reference below
    position = cache.seq_len % cache.window
    q_rot = _rope(q_t.to(acc), position, rope_base)  # (B, H, D)
    keys, values = cache.append(_rope(k_t.to(acc), position, rope_base), v_t)
    keys = _expand_kv(keys.to(acc), H)  # (B, H, n, D), n = min(seq_len, window)
    values = _expand_kv(values.to(acc), H)
    scores = (keys @ q_rot[..., None]).squeeze(-1) * _softmax_scale(sm_scale, D)  # (B, H, n)
    o_t = (scores.softmax(dim=-1)[..., None, :] @ values).squeeze(-2)  # (B, H, D)
    return o_t.to(q_t.dtype)
