"""Level 4: stop tokens: a request ends at its first new token in `stop` (kept), leaves in that
step with its blocks, and with a draft keeps nothing past it."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from grading.judge.strategies import seeds
from grading.model.naive import naive_serve
from grading.model.workload import WorkloadRequest
from katas.serving.cases import (
    DRAFTS,
    MAX_SEQ_LEN,
    VOCAB,
    as_requests,
    budgets,
    busy_steps,
    chat_workload,
    check_memory,
    check_one_row_per_token,
    check_preempts_only_without_blocks,
    check_reads,
    check_stopped_completions,
    draft,
    ideal_tokens,
    kept_workload,
    run,
    solo,
    solo_rounds,
    stopped_answer,
    stops,
    target,
    workloads,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 32])
KS = st.sampled_from([1, 2, 3, 4, 7])


def draw_stops(data, specs, early: bool = False) -> list:
    return [data.draw(stops(s, early), label=f"stop of request {s.id}") for s in specs]


@given(data=st.data(), specs=workloads(max_requests=5, max_new=10), batch=BATCH_SIZES)
def test_stopped_tokens_equal_naive_serve_within_every_budget(impl, data, specs, batch):
    """Stop ids drawn from what each request really generates (its first new token too), ids it
    never generates, tokens of its prompt; every budget. A request that stops after n tokens is
    then fed exactly as one that asks for n: one row per token, each token read once, preempted
    only when the blocks run out."""
    stop = draw_stops(data, specs)
    block_size, kv_blocks = data.draw(budgets(specs), label="block_size, kv_blocks")
    model = target()
    out, log = run(
        impl.serve, model, as_requests(impl, specs, stop),
        max_batch_size=batch, kv_blocks=kv_blocks, block_size=block_size,
    )  # fmt: skip
    check_stopped_completions(out, specs, stop)
    check_memory(log, batch, kv_blocks, block_size)
    kept = kept_workload(specs, stop)
    check_one_row_per_token(log, kept)
    check_reads(model, None, None, 1, kept)
    check_preempts_only_without_blocks(log, kept, None, 1, kv_blocks, block_size)


@given(data=st.data(), specs=workloads(max_requests=5, max_new=10))
def test_with_room_a_request_leaves_in_the_step_of_its_stop_token(impl, data, specs):
    """No waiting: a request gains a token a step from its arrival, and its stop token, its
    n-th, comes out in step arrival + n - 1, which is its `finished`; nobody is fed after it."""
    stop = draw_stops(data, specs)
    model = target()
    out, log = run(impl.serve, model, as_requests(impl, specs, stop), max_batch_size=len(specs))
    check_stopped_completions(out, specs, stop)
    for got, spec, ids in zip(out, specs, stop, strict=True):
        n = len(stopped_answer(spec, ids))
        want = (spec.arrival, spec.arrival + n - 1)
        assert (got.first_token, got.finished) == want, (
            f"request {spec.id} (arrival {spec.arrival}, max_new_tokens {spec.max_new_tokens}, "
            f"stop {ids}, {n} tokens kept): expected (first_token, finished) = {want}, got "
            f"{(got.first_token, got.finished)}. With room it gains a token every step from "
            "its arrival; `finished` is the step whose call gave its stop token (or its "
            "max_new_tokens-th token), and it leaves in that step"
        )
    kept = kept_workload(specs, stop)
    check_one_row_per_token(log, kept)
    fed = sum(call.new_tokens for call in log)
    assert fed == ideal_tokens(kept), (
        f"the target read {fed} tokens; every prompt token and every kept token but the last, "
        f"once each, make {ideal_tokens(kept)}. More: a request was fed after its stop token"
    )
    assert len(log) == busy_steps(out), (
        f"{len(log)} target calls for {busy_steps(out)} busy steps: one packed call per step"
    )


@st.composite
def crowded(draw):
    """2 or 3 requests, all at step 0, whose prompts (21 to 30 tokens) are so long that no two
    fit in the pool together: kv_blocks is what the largest needs alone. Each stops before its
    max_new_tokens (2 to 6)."""
    n = draw(st.integers(2, 3), label="requests")
    base = draw(st.integers(0, VOCAB - 1), label="first token")
    gen = torch.Generator().manual_seed(draw(seeds(), label="prompt seed"))
    specs = []
    for i in range(n):
        P = draw(st.integers(21, 30), label=f"prompt length {i}")
        new = draw(st.integers(2, 6), label=f"max_new_tokens {i}")
        prompt = [(base + 5 * i) % VOCAB] + torch.randint(
            0, VOCAB, (P - 1,), generator=gen
        ).tolist()
        specs.append(WorkloadRequest(10 + i, prompt, new, 0))
    return specs


@given(data=st.data(), specs=crowded(), block_size=st.sampled_from([1, 2, 3, 4, 16]))
def test_a_stopped_request_hands_its_blocks_back_in_the_step_it_stops(
    impl, data, specs, block_size
):
    """No two prompts fit in the pool together, so the requests run one at a time, each from
    step 0 on, whatever the order: the next joins in the step after the one before stops. A
    request's blocks are free in the step its stop token comes out, as when it reaches its
    max_new_tokens."""
    stop = draw_stops(data, specs, early=True)
    kv_blocks = max(-(-(len(s.prompt) + s.max_new_tokens - 1) // block_size) for s in specs)
    out, log = run(
        impl.serve, target(), as_requests(impl, specs, stop), max_batch_size=len(specs),
        kv_blocks=kv_blocks, block_size=block_size,
    )  # fmt: skip
    check_stopped_completions(out, specs, stop)
    check_memory(log, len(specs), kv_blocks, block_size)
    order = sorted(out, key=lambda c: c.first_token)
    assert order[0].first_token == 0, (
        f"the first request to run started at step {order[0].first_token}: all arrive at step 0 "
        "and each fits alone"
    )
    for before, after in zip(order, order[1:], strict=False):
        assert after.first_token == before.finished + 1, (
            f"request {before.id} stopped at step {before.finished} ({len(before.tokens)} tokens, "
            f"its last a stop token); request {after.id}, waiting since step 0, joined at step "
            f"{after.first_token}, expected {before.finished + 1}. No two of these prompts fit in "
            f"kv_blocks={kv_blocks} blocks of {block_size} tokens together: a request that stops "
            "hands its blocks back in that very step, and a waiting one joins the next step. "
            "Later: the stopped request's blocks were freed a step late, or it kept its row"
        )
    steps = order[-1].finished + 1
    assert len(log) == steps and all(len(call.rows) == 1 for call in log), (
        f"{len(log)} target calls, with {[len(call.rows) for call in log]} rows, for steps 0 to "
        f"{steps - 1}: one request at a time, and a call in every step (a step without one "
        "means a request waited for blocks that were already free)"
    )


@given(
    data=st.data(), specs=workloads(max_requests=4, max_new=10), batch=BATCH_SIZES, k=KS,
    kind=st.sampled_from(DRAFTS),
)  # fmt: skip
def test_speculative_serve_keeps_no_token_past_the_stop(impl, data, specs, batch, k, kind):
    """With a draft a round may commit several tokens; when the accepted proposals or the
    target's own token hold a stop token, the completion ends at the first of them."""
    stop = draw_stops(data, specs)
    block_size, kv_blocks = data.draw(budgets(specs), label="block_size, kv_blocks")
    out, log = run(
        impl.serve, target(), as_requests(impl, specs, stop), max_batch_size=batch,
        kv_blocks=kv_blocks, block_size=block_size, draft=draft(kind), k=k,
    )  # fmt: skip
    check_stopped_completions(out, specs, stop)
    check_memory(log, batch, kv_blocks, block_size)
    check_memory(list(draft(kind).batch_log), batch, kv_blocks, block_size)


