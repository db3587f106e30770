"""Bug: the ALiBi bias aligns queries top-left (p_i = i) instead of bottom-right.

With q_len == k_len both agree, so tests on square inputs pass; during decoding (one query, many
keys) the newest query is then treated as position 0 and every key looks like the future.
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
    closest = 1 << (n_heads.bit_length() - 1)
    slopes = [2.0 ** (-8.0 * h / closest) for h in range(1, closest + 1)]
    twice = [2.0 ** (-4.0 * h / closest) for h in range(1, 2 * closest + 1)]
    slopes += twice[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads, q_len, k_len):
    if q_len < 0 or k_len < 0:
        raise ValueError("lengths must be >= 0")
    slopes = alibi_slopes(n_heads)
    query_pos = torch.arange(q_len)  # should add k_len - q_len
    distance = query_pos[:, None] - torch.arange(k_len)[None, :]
    return -slopes[:, None, None] * distance.to(torch.float32)
