"""Bug: the rolling cache appends every token and returns the last `window`: memory grows forever.

The outputs are exactly right, so only the memory test can tell: this is a KV cache with a
sliding-window view, not a rolling buffer.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from reference.efficient_attention import (  # noqa: F401
    _LINEAR_CHUNK,
    _MAX_QUERY_CHUNK,
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
    sliding_window_decode_step,
)


class RollingKVCache:
    def __init__(self, window, batch, n_kv_heads, head_dim, *, dtype=torch.float32, device=None):
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self.k = torch.zeros(batch, n_kv_heads, 0, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)

    @property
    def seq_len(self) -> int:
        return self.k.shape[2]

    def append(self, k_t, v_t):
        if k_t.shape != self.k.shape[:2] + self.k.shape[3:]:
            raise ValueError(f"k_t must be [B, Hkv, head_dim], got {list(k_t.shape)}")
        self.k = torch.cat([self.k, k_t[:, :, None].to(self.k.dtype)], dim=2)
        self.v = torch.cat([self.v, v_t[:, :, None].to(self.v.dtype)], dim=2)
        return self.k[:, :, -self.window :], self.v[:, :, -self.window :]
