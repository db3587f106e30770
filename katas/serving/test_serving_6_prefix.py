"""Level 6: prefix caching in the engine: a request that joins reuses the keys of the longest run
of full blocks another request left behind, and feeds only the tokens past them."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from grading.judge.strategies import seeds
from grading.model.workload import WorkloadRequest, shared_prefix_workload
from katas.serving.cases import (
    DRAFTS,
    MAX_SEQ_LEN,
    VOCAB,
    as_requests,
    budgets,
    check_completions,
    check_memory,
    draft,
    run,
    solo,
    target,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 32])


@st.composite
def shared_workloads(draw, max_requests: int = 6, max_new: int = 8):
    """Requests whose prompts are a cut of one of 1 to 3 shared prefixes (from 1 token to the
    whole context) followed by a tail of their own (0 to 5 tokens); unique ids, arrivals bunched
    or spread, max_new_tokens from 1. Two requests may share everything but their answers."""
    gen = torch.Generator().manual_seed(draw(seeds(), label="token seed"))
    prefixes = [
        torch.randint(0, VOCAB, (draw(st.integers(1, MAX_SEQ_LEN), label="prefix"),), generator=gen)
        for _ in range(draw(st.integers(1, 3), label="prefixes"))
    ]
    n = draw(st.integers(1, max_requests), label="requests")
    ids = draw(st.lists(st.integers(0, 999), min_size=n, max_size=n, unique=True), label="ids")
    spread = draw(st.sampled_from([0, 3, 12]), label="arrival spread")
    specs = []
    for i in range(n):
        prefix = prefixes[draw(st.integers(0, len(prefixes) - 1), label=f"prefix of {i}")]
        cut = draw(st.integers(1, len(prefix)), label=f"prefix tokens of {i}")
        tail = draw(st.integers(0, min(5, MAX_SEQ_LEN - cut)), label=f"tail of {i}")
        prompt = prefix[:cut].tolist() + torch.randint(0, VOCAB, (tail,), generator=gen).tolist()
        new = draw(st.integers(1, min(max_new, MAX_SEQ_LEN - len(prompt) + 1)), label="new")
        specs.append(WorkloadRequest(ids[i], prompt, new, draw(st.integers(0, spread))))
    return specs


def cached_run_bound(specs: list[WorkloadRequest], block_size: int) -> int:
    """With room, every request joins at its arrival; one that arrives after another whose
    prompt shares its first m tokens finds their full blocks cached (never the block of its own
    last prompt token): it reads at most len(prompt) - block_size x floor(min(m, P - 1) / bs)
    prompt tokens. Answers cached earlier may save more; this bound counts prompts only."""
    reads = 0
    for s in specs:
        shared = 0
        for e in (e for e in specs if e.arrival < s.arrival):
            pairs = zip(s.prompt, e.prompt, strict=False)  # up to the shorter prompt
            m = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
            shared = max(shared, min(len(s.prompt), len(e.prompt)) if m is None else m)
        reads += len(s.prompt) - block_size * (min(shared, len(s.prompt) - 1) // block_size)
    return reads + sum(s.max_new_tokens - 1 for s in specs)


def check_shared_memory(log, specs, kv_blocks: int | None, block_size: int) -> None:
    """Without a draft: the blocks each call's rows need at least, a full block shared by equal
    prefixes counted once, stay within kv_blocks. A row is read as the request whose tokens it
    feeds at its positions; a row that could be more than one request's is left out."""
    if kv_blocks is None:
        return
    full = [list(s.prompt) + list(solo(tuple(s.prompt), s.max_new_tokens)) for s in specs]
    for c, call in enumerate(log):
        keys, partial = set(), 0
        for row in call.rows:
            end = row.start + len(row.tokens)
            owners = {tuple(f[:end]) for f in full if f[row.start : end] == list(row.tokens)}
            if len(owners) != 1:
                continue
            (tokens,) = owners
            keys |= {tokens[: (j + 1) * block_size] for j in range(end // block_size)}
            partial += end % block_size > 0
        assert len(keys) + partial <= kv_blocks, (
            f"call {c}: its rows hold {len(keys)} distinct full blocks and {partial} partial ones "
            f"at least, but kv_blocks is {kv_blocks}: a shared block counts once, yet the pool "
            "still bounds what the rows hold"
        )


@given(data=st.data(), specs=shared_workloads(max_requests=5, max_new=6), batch=BATCH_SIZES)
def test_prefix_caching_tokens_equal_naive_serve_within_every_budget(impl, data, specs, batch):
    """Shared prefixes in every pool (blocks evicted and asked for again, preemptions), every
    batch size, with or without a step budget and a draft: the same tokens as naive_serve."""
    block_size, kv_blocks = data.draw(budgets(specs), label="block_size, kv_blocks")
    per_step = data.draw(st.sampled_from([None, 1, 3, 7, 16]), label="max_tokens_per_step")
    kind = data.draw(st.sampled_from([None, *DRAFTS]), label="draft")
    extra = {} if kind is None else {"draft": draft(kind), "k": data.draw(st.integers(1, 5))}
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), max_batch_size=batch,
        kv_blocks=kv_blocks, block_size=block_size, max_tokens_per_step=per_step,
        prefix_caching=True, **extra,
    )  # fmt: skip
    check_completions(out, specs)
    check_memory(log, batch, None, block_size)  # rows; blocks are counted below
    if per_step is not None:
        late = [(c, call.new_tokens) for c, call in enumerate(log) if call.new_tokens > per_step]
        assert not late, f"(call, tokens) past max_tokens_per_step={per_step}: {late}"
    if kind is None:
        check_shared_memory(log, specs, kv_blocks, block_size)


