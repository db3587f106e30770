"""Level 5: chunked prefill: `max_tokens_per_step` caps the tokens of every target call, so a long
prompt is fed in chunks over several steps while the decoding requests keep their pace."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from grading.model.workload import WorkloadRequest
from katas.serving.cases import (
    DRAFTS,
    MAX_SEQ_LEN,
    as_requests,
    budgets,
    check_completions,
    check_memory,
    draft,
    ideal_tokens,
    run,
    solo,
    target,
    workloads,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 32])
STEP_BUDGETS = st.sampled_from([1, 2, 3, 4, 5, 7, 16, 31, 64])


def check_budget(log, max_tokens_per_step: int) -> None:
    """No target call feeds more than max_tokens_per_step tokens, proposals included."""
    for c, call in enumerate(log):
        assert call.new_tokens <= max_tokens_per_step, (
            f"call {c} fed {call.new_tokens} tokens in {len(call.rows)} rows (rows of "
            f"{[len(row.tokens) for row in call.rows]}), but max_tokens_per_step is "
            f"{max_tokens_per_step}: a long prompt is fed in chunks, each row taking "
            "min(pending, budget left), and a draft's proposals count towards the budget"
        )


def check_chunks_take_the_budget_left(log, specs: list[WorkloadRequest], per_step: int) -> None:
    """Without a draft: a row that leaves some of its pending tokens for later (a chunk) took all
    the budget left, so it is its call's last row and the call fed max_tokens_per_step tokens. A
    chunk is never shrunk to fit the free blocks (the latest admitted is preempted instead), nor
    cut short while budget is left. Rows are told apart by the model's log alone: a row from
    position 0 is the request with that first prompt token, a later one the request whose next
    row starts there with those tokens."""
    full = [list(s.prompt) + list(solo(tuple(s.prompt), s.max_new_tokens)) for s in specs]
    by_first = {s.prompt[0]: r for r, s in enumerate(specs)}  # distinct first tokens
    made = [0] * len(specs)  # tokens each request has generated
    at = [None] * len(specs)  # where each request's next row starts; None: not yet admitted
    for c, call in enumerate(log):
        used = set()
        for n, row in enumerate(call.rows):
            end = row.start + len(row.tokens)
            if row.start == 0:  # a join: the request with that first prompt token, if any
                who = [by_first[t] for t in row.tokens[:1] if t in by_first]
            else:
                who = [r for r in range(len(specs)) if r not in used and at[r] == row.start
                       and full[r][row.start : end] == list(row.tokens)]  # fmt: skip
            complete = {end == len(specs[r].prompt) + made[r] for r in who}
            if len(complete) != 1:
                return  # no request, or two in the same place: the log cannot tell
            r = who[0]
            used.add(r)
            at[r] = end
            if complete.pop():  # its last pending token is in: a new token comes out
                made[r] += 1
                continue
            last, fed = n == len(call.rows) - 1, call.new_tokens
            assert last and fed == per_step, (
                f"call {c}: request {specs[r].id}'s row fed positions {row.start}..{end - 1}, "
                f"a chunk (its tokens reach {len(specs[r].prompt) + made[r]}), yet the call fed "
                f"{fed} of max_tokens_per_step={per_step} tokens"
                + ("" if last else " and rows follow it")
                + ". A chunk takes all the budget left: min(pending, budget left). Usually: a "
                "chunk shrunk to fit the free blocks (preempt the latest admitted instead), or "
                "a later request served before the chunk's budget was spent"
            )


def chunked_schedule(specs: list[WorkloadRequest], budget: int, max_batch_size: int):
    """The README's schedule without a draft and with room in the pool: every step the running
    requests, oldest admitted first, then the arrived requests join in arrival order (ties in the
    order of `requests`) while a slot and budget are left, each row taking min(pending, budget
    left). A prompt left unfinished exhausted its step's budget, so it is always the latest
    admitted: the decoding rows come before it. Returns {id: (first_token, finished)} and each
    call's tokens."""
    order = sorted(range(len(specs)), key=lambda i: (specs[i].arrival, i))
    read = dict.fromkeys(order, 0)  # tokens the target has read
    made = dict.fromkeys(order, 0)  # tokens generated
    first, finished, fed_per_call = {}, {}, []
    waiting, running, step = list(order), [], 0
    while waiting or running:
        if not running and specs[waiting[0]].arrival > step:
            step = specs[waiting[0]].arrival  # idle until somebody arrives
        left, rows = budget, []

        def pending(i: int) -> int:
            return len(specs[i].prompt) + made[i] - read[i]

        for i in running:
            if left:
                rows.append((i, min(pending(i), left)))
                left -= rows[-1][1]
        while (
            waiting
            and specs[waiting[0]].arrival <= step
            and left
            and len(running) < (max_batch_size)
        ):
            running.append(waiting.pop(0))
            rows.append((running[-1], min(pending(running[-1]), left)))
            left -= rows[-1][1]
        fed_per_call.append(budget - left)
        for i, n in rows:
            read[i] += n
            if pending(i) == 0:  # its last pending token is in: a new token comes out
                made[i] += 1
                first.setdefault(specs[i].id, step)
                if made[i] == specs[i].max_new_tokens:
                    finished[specs[i].id] = step
                    running.remove(i)
        step += 1
    return {s.id: (first[s.id], finished[s.id]) for s in specs}, fed_per_call


