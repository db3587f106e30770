"""Bug: rope_cos_sin turns the positions into integers, truncating fractional ones.

Positions are usually token indices, so .long() looks harmless; but interpolation feeds p / factor,
and truncating it makes neighbouring tokens share one angle.
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
    angles = torch.outer(positions.long().double(), inv_freq.double())  # 2.5 -> 2
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()
