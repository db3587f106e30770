"""Bug: rotate_half returns cat(x2, -x1) instead of cat(-x2, x1): every pair turns backwards.

The sign is easy to misplace when writing the rotation from memory, and the result still keeps
norms and still depends only on relative positions, so only fixed known values catch it.
"""

import torch

from reference.context_extension import (
    alibi_bias,
    alibi_slopes,
    dynamic_ntk_inv_freq,
    linear_scaled_inv_freq,
    ntk_scaled_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
    yarn_inv_freq,
)


def apply_rope(x, cos, sin):
    N, D = x.shape[-2:]
    if D % 2 or tuple(cos.shape) != (N, D) or tuple(sin.shape) != (N, D):
        raise ValueError("shapes do not match")
    xc = x.float()
    x1, x2 = xc.chunk(2, dim=-1)
    rotated = torch.cat([x2, -x1], dim=-1)  # the sign on the wrong half
    return (xc * cos + rotated * sin).to(x.dtype)
