"""Bug: block-sparse attention expands the block mask to tokens and runs dense masked attention.

Right numbers at dense cost: N x N scores and an N x N mask, whatever fraction of blocks is kept.
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
    global_block_mask,
    linear_attention,
    linear_attention_step,
    local_block_mask,
    random_block_mask,
    sliding_window_attention,
    sliding_window_decode_step,
)


def block_sparse_attention(q, k, v, block_mask, block_size, causal=False, sm_scale=None):
    _check_attention_inputs(q, k, v)
    B, H, N, D = q.shape
    nb = -(-N // block_size)
    if k.shape[2] != N or block_mask.dtype != torch.bool or tuple(block_mask.shape) != (nb, nb):
        raise ValueError(f"block_mask must be bool [{nb}, {nb}] and Nk == Nq")
    acc = _compute_dtype(q.dtype)
    kk, vv = _expand_kv(k.to(acc), H), _expand_kv(v.to(acc), H)
    scores = (q.to(acc) @ kk.transpose(-1, -2)) * _softmax_scale(sm_scale, D)  # (B, H, N, N)
    allowed = block_mask.repeat_interleave(block_size, 0).repeat_interleave(block_size, 1)[:N, :N]
    if causal:
        allowed = allowed & torch.ones(N, N, dtype=torch.bool).tril()
    return (_softmax_or_zeros(scores, allowed) @ vv).to(q.dtype)
