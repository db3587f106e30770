"""Level 3 of the KV-cache kata: the paged cache and attention over its blocks.

Run: `nox -s kv_cache -- -k "3_paged"` or `pytest katas/kv_cache -k "3_paged" [--impl ...]`.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.attention import AttentionCase, below_mask_powers, scores_below_any_mask
from grading.judge.cost import held_bytes, measure
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from grading.judge.oracles import attention_oracle, attention_scores
from grading.judge.strategies import gqa_heads, randn, seeds
from grading.judge.tolerance import assert_close
from katas.kv_cache.cases import FLOAT_DTYPES, STORAGE_DTYPES, strided_like

HKV, D = 2, 4


def pool_bytes(num_blocks, block_size, dtype, Hkv=HKV, head_dim=D) -> int:
    return 2 * num_blocks * Hkv * block_size * head_dim * dtype.itemsize


@st.composite
def workloads(draw):
    """A pool and a random interleaving of appends to and frees of several sequences (a freed
    id comes back as a new sequence), with the caller scribbling on the block tables it got."""
    block_size = draw(st.sampled_from([1, 2, 3, 4, 7]), label="block_size")
    num_blocks = draw(st.integers(4, 24), label="num_blocks")
    ops = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 2 * block_size + 1)),
                st.tuples(st.just("free"), st.integers(0, 3), st.just(0)),
                st.tuples(st.just("scribble"), st.integers(0, 3), st.just(0)),
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
        elif kind == "scribble":  # the list is the caller's: changing it changes no cache
            table = cache.block_table(seq)
            table.reverse()
            table.append(num_blocks)
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
        assert all(0 <= b < num_blocks for b in tables), (
            f"block tables {tables} name blocks outside the pool of {num_blocks}: does "
            "block_table hand out the cache's own list, which the caller then changed? Return a "
            "new list"
        )
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


@given(
    block_size=st.sampled_from([1, 3, 4]),
    first=st.integers(1, 12),
    second=st.one_of(st.none(), st.integers(1, 12)),
    other=st.integers(1, 9),
    seed=seeds(),
)
@example(block_size=4, first=6, second=None, other=5, seed=0)
def test_a_freed_id_starts_afresh(impl, block_size, first, second, other, seed):
    """Free a sequence, then append to its id again (as often as not to the same length): the
    id is a new sequence, and gather and paged_attention read only what came after the free."""
    second = first if second is None else second  # None: the new sequence as long as the old
    note(f"the id is reused for {second} tokens after {first} were freed")
    blocks = math.ceil(first / block_size) + math.ceil(other / block_size) + 1
    cache = impl.PagedKVCache(blocks + math.ceil(second / block_size), block_size, HKV, D)
    old_k, old_v = randn((HKV, first, D), seed=seed), randn((HKV, first, D), seed=seed + 1)
    k, v = randn((HKV, second, D), seed=seed + 2), randn((HKV, second, D), seed=seed + 3)
    kept_k, kept_v = randn((HKV, other, D), seed=seed + 4), randn((HKV, other, D), seed=seed + 5)
    q = randn((2 * HKV, 1, D), seed=seed + 6)
    cache.append("reused", old_k, old_v)
    cache.append("kept", kept_k, kept_v)
    cache.gather("reused")
    impl.paged_attention(q, cache, "reused")
    cache.free("reused")
    cache.append("reused", k, v)
    assert cache.length("reused") == second and len(cache.block_table("reused")) == math.ceil(
        second / block_size
    ), (
        f"after free and {second} new tokens, the reused id holds length "
        f"{cache.length('reused')} in blocks {cache.block_table('reused')}: free must forget the "
        "sequence, and the next append start a new one"
    )
    got_k, got_v = cache.gather("reused")
    assert torch.equal(got_k, k) and torch.equal(got_v, v), (
        f"gather of the reused id does not give back the {second} tokens appended after the "
        "free: something of the freed sequence was kept (a table, a length, or a result "
        "remembered under the id)"
    )
    want = attention_oracle(q[None], k[None], v[None], causal=True)[0]
    assert_close(
        impl.paged_attention(q, cache, "reused"),
        want,
        hint="paged_attention of the reused id must read its new keys: a result or a gathered "
        "copy kept from before the free is stale",
    )
    got_k, got_v = cache.gather("kept")
    assert torch.equal(got_k, kept_k) and torch.equal(got_v, kept_v), (
        "freeing and reusing one id changed another sequence"
    )


def test_pool_holds_the_tokens_where_the_block_table_says(impl):
    """k_pool[table[t // block_size], :, t % block_size] is token t's key; nothing else is kept."""
    num_blocks, bs = 9, 3
    cache = impl.PagedKVCache(num_blocks, bs, HKV, D, dtype=torch.float64)
    expected = pool_bytes(num_blocks, bs, torch.float64)
    assert held_bytes(cache) == expected, (
        f"a fresh PagedKVCache should hold its pool, {expected} bytes (k_pool and v_pool of "
        f"shape [{num_blocks}, {HKV}, {bs}, {D}]), it holds {held_bytes(cache)}"
    )
    given_kv = {}
    ops = [("a", 2), ("b", 4), ("c", 1), ("d", 3), ("b", 0), ("c", 5), ("a", 3), ("d", 1)]
    for step, (seq, T) in enumerate(ops):  # T = 0: free the sequence, its blocks to be reused
        if T == 0:
            cache.free(seq)
            del given_kv[seq]
            continue
        k = randn((HKV, T, D), seed=step, dtype=torch.float64)
        v = randn((HKV, T, D), seed=50 + step, dtype=torch.float64)
        cache.append(seq, k, v)
        given_kv.setdefault(seq, []).append((k.clone(), v.clone()))
        caller_changes(impl.PagedKVCache.append, k, v)
        k.fill_(float("nan"))  # the caller reuses its buffers
        v.fill_(float("nan"))
    assert held_bytes(cache) == expected, (
        f"after appending, the cache holds {held_bytes(cache)} bytes instead of its pool's "
        f"{expected}: it keeps tensors besides k_pool and v_pool (the caller's, or per-sequence "
        "copies). Write every token into the pool"
    )
    for seq, parts in given_kv.items():
        want_k = torch.cat([k for k, _ in parts], dim=1)
        want_v = torch.cat([v for _, v in parts], dim=1)
        table = cache.block_table(seq)
        for t in range(want_k.shape[1]):
            block, offset = table[t // bs], t % bs
            assert torch.equal(cache.k_pool[block, :, offset], want_k[:, t]) and torch.equal(
                cache.v_pool[block, :, offset], want_v[:, t]
            ), (
                f"sequence {seq!r}, token {t}: k_pool[{block}, :, {offset}] (block table {table}, "
                f"block_size {bs}) does not hold its key and value: write token t to block "
                "table[t // block_size] at offset t % block_size of the pool"
            )
        k, v = cache.gather(seq)
        assert torch.equal(k, want_k) and torch.equal(v, want_v), (
            f"sequence {seq!r}: after the caller overwrote the tensors it appended, gather "
            "changed: copy into the pool, don't keep references"
        )


def test_refused_append_changes_nothing_and_leaks_nothing(impl):
    """An append that needs 3 blocks when 2 are free raises OutOfBlocks and changes nothing."""
    bs = 4
    cache = impl.PagedKVCache(5, bs, HKV, D)
    a_k, a_v = randn((HKV, 12, D), seed=1), randn((HKV, 12, D), seed=2)
    cache.append("a", a_k, a_v)  # 3 full blocks; 2 free
    table = cache.block_table("a")

    def unchanged(what: str) -> None:
        assert cache.num_free_blocks == 2, (
            f"{what}: {cache.num_free_blocks} blocks free, expected the 2 free before it: work "
            "out how many blocks the append needs and refuse before taking any"
        )
        assert cache.block_table("a") == table and cache.length("a") == 12, (
            f"{what}: sequence 'a' changed (table {cache.block_table('a')}, length "
            f"{cache.length('a')}); expected {table} and 12"
        )
        k, v = cache.gather("a")
        assert torch.equal(k, a_k) and torch.equal(v, a_v), f"{what}: 'a' no longer gathers back"

    nine = randn((HKV, 9, D), seed=3)
    with pytest.raises(impl.OutOfBlocks):
        cache.append("a", nine, nine)  # 12 + 9 tokens need 6 blocks: 3 more, 2 free
    unchanged("a refused append of 9 tokens to 'a'")
    with pytest.raises(impl.OutOfBlocks):
        cache.append("b", nine, nine)  # a new sequence needing 3 blocks, 2 free
    unchanged("a refused first append of 'b'")
    assert cache.block_table("b") == [] and cache.length("b") == 0, (
        "a refused first append must not create the sequence"
    )
    with pytest.raises(ValueError, match="seq_id"):
        cache.gather("b")
    eight = randn((HKV, 8, D), seed=4)
    cache.append("b", eight, -eight)  # exactly the 2 free blocks: allowed
    assert cache.num_free_blocks == 0, "an append that needs exactly the free blocks succeeds"
    k, v = cache.gather("b")
    assert torch.equal(k, eight) and torch.equal(v, -eight)
    cache.free("a")
    cache.free("b")
    assert cache.num_free_blocks == 5, (
        f"after freeing everything {cache.num_free_blocks} of 5 blocks are free: a block leaked"
    )


def test_append_of_bad_input_leaves_the_pool_alone(impl):
    """A ValueError comes before anything changes: an append whose v is of the wrong dtype (or
    shape) writes no key into the pool first, and the sequence keeps its table and length."""
    cache = impl.PagedKVCache(4, 4, HKV, D)
    k, v = randn((HKV, 5, D), seed=5), randn((HKV, 5, D), seed=6)
    cache.append("a", k, v)
    k_pool, v_pool, table = cache.k_pool.clone(), cache.v_pool.clone(), cache.block_table("a")
    more = randn((HKV, 2, D), seed=7)
    for what, bad_v in (
        ("v in float64", more.double()),
        ("v of the wrong head_dim", randn((HKV, 2, D + 1), seed=8)),
    ):
        with pytest.raises(ValueError):
            cache.append("a", more, bad_v)
        changed = int((cache.k_pool != k_pool).any(dim=(1, 3)).sum())
        changed += int((cache.v_pool != v_pool).any(dim=(1, 3)).sum())
        assert changed == 0 and cache.block_table("a") == table and cache.length("a") == 5, (
            f"an append refused for {what} changed {changed} token slots of k_pool / v_pool "
            f"(table {cache.block_table('a')}, length {cache.length('a')}; were {table}, 5): "
            "check every argument before writing anything"
        )


def test_refused_append_leaves_the_pool_alone(impl):
    """A refused append writes nothing, not even the tokens that would fit in the sequence's
    partly filled last block."""
    cache = impl.PagedKVCache(4, 4, HKV, D)
    k, v = randn((HKV, 5, D), seed=5), randn((HKV, 5, D), seed=6)
    cache.append("a", k, v)  # 2 blocks, the second holding 1 token of 4; 2 free
    k_pool, v_pool = cache.k_pool.clone(), cache.v_pool.clone()
    more = randn((HKV, 12, D), seed=7)
    with pytest.raises(impl.OutOfBlocks):
        cache.append("a", more, more)  # 17 tokens need 5 blocks: 3 more, 2 free
    changed = int((cache.k_pool != k_pool).any(dim=(1, 3)).sum())
    changed += int((cache.v_pool != v_pool).any(dim=(1, 3)).sum())
    assert changed == 0, (
        f"a refused append of 12 tokens to a sequence of 5 (blocks of 4, 2 free) changed "
        f"{changed} token slots of k_pool / v_pool: when the free blocks are too few nothing "
        "changes, so check before writing anything (not even into the last, partly filled block)"
    )


def test_gather_reads_the_pool(impl):
    """gather returns what the pool holds at the sequence's blocks: a change made to k_pool or
    v_pool there shows in the next gather (the cache holds no tensor but its pool)."""
    bs = 3
    cache = impl.PagedKVCache(6, bs, HKV, D)
    k, v = randn((HKV, 7, D), seed=8), randn((HKV, 7, D), seed=9)
    cache.append("a", k, v)
    table = cache.block_table("a")
    cache.k_pool[table[1], :, 2] = 100.0  # token 5
    cache.v_pool[table[2], :, 0] = -100.0  # token 6
    got_k, got_v = cache.gather("a")
    want_k, want_v = k.clone(), v.clone()
    want_k[:, 5], want_v[:, 6] = 100.0, -100.0
    assert torch.equal(got_k, want_k) and torch.equal(got_v, want_v), (
        "after k_pool[table[1], :, 2] and v_pool[table[2], :, 0] were overwritten (tokens 5 and "
        "6 of 'a', blocks of 3), gather did not show the change: gather must read the tokens "
        "from k_pool / v_pool at the sequence's blocks, not from a copy kept elsewhere"
    )


def test_running_out_of_blocks_is_a_clear_error(impl):
    assert issubclass(impl.OutOfBlocks, RuntimeError)
    cache = impl.PagedKVCache(3, 4, HKV, D)
    cache.append("a", torch.zeros(HKV, 9, D), torch.zeros(HKV, 9, D))  # 3 blocks
    with pytest.raises(impl.OutOfBlocks, match="block"):
        cache.append("b", torch.zeros(HKV, 1, D), torch.zeros(HKV, 1, D))
    assert cache.num_free_blocks == 0 and cache.length("b") == 0
    cache.append("a", torch.zeros(HKV, 3, D), torch.zeros(HKV, 3, D))  # fills block 3: no new one
    assert cache.length("a") == 12 and cache.num_free_blocks == 0
    cache.free("a")
    cache.append("b", torch.zeros(HKV, 1, D), torch.zeros(HKV, 1, D))
    assert cache.num_free_blocks == 2


@pytest.mark.parametrize("dtype", STORAGE_DTYPES, ids=str)
def test_paged_cache_in_every_dtype(impl, dtype):
    num_blocks, bs = 6, 2
    cache = impl.PagedKVCache(num_blocks, bs, HKV, D, dtype=dtype)
    assert held_bytes(cache) == pool_bytes(num_blocks, bs, dtype), (
        f"a {dtype} pool of {num_blocks} blocks holds {pool_bytes(num_blocks, bs, dtype)} bytes; "
        f"this one holds {held_bytes(cache)}: allocate k_pool and v_pool in `dtype`"
    )
    k = randn((HKV, 5, D), seed=1, scale=100.0).to(dtype)
    v = randn((HKV, 5, D), seed=2, scale=0.5 if dtype.is_floating_point else 20.0).to(dtype)
    cache.append(0, k[:, :3], v[:, :3])
    cache.append(1, k, v)
    cache.append(0, k[:, 3:], v[:, 3:])
    for seq in (0, 1):
        got_k, got_v = cache.gather(seq)
        assert got_k.dtype == dtype and torch.equal(got_k, k) and torch.equal(got_v, v), (
            f"sequence {seq}: gather should give back exactly the {dtype} keys and values "
            f"appended, got {got_k.dtype}"
        )


@pytest.mark.parametrize("k_layout, v_layout", [("transposed", "gapped"), ("gapped", "transposed")])
def test_paged_append_accepts_any_layout(impl, k_layout, v_layout):
    cache = impl.PagedKVCache(8, 3, HKV, D)
    k, v = randn((HKV, 7, D), seed=1), randn((HKV, 7, D), seed=2)
    cache.append("s", strided_like(k[:, :4], k_layout), strided_like(v[:, :4], v_layout))
    cache.append("s", strided_like(k[:, 4:], k_layout), strided_like(v[:, 4:], v_layout))
    got_k, got_v = cache.gather("s")
    assert torch.equal(got_k, k) and torch.equal(got_v, v), (
        f"k {k_layout} and v {v_layout} (different strides) were not stored as given: copy "
        "each by its own strides"
    )


def test_long_sequences_in_small_blocks(impl):
    """3,000 tokens in blocks of 16, interleaved with a second sequence; attention over all."""
    bs, Hkv, H, d = 16, 1, 2, 8
    dtype = torch.float16
    n = [3000, 700]
    cache = impl.PagedKVCache(sum(math.ceil(x / bs) for x in n), bs, Hkv, d, dtype=dtype)
    keys = [randn((Hkv, x, d), seed=i, dtype=dtype) for i, x in enumerate(n)]
    values = [randn((Hkv, x, d), seed=10 + i, dtype=dtype) for i, x in enumerate(n)]
    for start in range(0, max(n), 100):
        for s, x in enumerate(n):
            if start < x:
                cache.append(s, keys[s][:, start : start + 100], values[s][:, start : start + 100])
    assert cache.num_free_blocks == 0
    for s in range(2):
        k, v = cache.gather(s)
        assert torch.equal(k, keys[s]) and torch.equal(v, values[s]), (
            f"sequence {s} of {n[s]} tokens does not gather back exactly"
        )
        q = randn((H, 3, d), seed=20 + s, dtype=dtype)
        out = impl.paged_attention(q, cache, s)
        want = attention_oracle(q[None], keys[s][None], values[s][None], causal=True)[0]
        assert_close(
            out,
            want,
            hint=f"attention over {n[s]} float16 keys: accumulate the scores, the softmax and the "
            "weighted sum in float32, not in float16",
        )


@given(
    heads=gqa_heads(max_kv_heads=2),
    block_size=st.sampled_from([1, 3, 4]),
    lengths=st.lists(st.integers(1, 12), min_size=2, max_size=3),
    q_len=st.integers(1, 12),
    dtype=st.sampled_from(FLOAT_DTYPES),
    seed=seeds(),
)
@example(heads=(4, 2), block_size=4, lengths=[9, 5], q_len=12, dtype=torch.float32, seed=0)
@example(heads=(3, 1), block_size=1, lengths=[1, 2], q_len=1, dtype=torch.bfloat16, seed=1)
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
            "in block-table order, stop at the sequence's length, align the causal mask "
            "bottom-right, and give query head h the kv head h // (H // n_kv_heads)",
        )


def test_paged_attention_answers_follow_their_inputs(impl):
    """Every call computes from what it is given: called again on fresh queries, on the same
    tensors, after the queries change in place (`measure`), and after the pool changes under
    the same cache."""
    cache = impl.PagedKVCache(8, 4, HKV, D)
    k, v = randn((HKV, 13, D), seed=21), randn((HKV, 13, D), seed=22)
    cache.append("a", k, v)
    q = randn((4, 5, D), seed=23)
    out, _ = measure(impl.paged_attention, q, cache, "a")
    want = attention_oracle(q[None], k[None], v[None], causal=True)[0]
    assert_close(out, want, hint="paged attention of 13 keys in blocks of 4, 5 queries")
    block = cache.block_table("a")[1]
    cache.k_pool[block] *= -2.0  # tokens 4..7, changed in the pool itself
    cache.v_pool[block] += 1.0
    caller_changes(impl.PagedKVCache.append, k, v)  # the test's own copies, to compare with
    k[:, 4:8] *= -2.0
    v[:, 4:8] += 1.0
    want = attention_oracle(q[None], k[None], v[None], causal=True)[0]
    assert_close(
        impl.paged_attention(q, cache, "a"),
        want,
        name="after k_pool and v_pool changed in place",
        hint="a memory of earlier calls (keyed on the queries, the cache or the pool's identity) "
        "answers with stale numbers: read the keys and values from the pool on every call",
    )


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_paged_attention_extreme_scores(impl, dtype):
    """Scores in the hundreds: exp() overflows unless the row maximum is subtracted first, and
    rounding the scores to a 16-bit type moves the result far from the oracle.

    A float32 computation rounds scores of size S by about S x 6e-8 whatever it does, so for
    float32 the tolerance's atol is relative to max |score| x max |v| instead of max |output|.
    """
    cache = impl.PagedKVCache(8, 4, HKV, D, dtype=dtype)
    k = randn((HKV, 29, D), seed=1, dtype=dtype, scale=12.0)
    v = randn((HKV, 29, D), seed=2, dtype=dtype)
    cache.append(0, k, v)
    q = randn((2 * HKV, 5, D), seed=3, dtype=dtype, scale=12.0)
    out = impl.paged_attention(q, cache, 0)
    want = attention_oracle(q[None], k[None], v[None], causal=True)[0]
    scale = None
    if dtype == torch.float32:
        scores = attention_scores(q[None], k[None], causal=True)
        scale = float(scores[scores.isfinite()].abs().max()) * float(v.abs().max())
    assert_close(
        out,
        want,
        scale=scale,
        hint="with large scores: subtract each row's maximum before exp (or use torch.softmax), "
        "and compute the scores and softmax in float32 even for 16-bit inputs",
    )


@given(
    heads=gqa_heads(2, 3),
    n=st.integers(1, 13),
    block=st.integers(1, 5),
    dtype=st.sampled_from(FLOAT_DTYPES),
    seed=seeds(),
    data=st.data(),
)
def test_paged_attention_with_every_score_below_any_mask_constant(
    impl, heads, n, block, dtype, seed, data
):
    """Every visible score is about -2**18 or far lower
    (grading.judge.attention.scores_below_any_mask): a future key given a finite score (-1e4,
    -1e30, the dtype's finfo.min) instead of -inf wins the softmax."""
    H, Hkv = heads
    Tq = data.draw(st.integers(1, n), label="Tq")
    case = AttentionCase(H=H, Hkv=Hkv, Nq=Tq, Nk=n, D=16, dtype=dtype, seed=seed)
    power = data.draw(st.sampled_from(below_mask_powers(dtype)), label="power")
    q, k, v = scores_below_any_mask(case, power)  # (1, H, Tq, 16), (1, Hkv, n, 16) twice
    cache = impl.PagedKVCache(-(-n // block) + 1, block, Hkv, 16, dtype=dtype)
    cache.append(0, k[0], v[0])
    out = impl.paged_attention(q[0], cache, 0)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=True)[0],
        hint=f"every visible score is about -2**{2 * power - 2}, below any finite mask "
        "constant: the keys after a query's position get -inf (not -1e4, -1e30 or the dtype's "
        "finfo.min), and a running max starts at -inf",
    )


def test_paged_attention_accepts_any_layout(impl):
    cache = impl.PagedKVCache(6, 2, HKV, D)
    k, v = randn((HKV, 7, D), seed=1), randn((HKV, 7, D), seed=2)
    cache.append(0, k, v)
    q = randn((2 * HKV, 3, D), seed=3)
    out = impl.paged_attention(strided_like(q, "transposed"), cache, 0)
    assert_close(out, attention_oracle(q[None], k[None], v[None], causal=True)[0])


# ----------------------------------------------------------------------------------------------
# the error contract


def _cache(impl):
    """A pool of 4 blocks of 2 tokens (2 kv heads of 4) holding sequence 0, 3 tokens long."""
    cache = impl.PagedKVCache(4, 2, HKV, D)
    cache.append(0, torch.zeros(HKV, 3, D), torch.zeros(HKV, 3, D))
    return cache


def _freed(impl):
    """The same pool after sequence 0 was freed."""
    cache = _cache(impl)
    cache.free(0)
    return cache


def _kv(Hkv=HKV, T=1, d=D, dtype=torch.float32):
    return torch.zeros(Hkv, T, d, dtype=dtype)


def _bad(call, why, run, names):
    return pytest.param(BadCall(call, why, run), rf"\b{names}\b", id=why.replace(" ", "-"))


POOL_ARGS = dict(num_blocks=4, block_size=2, n_kv_heads=HKV, head_dim=D)


def _pool_with(**changes):
    args = {**POOL_ARGS, **changes}
    return lambda impl: impl.PagedKVCache(*args.values())


BAD_CALLS = [
    _bad("PagedKVCache(0, 2, 2, 4)", "an empty pool", _pool_with(num_blocks=0), "num_blocks"),
    _bad("PagedKVCache(4, 0, 2, 4)", "blocks of no tokens", _pool_with(block_size=0), "block_size"),
    _bad(
        "PagedKVCache(4, 2.5, 2, 4)", "a float block_size", _pool_with(block_size=2.5), "block_size"
    ),
    _bad("PagedKVCache(4, 2, 0, 4)", "no kv heads", _pool_with(n_kv_heads=0), "n_kv_heads"),
    _bad("PagedKVCache(4, 2, 2, -4)", "a negative head_dim", _pool_with(head_dim=-4), "head_dim"),
    _bad(
        "PagedKVCache(4, 2, 2, 4, dtype='float16')",
        "a dtype given as a string",
        lambda impl: impl.PagedKVCache(4, 2, HKV, D, dtype="float16"),
        "dtype",
    ),
    _bad(
        "append(0, k of shape [3, 1, 4], v)",
        "k with the wrong number of kv heads",
        lambda impl: _cache(impl).append(0, _kv(Hkv=3), _kv()),
        "k",
    ),
    _bad(
        "append(0, k, v of shape [2, 1, 5])",
        "v with the wrong head_dim",
        lambda impl: _cache(impl).append(0, _kv(), _kv(d=5)),
        "v",
    ),
    _bad(
        "append(0, k of shape [1, 2, 1, 4], v)",
        "k with a batch dimension",
        lambda impl: _cache(impl).append(0, _kv()[None], _kv()),
        "k",
    ),
    _bad(
        "append(0, k of 1 token, v of 2 tokens)",
        "k and v of different lengths",
        lambda impl: _cache(impl).append(0, _kv(), _kv(T=2)),
        "[kv]",  # either may be named
    ),
    _bad(
        "append(0, k of 0 tokens, v of 0 tokens)",
        "no new token",
        lambda impl: _cache(impl).append(0, _kv(T=0), _kv(T=0)),
        "k",
    ),
    _bad(
        "append(0, k in float16, v) to a float32 pool",
        "k in another dtype",
        lambda impl: _cache(impl).append(0, _kv(dtype=torch.float16), _kv()),
        "k",
    ),
    _bad(
        "append(0, k, v in bfloat16) to a float32 pool",
        "v in another dtype",
        lambda impl: _cache(impl).append(0, _kv(), _kv(dtype=torch.bfloat16)),
        "v",
    ),
    _bad(
        "gather('never appended')",
        "gather of an unknown sequence",
        lambda impl: _cache(impl).gather("never appended"),
        "seq_id",
    ),
    _bad(
        "free('never appended')",
        "free of an unknown sequence",
        lambda impl: _cache(impl).free("never appended"),
        "seq_id",
    ),
    _bad(
        "free(0) after free(0)",
        "free of a freed sequence",
        lambda impl: _freed(impl).free(0),
        "seq_id",
    ),
    _bad(
        "gather(0) after free(0)",
        "gather of a freed sequence",
        lambda impl: _freed(impl).gather(0),
        "seq_id",
    ),
    _bad(
        "paged_attention(q, cache, 'never appended')",
        "attention over an unknown sequence",
        lambda impl: impl.paged_attention(torch.zeros(HKV, 1, D), _cache(impl), "never appended"),
        "seq_id",
    ),
    _bad(
        "paged_attention(q of shape [3, 1, 4], cache, 0) with 2 kv heads",
        "H not a multiple of n_kv_heads",
        lambda impl: impl.paged_attention(torch.zeros(3, 1, D), _cache(impl), 0),
        "q",
    ),
    _bad(
        "paged_attention(q of shape [2, 1, 5], cache, 0)",
        "q with the wrong head_dim",
        lambda impl: impl.paged_attention(torch.zeros(HKV, 1, D + 1), _cache(impl), 0),
        "q",
    ),
    _bad(
        "paged_attention(q of shape [2, 4, 4], cache, 0) with 3 tokens cached",
        "more queries than keys",
        lambda impl: impl.paged_attention(torch.zeros(HKV, 4, D), _cache(impl), 0),
        "q",
    ),
    _bad(
        "paged_attention(q of shape [2, 0, 4], cache, 0)",
        "no query",
        lambda impl: impl.paged_attention(torch.zeros(HKV, 0, D), _cache(impl), 0),
        "q",
    ),
    _bad(
        "paged_attention(q of shape [1, 2, 1, 4], cache, 0)",
        "q with a batch dimension",
        lambda impl: impl.paged_attention(torch.zeros(1, HKV, 1, D), _cache(impl), 0),
        "q",
    ),
    _bad(
        "paged_attention(q in float64, float32 cache, 0)",
        "q in another dtype than the cache",
        lambda impl: impl.paged_attention(
            torch.zeros(HKV, 1, D, dtype=torch.float64), _cache(impl), 0
        ),
        "q",
    ),
]


@pytest.mark.parametrize("bad, names", BAD_CALLS)
def test_paged_bad_input_raises_value_error(impl, bad, names):
    assert_value_error(bad, impl, match=names)
