"""Bug: the positions are cast to the model's bfloat16 before the angles are formed.

Building position ids in the activation dtype is a known real-world bug: bfloat16 holds integers
exactly only up to 256, so beyond that neighbouring tokens get the same position.
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
    angles = torch.outer(positions.to(torch.bfloat16).double(), inv_freq.double())
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()