@given(data=st.data(), specs=workloads(max_requests=4, max_new=6, max_prompt=24), batch=BATCH_SIZES)
def test_chunked_tokens_equal_naive_serve_within_every_budget(impl, data, specs, batch):
    """Every step budget, pool and batch size, with or without a draft: the same tokens as
    naive_serve, no call past the step budget, the rows' blocks within kv_blocks."""
    per_step = data.draw(STEP_BUDGETS, label="max_tokens_per_step")
    block_size, kv_blocks = data.draw(budgets(specs), label="block_size, kv_blocks")
    kind = data.draw(st.sampled_from([None, *DRAFTS]), label="draft")
    extra = {} if kind is None else {"draft": draft(kind), "k": data.draw(st.integers(1, 5))}
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), max_batch_size=batch,
        kv_blocks=kv_blocks, block_size=block_size, max_tokens_per_step=per_step, **extra,
    )  # fmt: skip
    check_completions(out, specs)
    check_budget(log, per_step)
    check_memory(log, batch, kv_blocks, block_size)
    if kind is None:
        check_chunks_take_the_budget_left(log, specs, per_step)


TIGHT = [  # (requests, block_size, kv_blocks, max_tokens_per_step): chunks and preemptions
    (
        [([62, 32, 10, 38, 43, 2, 9], 8, 0), ([36, 15], 5, 0),
         ([8, 17, 34, 19, 27, 54, 9, 52, 18, 7], 1, 1)],
        3, 6, 6,
    ),
    (
        [([46, 37, 22, 35, 14], 1, 1), ([53, 32, 40, 51, 17, 7, 17], 7, 1), ([26, 42, 15], 6, 0),
         ([52, 10, 60, 18, 52], 7, 2)],
        1, 15, 6,
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(TIGHT)))
def test_chunks_in_a_tight_pool_preempt_rather_than_shrink(impl, case):
    """Prompts fed in chunks while the pool runs out: the latest admitted is preempted, a chunk
    is never shrunk to fit the free blocks, and a recompute after a preemption is fed in chunks
    within the budget like a prompt."""
    rows, block_size, kv_blocks, per_step = TIGHT[case]
    specs = [WorkloadRequest(i, p, new, at) for i, (p, new, at) in enumerate(rows)]
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), block_size=block_size,
        kv_blocks=kv_blocks, max_tokens_per_step=per_step,
    )  # fmt: skip
    check_completions(out, specs)
    check_budget(log, per_step)
    check_memory(log, 32, kv_blocks, block_size)
    check_chunks_take_the_budget_left(log, specs, per_step)