@given(specs=shared_workloads(max_requests=6), block_size=st.sampled_from([1, 2, 3, 4, 16]))
def test_a_request_reads_only_past_its_cached_prefix(impl, specs, block_size):
    """With room and no draft, a request that joins after another with the same first m prompt
    tokens feeds only what follows their full blocks (the block of its last prompt token is
    always fed): the target reads no more than that, plus each new token but the last."""
    model = target()
    out, log = run(
        impl.serve, model, as_requests(impl, specs), block_size=block_size, prefix_caching=True
    )
    check_completions(out, specs)
    read, bound = sum(call.new_tokens for call in log), cached_run_bound(specs, block_size)
    assert read <= bound, (
        f"with prefix_caching=True and block_size={block_size} the target read {read} tokens; "
        f"reusing the full blocks of the prompts that came before needs at most {bound}. A "
        "request that joins looks up the chained keys of its full blocks (each block's key "
        "names every token up to its end) and feeds only the tokens past the longest cached "
        "run; a block that is freed keeps its keys until the pool needs it"
    )


@pytest.mark.parametrize("P, block_size", [(20, 4), (17, 4), (16, 16), (33, 16), (5, 1)])
def test_the_same_prompt_again_feeds_only_its_last_block(impl, P, block_size):
    """The same prompt, asked again after the first answer is done: the second request's first
    row starts at block_size x floor((P - 1) / block_size), the start of the block of its last
    prompt token, and gives the same answer."""
    prompt = [(11 * i + 3) % VOCAB for i in range(P)]
    specs = [WorkloadRequest(1, prompt, 3, 0), WorkloadRequest(2, list(prompt), 3, 5)]
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), block_size=block_size, prefix_caching=True
    )
    check_completions(out, specs)
    start = block_size * ((P - 1) // block_size)
    row = log[3].rows[0]  # steps 0, 1, 2 answer the first; 3 and 4 pass idle
    assert (row.start, list(row.tokens)) == (start, prompt[start:]), (
        f"a prompt of {P} tokens asked again (block_size={block_size}): expected its first row "
        f"to start at {start} and feed {prompt[start:]}, got start {row.start} and "
        f"{list(row.tokens)}. Its full blocks are all cached but the one holding its last token, "
        "which is fed again so that the call gives the first token's logits; a freed block keeps "
        "its keys until the pool needs it"
    )


@given(specs=shared_workloads(max_requests=4, max_new=8), k=st.sampled_from([1, 2, 4]))
def test_an_agreeing_draft_keeps_its_pace_over_shared_blocks(impl, specs, k):
    """A draft that always agrees (the target's own weights) and room: every request finishes at
    arrival + ceil(max_new_tokens / (k + 1)) - 1, as in level 3, also when it joins over blocks
    another request left. A shared block holds the draft's keys too: it is registered only once
    both models hold its tokens."""
    out, _ = run(
        impl.serve, target(), as_requests(impl, specs), block_size=2, draft=draft("agreeing"),
        k=k, prefix_caching=True,
    )  # fmt: skip
    check_completions(out, specs)
    for got, spec in zip(out, specs, strict=True):
        want = spec.arrival + -(-spec.max_new_tokens // (k + 1)) - 1
        assert got.finished == want, (
            f"request {spec.id} (arrival {spec.arrival}, max_new_tokens {spec.max_new_tokens}, "
            f"k={k}) finished at step {got.finished}, expected {want}: with a draft that always "
            "agrees every proposal is kept. Fewer kept: the draft read keys it never wrote "
            "(a block shared before the draft held its tokens)"
        )


@pytest.mark.parametrize("block_size", [1, 2, 4])
def test_equal_blocks_after_different_prefixes_are_not_shared(impl, block_size):
    """A's prompt is P1 + P2, B's (arriving later) P2 + P1 + one token: their blocks hold equal
    tokens, but after different prefixes, so their keys differ (RoPE positions, attention over
    what came before). B shares nothing: its first row starts at position 0."""
    p1 = [(5 * i + 1) % VOCAB for i in range(2 * block_size)]
    p2 = [(7 * i + 3) % VOCAB for i in range(2 * block_size)]
    specs = [WorkloadRequest(1, p1 + p2, 4, 0), WorkloadRequest(2, p2 + p1 + [9], 4, 2)]
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), block_size=block_size, prefix_caching=True
    )
    check_completions(out, specs)
    joins = [row.start for call in log for row in call.rows if len(row.tokens) > 1]
    assert joins == [0, 0], (
        f"the two prompts' first rows start at positions {joins}, expected [0, 0]: a block's key "
        "chains the key of the block before it, (previous key, its tokens), so equal tokens "
        "after a different prefix are a different block"
    )


