"""Bug: NTK raises the base to base * factor, without the exponent d / (d - 2).

The exponent looks like a detail; without it the slowest pair is slowed by factor ** ((d-2)/d)
instead of exactly factor, so the extended range falls short of what was asked for.
"""

import torch

from reference.context_extension import (
    _check_base,
    _check_factor,
    _check_head_dim,
    _check_length,
    _inv_freq64,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    linear_scaled_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
    yarn_inv_freq,
)


def ntk_scaled_inv_freq(head_dim, base, factor):
    _check_head_dim(head_dim, minimum=4)
    _check_base(base)
    _check_factor(factor)
    return _inv_freq64(head_dim, base * factor).to(torch.float32)


def dynamic_ntk_inv_freq(head_dim, base, factor, seq_len, original_max_len):
    _check_head_dim(head_dim, minimum=4)
    _check_base(base)
    _check_factor(factor)
    _check_length("seq_len", seq_len, minimum=1)
    _check_length("original_max_len", original_max_len, minimum=1)
    length = max(seq_len, original_max_len)
    scale = factor * length / original_max_len - (factor - 1)
    return _inv_freq64(head_dim, base * scale).to(torch.float32)
