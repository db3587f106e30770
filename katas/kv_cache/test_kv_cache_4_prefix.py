"""Level 4 of the KV-cache kata: automatic prefix caching.

Run: `nox -s kv_cache -- -k "4_prefix"` or `pytest katas/kv_cache -k "4_prefix" [--impl ...]`.

The keys and values of token p are made from the token ids up to p (`prefix_kv`), as a model's
are: sequences with equal prefixes have equal keys and values there, and a block shared by
mistake after another prefix shows as wrong numbers. `PrefixModel` (cases.py) follows the
README's rules in plain Python and says which block every call must hand out.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.cost import held_bytes, measure
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from katas.kv_cache.cases import FLOAT_DTYPES, PrefixModel, prefix_kv

HKV, D = 2, 4
VOCAB = 3  # token ids 0..2: equal blocks after different prefixes turn up everywhere
RULES = (
    "the rules (README, level 4): start takes the cached blocks match finds; append takes new "
    "blocks from the FRONT of the free queue; free puts each block no sequence holds any more at "
    "the BACK, the sequence's last block first"
)


def kv(tokens, dtype=torch.float32):
    return prefix_kv(tokens, HKV, D, dtype)


def prefill(cache, seq, prompt, dtype=torch.float32) -> int:
    """start `seq` with `prompt`, then append the tokens start did not find; returns what start
    returned."""
    n = cache.start(seq, list(prompt))
    fill(cache, seq, prompt, n, dtype)
    return n


def fill(cache, seq, prompt, n, dtype=torch.float32, split=None) -> None:
    """Append prompt[n:] to `seq`, in two pieces when `split` falls inside it."""
    k, v = kv(prompt, dtype)
    cuts = [n, len(prompt)]
    if split is not None and n < split < len(prompt):
        cuts = [n, split, len(prompt)]
    for a, b in itertools.pairwise(cuts):
        cache.append(seq, list(prompt[a:b]), k[:, a:b], v[:, a:b])


def decode(cache, seq, ids, new, dtype=torch.float32) -> None:
    """Append the tokens `new` to `seq`, whose ids so far are `ids`."""
    k, v = kv(ids + new, dtype)
    cache.append(seq, list(new), k[:, len(ids) :], v[:, len(ids) :])


def refs(cache) -> list[int]:
    return [cache.ref_count(b) for b in range(cache.num_blocks)]


def rows(cache, blocks):
    """The pool's rows of `blocks`, copied."""
    index = torch.tensor(sorted(blocks), dtype=torch.long)
    return cache.k_pool[index].clone(), cache.v_pool[index].clone()


def changed_blocks(cache, blocks, before) -> list[int]:
    """Which of `blocks` (as `rows` took them in `before`) hold other bits now."""
    k, v = rows(cache, blocks)
    differ = (k != before[0]).flatten(1).any(1) | (v != before[1]).flatten(1).any(1)
    return [b for b, d in zip(sorted(blocks), differ.tolist(), strict=True) if d]


def assert_gathers(cache, seq, ids, dtype=torch.float32, why="") -> None:
    k, v = cache.gather(seq)
    want_k, want_v = kv(ids, dtype)
    assert k.dtype == dtype and torch.equal(k, want_k) and torch.equal(v, want_v), (
        f"sequence {seq!r} (token ids {ids}, blocks {cache.block_table(seq)}) does not gather back "
        f"its own keys and values{why}: a block it holds was written by another sequence, or it "
        "was handed a block whose prefix differs from its own"
    )


def agrees(cache, model: PrefixModel, seqs, where: str, dtype=torch.float32) -> None:
    """Every table, length, ref count, the free count and every gather are as the rules say."""
    for s in seqs:
        want = model.tables.get(s, [])
        got = cache.block_table(s)
        assert got == want, (
            f"{where}: sequence {s!r} holds blocks {got}; by {RULES}, it holds {want} (its token "
            f"ids {model.tokens.get(s)}; the free queue, front first, is now {model.queue})"
        )
        assert cache.length(s) == len(model.tokens.get(s, [])), (
            f"{where}: sequence {s!r} has length {cache.length(s)}, expected "
            f"{len(model.tokens.get(s, []))}"
        )
        if s in model.tables:
            assert_gathers(cache, s, model.tokens[s], dtype, f" ({where})")
    got = refs(cache)
    assert got == model.refs, (
        f"{where}: ref counts (block by block) {got}, expected {model.refs}: a block's count is "
        "how many sequences hold it; start adds 1 to each cached block it takes, append sets a "
        "taken block's to 1, free takes 1 from each of the sequence's blocks"
    )
    assert cache.num_free_blocks == len(model.queue), (
        f"{where}: {cache.num_free_blocks} free blocks, expected {len(model.queue)} (the free "
        f"queue {model.queue}): a block is free when no sequence holds it, cached or not, and "
        "only then"
    )


# ----------------------------------------------------------------------------------------------
# random workloads, against the rules


@st.composite
def workloads(draw):
    """A pool, one or two stems that prompts begin with, and a random interleaving of starts
    (with their prefill), decodes, frees and match probes on four sequence ids."""
    bs = draw(st.sampled_from([1, 2, 3, 4, 5]), label="block_size")
    num_blocks = draw(st.integers(3, 12), label="num_blocks")
    token = st.integers(0, VOCAB - 1)
    stems = draw(
        st.lists(st.lists(token, min_size=1, max_size=3 * bs + 2), min_size=1, max_size=2),
        label="stems",
    )
    prompt = st.tuples(
        st.integers(0, len(stems) - 1), st.integers(0, 3 * bs + 2), st.lists(token, max_size=bs + 1)
    ).map(lambda p: (stems[p[0]][: p[1]] + p[2]) or [0])
    seq = st.integers(0, 3)
    ops = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("start"), seq, prompt),
                st.tuples(st.just("decode"), seq, st.lists(token, min_size=1, max_size=bs + 1)),
                st.tuples(st.just("free"), seq, st.just([])),
                st.tuples(st.just("match"), st.just(None), prompt),
            ),
            min_size=6,
            max_size=18,
        ),
        label="operations (kind, sequence, token ids)",
    )
    return bs, num_blocks, ops