@given(data=st.data(), specs=workloads(max_requests=4, max_new=10), k=KS)
def test_with_room_and_a_draft_a_request_stops_in_the_round_of_its_stop_token(impl, data, specs, k):
    """The rounds are those without stop tokens (the draft proposes min(k, tokens still needed
    - 1) as before); the round that commits the stop token is the request's last."""
    kind = data.draw(st.sampled_from(DRAFTS), label="draft")
    stop = draw_stops(data, specs)
    out, _ = run(
        impl.serve, target(), as_requests(impl, specs, stop), max_batch_size=len(specs),
        draft=draft(kind), k=k,
    )  # fmt: skip
    check_stopped_completions(out, specs, stop)
    proposed = 0  # draft rows: one per proposal, in the rounds up to the stop
    for got, spec, ids in zip(out, specs, stop, strict=True):
        n = len(stopped_answer(spec, ids))
        plan = solo_rounds(kind, tuple(spec.prompt), spec.max_new_tokens, k)
        done, r = 0, 0
        while done < n:  # round r commits plan[r].kept + 1 tokens
            done, r = done + plan[r].kept + 1, r + 1
            proposed += len(plan[r - 1].proposals)
        want = (spec.arrival, spec.arrival + r - 1)
        assert (got.first_token, got.finished) == want, (
            f"request {spec.id} (arrival {spec.arrival}, max_new_tokens {spec.max_new_tokens}, "
            f"stop {ids}, {n} tokens kept, k={k}, {kind} draft): expected (first_token, "
            f"finished) = {want}: its stop token comes out in round {r}, got "
            f"{(got.first_token, got.finished)}. Each step is one round, as without stop "
            "tokens; the round that commits the stop token ends the request"
        )
    rows = sum(len(call.rows) for call in draft(kind).batch_log)
    assert rows == proposed, (
        f"the draft's calls held {rows} rows; its rounds up to each stop propose {proposed} "
        f"tokens (k={k}), one row each. The draft proposes min(k, tokens still needed - 1) "
        "counted from max_new_tokens, whatever it drafts: where a stop comes is known only "
        "once the target has verified it"
    )


