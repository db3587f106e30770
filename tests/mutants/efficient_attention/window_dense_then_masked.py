"""Bug: the sliding window scores every query against every key, then masks to the band.

The numbers are right, but work and memory are O(Nq · Nk) however small the window: the whole
point of the window is lost. It is the first version almost everyone writes.
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
    _check_attention_inputs(q, k, v)
    _check_int("window", window, 1)
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    acc = _compute_dtype(q.dtype)
    kk, vv = _expand_kv(k.to(acc), H), _expand_kv(v.to(acc), H)
    scores = (q.to(acc) @ kk.transpose(-1, -2)) * _softmax_scale(sm_scale, D)  # (B, H, Nq, Nk)
    p = torch.arange(Nq)[:, None] + (Nk - Nq)
    j = torch.arange(Nk)[None, :]
    allowed = (j <= p) & (j > p - window)
    return (_softmax_or_zeros(scores, allowed) @ vv).to(q.dtype)