def appended(impl, cache, model, seq, new, where) -> None:
    """Append `new` to `seq` in the cache and the model; the blocks other sequences hold must
    come out of it bit for bit the same."""
    ids = model.tokens.get(seq, [])
    others = {b for s, t in model.tables.items() if s != seq for b in t}
    before = rows(cache, others) if others else None
    if model.new_blocks(seq, len(new)) > len(model.queue):
        with pytest.raises(impl.OutOfBlocks):
            decode(cache, seq, ids, new)
        return
    decode(cache, seq, ids, new)
    model.append(seq, new)
    if others:
        written = changed_blocks(cache, others, before)
        holders = {b: [s for s, t in model.tables.items() if b in t] for b in written}
        assert not written, (
            f"{where}: appending to sequence {seq!r} changed k_pool / v_pool at block(s) "
            f"{written}, which other sequences hold ({holders}): a block is never written while "
            "another sequence holds it. Only full blocks are shared; an append writes into the "
            "sequence's own partial last block and the blocks it takes from the free queue"
        )


@given(workload=workloads())
@example(
    workload=(
        2,
        6,
        [
            ("start", 0, [0, 1, 2, 0, 1]),
            ("free", 0, []),
            ("start", 1, [0, 1, 2, 0, 2]),
            ("decode", 2, [1, 1, 1, 1, 1]),
            ("match", None, [0, 1, 2, 0, 1]),
        ],
    )
)
@example(
    workload=(1, 6, [("start", 0, [0, 1, 2]), ("start", 1, [1, 0, 2])])
)  # same tokens, after others
@example(  # an evicted block asked for again
    workload=(
        2,
        4,
        [
            ("start", 0, [0, 1, 0, 1, 2]),
            ("free", 0, []),
            ("decode", 1, [2, 2, 2, 2, 2, 2]),
            ("start", 2, [0, 1, 0, 1, 2]),
        ],
    )
)
@example(  # a private duplicate taken from the queue: the registered block stays found
    workload=(
        2,
        4,
        [
            ("start", 0, [0, 0]),
            ("start", 1, [0, 0]),
            ("free", 1, []),
            ("decode", 2, [1] * 6),
            ("match", None, [0, 0, 1]),
        ],
    )
)
def test_prefix_workload_follows_the_rules(impl, workload):
    """Every call, in any order, hands out exactly the blocks the rules name, and every sequence
    gathers back its own keys and values."""
    bs, num_blocks, ops = workload
    cache = impl.PrefixCache(num_blocks, bs, HKV, D)
    model = PrefixModel(num_blocks, bs)
    seqs = range(4)
    for step, (kind, seq, ids) in enumerate(ops):
        where = f"step {step}, {kind} {'' if seq is None else seq} {ids}"
        note(where)
        if kind == "match":
            got, want = cache.match(list(ids)), model.match(ids)
            assert got == want, (
                f"{where}: match gave {got}, expected {want}: the leading full blocks of the "
                "tokens that are registered under their keys (the whole prefix up to each block's "
                f"end), stopping at the first that is not, never the last token's block (cached "
                f"prefixes: {sorted(model.registered, key=len)})"
            )
        elif kind == "free":
            if seq in model.tables:
                cache.free(seq)
                model.free(seq)
            else:
                with pytest.raises(ValueError, match=r"\bseq_id\b"):
                    cache.free(seq)
        elif kind == "start":
            if seq in model.tables:
                with pytest.raises(ValueError, match=r"\bseq_id\b"):
                    cache.start(seq, list(ids))
            else:
                got, want = cache.start(seq, list(ids)), model.start(seq, ids)
                assert got == want, (
                    f"{where}: start returned {got}, expected {want}, what match finds "
                    f"(cached prefixes: {sorted(model.registered, key=len)})"
                )
                appended(impl, cache, model, seq, ids[want:], where + " (its prefill)")
        else:
            appended(impl, cache, model, seq, ids, where)
        agrees(cache, model, seqs, where)
    if model.queue:  # take every free block: they come in the free queue's order
        every = [0] * (len(model.queue) * bs)
        appended(impl, cache, model, "last", every, "taking every free block")
        agrees(cache, model, [*seqs, "last"], "after a sequence took every free block")
    for s in list(model.tables):
        cache.free(s)
    assert cache.num_free_blocks == num_blocks, "freeing every sequence must free every block"


# ----------------------------------------------------------------------------------------------
# sharing


@st.composite
def shared_prompts(draw):
    """block_size, then two to four prompts that begin with some of one base prompt (cut often at
    k * block_size and k * block_size +- 1), each with a tail of its own."""
    bs = draw(st.sampled_from([1, 2, 3, 4, 7]), label="block_size")
    token = st.integers(0, VOCAB)
    base = draw(st.lists(token, min_size=1, max_size=4 * bs + 1), label="base prompt")
    edges = [c for k in range(5) for c in (k * bs - 1, k * bs, k * bs + 1) if 0 <= c <= len(base)]
    prompts = []
    for i in range(draw(st.integers(2, 4), label="prompts")):
        cut = draw(st.one_of(st.sampled_from(edges), st.integers(0, len(base))), label=f"cut {i}")
        tail = draw(st.lists(token, min_size=0 if cut else 1, max_size=bs + 1), label=f"tail {i}")
        prompts.append(base[:cut] + tail)
    return bs, prompts