@pytest.mark.parametrize("at", [0, 1, 2])
def test_a_stopped_request_frees_its_blocks_while_another_runs(impl, at):
    """Request A decodes in one block all along; B stops at its new token number `at` + 1; C
    waits for blocks. With kv_blocks=3 of 4 tokens, C joins in the step after B stops: B's
    blocks are free in the step of its stop token even though A keeps running."""
    b_prompt = [3, 14, 15, 9, 26]
    stop = (solo(tuple(b_prompt), 4)[at],)
    specs = [
        WorkloadRequest(2, [1], 4, 0),
        WorkloadRequest(0, b_prompt, 4, 0),
        WorkloadRequest(1, [7, 7, 1, 2, 5], 4, 0),
    ]
    stops_given = [(), stop, ()]
    out, log = run(
        impl.serve, target(), as_requests(impl, specs, stops_given), kv_blocks=3, block_size=4
    )
    check_stopped_completions(out, specs, stops_given)
    check_memory(log, 32, 3, 4)
    b, c = out[1], out[2]
    assert c.first_token == b.finished + 1, (
        f"request {b.id} stopped at step {b.finished} (stop {stop}); request {c.id}, waiting "
        f"for 2 of the 3 blocks since step 0, joined at step {c.first_token}, expected "
        f"{b.finished + 1}: a stopped request hands its blocks back in the step of its stop "
        f"token, whoever else is running (request {out[0].id} holds the third block)"
    )


def test_stopped_serve_matches_naive_serve_on_a_chat_workload(impl):
    """naive_serve itself, on the chat-like workload, each request stopping on the token it
    generates halfway (or never: every third has no stop ids)."""
    specs = chat_workload(8, seed=2)
    stop = [
        () if i % 3 == 0 else (solo(tuple(s.prompt), s.max_new_tokens)[s.max_new_tokens // 2],)
        for i, s in enumerate(specs)
    ]
    naive = naive_serve(target(), as_requests(impl, specs, stop))
    out, log = run(
        impl.serve, target(), as_requests(impl, specs, stop), max_batch_size=8, kv_blocks=12
    )
    check_stopped_completions(out, specs, stop)
    check_memory(log, 8, 12, 16)
    for got, want in zip(out, naive, strict=True):
        assert list(got.tokens) == want.tokens, f"request {want.id}: tokens differ from naive_serve"


def test_a_stop_token_in_the_prompt_means_nothing(impl):
    """Every token of each prompt that the request never generates is one of its stop ids: none
    of them ends it, so it keeps all its max_new_tokens tokens."""
    specs = chat_workload(6, seed=4)
    stop = [
        tuple(sorted(set(s.prompt) - set(solo(tuple(s.prompt), s.max_new_tokens)))) for s in specs
    ]
    assert all(stop), "each prompt has a token its request never generates"
    out, _ = run(impl.serve, target(), as_requests(impl, specs, stop), max_batch_size=4)
    check_stopped_completions(out, specs, stop)


def _with_stop(stop):
    return lambda impl: impl.serve(target(), [impl.Request(1, [3, 4], 2, 0, stop=stop)])


BAD_CALLS = [
    BadCall(f"serve(model, [Request(1, [3, 4], 2, 0, stop={text})])", why, _with_stop(stop))
    for text, stop, why in [
        ("(64,)", (64,), "a stop id outside the vocabulary"),
        ("(-1,)", (-1,), "a negative stop id"),
        ("(True,)", (True,), "a bool stop id"),
        ("(3.0,)", (3.0,), "a float stop id"),
        ("(torch.tensor(4),)", (torch.tensor(4),), "a tensor stop id"),
        ("5", 5, "stop an int, not a tuple"),
        ("None", None, "stop None"),
        ("torch.tensor([4])", torch.tensor([4]), "stop a tensor"),
    ]
]


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_stop_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match="stop")


def _stopping_at_once(prompt: list[int], max_new_tokens: int, **kwargs):
    first = solo(tuple(prompt), 1)[0]  # its first new token ends it, were it served
    return lambda impl: impl.serve(
        target(), [impl.Request(1, prompt, max_new_tokens, 0, stop=(first,))], **kwargs
    )


LENGTH_CALLS = [
    BadCall(f"serve(model, [Request(1, a prompt of {MAX_SEQ_LEN} tokens, 2, 0, stop=(its first "
            "new token,))])", "max_seq_len",
            _stopping_at_once([(7 * i) % VOCAB for i in range(MAX_SEQ_LEN)], 2)),
    BadCall("serve(model, [Request(1, [3, 14, 15, 9], 3, 0, stop=(its first new token,))], "
            "kv_blocks=1, block_size=4)", "kv_blocks",
            _stopping_at_once([3, 14, 15, 9], 3, kv_blocks=1, block_size=4)),
]  # fmt: skip


@pytest.mark.parametrize("bad", LENGTH_CALLS, ids=str)
def test_lengths_are_checked_for_max_new_tokens_whatever_stop_says(impl, bad):
    """A stop may never come: the length and block checks count max_new_tokens."""
    assert_value_error(bad, impl, match=bad.why)
