"""Level 2 of the KV-cache kata: the paged cache and attention over its blocks."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.oracles import attention_oracle
from grading.strategies import gqa_heads, randn, seeds
from grading.tolerance import assert_close

HKV, D = 2, 4


@st.composite
def workloads(draw):
    """A pool and a random interleaving of appends to and frees of several sequences."""
    block_size = draw(st.sampled_from([1, 2, 3, 4, 7]), label="block_size")
    num_blocks = draw(st.integers(4, 24), label="num_blocks")
    ops = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 2 * block_size + 1)),
                st.tuples(st.just("free"), st.integers(0, 3), st.just(0)),
            ),
            min_size=1,
            max_size=25,
        ),
        label="operations (kind, sequence, tokens)",
    )
    return block_size, num_blocks, ops


@given(workload=workloads(), seed=seeds())
def test_interleaved_appends_gather_back_exactly(impl, workload, seed):
    block_size, num_blocks, ops = workload
    cache = impl.PagedKVCache(num_blocks, block_size, HKV, D)
    assert cache.num_blocks == num_blocks and cache.num_free_blocks == num_blocks
    written: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for step, (kind, seq, T) in enumerate(ops):
        note(f"step {step}: {kind} seq {seq} {T}")
        if kind == "free":
            if seq in written:
                cache.free(seq)
                del written[seq]
                assert cache.block_table(seq) == [] and cache.length(seq) == 0
        else:
            k = randn((HKV, T, D), seed=seed + 2 * step)
            v = randn((HKV, T, D), seed=seed + 2 * step + 1)
            length = sum(x.shape[1] for x, _ in written.get(seq, []))
            held = sum(len(cache.block_table(s)) for s in written)
            if (
                math.ceil((length + T) / block_size) - len(cache.block_table(seq))
                > num_blocks - held
            ):
                with pytest.raises(impl.OutOfBlocks):
                    cache.append(seq, k, v)
                assert cache.length(seq) == length, "a refused append must change nothing"
                continue
            cache.append(seq, k, v)
            written.setdefault(seq, []).append((k, v))
        used = sum(len(cache.block_table(s)) for s in written)
        assert cache.num_free_blocks + used == num_blocks, (
            f"free ({cache.num_free_blocks}) + used ({used}) blocks should equal the pool "
            f"({num_blocks}) after step {step}"
        )
        tables = [b for s in written for b in cache.block_table(s)]
        assert len(set(tables)) == len(tables), f"two sequences share a physical block: {tables}"
        for s, parts in written.items():
            want_k = torch.cat([k for k, _ in parts], dim=1)
            want_v = torch.cat([v for _, v in parts], dim=1)
            n = want_k.shape[1]
            assert cache.length(s) == n
            assert len(cache.block_table(s)) == math.ceil(n / block_size), (
                f"sequence {s} holds {n} tokens in blocks of {block_size}: it needs "
                f"ceil({n} / {block_size}) = {math.ceil(n / block_size)} blocks, it has "
                f"{cache.block_table(s)}"
            )
            k, v = cache.gather(s)
            assert torch.equal(k, want_k) and torch.equal(v, want_v), (
                f"sequence {s}: gather does not give back what was appended (block table "
                f"{cache.block_table(s)}, block_size {block_size}); token t lives in block "
                "table[t // block_size] at offset t % block_size"
            )
    for s in list(written):
        cache.free(s)
    assert cache.num_free_blocks == num_blocks, "freeing every sequence must return every block"


def test_running_out_of_blocks_is_a_clear_error(impl):
    cache = impl.PagedKVCache(3, 4, HKV, D)
    cache.append("a", torch.zeros(HKV, 9, D), torch.zeros(HKV, 9, D))  # 3 blocks
    with pytest.raises(impl.OutOfBlocks, match="block"):
        cache.append("b", torch.zeros(HKV, 1, D), torch.zeros(HKV, 1, D))
    assert cache.num_free_blocks == 0 and cache.length("b") == 0
    cache.free("a")
    cache.append("b", torch.zeros(HKV, 1, D), torch.zeros(HKV, 1, D))
    assert cache.num_free_blocks == 2


def test_paged_bad_input(impl):
    cache = impl.PagedKVCache(4, 2, HKV, D)
    with pytest.raises(ValueError):
        cache.append(0, torch.zeros(HKV + 1, 1, D), torch.zeros(HKV + 1, 1, D))
    with pytest.raises(ValueError):
        cache.append(0, torch.zeros(HKV, 1, D), torch.zeros(HKV, 2, D))
    with pytest.raises(ValueError):
        cache.gather("never appended")


@given(
    heads=gqa_heads(max_kv_heads=2),
    block_size=st.sampled_from([1, 3, 4]),
    lengths=st.lists(st.integers(1, 12), min_size=2, max_size=3),
    q_len=st.integers(1, 3),
    dtype=st.sampled_from([torch.float32, torch.float16]),
    seed=seeds(),
)
def test_paged_attention_is_independent_of_placement(
    impl, heads, block_size, lengths, q_len, dtype, seed
):
    """Sequences appended token by token, interleaved, land in scattered blocks."""
    H, Hkv = heads
    cache = impl.PagedKVCache(sum(lengths), block_size, Hkv, D, dtype=dtype)
    keys = [randn((Hkv, n, D), seed=seed + i, dtype=dtype) for i, n in enumerate(lengths)]
    values = [randn((Hkv, n, D), seed=seed + 50 + i, dtype=dtype) for i, n in enumerate(lengths)]
    for t in range(max(lengths)):
        for s, n in enumerate(lengths):
            if t < n:
                cache.append(s, keys[s][:, t : t + 1], values[s][:, t : t + 1])
    for s, n in enumerate(lengths):
        Tq = min(q_len, n)
        q = randn((H, Tq, D), seed=seed + 100 + s, dtype=dtype)
        out = impl.paged_attention(q, cache, s)
        want = attention_oracle(q[None], keys[s][None], values[s][None], causal=True)[0]
        assert out.dtype == dtype, f"output dtype should be q's ({dtype}), got {out.dtype}"
        assert_close(
            out,
            want,
            hint=f"sequence {s} sits in blocks {cache.block_table(s)}: attention must read them "
            "in block-table order and stop at the sequence's length",
        )
