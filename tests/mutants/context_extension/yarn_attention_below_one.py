"""Bug: YaRN's attention factor misses the factor <= 1 case: 0.1 * ln(factor) + 1 always.

For a factor below 1 this shrinks the logits below 1x, although nothing was stretched;
Transformers returns 1.0 there.
"""

import math

import torch

from reference.context_extension import (
    _check_base,
    _check_factor,
    _check_head_dim,
    _check_length,
    _correction_pair,
    _inv_freq64,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    dynamic_ntk_inv_freq,
    linear_scaled_inv_freq,
    ntk_scaled_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
)


def yarn_inv_freq(head_dim, base, factor, original_max_len, beta_fast=32.0, beta_slow=1.0):
    _check_head_dim(head_dim)
    _check_base(base)
    _check_factor(factor)
    _check_length("original_max_len", original_max_len, minimum=1)
    low = max(math.floor(_correction_pair(beta_fast, head_dim, base, original_max_len)), 0)
    high = min(
        math.ceil(_correction_pair(beta_slow, head_dim, base, original_max_len)), head_dim - 1
    )
    if low == high:
        high += 0.001
    pair = torch.arange(head_dim // 2, dtype=torch.float64)
    ramp = ((pair - low) / (high - low)).clamp(0, 1)
    original = _inv_freq64(head_dim, base)
    inv_freq = original * (1 - ramp) + (original / factor) * ramp
    attention_factor = 0.1 * math.log(factor) + 1.0
    return inv_freq.to(torch.float32), attention_factor
