"""Strategies and helpers the KV-cache kata's tests share: dtypes, layouts and model setups."""

from __future__ import annotations

import functools

import torch
from hypothesis import strategies as st

from grading.judge.strategies import gqa_heads, lengths, seeds
from grading.model import make_model

# The dtypes a cache may hold in these tests (CPU-friendly, every width from 8 bytes to 2).
FLOAT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
# What a cache may also store: the 8-bit types of quantised caches.
STORAGE_DTYPES = FLOAT_DTYPES + [torch.float8_e4m3fn, torch.float8_e5m2, torch.int8, torch.uint8]
# Every dtype torch defines: wherever a function takes a dtype, it must take any of them.
EVERY_DTYPE = sorted(
    {value for value in vars(torch).values() if isinstance(value, torch.dtype)}, key=str
)


def strided_like(x: torch.Tensor, how: str) -> torch.Tensor:
    """x's values in a non-contiguous layout: "transposed" (the last two dims swapped in memory)
    or "gapped" (every other element of a buffer twice as wide). Same values, other strides."""
    if how == "transposed":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if how == "gapped":
        wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
        wide[..., ::2] = x
        return wide[..., ::2]
    raise ValueError(f"how: expected 'transposed' or 'gapped', got {how!r}")


@functools.lru_cache(maxsize=64)
def tiny_model(seed: int, n_heads: int, n_kv_heads: int, dtype: torch.dtype, max_seq_len=256):
    """The shared model, built once per recipe (building it is most of an example's time)."""
    return make_model(seed, dtype, n_heads=n_heads, n_kv_heads=n_kv_heads, max_seq_len=max_seq_len)


@st.composite
def model_setups(draw):
    """(model recipe, prompt): tiny_model(**recipe, dtype=...) builds the model in any dtype."""
    n_heads, n_kv_heads = draw(
        gqa_heads(max_kv_heads=2, max_group=4), label="(n_heads, n_kv_heads)"
    )
    recipe = dict(
        seed=draw(st.integers(0, 3), label="model seed"), n_heads=n_heads, n_kv_heads=n_kv_heads
    )
    B = draw(st.integers(1, 3), label="batch")
    T = draw(lengths(12), label="prompt length")
    prompt_seed = draw(seeds(), label="prompt seed")
    prompt = torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(prompt_seed))
    return recipe, prompt