@pytest.mark.parametrize("kv_blocks", [7, 8, 10])
def test_a_shared_block_stays_while_another_holder_runs(impl, kv_blocks):
    """A and B share their first two blocks (block_size 2); B finishes first, then C joins in a
    tight pool. A still holds the shared blocks, so they are not free: C's new tokens go
    elsewhere, and A's answer stays naive_serve's."""
    prefix = [(5 * i + 1) % VOCAB for i in range(4)]
    specs = [
        WorkloadRequest(1, prefix + [40], 10, 0),
        WorkloadRequest(2, prefix + [41], 2, 1),
        WorkloadRequest(3, [(11 * i + 2) % VOCAB for i in range(3)], 6, 4),
    ]
    out, _ = run(
        impl.serve, target(), as_requests(impl, specs), block_size=2, kv_blocks=kv_blocks,
        prefix_caching=True,
    )  # fmt: skip
    check_completions(out, specs)


def test_a_preempted_request_rejoins_over_the_blocks_it_left(impl):
    """B (3 prompt tokens, 6 new) arrives first; A (7 prompt tokens, 4 new) arrives at step 1
    and shares B's first two tokens; block_size 1, 10 blocks. A joins over B's 2 cached blocks
    and feeds its other 5 prompt tokens. At step 2, B takes the last free block and A, the
    latest admitted, finds none for its newest token: it is preempted, and its 5 blocks go back
    to the free blocks with their keys, the block of its last prompt token first. B takes 3 of
    them (positions 6, 5 and 4 of A) before it finishes at step 5. At step 6 A rejoins: it looks
    its tokens up like any join, finds the 4 blocks of positions 0 to 3 still cached, and feeds
    positions 4 to 7 only."""
    specs = [
        WorkloadRequest(1, [16, 47, 49], 6, 0),
        WorkloadRequest(0, [16, 47, 60, 29, 24, 60, 60], 4, 1),
    ]
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), block_size=1, kv_blocks=10,
        prefix_caching=True,
    )  # fmt: skip
    check_completions(out, specs)
    joins = [(c, row.start, len(row.tokens)) for c, call in enumerate(log)
             for row in call.rows if len(row.tokens) > 1]  # fmt: skip
    want = [(0, 0, 3), (1, 2, 5), (6, 4, 4)]
    assert joins == want, (
        f"(call, start, tokens) of the rows feeding more than one token: expected {want}, got "
        f"{joins}. A request that rejoins after a preemption looks up the keys of its tokens' "
        "full blocks like any join: the blocks it let go keep their contents and keys until "
        "the pool hands them out again (least recently freed first), so its row starts past "
        "those still cached"
    )


def test_prefix_caching_reads_a_third_of_the_prompts_on_a_shared_prefix_workload(impl, figures):
    """24 requests, 4 system prompts of 32 tokens, tails of 2 to 6: with prefix caching the
    target reads at least 3x fewer prompt tokens than without, the answers unchanged."""
    specs = shared_prefix_workload(
        24, rate=2.0, prefix_len=32, tail=(2, 6), vocab_size=VOCAB, max_seq_len=MAX_SEQ_LEN,
        scale=0.015,
    )  # fmt: skip
    answers = sum(s.max_new_tokens - 1 for s in specs)
    reads = {}
    for caching in (False, True):
        out, log = run(impl.serve, target(), as_requests(impl, specs), prefix_caching=caching)
        check_completions(out, specs)
        reads[caching] = sum(call.new_tokens for call in log) - answers
    figures.record("prompt tokens read, without / with prefix caching",
                   reads[False] / reads[True], "x", requests=len(specs))  # fmt: skip
    assert 3 * reads[True] <= reads[False], (
        f"the target read {reads[True]} prompt tokens with prefix caching and {reads[False]} "
        f"without: {reads[False] / reads[True]:.1f}x fewer, 3x expected. The 4 prefixes of 32 "
        "tokens are two full blocks each: a request whose prefix was seen at an earlier step "
        "reads only its tail"
    )


BAD_FLAGS = [
    BadCall(f"serve(model, requests, prefix_caching={value!r})", why,
            lambda impl, value=value: impl.serve(
                target(), [impl.Request(1, [3], 1)], prefix_caching=value))
    for value, why in [(1, "an int"), ("yes", "a string"), (None, "None")]
]  # fmt: skip


@pytest.mark.parametrize("bad", BAD_FLAGS, ids=str)
def test_a_bad_prefix_caching_flag_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match="prefix_caching")
