"""Bug: sliding-window attention always scales scores by 1 / sqrt(D), ignoring sm_scale.

The default is what nearly every test of a first version uses, so the argument goes unread.
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
    sliding_window_decode_step,
)


def sliding_window_attention(q, k, v, window, sm_scale=None):
    """Causal attention where query i (position p = i + Nk - Nq) sees keys p - window < j <= p.

    q (B, H, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> (B, H, Nq, Dv).
    Work and memory O(Nq · window · D): never an Nq x Nk tensor.
    """
    _check_attention_inputs(q, k, v)
    _check_int("window", window, 1)
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    acc = _compute_dtype(q.dtype)
    W = min(window, Nk)  # a window longer than the keys is plain causal attention
    C = min(W, _MAX_QUERY_CHUNK)  # queries per chunk
    n_chunks = -(-Nq // C)
    band = C + W - 1  # keys one chunk may see

    # Chunk c holds queries c*C .. c*C + C - 1; its band starts at the position of the first
    # query minus W - 1. The bands of consecutive chunks overlap by W - 1 keys.
    start = Nk - Nq - W + 1
    length = n_chunks * C + W - 1
    k_bands = _key_span(k.to(acc), start, length).unfold(2, band, C).transpose(-1, -2)
    v_bands = _key_span(v.to(acc), start, length).unfold(2, band, C).transpose(-1, -2)
    k_bands = _expand_kv(k_bands, H)  # (B, H, n_chunks, band, D)
    v_bands = _expand_kv(v_bands, H)  # (B, H, n_chunks, band, Dv)
    q_chunks = F.pad(q.to(acc), (0, 0, 0, n_chunks * C - Nq)).unflatten(2, (n_chunks, C))

    # Query a of a chunk and key b of its band are (W - 1) + a - b positions apart, the same in
    # every chunk: the window is a <= b <= a + W - 1. Keys outside 0 .. Nk - 1 are padding.
    a = torch.arange(C, device=q.device)[:, None]
    b = torch.arange(band, device=q.device)[None, :]
    in_window = (a <= b) & (b <= a + W - 1)  # (C, band)
    key_pos = torch.arange(start, start + length, device=q.device)
    real_key = ((key_pos >= 0) & (key_pos < Nk)).unfold(0, band, C)  # (n_chunks, band)
    allowed = in_window & real_key[:, None, :]  # (n_chunks, C, band)

    # BUG: changed from the reference below
    scale = _softmax_scale(None, D)
    scores = (q_chunks @ k_bands.transpose(-1, -2)) * scale  # (B, H, n_chunks, C, band)
    out = _softmax_or_zeros(scores, allowed) @ v_bands  # (B, H, n_chunks, C, Dv)
    return out.flatten(2, 3)[:, :, :Nq].to(q.dtype)
