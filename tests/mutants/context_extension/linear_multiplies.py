"""Bug: position interpolation multiplies the frequencies by the factor instead of dividing.

"Scale by the factor" is ambiguous; multiplying squeezes the wavelengths, so positions turn
factor times faster and the model leaves its trained range even sooner.
"""

import torch

from reference.context_extension import (
    _check_base,
    _check_factor,
    _check_head_dim,
    _inv_freq64,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    dynamic_ntk_inv_freq,
    ntk_scaled_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
    yarn_inv_freq,
)


def linear_scaled_inv_freq(head_dim, base, factor):
    _check_head_dim(head_dim)
    _check_base(base)
    _check_factor(factor)
    return (_inv_freq64(head_dim, base) * factor).to(torch.float32)
