"""Level 2: the engine without a draft: exact, continuous, paged, and far cheaper than naive."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from grading.judge.cost import count_flops
from grading.judge.errors import BadCall, assert_value_error
from grading.model import greedy_generate_no_cache
from grading.model.naive import naive_serve
from grading.model.workload import WorkloadRequest
from katas.batching.cases import REQUEST_ERROR_NAMES, request_errors
from katas.serving.cases import (
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
    ideal_tokens,
    naive_flops,
    run,
    solo,
    target,
    workloads,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 32])


@given(data=st.data(), specs=workloads(max_requests=8, max_new=12), batch=BATCH_SIZES)
def test_serve_tokens_equal_naive_serve_within_every_budget(impl, data, specs, batch):
    block_size, kv_blocks = data.draw(budgets(specs), label="block_size, kv_blocks")
    model = target()
    out, log = run(
        impl.serve, model, as_requests(impl, specs),
        max_batch_size=batch, kv_blocks=kv_blocks, block_size=block_size,
    )  # fmt: skip
    check_completions(out, specs)
    check_memory(log, batch, kv_blocks, block_size)
    check_reads(model, None, None, 1, specs)
    check_preempts_only_without_blocks(log, specs, None, 1, kv_blocks, block_size)


@given(data=st.data(), specs=workloads(max_requests=6, max_new=8), batch=BATCH_SIZES)
def test_serve_takes_a_dense_model_too(impl, data, specs, batch):
    """The engine takes any shared model: a dense one (no experts, so no feed_forward) too,
    through forward_packed and its own paged memory like the mixture."""
    block_size, kv_blocks = data.draw(budgets(specs), label="block_size, kv_blocks")
    model = draft("weak")  # one dense layer, the mixture's vocabulary
    out, log = run(
        impl.serve, model, as_requests(impl, specs),
        max_batch_size=batch, kv_blocks=kv_blocks, block_size=block_size,
    )  # fmt: skip
    assert isinstance(out, list) and len(out) == len(specs), f"expected {len(specs)} Completions"
    for got, spec in zip(out, specs, strict=True):
        ids = torch.tensor([spec.prompt])
        want = greedy_generate_no_cache(model, ids, spec.max_new_tokens)[0, len(spec.prompt) :]
        assert list(got.tokens) == want.tolist(), (
            f"a dense model, request {spec.id} (prompt of {len(spec.prompt)} tokens, "
            f"max_new_tokens {spec.max_new_tokens}): tokens differ from its greedy decoding\n"
            f" expected {want.tolist()}\n got      {list(got.tokens)}"
        )
    assert all(row.cache is None for call in log for row in call.rows), (
        "a dense model: some calls went through model.forward_batch and the model's own caches; "
        "every step is one model.forward_packed call over the engine's paged KV memory, for a "
        "dense model as for a mixture (feed_forward=None)"
    )
    check_memory(log, batch, kv_blocks, block_size)


@given(specs=workloads(max_requests=8, max_new=12))
def test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step(impl, specs):
    """max_batch_size >= the requests and no block limit: nobody ever waits."""
    model = target()
    out, log = run(impl.serve, model, as_requests(impl, specs), max_batch_size=len(specs))
    check_completions(out, specs)
    for got, spec in zip(out, specs, strict=True):
        want = (spec.arrival, spec.arrival + spec.max_new_tokens - 1)
        assert (got.first_token, got.finished) == want, (
            f"request {spec.id} (arrival {spec.arrival}, max_new_tokens {spec.max_new_tokens}): "
            f"expected (first_token, finished) = {want}, got {(got.first_token, got.finished)}. "
            "With room in the batch a request joins the call of its arrival step, whose output "
            "is its first token, then gains one token per step: no waiting for a batch to end"
        )
    fed = sum(len(row.tokens) for call in log for row in call.rows)
    assert fed == ideal_tokens(specs), (
        f"the target read {fed} tokens; every prompt token and every new token but the last, "
        f"once each, make {ideal_tokens(specs)}. More means recomputation, or a finished "
        "request kept running"
    )
    assert len(log) == busy_steps(out), (
        f"{len(log)} target calls for {busy_steps(out)} busy steps: one packed call per step, "
        "every running request in it"
    )


@given(specs=workloads(min_requests=2, max_requests=7, max_new=8), batch=st.sampled_from([1, 2, 3]))
def test_a_waiting_request_joins_in_the_step_a_row_frees(impl, specs, batch):
    """No block limit, fewer rows than requests: in every step that some arrived request still
    waits for its first token, the batch is full. A request leaves in the step of its last token,
    so its row is free for a waiting request in the very next step."""
    model = target()
    out, _ = run(impl.serve, model, as_requests(impl, specs), max_batch_size=batch)
    check_completions(out, specs)
    for got, spec in zip(out, specs, strict=True):
        assert got.finished - got.first_token == spec.max_new_tokens - 1, (
            f"request {spec.id}: first token at step {got.first_token}, last at {got.finished}, "
            f"for {spec.max_new_tokens} tokens; without a block limit nobody is preempted, and a "
            "running request gains a token every step"
        )
    for step in sorted({t for c in out for t in range(c.arrival, c.first_token)}):
        running = [c.id for c in out if c.first_token <= step <= c.finished]
        waiting = [c.id for c in out if c.arrival <= step < c.first_token]
        assert len(running) == batch, (
            f"step {step}: requests {waiting} had arrived and waited while only {running} ran, "
            f"{len(running)} of max_batch_size={batch} rows. Arrived requests join at once while "
            "there is room; a request leaves in the step of its last token, and its row is free "
            "for the next step (a finished request kept a row one step too long?)"
        )


@given(
    specs=workloads(min_requests=2, max_requests=6, max_new=12, max_arrival=0),
    block_size=st.sampled_from([1, 3, 4, 16]),
)
def test_requests_join_while_their_prompts_blocks_are_free(impl, specs, block_size):
    """Everybody arrives at step 0 and the pool holds the blocks of every prompt at once (and
    of the longest request alone): all join at step 0. A request holds blocks for the tokens it
    has cached, taken as it grows, never its whole future reserved when it joins."""
    specs = [WorkloadRequest(s.id, s.prompt, s.max_new_tokens, 0) for s in specs]
    kv_blocks = sum(-(-len(s.prompt) // block_size) for s in specs)
    needs = max(-(-(len(s.prompt) + s.max_new_tokens - 1) // block_size) for s in specs)
    kv_blocks = max(kv_blocks, needs)  # every request must fit alone
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), max_batch_size=len(specs),
        kv_blocks=kv_blocks, block_size=block_size,
    )  # fmt: skip
    check_completions(out, specs)
    check_memory(log, len(specs), kv_blocks, block_size)
    late = {c.id: c.first_token for c in out if c.first_token != 0}
    assert not late, (
        f"first tokens at steps {late}, expected all at step 0: the {kv_blocks} blocks of "
        f"{block_size} tokens hold every prompt at once, and arrived requests join at once while "
        "there is room. A request needs blocks for the tokens it has cached, not for every token "
        "it may ever have (was its whole future reserved when it joined?)"
    )


def test_a_request_may_fill_the_whole_context(impl):
    specs = [
        WorkloadRequest(1, [5] * MAX_SEQ_LEN, 1, 0),
        WorkloadRequest(2, [6] * (MAX_SEQ_LEN - 3), 4, 0),
    ]
    out, log = run(impl.serve, target(), as_requests(impl, specs), kv_blocks=3, block_size=16)
    check_completions(out, specs)
    check_memory(log, 32, 3, 16)


def test_a_preempted_request_rejoins_with_every_token_it_had(impl):
    """3 requests of 4 + 12 tokens cannot all grow in 6 blocks of 4. A request is preempted only
    when the blocks run out, and feeds its prompt and every token it had generated when it
    rejoins: no token is decoded twice, so the calls hold one row per new token."""
    specs = [WorkloadRequest(i + 1, [10 + i, 3, 3, 3], 12, 0) for i in range(3)]
    out, log = run(
        impl.serve, target(), as_requests(impl, specs), max_batch_size=3, kv_blocks=6,
        block_size=4,
    )  # fmt: skip
    check_completions(out, specs)
    check_memory(log, 3, 6, 4)
    check_preempts_only_without_blocks(log, specs, None, 1, 6, 4)
    had = {s.id: -1 for s in specs}  # tokens generated at its last admission
    for c, call in enumerate(log):  # all arrive at 0 and nobody idles: call c is step c
        for row in (row for row in call.rows if row.start == 0):  # an admission
            spec = next(s for s in specs if s.prompt[0] == row.tokens[0])  # distinct firsts
            got = next(o for o in out if o.id == spec.id)
            if had[spec.id] < 0:
                assert got.first_token == c, (
                    f"request {spec.id} first joined in step {c}, whose call gave its first "
                    f"token, but first_token is {got.first_token}: a preemption does not change "
                    "when the first token came"
                )
            g = len(row.tokens) - len(spec.prompt)
            want = spec.prompt + list(solo(tuple(spec.prompt), spec.max_new_tokens))[: max(g, 0)]
            assert list(row.tokens) == want, (
                f"call {c} admits request {spec.id} with {list(row.tokens)}; expected its prompt "
                f"followed by tokens it had generated: {want}"
            )
            assert g > had[spec.id], (
                f"call {c} admits request {spec.id} with {g} tokens after its prompt; at its "
                f"previous admission it had {had[spec.id]}. A request that rejoins after "
                "preemption feeds its prompt and every token it had generated (each admission "
                "earned it one at least), never its prompt alone"
            )
            had[spec.id] = g
    rows = sum(len(call.rows) for call in log)
    want_rows = sum(s.max_new_tokens for s in specs)
    assert rows == want_rows, (
        f"the calls fed {rows} rows for {want_rows} new tokens: each row gives its request one "
        "new token, which it keeps through preemption. More rows: tokens decoded again"
    )


def test_serve_matches_naive_serve_on_a_chat_workload(impl):
    """The same completions as naive_serve in tokens, on the shipped chat-like workload."""
    specs = chat_workload(24, seed=1)
    naive = naive_serve(target(), as_requests(impl, specs))
    out, log = run(impl.serve, target(), as_requests(impl, specs), max_batch_size=8, kv_blocks=12)
    check_completions(out, specs)
    check_memory(log, 8, 12, 16)
    for got, want in zip(out, naive, strict=True):
        assert list(got.tokens) == want.tokens, f"request {want.id}: tokens differ from naive_serve"


def test_serve_is_ten_times_cheaper_than_naive(impl, figures):
    """Deterministic counts: at least 10x fewer FLOPs and 10x fewer model calls than naive."""
    specs = chat_workload()
    model = target()
    out, log = run(impl.serve, model, as_requests(impl, specs))
    check_completions(out, specs)
    calls = len(model.calls)
    _, flops = count_flops(impl.serve, model, as_requests(impl, specs))
    naive_calls = sum(s.max_new_tokens for s in specs)
    naive = naive_flops(model, specs)
    figures.record("naive FLOPs / serve FLOPs", naive / flops, "x", requests=len(specs))
    figures.record("naive calls / serve calls", naive_calls / calls, "x", requests=len(specs))
    assert 10 * flops <= naive, (
        f"serve spent {flops:,} FLOPs on {len(specs)} requests; naive_serve needs {naive:,}: "
        f"only {naive / flops:.1f}x fewer, 10x expected. A KV cache, batching and grouped "
        "experts each cut the work"
    )
    assert 10 * calls <= naive_calls, (
        f"serve made {calls} model calls; naive_serve makes {naive_calls} (one per token): only "
        f"{naive_calls / calls:.1f}x fewer, 10x expected. Serve every running request in one "
        "call per step"
    )


@given(specs=workloads(max_requests=6, max_new=10), batch=BATCH_SIZES)
def test_serve_flops_within_the_ideal(impl, specs, batch):
    """FLOPs at most 1.25x the products the logged calls need with grouped experts and causal
    attention over each row's own keys."""
    model = target()
    out, log = run(impl.serve, model, as_requests(impl, specs), max_batch_size=batch)
    check_completions(out, specs)
    _, flops = count_flops(impl.serve, model, as_requests(impl, specs), max_batch_size=batch)
    ideal = ideal_flops(model, log)
    assert flops <= 1.25 * ideal, (
        f"serve spent {flops:,} FLOPs; the calls it made need {ideal:,} with grouped experts "
        f"({model.config.top_k} of {model.config.n_experts} per token) and each row attending "
        f"only to its own keys: {flops / ideal:.2f}x. Usually every expert on every token, or "
        "attention over the whole pool or a padded batch"
    )


BAD_CALLS = request_errors(
    "serve(model, requests)", lambda impl, requests: impl.serve(target(), requests)
) + [
    BadCall(f"serve(model, requests, {arg}=0)", f"{arg} below 1",
            lambda impl, arg=arg: impl.serve(target(), [impl.Request(1, [3], 1)], **{arg: 0}))
    for arg in ("max_batch_size", "kv_blocks", "block_size", "k")
] + [
    BadCall("serve(model, [prompt of 20 + 13 new], kv_blocks=1, block_size=16)",
            "a request that needs 2 blocks even alone",
            lambda impl: impl.serve(target(), [impl.Request(1, [3] * 20, 13)], kv_blocks=1)),
]  # fmt: skip


# What each ValueError's message must name, beyond the request errors every strategy shares.
NAMES = {
    **REQUEST_ERROR_NAMES,
    "max_batch_size below 1": "max_batch_size",
    "kv_blocks below 1": "kv_blocks",
    "block_size below 1": "block_size",
    "k below 1": "k",
    "a request that needs 2 blocks even alone": "kv_blocks",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_serve_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])
