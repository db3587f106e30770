"""Bug: ALiBi slopes are 2 ** (-8h / n) for every head count, powers of two or not.

The power-of-two formula is the one everybody remembers; for 12 or 40 heads (BLOOM, MPT-style
configs) the paper uses the slopes of the power of two below, then interleaved extra slopes.
"""

import torch

from reference.context_extension import (
    apply_rope,
    dynamic_ntk_inv_freq,
    linear_scaled_inv_freq,
    ntk_scaled_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
    yarn_inv_freq,
)


def alibi_slopes(n_heads):
    if not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError("n_heads must be >= 1")
    slopes = [2.0 ** (-8.0 * h / n_heads) for h in range(1, n_heads + 1)]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads, q_len, k_len):
    if q_len < 0 or k_len < 0:
        raise ValueError("lengths must be >= 0")
    slopes = alibi_slopes(n_heads)
    query_pos = torch.arange(q_len) + (k_len - q_len)
    distance = query_pos[:, None] - torch.arange(k_len)[None, :]
    return -slopes[:, None, None] * distance.to(torch.float32)
