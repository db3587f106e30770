"""Bug: rope_inv_freq uses base ** (-i / d) for i = 0 .. d/2 - 1 instead of base ** (-2i / d).

Writing torch.arange(d // 2) / d where torch.arange(0, d, 2) / d was meant is an easy slip: the
slowest pair then turns sqrt(base) times too fast and the model's long-range pairs are wrong.
"""

import torch

from reference.context_extension import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    dynamic_ntk_inv_freq,
    linear_scaled_inv_freq,
    ntk_scaled_inv_freq,
    rope_cos_sin,
    yarn_inv_freq,
)


def rope_inv_freq(head_dim, base=10000.0):
    if not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2 or not base > 1:
        raise ValueError("bad head_dim or base")
    exponents = torch.arange(head_dim // 2, dtype=torch.float64) / head_dim  # 2i / d intended
    return (base**-exponents).float()
