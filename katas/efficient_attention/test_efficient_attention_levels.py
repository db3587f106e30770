"""Tests for the levels beyond: BigBird-style block masks, and decoding with a rolling window.

Run: `nox -s efficient_attention` or `pytest katas/efficient_attention [--impl ...]`.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.cost import count_flops, held_bytes
from grading.oracles import attention_oracle
from grading.strategies import gqa_heads, randn, seeds
from grading.tolerance import assert_close
from katas.efficient_attention.support import (
    DTYPES,
    band_mask,
    rope_at_positions,
    token_mask,
)

n_blocks = st.integers(1, 24)

# ----------------------------------------------------------------------------------------------
# Block patterns


def test_block_patterns_worked_example(impl):
    local = impl.local_block_mask(4, 1)
    assert local.dtype == torch.bool and local.shape == (4, 4), (
        "masks are bool [n_blocks, n_blocks]"
    )
    assert local.int().tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]], (
        f"local_block_mask(4, 1) is the band |r - c| <= 1, got\n{local.int()}"
    )
    causal = impl.local_block_mask(4, 1, causal=True)
    assert causal.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]], (
        f"local_block_mask(4, 1, causal=True) keeps r - 1 <= c <= r, got\n{causal.int()}"
    )
    glob = impl.global_block_mask(4, 1)
    assert glob.int().tolist() == [[1, 1, 1, 1], [1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]], (
        "global_block_mask(4, 1): block 0 reads every block (row 0) and every block reads it "
        f"(column 0), got\n{glob.int()}"
    )


@given(n=n_blocks, radius=st.integers(0, 30), causal=st.booleans())
def test_local_block_mask_is_a_band(impl, n, radius, causal):
    got = impl.local_block_mask(n, radius, causal=causal)
    r, c = torch.arange(n)[:, None], torch.arange(n)[None, :]
    want = ((r - c).abs() <= radius) & ((c <= r) | (not causal))
    assert torch.equal(got, want), f"local_block_mask({n}, {radius}, causal={causal}):\n{got.int()}"


@given(n=n_blocks, data=st.data())
def test_global_block_mask_reads_and_is_read_by_all(impl, n, data):
    n_global = data.draw(st.integers(0, n), label="n_global")
    got = impl.global_block_mask(n, n_global)
    want = torch.tensor([[r < n_global or c < n_global for c in range(n)] for r in range(n)])
    assert torch.equal(got, want), f"global_block_mask({n}, {n_global}):\n{got.int()}"


@given(n=n_blocks, seed=seeds(), data=st.data())
def test_random_block_mask_is_seeded_and_exact(impl, n, seed, data):
    n_random = data.draw(st.integers(0, n), label="n_random")
    first = impl.random_block_mask(n, n_random, seed=seed)
    torch.rand(7)  # whatever the global random state does, the seed alone decides the mask
    again = impl.random_block_mask(n, n_random, seed=seed)
    assert first.dtype == torch.bool and first.shape == (n, n)
    assert torch.equal(first, again), "the same seed must give the same mask: use a torch.Generator"
    per_row = first.sum(dim=1)
    assert bool((per_row == n_random).all()), (
        f"every block row must read exactly n_random={n_random} distinct key blocks, "
        f"got {per_row.tolist()}"
    )


def test_random_block_mask_rows_draw_independently(impl):
    mask = impl.random_block_mask(64, 2, seed=0)
    columns_used = int(mask.any(dim=0).sum())
    assert columns_used > 8, (
        f"64 rows of 2 random blocks each read only {columns_used} distinct columns: every row "
        "seems to get the same picks; draw each row's blocks separately"
    )


@given(
    bs=st.sampled_from([2, 3, 4]),
    nb=st.integers(1, 8),
    radius=st.integers(0, 2),
    n_global=st.integers(0, 1),
    n_random=st.integers(0, 2),
    seed=seeds(),
    causal=st.booleans(),
)
def test_bigbird_pattern_through_block_sparse_attention(
    impl, bs, nb, radius, n_global, n_random, seed, causal
):
    N = nb * bs - (seed % bs)  # the last block may be partial
    block_mask = (
        impl.local_block_mask(nb, radius)
        | impl.global_block_mask(nb, n_global)
        | impl.random_block_mask(nb, min(n_random, nb), seed=seed)
    )
    note(f"N={N}, block_mask:\n{block_mask.int()}")
    q, k, v = (randn((1, 2, N, 8), seed=seed + s) for s in range(3))
    out = impl.block_sparse_attention(q, k, v, block_mask, bs, causal=causal)
    mask = token_mask(block_mask, bs, N)
    assert_close(
        out, attention_oracle(q, k, v, causal=causal, mask=mask), hint="local | global | random"
    )


def test_bigbird_pattern_costs_a_fraction_of_dense(impl, figures):
    nb, bs, D = 32, 16, 16
    block_mask = (
        impl.local_block_mask(nb, 1)
        | impl.global_block_mask(nb, 1)
        | impl.random_block_mask(nb, 1, seed=0)
    )
    q, k, v = (randn((1, 1, nb * bs, D), seed=s) for s in range(3))
    _, flops = count_flops(impl.block_sparse_attention, q, k, v, block_mask, bs)
    dense = 4 * (nb * bs) ** 2 * D
    kept = float(block_mask.float().mean())
    figures.record("BigBird FLOPs / dense", flops / dense, "", blocks_kept=round(kept, 3))
    assert flops <= 1.25 * kept * dense, (
        f"{flops} FLOPs for a pattern that keeps {kept:.0%} of the blocks; dense costs {dense}"
    )


# ----------------------------------------------------------------------------------------------
# Decoding with a rolling window


@st.composite
def decode_cases(draw):
    B = draw(st.integers(1, 2))
    H, Hkv = draw(gqa_heads(2, 2))
    D = draw(st.sampled_from([2, 8, 16]))
    window = draw(st.integers(1, 5))
    steps = draw(st.integers(1, 3 * window + 2))
    return B, H, Hkv, D, window, steps, draw(st.sampled_from(DTYPES)), draw(seeds())


def decode(impl, q, k, v, window, dtype):
    """Run sliding_window_decode_step over every position; return the outputs and the cache."""
    B, Hkv, N, D = k.shape
    cache = impl.RollingKVCache(window, B, Hkv, D, dtype=dtype)
    outs = [
        impl.sliding_window_decode_step(q[:, :, t], k[:, :, t], v[:, :, t], cache) for t in range(N)
    ]
    return torch.stack(outs, dim=2), cache


def test_rolling_cache_append_returns_the_window(impl):
    cache = impl.RollingKVCache(3, 1, 2, 4)
    sizes = []
    for t in range(5):
        keys, values = cache.append(
            torch.full((1, 2, 4), float(t)), torch.full((1, 2, 4), float(t))
        )
        sizes.append(keys.shape[2])
        assert keys.shape == values.shape
    assert sizes == [1, 2, 3, 3, 3], f"append returns min(seq_len, window) keys, got sizes {sizes}"
    assert held_bytes(cache) <= 2 * 2 * 3 * 4 * 4, (
        f"a float32 cache of window 3 for 2 kv heads of dim 4 holds {held_bytes(cache)} bytes "
        "after 5 tokens; keys and values need 2 x 2 x 3 x 4 x 4 B = 192: overwrite the oldest slot"
    )
    assert sorted(keys[0, 0, :, 0].tolist()) == [2.0, 3.0, 4.0], (
        "after 5 tokens in a window of 3 the cache must hold tokens 2, 3, 4, "
        f"got {keys[0, 0, :, 0].tolist()}"
    )


def test_rolling_cache_bad_arguments_raise_value_error(impl):
    with pytest.raises(ValueError):
        impl.RollingKVCache(0, 1, 1, 4)
    cache = impl.RollingKVCache(2, 1, 2, 4)
    with pytest.raises(ValueError):
        cache.append(torch.zeros(1, 3, 4), torch.zeros(1, 3, 4))  # 3 kv heads in a cache of 2
    with pytest.raises(ValueError):  # RoPE rotates pairs of dims: D must be even
        odd = torch.zeros(1, 2, 3)
        impl.sliding_window_decode_step(odd, odd, odd, impl.RollingKVCache(2, 1, 2, 3))


def test_decoding_rope_position_keeps_counting(impl):
    # Window 2, 5 steps: the buffer wraps twice; step 4 must see positions 3 and 4 only.
    q, k, v = (randn((1, 1, 5, 4), seed=s) for s in range(3))
    out, cache = decode(impl, q, k, v, 2, torch.float32)
    assert cache.seq_len == 5, (
        f"seq_len counts every token appended: expected 5, got {cache.seq_len}"
    )
    expected = attention_oracle(
        rope_at_positions(q), rope_at_positions(k), v, causal=True, mask=band_mask(5, 5, 2)
    )
    assert_close(out[:, :, 4], expected[:, :, 4], hint="RoPE positions are absolute, not slots")


@given(case=decode_cases())
def test_decoding_equals_sliding_window_attention(impl, case):
    B, H, Hkv, D, window, steps, dtype, seed = case
    q = randn((B, H, steps, D), seed=seed, dtype=dtype)
    k = randn((B, Hkv, steps, D), seed=seed + 1, dtype=dtype)
    v = randn((B, Hkv, steps, D), seed=seed + 2, dtype=dtype)
    out, _ = decode(impl, q, k, v, window, dtype)
    # The cache stores rotated keys in its dtype; the oracle rounds them the same way.
    k_rot = rope_at_positions(k).to(dtype)
    expected = attention_oracle(
        rope_at_positions(q), k_rot, v, causal=True, mask=band_mask(steps, steps, window)
    )
    assert_close(
        out,
        expected,
        hint="rotate q_t and k_t at the absolute position cache.seq_len (it keeps counting after "
        "the ring wraps), store the rotated key, and attend over the slots that hold a key.",
    )


@given(case=decode_cases())
def test_rolling_cache_memory_stops_growing_at_the_window(impl, case):
    B, H, Hkv, D, window, _, dtype, seed = case
    steps = 3 * window + 1
    q = randn((B, H, steps, D), seed=seed, dtype=dtype)
    k, v = (randn((B, Hkv, steps, D), seed=seed + s, dtype=dtype) for s in (1, 2))
    cache = impl.RollingKVCache(window, B, Hkv, D, dtype=dtype)
    held = []
    for t in range(steps):
        impl.sliding_window_decode_step(q[:, :, t], k[:, :, t], v[:, :, t], cache)
        held.append(held_bytes(cache))
    limit = 2 * B * Hkv * window * D * dtype.itemsize
    assert max(held) <= limit, (
        f"the cache held {max(held)} bytes; its window of keys and values is {limit} "
        f"(2 x B={B} x Hkv={Hkv} x window={window} x D={D} x {dtype.itemsize} B). Keep kv heads "
        "unexpanded and "
        "overwrite the oldest slot instead of growing."
    )
    assert held[window - 1] == held[-1], (
        f"the cache held {held[window - 1]} bytes after {window} steps and {held[-1]} after "
        f"{steps}: it must stop growing once the window is full"
    )
