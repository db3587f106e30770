"""Level 5: stop tokens: a request is done at its first generated stop token, in every strategy.

Stop ids are drawn from what the model really generates (decoding each request alone first): a
token of its completion, its very first new token, an id it never generates, ids of its prompt.
Every completion must equal decoding alone cut after its first stop token, and every schedule
must follow from those shorter completions, as the README states.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from katas.batching.cases import (
    MAX_SEQ_LEN,
    VOCAB,
    Limits,
    StopRequest,
    as_requests,
    check_clock,
    check_completions,
    check_first_come_first_served,
    check_fixed_batches,
    check_joins_after_a_stop,
    check_limits,
    check_no_slot_left_empty,
    check_no_work_after_done,
    check_oldest_admitted_first,
    check_preemption,
    check_rejoins_keep_their_tokens,
    continuous_steps,
    dynamic_plan,
    read_trace,
    serve,
    serve_every_strategy,
    shared_model,
    solo,
    static_plan,
    workloads,
)
from katas.batching.test_batching_3_continuous import customers

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 7])
WAITS = st.sampled_from([0, 1, 2, 5])
CLOCK = "every call is one step; the clock skips steps only while nobody waits or runs"
STOP_KINDS = (
    "none",
    "a token of its completion",
    "its first new token",
    "an id it never generates",
    "ids of its prompt it never generates",
    "several",
)


@st.composite
def stops_for(draw, specs, kinds=STOP_KINDS):
    """`specs` with stop ids, each request's drawn from what decoding it alone generates."""
    out = []
    for i, s in enumerate(specs):
        tokens = solo(tuple(s.prompt), s.max_new_tokens)
        never = [t for t in range(VOCAB) if t not in tokens]
        in_prompt = sorted(set(s.prompt) - set(tokens))
        kind = draw(st.sampled_from(kinds), label=f"stop kind {i}")
        some = draw(st.integers(0, len(tokens) - 1), label=f"stop position {i}")
        stop = {
            "none": (),
            "a token of its completion": (tokens[some],),
            "its first new token": (tokens[0],),
            "an id it never generates": (never[some % len(never)],),
            "ids of its prompt it never generates": tuple(in_prompt[:3]),
            "several": (never[-1], *in_prompt[:1], tokens[some]),
        }[kind]
        out.append(StopRequest(s.id, s.prompt, s.max_new_tokens, s.arrival, stop))
    return out


@st.composite
def stop_workloads(draw, max_requests: int = 5, max_new: int = 10, max_arrival: int = 12):
    """A workload whose requests have stop ids (most of them, ids they really generate)."""
    specs = draw(workloads(max_requests=max_requests, max_new=max_new, max_arrival=max_arrival))
    return draw(stops_for(specs))


def stopped_early(specs) -> None:
    """Note which requests stop before max_new_tokens, to replay a failure by reading."""
    for s in specs:
        tokens = solo(tuple(s.prompt), s.max_new_tokens)
        ends = [k + 1 for k, t in enumerate(tokens) if t in s.stop]
        note(f"request {s.id}: stop {s.stop}, done after {ends[0] if ends else len(tokens)} tokens")


# ----------------------------------------------------------------------------------------------
# Static and dynamic batching: a group runs until every member is done, stopped ones included


@given(specs=stop_workloads(), batch_size=BATCH_SIZES)
def test_static_groups_end_when_every_member_is_done(impl, specs, batch_size):
    stopped_early(specs)
    out, log = serve(impl.static_batching, shared_model(), as_requests(impl, specs), batch_size)
    check_completions(out, specs)
    check_fixed_batches(
        read_trace(log, specs), out, static_plan(specs, batch_size),
        rule="static: groups of batch_size in arrival order, each running until every member "
        "has max_new_tokens tokens or has produced a stop token; the next starts when its last "
        "member has arrived and the previous group is done",
    )  # fmt: skip


