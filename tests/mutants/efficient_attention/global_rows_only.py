"""Bug: global blocks read every block, but the other blocks do not read them back.

Global tokens work both ways (BigBird's ITC): marking only the rows gives the global blocks a
view of everything but nobody a view of them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from reference.efficient_attention import (  # noqa: F401
    _LINEAR_CHUNK,
    _MAX_QUERY_CHUNK,
    RollingKVCache,
    _causal_linear,
    _check_attention_inputs,
    _check_int,
    _compute_dtype,
    _exclusive_cumsum,
    _expand_kv,
    _key_span,
    _phi,
    _rope,
    _softmax_or_zeros,
    _softmax_scale,
    block_sparse_attention,
    linear_attention,
    linear_attention_step,
    local_block_mask,
    random_block_mask,
    sliding_window_attention,
    sliding_window_decode_step,
)


def global_block_mask(n_blocks, n_global):
    """bool (n_blocks, n_blocks): the first n_global blocks see every block and are seen by all."""
    _check_int("n_blocks", n_blocks, 1)
    _check_int("n_global", n_global, 0, n_blocks)
    mask = torch.zeros(n_blocks, n_blocks, dtype=torch.bool)
    mask[:n_global, :] = True  # global queries read everything
    # BUG: a line of the reference was removed here
    return mask
