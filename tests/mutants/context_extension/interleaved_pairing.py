"""Bug: RoPE pairs neighbouring dimensions (2i, 2i + 1) and lays the tables out f0, f0, f1, f1.

That is the layout of the original RoFormer/GPT-J code and of Meta's complex-number Llama, so it
looks right, but Hugging Face checkpoints permute their q/k weights for the half-split layout:
with those weights, interleaved RoPE rotates the wrong pairs.
"""

import torch

from reference.context_extension import (
    alibi_bias,
    alibi_slopes,
    dynamic_ntk_inv_freq,
    linear_scaled_inv_freq,
    ntk_scaled_inv_freq,
    rope_inv_freq,
    yarn_inv_freq,
)


def rope_cos_sin(positions, inv_freq):
    if positions.dim() != 1 or inv_freq.dim() != 1:
        raise ValueError("positions and inv_freq must be 1-D")
    angles = torch.outer(positions.to(torch.float64), inv_freq.to(torch.float64))
    angles = angles.repeat_interleave(2, dim=-1)  # f0, f0, f1, f1, ...
    return angles.cos().float(), angles.sin().float()


def apply_rope(x, cos, sin):
    N, D = x.shape[-2:]
    if D % 2 or tuple(cos.shape) != (N, D) or tuple(sin.shape) != (N, D):
        raise ValueError("shapes do not match")
    xc = x.float()
    even, odd = xc[..., 0::2], xc[..., 1::2]
    rotated = torch.stack([-odd, even], dim=-1).flatten(-2)  # (-x1, x0, -x3, x2, ...)
    return (xc * cos + rotated * sin).to(x.dtype)
