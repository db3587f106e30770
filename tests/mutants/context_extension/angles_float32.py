"""Bug: the RoPE angles are formed in float32: positions.float() * inv_freq.

This is what most model code does, and it is fine at a few thousand positions; at 10^5 and beyond
a float32 angle has lost its last few thousandths of a radian, exactly where long context lives.
"""

import torch

from reference.context_extension import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    dynamic_ntk_inv_freq,
    linear_scaled_inv_freq,
    ntk_scaled_inv_freq,
    rope_inv_freq,
    yarn_inv_freq,
)


def rope_cos_sin(positions, inv_freq):
    if positions.dim() != 1 or inv_freq.dim() != 1:
        raise ValueError("positions and inv_freq must be 1-D")
    angles = torch.outer(positions.float(), inv_freq.float())  # float32 angles
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()
