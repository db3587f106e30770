"""Bug: apply_rope returns float32 for float16/bfloat16 input.

x * cos with float32 tables promotes to float32 silently; forgetting the cast back doubles the
memory of every query and key and breaks the next kernel that expects the model's dtype.
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
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return x * cos + rotated * sin  # promoted to float32, never cast back
