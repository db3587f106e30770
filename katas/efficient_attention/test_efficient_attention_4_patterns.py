"""Level 4: BigBird's block patterns, built as masks and fed to block-sparse attention.

Run: `pytest katas/efficient_attention -k 4_patterns [--impl ...]`.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.judge.cost import count_flops
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.oracles import attention_oracle
from grading.judge.strategies import randn, seeds
from grading.judge.tolerance import assert_close
from katas.efficient_attention.cases import token_mask

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


BAD_CALLS = [
    BadCall("local_block_mask(0, 1)", "no blocks", lambda impl: impl.local_block_mask(0, 1)),
    BadCall("local_block_mask(4, -1)", "a negative radius",
            lambda impl: impl.local_block_mask(4, -1)),
    BadCall("global_block_mask(4, 5)", "more global blocks than blocks",
            lambda impl: impl.global_block_mask(4, 5)),
    BadCall("global_block_mask(4, -1)", "a negative n_global",
            lambda impl: impl.global_block_mask(4, -1)),
    BadCall("global_block_mask(0, 0)", "a global mask of no blocks",
            lambda impl: impl.global_block_mask(0, 0)),
    BadCall("random_block_mask(0, 0, seed=0)", "a random mask of no blocks",
            lambda impl: impl.random_block_mask(0, 0, seed=0)),
    BadCall("random_block_mask(4, 5, seed=0)", "more random blocks per row than blocks",
            lambda impl: impl.random_block_mask(4, 5, seed=0)),
    BadCall("random_block_mask(4, -2, seed=0)", "a negative n_random",
            lambda impl: impl.random_block_mask(4, -2, seed=0)),
    BadCall("random_block_mask(-4, 1, seed=0)", "a negative n_blocks",
            lambda impl: impl.random_block_mask(-4, 1, seed=0)),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    "no blocks": "n_blocks",
    "a negative radius": "radius",
    "more global blocks than blocks": "n_global",
    "a negative n_global": "n_global",
    "more random blocks per row than blocks": "n_random",
    "a negative n_random": "n_random",
    "a negative n_blocks": "n_blocks",
    "a global mask of no blocks": "n_blocks",
    "a random mask of no blocks": "n_blocks",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_block_patterns_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])


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


def test_random_block_mask_picks_are_spread_over_the_row(impl):
    mask = impl.random_block_mask(64, 2, seed=1)
    picks = [row.nonzero().flatten().tolist() for row in mask]
    neighbours = sum((b - a) % 64 in (1, 63) for a, b in picks)
    assert neighbours <= 16, (
        f"{neighbours} of 64 rows read two neighbouring blocks (uniform draws give about 2): "
        "draw each block of a row uniformly (e.g. argsort of random numbers), not a random "
        "start and the blocks after it"
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_random_block_mask_picks_every_block_equally_often(impl, seed):
    # 512 rows of 64 picks among 512 blocks: uniform draws put each block in a row with
    # probability 1/8, so every column holds about 64 picks, and so does every offset c - r
    # from the diagonal. Pearson's statistic over the 512 counts is then about 450 (a standard
    # deviation about 30); 767 lies eight deviations above 511 and is never reached by chance.
    n, n_random = 512, 64
    mask = impl.random_block_mask(n, n_random, seed=seed)
    assert mask.shape == (n, n) and bool((mask.sum(dim=1) == n_random).all())
    rows, cols = mask.nonzero(as_tuple=True)
    expected = n * n_random / n
    for what, index in (("block", cols), ("offset from the diagonal", (cols - rows) % n)):
        counts = torch.bincount(index, minlength=n).double()
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        worst = int(counts.argmax()), int(counts.argmin())
        assert chi2 < 767, (
            f"random_block_mask({n}, {n_random}, seed={seed}): each {what} should be picked "
            f"about {expected:g} times, but the counts range from {int(counts.min())} (at "
            f"{worst[1]}) to {int(counts.max())} (at {worst[0]}): Pearson's chi-square {chi2:.0f} "
            f"over {n} counts, where uniform draws give about 450. Every set of n_random distinct "
            "blocks must be equally likely: e.g. the first n_random of a random permutation "
            "(torch.randperm, or argsort of torch.rand), not weighted or biased picks"
        )


@pytest.mark.parametrize("n, n_random", [(2, 1), (3, 1), (4, 1), (4, 2), (5, 2), (5, 4)])
def test_random_block_mask_small_rows_draw_every_set_equally_often(impl, n, n_random):
    # At small sizes every set of n_random distinct blocks can be counted: over 600 seeds
    # (600 x n rows) each of the C(n, n_random) sets is drawn about equally often. The bound,
    # df + 8 sqrt(2 df) + 16 for df = C(n, n_random) - 1 degrees of freedom, is far past any
    # chance result (below one in a million).
    sets = list(itertools.combinations(range(n), n_random))
    counts = dict.fromkeys(sets, 0)
    for seed in range(600):
        for row in impl.random_block_mask(n, n_random, seed=seed):
            counts[tuple(row.nonzero().flatten().tolist())] += 1
    expected = 600 * n / len(sets)
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    df = len(sets) - 1
    bound = df + 8 * math.sqrt(2 * df) + 16
    assert chi2 < bound, (
        f"random_block_mask({n}, {n_random}) over seeds 0..599: each set of {n_random} blocks "
        f"should be drawn about {expected:g} times, got {counts} (Pearson's chi-square "
        f"{chi2:.0f}, bound {bound:.0f}). Every set of n_random distinct blocks must be equally "
        "likely: the first n_random of a uniform permutation (torch.randperm, or argsort of "
        "torch.rand); a shuffle that only makes cycles (Sattolo's) never leaves a block in its "
        "own place, so block 0 is never first; moving a repeated pick to the next block favours "
        "neighbouring pairs"
    )


def gap_pattern(row: torch.Tensor) -> tuple[int, ...]:
    """The sorted gaps between a row's picks, around the row as a circle: a shift of the row
    (c -> c + s mod n) or its mirror image has the same pattern."""
    n, picks = row.numel(), row.nonzero().flatten().tolist()
    return tuple(
        sorted((b - a) % n or n for a, b in zip(picks, picks[1:] + picks[:1], strict=True))
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_block_mask_rows_are_not_shifts_of_one_draw(impl, seed):
    mask = impl.random_block_mask(64, 4, seed=seed)
    patterns = {gap_pattern(row) for row in mask}
    # 64 independent rows of 4 blocks out of 64 show about 63 patterns (never fewer than 55 in
    # thousands of seeds); rows that are shifts of one draw show 1.
    assert len(patterns) >= 32, (
        f"the 64 rows of random_block_mask(64, 4, seed={seed}) show only {len(patterns)} "
        "different patterns of gaps between their picks: the rows look like shifts (or mirror "
        "images) of one draw, e.g. (picks + r) % n_blocks for row r. Each row draws its own "
        "blocks, independently of the other rows (argsort of a fresh row of random numbers)."
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
