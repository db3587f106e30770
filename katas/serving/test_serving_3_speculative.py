"""Level 3: speculative decoding inside the engine: exact, one verifying call per step, batched
draft calls, the draft's cache rolled back, and the whole still far cheaper than naive."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grading.judge.cost import count_flops
from grading.judge.errors import BadCall, assert_value_error
from grading.model import make_model
from katas.serving.cases import (
    DRAFTS,
    MAX_SEQ_LEN,
    as_requests,
    budgets,
    busy_steps,
    chat_workload,
    check_completions,
    check_memory,
    check_preempts_only_without_blocks,
    check_reads,
    draft,
    ideal_flops,
    naive_flops,
    rounds,
    run,
    target,
    workloads,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 32])
KS = st.sampled_from([1, 2, 3, 4, 7])


@given(
    data=st.data(), specs=workloads(max_requests=6, max_new=12), batch=BATCH_SIZES, k=KS,
    kind=st.sampled_from(DRAFTS),
)  # fmt: skip
def test_speculative_serve_tokens_equal_naive_serve_within_every_budget(
    impl, data, specs, batch, k, kind
):
    block_size, kv_blocks = data.draw(budgets(specs), label="block_size, kv_blocks")
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), max_batch_size=batch,
        kv_blocks=kv_blocks, block_size=block_size, draft=draft(kind), k=k,
    )  # fmt: skip
    check_completions(out, specs)
    check_memory(log, batch, kv_blocks, block_size)
    check_memory(list(draft(kind).batch_log), batch, kv_blocks, block_size)
    check_reads(target(), draft(kind), kind, k, specs)
    check_preempts_only_without_blocks(log, specs, kind, k, kv_blocks, block_size)


@given(specs=workloads(max_requests=5, max_new=12), k=KS, kind=st.sampled_from(DRAFTS))
def test_with_room_each_request_takes_the_rounds_its_draft_earns(impl, specs, k, kind):
    """No waiting: a request's steps are its rounds alone, each round the draft's greedy
    proposals from the true context (the draft's cache rolled back after every rejection)."""
    model, small = target(), draft(kind)
    out, log = run(
        impl.serve, model, as_requests(impl, specs), max_batch_size=len(specs), draft=small, k=k
    )
    check_completions(out, specs)
    for got, spec in zip(out, specs, strict=True):
        n = rounds(kind, tuple(spec.prompt), spec.max_new_tokens, k)
        want = (spec.arrival, spec.arrival + n - 1)
        assert (got.first_token, got.finished) == want, (
            f"request {spec.id} (arrival {spec.arrival}, max_new_tokens {spec.max_new_tokens}, "
            f"k={k}, {kind} draft): expected (first_token, finished) = {want} ({n} rounds), got "
            f"{(got.first_token, got.finished)}. Each step is one round: min(k, tokens still "
            "needed - 1) greedy proposals, then one target call keeps the agreeing prefix plus "
            "one token. Fewer steps than that: tokens were accepted that the target never "
            "checked; more: proposals were wasted, often a draft cache still holding a rejected "
            "token's keys"
        )
    draft_calls = len(small.batch_log)
    assert len(log) == busy_steps(out), (
        f"{len(log)} target calls for {busy_steps(out)} busy steps: one target call per step "
        "verifies every running request's proposals"
    )
    assert draft_calls <= k * len(log), (
        f"{draft_calls} draft calls for {len(log)} steps with k={k}: at most one batched draft "
        "call per proposal position per step, every request's proposal in it"
    )


def test_the_draft_reads_each_committed_token_once(impl):
    """With room: between rounds each model keeps the keys of the committed tokens it has read
    (its memory rolled back only past the rejected proposals), so the target reads each
    committed token once plus the proposals it rejects, and the draft each committed token once
    plus the proposals it feeds back to itself: exactly, counted round by round."""
    specs, small = chat_workload(8, seed=3), draft("close")
    out, _ = run(impl.serve, target(), as_requests(impl, specs), draft=small, k=3)
    check_completions(out, specs)
    check_reads(target(), small, "close", 3, specs)


def test_speculative_serve_is_ten_times_cheaper_than_naive(impl, figures):
    """With a draft that agrees: at least 10x fewer FLOPs (both models) and 10x fewer target
    calls than naive_serve; FLOPs at most 1.25x what the logged calls need."""
    specs, small, model = chat_workload(), draft("agreeing"), target()
    out, log = run(impl.serve, model, as_requests(impl, specs), draft=small, k=4)
    check_completions(out, specs)
    calls, draft_log = len(log), list(small.batch_log)
    _, flops = count_flops(impl.serve, model, as_requests(impl, specs), draft=small, k=4)
    naive = naive_flops(model, specs)
    naive_calls = sum(s.max_new_tokens for s in specs)
    ideal = ideal_flops(model, log) + ideal_flops(small, draft_log)
    figures.record("naive FLOPs / serve FLOPs, with a draft", naive / flops, "x", k=4)
    figures.record("naive calls / serve target calls, with a draft", naive_calls / calls, "x", k=4)
    assert flops <= 1.25 * ideal, (
        f"serve with a draft spent {flops:,} FLOPs; the target's and the draft's logged calls "
        f"need {ideal:,} with grouped experts and each row attending to its own keys "
        f"({flops / ideal:.2f}x)"
    )
    assert 10 * flops <= naive and 10 * calls <= naive_calls, (
        f"serve with a draft: {flops:,} FLOPs and {calls} target calls; naive_serve needs "
        f"{naive:,} and {naive_calls}. 10x fewer of each expected"
    )


BAD_CALLS = [
    BadCall("serve(model, requests, draft=<a model with vocab_size 32>)",
            "a draft with another vocabulary",
            lambda impl: impl.serve(target(), [impl.Request(1, [3], 2)],
                                    draft=make_model(1, vocab_size=32, max_seq_len=MAX_SEQ_LEN))),
    BadCall("serve(model, [prompt of 10 + 10 new], draft=<max_seq_len 16>)",
            "a request longer than the draft allows",
            lambda impl: impl.serve(target(), [impl.Request(1, [3] * 10, 10)],
                                    draft=make_model(1, vocab_size=64, max_seq_len=16))),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    "a draft with another vocabulary": "vocab_size",
    "a request longer than the draft allows": "max_seq_len",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_speculative_serve_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])
