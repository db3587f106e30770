"""Bug: the cos/sin tables are laid out f0, f0, f1, f1 while apply_rope splits x in halves.

Mixing code from two codebases (an interleaved table builder, a half-split rotation) is a common
way to end up here; each half looks fine, together the two halves of a pair use different angles.
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
    angles = torch.outer(positions.to(torch.float64), inv_freq.to(torch.float64))
    angles = angles.repeat_interleave(2, dim=-1)  # should be cat([angles, angles], -1)
    return angles.cos().float(), angles.sin().float()
