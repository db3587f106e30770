"""Bug: before the ring buffer fills, append returns all `window` slots, empty ones included.

The zero keys of the empty slots score 0 and take part in the softmax during the first
window - 1 steps.
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
    """The last `window` keys and values of one attention layer, in a ring buffer.

    The token at absolute position p lives in slot p % window, so memory is 2 x (B, Hkv, window,
    head_dim) however long decoding runs. Keys are stored after RoPE at their absolute position;
    attention does not care in which order the slots hold them.
    """

    def __init__(self, window, batch, n_kv_heads, head_dim, *, dtype=torch.float32, device=None):
        sizes = {"window": window, "batch": batch, "n_kv_heads": n_kv_heads, "head_dim": head_dim}
        for name, value in sizes.items():
            _check_int(name, value, 1)
        self.window = window
        self.k = torch.zeros(batch, n_kv_heads, window, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)  # (B, Hkv, window, head_dim)
        self._seq_len = 0

    @property
    def seq_len(self) -> int:
        """Tokens appended so far: the absolute position of the next token."""
        return self._seq_len

    def append(self, k_t, v_t):
        """Store one token's k_t, v_t (B, Hkv, head_dim), evicting the token `window` back.

        Returns the keys and values in the window, (B, Hkv, min(seq_len, window), head_dim) each,
        in slot order (views of the buffer).
        """
        expected = self.k.shape[:2] + self.k.shape[3:]
        for name, t in (("k_t", k_t), ("v_t", v_t)):
            if t.shape != expected:
                raise ValueError(
                    f"{name} must be {list(expected)} [B, Hkv, head_dim], got {list(t.shape)}"
                )
        slot = self._seq_len % self.window
        self.k[:, :, slot] = k_t
        self.v[:, :, slot] = v_t
        self._seq_len += 1
        # Before the buffer fills, only slots 0 .. n - 1 hold keys.
        # BUG: changed from the reference below
        n = self.window  # empty slots too
        return self.k[:, :, :n], self.v[:, :, :n]
