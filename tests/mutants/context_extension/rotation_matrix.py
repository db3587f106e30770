"""Bug: apply_rope multiplies by a (D, D) rotation matrix per position: right numbers, wrong cost.

It is the textbook way to write a rotation and gives the right numbers, but it turns D elementwise
multiplies into a D x D matrix product per token and stores N x D x D numbers.
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
    half = D // 2
    rot = torch.zeros(N, D, D)  # out[..., r] = sum_c x[..., c] * rot[n, c, r]
    idx = torch.arange(half)
    c, s = cos[:, :half], sin[:, :half]
    rot[:, idx, idx] = c
    rot[:, idx + half, idx + half] = c
    rot[:, idx + half, idx] = -s
    rot[:, idx, idx + half] = s
    return (x.float().unsqueeze(-2) @ rot).squeeze(-2).to(x.dtype)