@given(
    P=st.integers(1, MAX_SEQ_LEN - 1),
    new=st.integers(1, 4),
    per_step=STEP_BUDGETS,
    arrival=st.integers(0, 3),
)
def test_a_long_prompt_alone_is_fed_in_chunks(impl, P, new, per_step, arrival):
    """Alone, a prompt of P tokens is fed in ceil(P / budget) calls of min(budget, what is left)
    tokens, at positions 0, budget, 2 x budget, ...; its first token comes from the last chunk's
    call, then one a step."""
    new = min(new, MAX_SEQ_LEN - P + 1)
    specs = [WorkloadRequest(7, [(3 * i + 1) % 64 for i in range(P)], new, arrival)]
    out, log = run(impl.serve, target(), as_requests(impl, specs), max_tokens_per_step=per_step)
    check_completions(out, specs)
    chunks = math.ceil(P / per_step)
    want = [(c * per_step, min(per_step, P - c * per_step)) for c in range(chunks)]
    got = [(call.rows[0].start, len(call.rows[0].tokens)) for call in log[:chunks]]
    assert got == want, (
        f"a prompt of {P} tokens alone with max_tokens_per_step={per_step}: expected its first "
        f"{chunks} calls to feed (start, tokens) = {want}, got {got}. Each step feeds "
        "min(pending, budget) of its prompt, from where the last chunk ended, and keeps the "
        "chunks' keys: no token is read twice"
    )
    want_steps = (arrival + chunks - 1, arrival + chunks + new - 2)
    assert (out[0].first_token, out[0].finished) == want_steps, (
        f"expected (first_token, finished) = {want_steps}, got "
        f"{(out[0].first_token, out[0].finished)}: the call that feeds the last chunk gives the "
        "first token (one whose chunk is not the prompt's last gives none), then one per step"
    )


@given(
    P=st.integers(1, MAX_SEQ_LEN - 1),
    new=st.integers(1, 6),
    per_step=STEP_BUDGETS,
    k=st.integers(1, 4),
)
def test_a_long_prompt_alone_gets_proposals_only_with_its_last_chunk(impl, P, new, per_step, k):
    """With a draft that always agrees, alone: the prompt is fed in the same chunks as without
    one, and only the call that feeds its last chunk (all its pending tokens) adds proposals:
    min(k, new - 1, budget left after the chunk)."""
    new = min(new, MAX_SEQ_LEN - P + 1)
    specs = [WorkloadRequest(7, [(3 * i + 1) % 64 for i in range(P)], new, 0)]
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), draft=draft("agreeing"), k=k,
        max_tokens_per_step=per_step,
    )  # fmt: skip
    check_completions(out, specs)
    check_budget(log, per_step)
    chunks = math.ceil(P / per_step)
    last = P - (chunks - 1) * per_step
    proposals = min(k, new - 1, per_step - last)
    want = [(c * per_step, per_step) for c in range(chunks - 1)]
    want.append(((chunks - 1) * per_step, last + proposals))
    got = [(call.rows[0].start, len(call.rows[0].tokens)) for call in log[:chunks]]
    assert got == want, (
        f"a prompt of {P} tokens alone, max_tokens_per_step={per_step}, a draft with k={k}, "
        f"{new} new tokens: expected its first {chunks} target calls to feed (start, tokens) = "
        f"{want}, got {got}. The prompt's chunks come first, each min(pending, budget); a row "
        "whose pending tokens all fit then gets min(k, tokens it still needs - 1, budget left) "
        "proposals, and a row fed only a chunk gets none"
    )