def common(a: list[int], b: list[int]) -> int:
    """The length of the longest common prefix of a and b."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@given(
    case=shared_prompts(),
    dtype=st.sampled_from(FLOAT_DTYPES),
    split=st.integers(1, 9),
)
@example(case=(4, [list(range(8)), list(range(8)), list(range(9))]), dtype=torch.float32, split=1)
@example(case=(3, [[0, 1, 2, 0, 1, 2, 0], [0, 1, 2, 0, 1, 3, 3]]), dtype=torch.bfloat16, split=5)
def test_shared_prefixes_gather_back_exactly(impl, case, dtype, split):
    """Prompts sharing prefixes, started and prefilled one after the other in a pool with room
    for all: start returns the longest cached full-block prefix, two sequences share exactly the
    full blocks of their common prefix (not a partial block, nothing after), each block's ref
    count is the number of sequences holding it, and every sequence gathers back exactly."""
    bs, prompts = case
    num_blocks = sum(math.ceil(len(p) / bs) for p in prompts)  # never evicts: nothing is freed
    cache = impl.PrefixCache(num_blocks, bs, HKV, D, dtype=dtype)
    registered = []  # how many full blocks of each earlier prompt are registered blocks
    for j, p in enumerate(prompts):
        runs = [min(common(q, p) // bs, r) for q, r in zip(prompts[:j], registered, strict=True)]
        want = min(max(runs, default=0), (len(p) - 1) // bs) * bs
        n = cache.start(j, list(p))
        assert n == want, (
            f"prompt {j} {p} (blocks of {bs}) after prompts {prompts[:j]}: start returned {n}, "
            f"expected {want}: the longest prefix of whole blocks cached by an earlier prompt, "
            f"never the last token's block (at most {(len(p) - 1) // bs * bs} tokens here)"
        )
        assert cache.length(j) == n and len(cache.block_table(j)) == n // bs, (
            f"after start returned {n}, sequence {j} should hold its {n // bs} cached blocks and "
            f"have length {n}; it holds {cache.block_table(j)}, length {cache.length(j)}"
        )
        assert_gathers(cache, j, p[:n], dtype, f" right after start returned {n}")
        fill(cache, j, p, n, dtype, split=n + split)
        # Its last full block is a duplicate (not registered) when an earlier prompt registered
        # that prefix already: start never takes the last token's block.
        duplicate = len(p) % bs == 0 and any(
            r * bs >= len(p) and common(q, p) >= len(p)
            for q, r in zip(prompts[:j], registered, strict=True)
        )
        registered.append(len(p) // bs - duplicate)
    tables = [cache.block_table(j) for j in range(len(prompts))]
    for j, p in enumerate(prompts):
        assert_gathers(cache, j, p, dtype)
        for i in range(j):
            c = min(common(prompts[i], p) // bs, registered[i], (len(p) - 1) // bs)
            assert tables[j][:c] == tables[i][:c], (
                f"prompts {i} {prompts[i]} and {j} {p} share their first {c} full blocks of {bs}; "
                f"their tables {tables[i]} and {tables[j]} should begin with the same {c} blocks"
            )
            assert not set(tables[j][c:]) & set(tables[i]), (
                f"prompts {i} {prompts[i]} and {j} {p} (blocks of {bs}) have {c} full blocks in "
                f"common, yet tables {tables[i]} and {tables[j]} share a block after those: only "
                "the full blocks of the common prefix are shared, never a partial block or a "
                "block after the prompts differ"
            )
    holders = [sum(b in t for t in tables) for b in range(num_blocks)]
    assert refs(cache) == holders, (
        f"ref counts {refs(cache)}, expected {holders} (how many of the tables {tables} hold "
        "each block)"
    )
    assert cache.num_free_blocks + sum(h > 0 for h in holders) == num_blocks


def test_equal_blocks_after_a_different_prefix_are_not_shared(impl):
    """A block's key is the whole prefix up to its end: equal tokens after other tokens (at the
    same place or elsewhere in the prompt) are another block."""
    cache = impl.PrefixCache(16, 4, HKV, D)
    A = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    B = [0, 2, 3, 4, 5, 6, 7, 8, 9]  # block 1 as A's, after another block 0
    C = [5, 6, 7, 8, 9]  # block 0 as A's block 1
    prefill(cache, "a", A)
    for name, p in (("B", B), ("C", C)):
        got = cache.match(p)
        assert got == 0, (
            f"match({name}={p}) gave {got} after only A={A} was cached (blocks of 4): {name}'s "
            "blocks hold the same tokens as one of A's, but after other tokens, so their keys and "
            "values differ. A block's key is (the key of the block before it, its tokens): the "
            "whole prefix up to its end, not its tokens alone, nor its tokens and its position"
        )
    assert cache.match(A + [0]) == 8
    prefill(cache, "b", B)
    prefill(cache, "c", C)
    a, b, c = (cache.block_table(s) for s in "abc")
    assert not (set(a) & set(b) or set(a) & set(c) or set(b) & set(c)), (
        f"tables {a}, {b} and {c} of A={A}, B={B} and C={C} share a block: none of them has a "
        "full block of the same prefix as another"
    )
    assert refs(cache)[:8] == [1] * 8  # 3 blocks for A and B each, 2 for C
    for s, p in (("a", A), ("b", B), ("c", C)):
        assert_gathers(cache, s, p)
    assert cache.start("b again", B) == 8 and cache.block_table("b again") == b[:2], (
        f"start of B={B} again should take B's own first two blocks {b[:2]}, got "
        f"{cache.block_table('b again')}: B's block 1 has the tokens of A's block 1, but not "
        "its prefix"
    )
    decode(cache, "b again", B[:8], [9])
    assert_gathers(cache, "b again", B)


# ----------------------------------------------------------------------------------------------
# match


@given(
    workload=workloads(),
    changes=st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), max_size=2),
)
@example(workload=(2, 8, [("start", 0, [0, 1, 2, 0]), ("start", 1, [0, 1, 2, 0, 1])]), changes=[])
def test_match_is_pure_and_exact(impl, workload, changes):
    """After a random workload, match of prefixes of every cached prompt (cut at k * block_size
    and k * block_size +- 1, with a token changed or not) gives the longest cached full-block
    prefix, never all the tokens; and asking changes nothing, not even the free queue's order."""
    bs, num_blocks, ops = workload
    cache = impl.PrefixCache(num_blocks, bs, HKV, D)
    model = PrefixModel(num_blocks, bs)
    for kind, seq, ids in ops:  # starts with their prefill, decodes and frees, where they fit
        if kind == "start" and seq not in model.tables:
            n = model.start(seq, ids)
            cache.start(seq, list(ids))
            if model.new_blocks(seq, len(ids) - n) <= len(model.queue):
                decode(cache, seq, ids[:n], ids[n:])
                model.append(seq, ids[n:])
        elif kind == "decode" and model.new_blocks(seq, len(ids)) <= len(model.queue):
            decode(cache, seq, model.tokens.get(seq, []), ids)
            model.append(seq, ids)
        elif kind == "free" and seq in model.tables:
            cache.free(seq)
            model.free(seq)
    tables = {s: cache.block_table(s) for s in range(4)}
    counts, free = refs(cache), cache.num_free_blocks
    probes = [list(p) for p in model.registered] + [ids for _, _, ids in ops]
    probes = [p for p in probes + list(model.tokens.values()) if p] + [[0, 1, 2] * 3]
    for which, at in changes:  # a probe with one token changed: its later blocks are others
        p = probes[which % len(probes)]
        at %= len(p)
        probes.append(p[:at] + [(p[at] + 1) % VOCAB] + p[at + 1 :])
    for p in probes:
        ends = {e for k in range(len(p) // bs + 2) for e in (k * bs - 1, k * bs, k * bs + 1)}
        for end in sorted(e for e in ends if 1 <= e <= len(p)):
            got, want = cache.match(p[:end]), model.match(p[:end])
            assert got == want, (
                f"match({p[:end]}) with blocks of {bs} gave {got}, expected {want}"
                + (
                    ": never all the tokens, the last one is always fed to the model (at most "
                    f"((len(tokens) - 1) // block_size) * block_size = {(end - 1) // bs * bs})"
                    if got > (end - 1) // bs * bs
                    else ": the leading full blocks registered under their keys (each the whole "
                    "prefix up to the block's end), stopping at the first that is not "
                    f"(registered: {sorted(model.registered, key=len)})"
                )
            )
    assert {s: cache.block_table(s) for s in range(4)} == tables and refs(cache) == counts, (
        "match changed the block tables or the ref counts: it only looks"
    )
    assert cache.num_free_blocks == free, "match changed the number of free blocks: it only looks"
    if model.queue:  # the free queue's order is unchanged: a sequence taking every free block
        new = [0] * (len(model.queue) * bs)
        decode(cache, "last", [], new)
        assert cache.block_table("last") == model.queue, (
            f"after the matches, a sequence taking every free block got {cache.block_table('last')}"
            f", expected the free queue {model.queue} (front first): match must not move a block "
            "in the queue (a lookup is not a use)"
        )


# ----------------------------------------------------------------------------------------------
# eviction, partial blocks, ref counts


def test_eviction_takes_the_least_recently_freed_block_first(impl):
    """Freed full blocks stay cached until append takes them, least recently freed first and, of
    one sequence, its last block first."""
    cache = impl.PrefixCache(6, 2, HKV, D)
    A, B = [1, 2, 3, 4, 5], [7, 8, 9, 10, 11]
    prefill(cache, "a", A)
    prefill(cache, "b", B)
    assert cache.block_table("a") == [0, 1, 2] and cache.block_table("b") == [3, 4, 5], (
        f"the free queue starts as blocks 0..5 in order, and append takes from its front: 'a' "
        f"should hold [0, 1, 2] and 'b' [3, 4, 5], they hold {cache.block_table('a')} and "
        f"{cache.block_table('b')}"
    )
    cache.free("a")
    cache.free("b")
    assert cache.num_free_blocks == 6
    cached = {"A": (cache.match(A), 4), "B": (cache.match(B), 4)}
    assert all(got == want for got, want in cached.values()), (
        f"right after A={A} and B={B} (blocks of 2) were freed, match found {cached} "
        "(got, expected): a freed full block keeps its key and contents until it is taken "
        "again, so both prompts still find their first 4 tokens"
    )
    # The free queue, front first: 2, 1, 0 (a's blocks, its last first), then 5, 4, 3 (b's).
    taken, ids = [], []
    expectations = [  # blocks taken by then, match(A), match(B)
        ([2], 4, 4),
        ([2, 1], 2, 4),
        ([2, 1, 0], 0, 4),
        ([2, 1, 0, 5], 0, 4),
        ([2, 1, 0, 5, 4], 0, 2),
        ([2, 1, 0, 5, 4, 3], 0, 0),
    ]
    for want_table, want_a, want_b in expectations:
        new = [20 + len(ids), 21 + len(ids)]
        decode(cache, "c", ids, new)  # one more block for 'c'
        ids += new
        taken = cache.block_table("c")
        assert taken == want_table, (
            f"a new sequence taking one block at a time got {taken}, expected {want_table}: after "
            "free('a') (blocks [0, 1, 2]) then free('b') ([3, 4, 5]) the free queue is "
            "[2, 1, 0, 5, 4, 3]: the least recently freed first and, of one sequence, its last "
            "block first (a sequence's end is evicted before its beginning)"
        )
        found = (cache.match(A), cache.match(B))
        assert found == (want_a, want_b), (
            f"with blocks {taken} taken, match(A) and match(B) gave {found}, expected "
            f"{(want_a, want_b)}: a block taken from the queue forgets its key (its contents "
            "are being overwritten), while every block not yet taken keeps its own"
        )
    assert_gathers(cache, "c", ids)


def test_a_partial_last_block_is_private(impl):
    """A prompt that ends inside a block shares only its full blocks: a second sequence with the
    same prefix writes its next token into a block of its own, never into the first one's."""
    cache = impl.PrefixCache(8, 4, HKV, D)
    A = list(range(10))  # blocks [0..3], [4..7] full, [8, 9] partial
    prefill(cache, "a", A)
    for p in (A + [20], A + [20, 21, 22]):
        assert cache.match(p) == 8, (
            f"match({p}) gave {cache.match(p)}, expected 8 (blocks of 4, A={A} cached): A's third "
            "block holds 2 tokens, and only full blocks are cached"
        )
    B = A + [20]
    n = cache.start("b", list(B))
    partial = cache.block_table("a")[2]
    assert n == 8 and cache.ref_count(partial) == 1, (
        f"start('b', A + [20]) returned {n} (expected 8) and the ref count of A's partial last "
        f"block is {cache.ref_count(partial)} (expected 1): a partial block is never shared"
    )
    k, v = kv(B)
    cache.append("b", B[n:], k[:, n:], v[:, n:])
    assert partial not in cache.block_table("b"), (
        f"'b' holds {cache.block_table('b')}, among them A's partial block {partial}"
    )
    decode(cache, "a", A, [30])  # A's 11th token, into its own partial block
    decode(cache, "b", B, [31])
    assert_gathers(cache, "a", A + [30])
    assert_gathers(cache, "b", B + [31])
    cache.free("b")
    cache.free("a")
    got = cache.match(A + [30, 5])
    assert got == 8, (
        f"after free, match(A + [30, 5]) gave {got}, expected 8: 'a''s last block held 3 tokens "
        "of 4 when it was freed; a partial block has no key, before or after free, and nothing "
        "finds it"
    )
    got = cache.match(B + [31, 5])
    assert got == 12, (
        f"after free, match(B + [31, 5]) gave {got}, expected 12: 'b''s third block filled up "
        "with its decoded token, so that append registered it, and free keeps it cached"
    )


def test_freeing_one_of_two_sharers_keeps_the_other(impl):
    """Preemption: one of two sequences sharing blocks is freed; the other keeps reading them, and
    they stay out of the free queue until it is freed too."""
    cache = impl.PrefixCache(8, 3, HKV, D)
    A = [1, 2, 3, 4, 5, 6, 7]
    B = A[:6] + [9, 8, 7, 6]
    prefill(cache, "a", A)  # blocks 0, 1 full, 2 partial
    assert prefill(cache, "b", B) == 6
    shared = cache.block_table("a")[:2]
    assert cache.block_table("b")[:2] == shared and [cache.ref_count(b) for b in shared] == [2, 2]
    cache.free("a")
    counts = [cache.ref_count(b) for b in shared]
    assert counts == [1, 1], (
        f"after 'a' was freed, the blocks {shared} it shared with 'b' have ref counts {counts}, "
        "expected [1, 1]: free takes 1 from each of the sequence's blocks"
    )
    held = set(cache.block_table("b"))
    assert cache.num_free_blocks == 8 - len(held), (
        f"{cache.num_free_blocks} free blocks while 'b' holds {sorted(held)} of 8: a block "
        "another sequence still holds is not free"
    )
    assert_gathers(cache, "b", B, why=" after 'a', which shared its first blocks, was freed")
    before = rows(cache, held)
    ids = []
    for _ in range(cache.num_free_blocks):  # take every free block, one at a time
        decode(cache, "c", ids, [0, 0, 0])
        ids += [0, 0, 0]
    written = changed_blocks(cache, held, before)
    assert not written and not held & set(cache.block_table("c")), (
        f"a sequence taking every free block got {cache.block_table('c')} and changed the "
        f"blocks {written} of 'b' ({sorted(held)}): a block leaves the free queue when start "
        "takes it and joins it only when no sequence holds it"
    )
    with pytest.raises(impl.OutOfBlocks):
        decode(cache, "c", ids, [0])
    assert_gathers(cache, "b", B)
    cache.free("c")
    cache.free("b")
    assert cache.num_free_blocks == 8 and refs(cache) == [0] * 8, (
        f"after every sequence was freed: {cache.num_free_blocks} of 8 blocks free, ref counts "
        f"{refs(cache)}: a block leaked"
    )
    assert cache.match(A) == 6, "the shared blocks, free now, are still cached"


@given(
    bs=st.sampled_from([1, 2, 3, 5]),
    prompt=st.lists(st.integers(0, VOCAB), min_size=1, max_size=16),
    cut=st.integers(0, 16),
    tail=st.lists(st.integers(0, VOCAB), min_size=1, max_size=6),
    free_first=st.booleans(),
    extra=st.integers(0, 2),
)
@example(bs=2, prompt=[0, 1, 2, 0, 1], cut=4, tail=[3], free_first=True, extra=0)
@example(bs=4, prompt=list(range(10)), cut=10, tail=[3], free_first=False, extra=1)
def test_shared_blocks_are_never_written(impl, bs, prompt, cut, tail, free_first, extra):
    """Three sequences share a prompt's blocks ('c' perhaps after 'a' was freed), then two of
    them decode a token at a time until the pool runs out: before every append the pool's rows of
    the blocks other sequences hold are copied, and after it they are the same, bit for bit."""
    P, Q = prompt, prompt[:cut] + tail
    num_blocks = math.ceil(len(P) / bs) + math.ceil(len(Q) / bs) + extra
    cache = impl.PrefixCache(num_blocks, bs, HKV, D)
    model = PrefixModel(num_blocks, bs)
    for seq, ids in (("a", P), ("b", Q), ("c", P)):
        if seq == "c" and free_first:
            cache.free("a")
            model.free("a")
        n = cache.start(seq, list(ids))
        assert n == model.start(seq, ids), f"start('{seq}', {ids}) returned {n}"
        appended(impl, cache, model, seq, ids[n:], f"the prefill of '{seq}'")
        assert_gathers(cache, seq, model.tokens[seq])
    running = ["b", "c"]
    for step in range(3 * num_blocks):
        seq = running[step % 2]
        if model.new_blocks(seq, 1) > len(model.queue):
            break
        appended(impl, cache, model, seq, [step % VOCAB], f"decode step {step} of '{seq}'")
    agrees(cache, model, ["a", "b", "c"], "after the decodes")


def test_a_duplicate_block_leaves_the_registered_one(impl):
    """Two sequences started before either was prefilled compute the same blocks; the one
    registered first stays registered, and a third sequence shares it."""
    cache = impl.PrefixCache(10, 2, HKV, D)
    P = [1, 2, 3, 4, 5]
    assert cache.start("a", list(P)) == 0 and cache.start("b", list(P)) == 0
    decode(cache, "a", [], P)  # blocks 0, 1, 2
    decode(cache, "b", [], P)  # blocks 3, 4, 5: 3 and 4 have the keys of 0 and 1
    assert cache.start("c", list(P)) == 4
    got = cache.block_table("c")
    assert got == [0, 1], (
        f"start('c', {P}) took blocks {got}, expected [0, 1]: 'a' and 'b' both filled blocks of "
        "the prefix [1, 2, 3, 4] ('a' first, into blocks 0 and 1); when a block with that key is "
        "registered already, the registered one stays, and the later one stays private"
    )
    assert refs(cache)[:6] == [2, 2, 1, 1, 1, 1]
    cache.free("b")
    assert cache.match(P) == 4 and cache.num_free_blocks == 7
    decode(cache, "c", P[:4], [5])
    assert_gathers(cache, "c", P)


# ----------------------------------------------------------------------------------------------
# running out, and what start costs


def test_out_of_blocks_changes_nothing(impl):
    """An append that needs more blocks than are free raises OutOfBlocks and changes nothing: no
    table, length or ref count, no cached block forgotten, no slot of the pool, not the free
    queue's order; one that needs exactly the free blocks succeeds."""
    cache = impl.PrefixCache(6, 2, HKV, D)
    A = [1, 2, 3, 4, 5]
    prefill(cache, "a", A)
    cache.free("a")  # the free queue: 3, 4, 5, 2, 1 (cached: A[:4]), 0 (cached: A[:2])

    def unchanged(what, tables, counts, free, pool):
        assert cache.num_free_blocks == free and refs(cache) == counts, (
            f"{what}: {cache.num_free_blocks} free blocks (expected {free}), ref counts "
            f"{refs(cache)} (expected {counts}): work out how many blocks the append needs and "
            "refuse before taking any"
        )
        now = {s: (cache.block_table(s), cache.length(s)) for s in tables}
        assert now == tables, f"{what}: tables and lengths {now}, expected {tables}"
        assert cache.match(A) == 4, (
            f"{what}: match(A) gave {cache.match(A)}, expected 4: the refused append took (and so "
            "evicted) cached blocks; when too few blocks are free, nothing changes"
        )
        assert torch.equal(cache.k_pool, pool[0]) and torch.equal(cache.v_pool, pool[1]), (
            f"{what}: k_pool / v_pool changed: a refused append writes nothing"
        )

    pool = (cache.k_pool.clone(), cache.v_pool.clone())
    with pytest.raises(impl.OutOfBlocks, match="block"):
        decode(cache, "x", [], [0] * 13)  # 7 blocks, 6 free
    what = "a refused first append of 13 tokens (7 blocks, 6 free)"
    unchanged(what, {"x": ([], 0)}, [0] * 6, 6, pool)
    with pytest.raises(ValueError, match=r"\bseq_id\b"):
        cache.gather("x")
    assert cache.start("b", list(A)) == 4  # takes blocks 0 and 1 back: 3, 4, 5, 2 free
    counts = refs(cache)
    with pytest.raises(impl.OutOfBlocks, match="block"):
        decode(cache, "b", A[:4], [5] + [0] * 8)  # 13 tokens: 5 more blocks, 4 free
    unchanged("a refused append of 9 tokens to 'b'", {"b": ([0, 1], 4)}, counts, 4, pool)
    decode(cache, "b", A[:4], [5] + [0] * 7)  # 12 tokens: exactly the 4 free blocks
    assert cache.block_table("b") == [0, 1, 3, 4, 5, 2] and cache.num_free_blocks == 0, (
        f"an append that needs exactly the 4 free blocks succeeds, taking them in the free "
        f"queue's order [3, 4, 5, 2]: 'b' holds {cache.block_table('b')}, "
        f"{cache.num_free_blocks} free"
    )
    assert_gathers(cache, "b", A + [0] * 7)


def test_start_copies_nothing(impl):
    """start hands over the cached blocks: it writes nothing into the pool, takes no free block,
    and costs no more for a 160-token prefix (40 blocks) than for a 4-token one."""
    bs = 4
    cache = impl.PrefixCache(48, bs, HKV, D)
    P = [t % VOCAB + (t // 7) % 5 for t in range(161)]
    prefill(cache, "a", P)
    free = cache.num_free_blocks
    _, short = measure(cache.start, "short", P[:5])
    pool = (cache.k_pool.clone(), cache.v_pool.clone())
    n, long = measure(cache.start, "long", list(P))
    one_block = HKV * bs * D
    assert long.work <= short.work + one_block, (
        f"start of a prompt whose first 160 tokens are cached (40 blocks of {bs}) did "
        f"{long.work:,} units of work (elements read and written), of a 4-token one "
        f"{short.work:,}: start copies the prefix's keys and values. It only takes the cached "
        "blocks: they join the new sequence's table and count one more holder"
    )
    assert torch.equal(cache.k_pool, pool[0]) and torch.equal(cache.v_pool, pool[1]), (
        "start wrote into k_pool / v_pool: the cached blocks are shared as they are"
    )
    assert n == 160 and cache.block_table("long") == cache.block_table("a")[:40], (
        f"start returned {n} and took blocks {cache.block_table('long')}; expected 160 and 'a''s "
        "first 40 blocks"
    )
    assert cache.num_free_blocks == free, (
        f"start took free blocks ({free} free before, {cache.num_free_blocks} after): the cached "
        "blocks it shares are held by 'a', and start takes no others"
    )
    decode(cache, "long", P[:160], P[160:])
    assert_gathers(cache, "long", P)


def test_the_lists_given_may_be_reused(impl):
    """The cache keeps no reference to the token lists it is given: a caller that reuses its
    list after start or append changes nothing the cache registered."""
    cache = impl.PrefixCache(8, 2, HKV, D)
    prefill(cache, "a", [0, 0, 1, 1])
    P = [0, 0, 2, 2, 1]  # block 0 cached; block 1 ([2, 2]) and the tail [1] appended
    given = list(P)
    assert cache.start("b", given) == 2
    caller_changes(impl.PrefixCache.start, given)
    given[:] = [7, 7, 7]  # the caller's list, reused
    tail = P[2:]
    k, v = kv(P)
    cache.append("b", tail, k[:, 2:], v[:, 2:])
    caller_changes(impl.PrefixCache.append, tail)
    tail[:] = [5, 5, 5]
    got = cache.match(P[:4] + [0])
    assert got == 4, (
        f"match({P[:4] + [0]}) gave {got}, expected 4: 'b' = {P} holds the full blocks [0, 0] and "
        "[2, 2]. The caller changed the lists it had passed to start and append after the calls; "
        "the cache must have copied what it needed (a block's key is made from the token ids "
        "when the block fills, so a list kept from start gives the wrong key)"
    )
    assert cache.match([7, 7, 7, 7, 0]) == 0 and cache.match([0, 0, 5, 5, 0]) == 2
    assert_gathers(cache, "b", P)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_prefix_cache_in_every_dtype(impl, dtype):
    """The pool is all the cache holds, in `dtype`; shared blocks read back bit for bit."""
    num_blocks, bs = 8, 3
    cache = impl.PrefixCache(num_blocks, bs, HKV, D, dtype=dtype)
    expected = 2 * num_blocks * HKV * bs * D * dtype.itemsize
    assert held_bytes(cache) == expected, (
        f"a {dtype} PrefixCache of {num_blocks} blocks of {bs} should hold its pool, {expected} "
        f"bytes (k_pool and v_pool), it holds {held_bytes(cache)}: allocate them in `dtype`, and "
        "keep no other tensor (token ids and keys are plain Python)"
    )
    A, B = [0, 1, 2, 0, 1, 2, 0, 1], [0, 1, 2, 0, 1, 2, 2]
    prefill(cache, "a", A, dtype)
    assert prefill(cache, "b", B, dtype) == 6
    assert held_bytes(cache) == expected
    assert_gathers(cache, "a", A, dtype)
    assert_gathers(cache, "b", B, dtype)


def test_prefix_append_of_bad_input_changes_nothing(impl):
    """A ValueError comes before anything changes: no key is written into the pool first, no
    block is taken, the sequence keeps its table and length."""
    cache = impl.PrefixCache(6, 2, HKV, D)
    A = [1, 2, 3]
    prefill(cache, "a", A)
    pool, table = (cache.k_pool.clone(), cache.v_pool.clone()), cache.block_table("a")
    free = cache.num_free_blocks
    k, v = kv(A + [4, 5, 6])
    more_k, more_v = k[:, 3:], v[:, 3:]
    for what, call in (
        ("tokens of 2 ids for 3 new keys", lambda: cache.append("a", [4, 5], more_k, more_v)),
        ("a float among the tokens", lambda: cache.append("a", [4, 5.0, 6], more_k, more_v)),
        ("v in float64", lambda: cache.append("a", [4, 5, 6], more_k, more_v.double())),
        ("v of the wrong head_dim", lambda: cache.append("a", [4, 5, 6], more_k, more_v[..., :3])),
    ):
        with pytest.raises(ValueError):
            call()
        same = torch.equal(cache.k_pool, pool[0]) and torch.equal(cache.v_pool, pool[1])
        assert same and cache.block_table("a") == table and cache.length("a") == 3, (
            f"an append refused for {what} changed k_pool / v_pool (or 'a': table "
            f"{cache.block_table('a')}, length {cache.length('a')}; were {table}, 3): check "
            "every argument, the token ids too, before writing anything"
        )
        assert cache.num_free_blocks == free, f"an append refused for {what} took a block"
    decode(cache, "a", A, [4, 5, 6])
    assert_gathers(cache, "a", A + [4, 5, 6])


# ----------------------------------------------------------------------------------------------
# the error contract


def _cache(impl):
    """A pool of 4 blocks of 2 tokens (2 kv heads of 4) holding sequence 0: tokens [1, 2, 3]."""
    cache = impl.PrefixCache(4, 2, HKV, D)
    prefill(cache, 0, [1, 2, 3])
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
    return lambda impl: impl.PrefixCache(*args.values())


BAD_CALLS = [
    _bad("PrefixCache(0, 2, 2, 4)", "an empty pool", _pool_with(num_blocks=0), "num_blocks"),
    _bad("PrefixCache(4, 0, 2, 4)", "blocks of no tokens", _pool_with(block_size=0), "block_size"),
    _bad(
        "PrefixCache(4, 2.5, 2, 4)", "a float block_size", _pool_with(block_size=2.5), "block_size"
    ),
    _bad("PrefixCache(4, 2, 0, 4)", "no kv heads", _pool_with(n_kv_heads=0), "n_kv_heads"),
    _bad("PrefixCache(4, 2, 2, -4)", "a negative head_dim", _pool_with(head_dim=-4), "head_dim"),
    _bad(
        "PrefixCache(4, 2, 2, 4, dtype='float16')",
        "a dtype given as a string",
        lambda impl: impl.PrefixCache(4, 2, HKV, D, dtype="float16"),
        "dtype",
    ),
    _bad("ref_count(-1)", "a negative block", lambda impl: _cache(impl).ref_count(-1), "block"),
    _bad(
        "ref_count(4) of a pool of 4 blocks",
        "a block past the pool",
        lambda impl: _cache(impl).ref_count(4),
        "block",
    ),
    _bad("ref_count(1.0)", "a float block", lambda impl: _cache(impl).ref_count(1.0), "block"),
    _bad("match([])", "match of no tokens", lambda impl: _cache(impl).match([]), "tokens"),
    _bad(
        "match([1, 2.0, 3])",
        "match of a float token",
        lambda impl: _cache(impl).match([1, 2.0, 3]),
        "tokens",
    ),
    _bad(
        "match([1, True, 3])",
        "match of a bool token",
        lambda impl: _cache(impl).match([1, True, 3]),
        "tokens",
    ),
    _bad(
        "match((1, 2, 3))",
        "match of a tuple",
        lambda impl: _cache(impl).match((1, 2, 3)),
        "tokens",
    ),
    _bad(
        "match(torch.tensor([1, 2, 3]))",
        "match of a tensor of ids",
        lambda impl: _cache(impl).match(torch.tensor([1, 2, 3])),
        "tokens",
    ),
    _bad("start(1, [])", "start of no tokens", lambda impl: _cache(impl).start(1, []), "tokens"),
    _bad(
        "start(1, [1, '2'])",
        "start of a string token",
        lambda impl: _cache(impl).start(1, [1, "2"]),
        "tokens",
    ),
    _bad(
        "start(0, [1, 2, 3]) while 0 exists",
        "start of an existing sequence",
        lambda impl: _cache(impl).start(0, [1, 2, 3]),
        "seq_id",
    ),
    _bad(
        "append(0, [4, 5], k of 1 token, v of 1 token)",
        "more token ids than keys",
        lambda impl: _cache(impl).append(0, [4, 5], _kv(), _kv()),
        "tokens|k|v",
    ),
    _bad(
        "append(0, [4], k of 2 tokens, v of 2 tokens)",
        "fewer token ids than keys",
        lambda impl: _cache(impl).append(0, [4], _kv(T=2), _kv(T=2)),
        "tokens|k|v",
    ),
    _bad(
        "append(0, [4.0], k, v)",
        "a float token id",
        lambda impl: _cache(impl).append(0, [4.0], _kv(), _kv()),
        "tokens",
    ),
    _bad(
        "append(0, torch.tensor([4]), k, v)",
        "token ids in a tensor",
        lambda impl: _cache(impl).append(0, torch.tensor([4]), _kv(), _kv()),
        "tokens",
    ),
    _bad(
        "append(0, [4], k of shape [3, 1, 4], v)",
        "k with the wrong number of kv heads",
        lambda impl: _cache(impl).append(0, [4], _kv(Hkv=3), _kv()),
        "k",
    ),
    _bad(
        "append(0, [4], k, v of shape [2, 1, 5])",
        "v with the wrong head_dim",
        lambda impl: _cache(impl).append(0, [4], _kv(), _kv(d=5)),
        "v",
    ),
    _bad(
        "append(0, [4], k of shape [1, 2, 1, 4], v)",
        "k with a batch dimension",
        lambda impl: _cache(impl).append(0, [4], _kv()[None], _kv()),
        "k",
    ),
    _bad(
        "append(0, [4], k of 1 token, v of 2 tokens)",
        "k and v of different lengths",
        lambda impl: _cache(impl).append(0, [4], _kv(), _kv(T=2)),
        "tokens|k|v",
    ),
    _bad(
        "append(0, [], k of 0 tokens, v of 0 tokens)",
        "no new token",
        lambda impl: _cache(impl).append(0, [], _kv(T=0), _kv(T=0)),
        "tokens|k|v",
    ),
    _bad(
        "append(0, [4], k in float16, v) to a float32 pool",
        "k in another dtype",
        lambda impl: _cache(impl).append(0, [4], _kv(dtype=torch.float16), _kv()),
        "k",
    ),
    _bad(
        "append(0, [4], k, v in bfloat16) to a float32 pool",
        "v in another dtype",
        lambda impl: _cache(impl).append(0, [4], _kv(), _kv(dtype=torch.bfloat16)),
        "v",
    ),
    _bad(
        "gather('never started')",
        "gather of an unknown sequence",
        lambda impl: _cache(impl).gather("never started"),
        "seq_id",
    ),
    _bad(
        "free('never started')",
        "free of an unknown sequence",
        lambda impl: _cache(impl).free("never started"),
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
]


@pytest.mark.parametrize("bad, names", BAD_CALLS)
def test_prefix_bad_input_raises_value_error(impl, bad, names):
    assert_value_error(bad, impl, match=names)
