"""Bug: random_block_mask draws from PyTorch's global random state, ignoring `seed`.

torch.rand without a generator is the default; the mask then changes from call to call and
cannot be rebuilt from its seed.
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
    global_block_mask,
    linear_attention,
    linear_attention_step,
    local_block_mask,
    sliding_window_attention,
    sliding_window_decode_step,
)


def random_block_mask(n_blocks, n_random, *, seed):
    """bool (n_blocks, n_blocks): each block row sees n_random distinct key blocks, drawn
    uniformly from a torch.Generator seeded with `seed` (the same seed gives the same mask)."""
    _check_int("n_blocks", n_blocks, 1)
    _check_int("n_random", n_random, 0, n_blocks)
    gen = torch.Generator().manual_seed(seed)
    # BUG: changed from the reference below
    picks = torch.rand(n_blocks, n_blocks).argsort(dim=1)[:, :n_random]
    return torch.zeros(n_blocks, n_blocks, dtype=torch.bool).scatter(1, picks, True)