@given(data=st.data(), specs=workloads(max_requests=5, max_new=6, max_prompt=24), batch=BATCH_SIZES)
def test_with_room_no_budget_is_left_unused(impl, data, specs, batch):
    """With room in the pool and no draft the schedule is pinned: the running requests first,
    oldest admitted first, then the arrived requests join in arrival order, each row taking
    min(pending, budget left), so no budget is left unused while a request has pending tokens
    or an arrived request could join. Every token is read once."""
    per_step = data.draw(STEP_BUDGETS, label="max_tokens_per_step")
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), max_batch_size=batch,
        max_tokens_per_step=per_step,
    )  # fmt: skip
    check_completions(out, specs)
    check_budget(log, per_step)
    want, fed = chunked_schedule(specs, per_step, batch)
    got = {c.id: (c.first_token, c.finished) for c in out}
    wrong = {i: (want[i], got[i]) for i in want if want[i] != got[i]}
    assert not wrong, (
        f"max_tokens_per_step={per_step}, max_batch_size={batch}: (first_token, finished) "
        f"expected vs got, for the requests that differ: {wrong}. Each step: the running requests "
        "first, oldest admitted first; then the arrived requests join in arrival order while a "
        "slot and budget are left; each row takes min(pending, budget left). Usually: budget "
        "left unused (a join refused while budget was left, a chunk cut short), a joining "
        "request served before a running one, or a chunk that does not start where the last "
        "one ended"
    )
    assert [call.new_tokens for call in log] == fed, (
        f"tokens fed per call: expected {fed}, got {[call.new_tokens for call in log]}"
    )
    read = sum(call.new_tokens for call in log)
    assert read == ideal_tokens(specs), (
        f"the target read {read} tokens; every prompt token and every new token but the last "
        f"once each make {ideal_tokens(specs)}: a chunk's keys are kept, never read again"
    )


@given(
    decoders=st.integers(1, 4),
    new=st.integers(5, 8),
    P=st.integers(20, 32),
    spare=st.integers(1, 8),
    when=st.integers(1, 3),
)
def test_decoding_requests_keep_their_pace_while_a_long_prompt_arrives(
    impl, decoders, new, P, spare, when
):
    """A few short requests decode; a long prompt arrives at step `when`. With a budget of the
    decoding rows plus `spare`, every short request still gains a token every step (its time per
    output token is one step), and the long prompt takes the rest of each step's budget."""
    per_step = decoders + spare
    specs = [WorkloadRequest(i, [5 * i + 1, 2], new, 0) for i in range(decoders)]
    specs.append(WorkloadRequest(99, [9] + [(7 * i) % 64 for i in range(P - 1)], 3, when))
    # the short prompts, 2 tokens each, join at step 0 while the budget lasts
    out, log = run(impl.serve, target(), as_requests(impl, specs), max_tokens_per_step=per_step)
    check_completions(out, specs)
    check_budget(log, per_step)
    for got in out[:-1]:
        assert got.finished - got.first_token == new - 1, (
            f"request {got.id} (prompt of 2 tokens, {new} new) got its first token at step "
            f"{got.first_token} and its last at {got.finished}: {got.finished - got.first_token} "
            f"steps for {new - 1} tokens, though each step's budget of {per_step} holds the "
            f"{decoders} decoding rows and {spare} tokens more. The decoding rows come first; the "
            f"prompt of {P} tokens that arrived at step {when} takes what is left, in chunks"
        )


BAD_BUDGETS = [
    BadCall(f"serve(model, requests, max_tokens_per_step={value!r})", why,
            lambda impl, value=value: impl.serve(
                target(), [impl.Request(1, [3], 1)], max_tokens_per_step=value))
    for value, why in [(0, "zero"), (-3, "negative"), (True, "a bool"), (2.0, "a float")]
]  # fmt: skip


@pytest.mark.parametrize("bad", BAD_BUDGETS, ids=str)
def test_a_bad_step_budget_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match="max_tokens_per_step")
