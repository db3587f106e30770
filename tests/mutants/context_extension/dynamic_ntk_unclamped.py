"""Bug: dynamic NTK uses L = seq_len without clamping it to at least original_max_len.

Short inputs then get a base below the trained one (or a negative one, hence NaN), so a model
that worked on short prompts changes behaviour on them. Transformers clamps for this reason.
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
    ntk_scaled_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
    yarn_inv_freq,
)


def dynamic_ntk_inv_freq(head_dim, base, factor, seq_len, original_max_len):
    _check_head_dim(head_dim, minimum=4)
    _check_base(base)
    _check_factor(factor)
    _check_length("seq_len", seq_len, minimum=1)
    _check_length("original_max_len", original_max_len, minimum=1)
    scale = factor * seq_len / original_max_len - (factor - 1)  # no max(seq_len, L0)
    new_base = base * scale ** (head_dim / (head_dim - 2))
    return _inv_freq64(head_dim, new_base).to(torch.float32)
