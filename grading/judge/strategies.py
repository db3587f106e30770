"""Hypothesis strategies the katas share: the sizes and dtypes that break code.

Strategies draw structure (sizes, dtypes, flags, a seed); tensors are then built from a seeded
generator with `randn`, so a failing example prints everything needed to replay it.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

SMALL_PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71]


def lengths(max_len: int = 64, *, block: int | None = None) -> st.SearchStrategy[int]:
    """Sequence lengths: 1, primes, and (given a block size) block ± 1, block, 2·block ± 1."""
    special = [1] + [p for p in SMALL_PRIMES if p <= max_len]
    if block is not None:
        special += [
            n for n in (block - 1, block, block + 1, 2 * block - 1, 2 * block + 1) if n >= 1
        ]
    special = sorted({n for n in special if n <= max_len})
    return st.one_of(st.sampled_from(special), st.integers(1, max_len))


def gqa_heads(max_kv_heads: int = 4, max_group: int = 4) -> st.SearchStrategy[tuple[int, int]]:
    """(n_heads, n_kv_heads) with n_heads a multiple of n_kv_heads: MHA, GQA and MQA."""
    return st.tuples(st.integers(1, max_kv_heads), st.integers(1, max_group)).map(
        lambda kv_group: (kv_group[0] * kv_group[1], kv_group[0])
    )


def seeds() -> st.SearchStrategy[int]:
    return st.integers(0, 2**31 - 1)


def randn(
    shape: tuple[int, ...],
    *,
    seed: int,
    dtype: torch.dtype = torch.float32,
    scale: float = 1.0,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """A normal tensor drawn on the CPU from `seed` (the same on every machine), then moved."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * scale
    return x.to(device=device, dtype=dtype)
