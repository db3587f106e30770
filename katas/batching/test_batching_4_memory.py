"""Level 4: chunked prefill under a token budget, and a KV block pool with preemption."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.cost import count_flops
from grading.judge.errors import BadCall, assert_value_error
from grading.model import make_model
from grading.model.workload import WorkloadRequest, poisson_workload
from katas.batching.cases import (
    MAX_SEQ_LEN,
    Limits,
    as_requests,
    check_clock,
    check_completions,
    check_first_come_first_served,
    check_limits,
    check_no_slot_left_empty,
    check_no_work_after_done,
    check_oldest_admitted_first,
    check_preemption,
    check_rejoins_keep_their_tokens,
    continuous_steps,
    ideal_flops,
    ideal_tokens,
    read_trace,
    recomputed_tokens,
    serve,
    shared_model,
    workloads,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 7])
BUDGETS = st.sampled_from([1, 2, 3, 5, 7, 13])  # mostly smaller than one prompt
CLOCK = "every call is one step; the clock skips steps only while nobody waits or runs"


def run_and_check_all(impl, specs, limits: Limits):
    """Run continuous_batching with `limits`; check its tokens, clock and every schedule rule."""
    out, log = serve(
        impl.continuous_batching, shared_model(), as_requests(impl, specs),
        limits.max_batch_size, limits.max_tokens_per_step, limits.kv_blocks, limits.block_size,
    )  # fmt: skip
    check_completions(out, specs)
    trace = read_trace(log, specs)
    steps = continuous_steps(trace)
    check_no_work_after_done(trace, steps)
    check_rejoins_keep_their_tokens(trace, steps, limits)
    check_clock(trace, out, steps, CLOCK)
    return trace, steps


@given(specs=workloads(), max_batch_size=BATCH_SIZES, budget=BUDGETS)
def test_chunked_prefill_is_exact_and_stays_within_the_budget(impl, specs, max_batch_size, budget):
    limits = Limits(max_batch_size, budget)
    trace, steps = run_and_check_all(impl, specs, limits)
    check_limits(trace, steps, limits)
    check_no_slot_left_empty(trace, steps, limits)
    check_first_come_first_served(trace, steps)
    check_oldest_admitted_first(trace, steps, limits)


@st.composite
def binding_budgets(draw):
    """Several requests running at once and a budget smaller than their next tokens: every step
    some running request must wait for the budget."""
    specs = draw(workloads(max_requests=8, max_new=10, max_arrival=3))
    budget = draw(st.integers(1, 3), label="max_tokens_per_step")
    return specs, Limits(draw(st.sampled_from([5, 7, 8]), label="max_batch_size"), budget)


@given(case=binding_budgets())
def test_a_binding_budget_serves_the_oldest_admitted_first(impl, case):
    specs, limits = case
    note(f"{limits}")
    trace, steps = run_and_check_all(impl, specs, limits)
    check_limits(trace, steps, limits)
    check_oldest_admitted_first(trace, steps, limits)


@st.composite
def memory_cases(draw):
    """A workload and a block pool barely large enough for its largest request."""
    specs = draw(workloads())
    block_size = draw(st.sampled_from([1, 2, 4, 16]), label="block_size")
    largest = max(-(-(len(s.prompt) + s.max_new_tokens - 1) // block_size) for s in specs)
    kv_blocks = largest + draw(st.sampled_from([0, 0, 1, 2, 5]), label="spare blocks")
    budget = draw(st.sampled_from([None, None, 3, 7]), label="max_tokens_per_step")
    limits = Limits(draw(BATCH_SIZES, label="max_batch_size"), budget, kv_blocks, block_size)
    return specs, limits


PREEMPTING = (  # three requests that outgrow 6 blocks of 4 tokens together: preemption is certain
    [WorkloadRequest(i, [i + 1, 9, 9, 9], 12, 0) for i in range(3)],
    Limits(3, None, 6, 4),
)


@given(case=memory_cases())
@example(case=PREEMPTING)
def test_kv_blocks_are_never_over_committed_and_preemption_is_exact(impl, case):
    specs, limits = case
    note(f"{limits}")
    trace, steps = run_and_check_all(impl, specs, limits)
    check_limits(trace, steps, limits)
    check_no_slot_left_empty(trace, steps, limits)
    check_first_come_first_served(trace, steps)
    check_oldest_admitted_first(trace, steps, limits)
    check_preemption(trace, steps, limits)


@st.composite
def preemption_cases(draw):
    """Two to five short requests arriving together into a pool of blocks of 1 or 2 tokens
    barely large enough for the largest: about half of these schedules preempt a request in a
    step in which the queue's head (the victim itself, or a request behind it) then fits."""
    specs = draw(workloads(max_requests=5, max_arrival=3, max_prompt=16, min_requests=2))
    block_size = draw(st.sampled_from([1, 2]), label="block_size")
    largest = max(-(-(len(s.prompt) + s.max_new_tokens - 1) // block_size) for s in specs)
    kv_blocks = largest + draw(st.integers(0, 3), label="spare blocks")
    budget = draw(st.sampled_from([None, 1, 2, 3]), label="max_tokens_per_step")
    return specs, Limits(draw(st.sampled_from([2, 3]), label="max_batch_size"), budget, kv_blocks,
                         block_size)  # fmt: skip


@given(case=preemption_cases())
@example(  # step 6: request 1 is preempted, and rejoins at once in the blocks it freed
    case=(
        [
            WorkloadRequest(0, [37, 14, 58, 35, 13], 6, 0),
            WorkloadRequest(1, [1, 11, 52, 14, 5], 1, 1),
            WorkloadRequest(2, [20, 14, 57, 21], 7, 1),
        ],
        Limits(2, 2, 12, 1),
    )
)
def test_a_preemption_step_still_admits_whoever_fits(impl, case):
    specs, limits = case
    note(f"{limits}")
    trace, steps = run_and_check_all(impl, specs, limits)
    check_limits(trace, steps, limits)
    check_preemption(trace, steps, limits)
    check_no_slot_left_empty(trace, steps, limits)
    check_first_come_first_served(trace, steps)
    check_oldest_admitted_first(trace, steps, limits)


def test_preemption_recomputes_within_the_counted_cost(impl, figures):
    specs, limits = PREEMPTING
    model = make_model(0, torch.float64)
    args = (limits.max_batch_size, limits.max_tokens_per_step, limits.kv_blocks, 4)
    out, log = serve(impl.continuous_batching, model, as_requests(impl, specs), *args)
    check_completions(out, specs)
    trace = read_trace(log, specs)
    _, flops = count_flops(impl.continuous_batching, model, as_requests(impl, specs), *args)
    again = [
        len(specs[s.request].prompt) + trace.generated_before(s.request, s.first_call)
        for i, s in enumerate(trace.segments)
        if trace.rejoined(i)
    ]
    fed = sum(call.new_tokens for call in log)
    figures.record("tokens recomputed after preemption", recomputed_tokens(trace), kv_blocks=6)
    assert again, "3 requests of 4 + 12 tokens cannot share 6 blocks of 4: someone is preempted"
    assert fed == ideal_tokens(specs) + recomputed_tokens(trace), (
        f"fed {fed} tokens; each prompt token and fed-back token once is {ideal_tokens(specs)}, "
        f"plus {recomputed_tokens(trace)} recomputed after preemption"
    )
    ideal = ideal_flops(model.config, specs, recompute=again)
    figures.record("FLOPs / (ideal + recompute)", flops / ideal, "x", kv_blocks=6)
    assert flops <= ideal, (
        f"{flops:,} FLOPs; the ideal plus recomputing {again} tokens after preemption costs "
        f"{ideal:,}"
    )


def test_chunked_prefill_bounds_the_longest_step(impl, figures):
    specs = poisson_workload(10, rate=0.5, seed=2, scale=0.2)
    model = make_model(0, torch.float32)
    longest = {}
    for budget in (None, 16):
        _, log = serve(impl.continuous_batching, model, as_requests(impl, specs), 8, budget)
        longest[budget] = max(call.new_tokens for call in log)
        figures.record("longest step (new tokens)", longest[budget], "tokens", budget=budget)
        figures.record("tokens per step", sum(s.max_new_tokens for s in specs) / len(log),
                       budget=budget)  # fmt: skip
    assert longest[16] <= 16 < longest[None], (
        f"the longest step fed {longest[16]} new tokens with max_tokens_per_step=16 "
        f"({longest[None]} without a budget): prefill long prompts in chunks"
    )


@st.composite
def exact_pools(draw):
    """A workload and a pool of exactly the blocks its largest max_batch_size requests need at
    their longest, in blocks that mostly do not divide the lengths: every set of requests that
    may run at once fits, so a correct scheduler never preempts; with one slot, the largest
    request takes the pool's last free block."""
    specs = draw(workloads(max_requests=4, max_new=10, max_arrival=3))
    block_size = draw(st.sampled_from([2, 3, 5, 7, 16]), label="block_size")
    slots = draw(st.sampled_from([1, 1, 2, 3]), label="max_batch_size")
    needs = sorted(-(-(len(s.prompt) + s.max_new_tokens - 1) // block_size) for s in specs)
    budget = draw(st.sampled_from([None, 1, 2, 3, 7]), label="max_tokens_per_step")
    return specs, Limits(slots, budget, sum(needs[-slots:]), block_size)


@given(case=exact_pools())
@example(case=([WorkloadRequest(1, [3] * 9, 8, 0)], Limits(1, None, 4, 4)))
def test_a_pool_that_fits_exactly_is_never_preempted(impl, case):
    specs, limits = case
    note(f"{limits}")
    trace, steps = run_and_check_all(impl, specs, limits)
    check_limits(trace, steps, limits)
    check_no_slot_left_empty(trace, steps, limits)
    check_preemption(trace, steps, limits)
    rejoins = [seg for seg in range(len(trace.segments)) if trace.rejoined(seg)]
    if rejoins:
        segment = trace.segments[rejoins[0]]
        spec = specs[segment.request]
        raise AssertionError(
            f"step {steps[segment.first_call]}: request {spec.id} rejoined after a preemption, "
            f"but the pool of {limits.kv_blocks} blocks of {limits.block_size} tokens holds any "
            f"{limits.max_batch_size} of these requests at their longest: no step ever lacks a "
            "block. A step whose tokens need exactly the blocks that are free fits; preempt "
            "only when they need more"
        )


@st.composite
def pools_one_block_short(draw):
    """A request and the blocks it needs at its longest, ceil((prompt + max_new_tokens - 1) /
    block_size), with block sizes that mostly do not divide that length."""
    block_size = draw(st.sampled_from([2, 3, 4, 5, 7, 16]), label="block_size")
    P = draw(st.integers(1, MAX_SEQ_LEN), label="prompt length")
    new = draw(st.integers(1, MAX_SEQ_LEN - P + 1), label="max_new_tokens")
    need = -(-(P + new - 1) // block_size)
    return WorkloadRequest(1, [3] + [7] * (P - 1), new, 0), block_size, need


@given(case=pools_one_block_short())
@example(case=(WorkloadRequest(1, [3] * 9, 9, 0), 4, 5))  # 17 tokens: 4 full blocks and 1 token
def test_a_request_needs_its_last_partial_block_to_fit_alone(impl, case):
    spec, block_size, need = case
    tokens = len(spec.prompt) + spec.max_new_tokens - 1

    def call(kv_blocks):
        return lambda impl: impl.continuous_batching(
            shared_model(), as_requests(impl, [spec]), 2, None, kv_blocks, block_size
        )

    if need > 1:
        short = BadCall(
            f"continuous_batching(model, [request of {tokens} tokens], 2, kv_blocks={need - 1}, "
            f"block_size={block_size})",
            f"a request needing ceil({tokens} / {block_size}) = {need} blocks alone",
            call(need - 1),
        )
        assert_value_error(short, impl, match="kv_blocks")
    out, _ = serve(
        impl.continuous_batching, shared_model(), as_requests(impl, [spec]), 2, None, need,
        block_size,
    )  # fmt: skip
    check_completions(out, [spec])


def test_a_request_that_just_fits_the_pool_is_served(impl):
    specs = [WorkloadRequest(1, [3] * 9, 8, 0)]  # 9 + 8 - 1 = 16 tokens: 4 blocks of 4
    out, _ = serve(
        impl.continuous_batching, shared_model(), as_requests(impl, specs), 2, None, 4, 4
    )
    check_completions(out, specs)


def memory_errors():
    one = [(1, [3] * 9, 8, 0)]  # needs 4 blocks of 4

    def call(max_tokens_per_step=None, kv_blocks=None, block_size=16, specs=one):
        return lambda impl: impl.continuous_batching(
            shared_model(), [impl.Request(*s) for s in specs], 2, max_tokens_per_step,
            kv_blocks, block_size,
        )  # fmt: skip

    return [
        BadCall("continuous_batching(model, requests, 2, max_tokens_per_step=0)",
                "max_tokens_per_step below 1", call(max_tokens_per_step=0)),
        BadCall("continuous_batching(model, requests, 2, kv_blocks=0)", "kv_blocks below 1",
                call(kv_blocks=0)),
        BadCall("continuous_batching(model, requests, 2, block_size=0)", "block_size below 1",
                call(block_size=0)),
        BadCall("continuous_batching(model, [], 2, kv_blocks=0)", "kv_blocks below 1",
                call(kv_blocks=0, specs=())),
        BadCall("continuous_batching(model, [request of 9 + 8 tokens], 2, kv_blocks=3, "
                "block_size=4)", "a request needing 4 blocks alone", call(None, 3, 4)),
    ]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    "max_tokens_per_step below 1": "max_tokens_per_step",
    "kv_blocks below 1": "kv_blocks",
    "block_size below 1": "block_size",
    "a request needing 4 blocks alone": "kv_blocks",
}


@pytest.mark.parametrize("bad", memory_errors(), ids=str)
def test_memory_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])