@given(specs=stop_workloads(), max_batch_size=BATCH_SIZES, max_wait=WAITS)
def test_dynamic_batches_end_when_every_member_is_done(impl, specs, max_batch_size, max_wait):
    stopped_early(specs)
    requests = as_requests(impl, specs)
    out, log = serve(impl.dynamic_batching, shared_model(), requests, max_batch_size, max_wait)
    check_completions(out, specs)
    check_fixed_batches(
        read_trace(log, specs), out, dynamic_plan(specs, max_batch_size, max_wait),
        rule=f"dynamic: a batch starts as soon as {max_batch_size} requests wait or the oldest "
        f"has waited {max_wait} steps, and runs until every member has max_new_tokens tokens "
        "or has produced a stop token",
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Continuous batching: a stopped request leaves in that step, its slot and blocks free at once


@given(specs=stop_workloads(), max_batch_size=BATCH_SIZES)
def test_continuous_stopped_requests_leave_at_once(impl, specs, max_batch_size):
    stopped_early(specs)
    requests = as_requests(impl, specs)
    out, log = serve(impl.continuous_batching, shared_model(), requests, max_batch_size)
    check_completions(out, specs)
    trace = read_trace(log, specs)
    steps, limits = continuous_steps(trace), Limits(max_batch_size)
    check_no_work_after_done(trace, steps)
    check_joins_after_a_stop(trace, out, steps)
    check_clock(trace, out, steps, CLOCK)
    check_limits(trace, steps, limits)
    check_no_slot_left_empty(trace, steps, limits)
    check_first_come_first_served(trace, steps)


@st.composite
def stop_memory_cases(draw):
    """Requests with stop ids arriving close together into a pool barely large enough for the
    largest (as it would be without a stop): a stopped request's blocks decide who joins next."""
    specs = draw(workloads(max_requests=5, max_arrival=3, max_prompt=24, min_requests=2))
    specs = draw(stops_for(specs))
    block_size = draw(st.sampled_from([1, 2, 4]), label="block_size")
    largest = max(-(-(len(s.prompt) + s.max_new_tokens - 1) // block_size) for s in specs)
    kv_blocks = largest + draw(st.sampled_from([0, 0, 1, 3]), label="spare blocks")
    budget = draw(st.sampled_from([None, None, 2, 5]), label="max_tokens_per_step")
    return specs, Limits(draw(st.sampled_from([2, 3]), label="max_batch_size"), budget, kv_blocks,
                         block_size)  # fmt: skip


FREES_AT_ONCE = (  # request 0 decodes 18, 38, 36, 8 alone: with stop (38,) it takes all 4
    [  # blocks of 4 at step 1 and stops there; request 1 (2 blocks) must join at step 2
        StopRequest(0, [1] + [9] * 11, 4, 0, (38,)),
        StopRequest(1, [2] + [9] * 7, 2, 0),
    ],
    Limits(2, None, 4, 4),
)


@given(case=stop_memory_cases())
@example(case=FREES_AT_ONCE)
def test_a_stopped_request_frees_its_blocks_at_once(impl, case):
    specs, limits = case
    note(f"{limits}")
    stopped_early(specs)
    out, log = serve(
        impl.continuous_batching, shared_model(), as_requests(impl, specs),
        limits.max_batch_size, limits.max_tokens_per_step, limits.kv_blocks, limits.block_size,
    )  # fmt: skip
    check_completions(out, specs)
    trace = read_trace(log, specs)
    steps = continuous_steps(trace)
    check_no_work_after_done(trace, steps)
    check_rejoins_keep_their_tokens(trace, steps, limits)
    check_joins_after_a_stop(trace, out, steps)
    check_clock(trace, out, steps, CLOCK)
    check_limits(trace, steps, limits)
    check_no_slot_left_empty(trace, steps, limits)
    check_first_come_first_served(trace, steps)
    check_oldest_admitted_first(trace, steps, limits)
    check_preemption(trace, steps, limits)


# ----------------------------------------------------------------------------------------------
# Every strategy: what a stop id is and is not


@given(
    specs=workloads(max_requests=4, max_new=8).flatmap(
        lambda specs: stops_for(specs, ("ids of its prompt it never generates",))
    ),
    batch_size=BATCH_SIZES,
)
def test_a_stop_id_in_the_prompt_means_nothing(impl, specs, batch_size):
    serve_every_strategy(
        impl, specs, shared_model(), batch_size,
        why="every request's stop ids are tokens of its own prompt that decoding it alone never "
        "generates: a stop id in the prompt means nothing, only generated tokens are matched, "
        "so every request runs to max_new_tokens",
    )  # fmt: skip


@given(
    specs=workloads(max_requests=4, max_new=8).flatmap(
        lambda specs: stops_for(specs, ("its first new token",))
    ),
    batch_size=BATCH_SIZES,
)
def test_a_stop_as_the_first_new_token_ends_at_the_prefill(impl, specs, batch_size):
    serve_every_strategy(
        impl, specs, shared_model(), batch_size,
        why="every request's stop id is its first new token, the one its prefill produces: "
        "each completion is that one token, finished in the step of its prefill",
    )  # fmt: skip


def test_a_stop_given_as_a_list_is_served_like_a_tuple(impl):
    """`stop` may be a list of ids too; the request is not changed."""
    prompt = (5, 1, 4, 1)
    tokens = solo(prompt, 6)
    spec = StopRequest(1, list(prompt), 6, 0, (tokens[2],))
    for strategy, args in (
        (impl.static_batching, (2,)),
        (impl.dynamic_batching, (2, 0)),
        (impl.continuous_batching, (2,)),
    ):
        requests = [impl.Request(1, list(prompt), 6, 0, [tokens[2]])]
        out, _ = serve(strategy, shared_model(), requests, *args)
        check_completions(out, [spec])


# ----------------------------------------------------------------------------------------------
# The sandwich shop of the README, B saying "that will do" after three layers


def customers_with_a_stop() -> list[StopRequest]:
    """The README's four customers; B's order stops at its third token (53, also a token of
    B's prompt, where it means nothing)."""
    specs = customers()
    b = specs[1]
    stop = (solo(tuple(b.prompt), b.max_new_tokens)[2],)
    return [StopRequest(s.id, s.prompt, s.max_new_tokens, s.arrival, stop if s is b else ())
            for s in specs]  # fmt: skip


SANDWICH_SHOP_WITH_A_STOP = {  # (first_token, finished) of A, B, C, D: the README's targets
    "static_batching": ((1, 2), (1, 3), (1, 1), (4, 5)),
    "dynamic_batching": ((0, 1), (0, 2), (3, 3), (3, 4)),
    "continuous_batching": ((0, 1), (0, 2), (1, 1), (2, 3)),
}


@pytest.mark.parametrize("strategy", SANDWICH_SHOP_WITH_A_STOP)
def test_the_sandwich_shop_with_a_stop(impl, strategy):
    specs = customers_with_a_stop()
    args = {"static_batching": (3,), "dynamic_batching": (3, 0), "continuous_batching": (3,)}
    out, _ = serve(getattr(impl, strategy), shared_model(), as_requests(impl, specs),
                   *args[strategy])  # fmt: skip
    check_completions(out, specs)
    got = tuple((c.first_token, c.finished) for c in out)
    want = SANDWICH_SHOP_WITH_A_STOP[strategy]
    assert got == want, (
        f"{strategy} on the README's four customers (batch size 3), B stopping after 3 of its 6 "
        f"tokens: (first_token, finished) of A, B, C, D should be {want}, got {got}. A member "
        "that has stopped is done: a group ends when every member is done, and a stopped "
        "request's slot is free in the next step"
    )


# ----------------------------------------------------------------------------------------------
# Bad stop ids

STOP_STRATEGIES = {
    "static_batching(model, requests, 2)": lambda impl, rs: impl.static_batching(
        shared_model(), rs, 2
    ),
    "dynamic_batching(model, requests, 2, 1)": lambda impl, rs: impl.dynamic_batching(
        shared_model(), rs, 2, 1
    ),
    "continuous_batching(model, requests, 2)": lambda impl, rs: impl.continuous_batching(
        shared_model(), rs, 2
    ),
}
BAD_STOPS = {
    f"id {VOCAB} in a {VOCAB}-token vocabulary": lambda: (3, VOCAB),
    "id -1": lambda: (-1,),
    "id True": lambda: (True,),
    "id 3.0": lambda: (3.0,),
    "id torch.tensor(3)": lambda: (torch.tensor(3),),
    "a tensor, torch.tensor([3])": lambda: torch.tensor([3]),
    "a bare int, 3": lambda: 3,
    "None": lambda: None,
}


def stop_errors() -> list[BadCall]:
    def call(run, make_stop):
        return lambda impl: run(
            impl, [impl.Request(1, [5, 6], 2, 0), impl.Request(2, [7], 2, 0, make_stop())]
        )

    return [
        BadCall(f"{name} with requests[1].stop {what}", f"{name.split('(')[0]}: stop {what}",
                call(run, make_stop))
        for name, run in STOP_STRATEGIES.items()
        for what, make_stop in BAD_STOPS.items()
    ]  # fmt: skip


@pytest.mark.parametrize("bad", stop_errors(), ids=str)
def test_stop_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match="stop")


def length_errors() -> list[BadCall]:
    """Requests too long for the model's context, or for kv_blocks alone, counted with
    max_new_tokens: each stops on its very first new token, which would have ended it in time."""
    long_prompt = [(7 * i) % VOCAB for i in range(MAX_SEQ_LEN)]
    first_long = solo(tuple(long_prompt), 1)[0]
    short_prompt = [3, 14, 15, 9]
    first_short = solo(tuple(short_prompt), 1)[0]
    too_long = {
        name: (lambda impl, run=run: run(impl, [impl.Request(1, long_prompt, 2, 0, (first_long,))]))
        for name, run in STOP_STRATEGIES.items()
    }
    calls = [
        BadCall(f"{name} with a prompt of {MAX_SEQ_LEN} tokens, max_new_tokens 2, stop on its "
                "first new token", "max_seq_len", call)
        for name, call in too_long.items()
    ]  # fmt: skip
    calls.append(
        BadCall(
            "continuous_batching(model, [Request(1, [3, 14, 15, 9], 3, 0, stop=(its first new "
            "token,))], 1, kv_blocks=1, block_size=4)",
            "kv_blocks",
            lambda impl: impl.continuous_batching(
                shared_model(), [impl.Request(1, short_prompt, 3, 0, (first_short,))], 1,
                kv_blocks=1, block_size=4,
            ),
        )
    )  # fmt: skip
    return calls


@pytest.mark.parametrize("bad", length_errors(), ids=str)
def test_lengths_are_checked_for_max_new_tokens_whatever_stop_says(impl, bad):
    """A stop may never come: the length and block checks count max_new_tokens."""
    assert_value_error(bad, impl, match=bad.why)
