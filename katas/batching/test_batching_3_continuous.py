"""Level 3: continuous batching: finished requests leave at once, arrived ones join at once."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from grading.judge.cost import count_flops
from grading.judge.errors import BadCall, assert_value_error
from grading.model import make_model
from grading.model.workload import WorkloadRequest, poisson_workload
from katas.batching.cases import (
    REQUEST_ERROR_NAMES,
    Limits,
    as_requests,
    check_clock,
    check_completions,
    check_first_come_first_served,
    check_limits,
    check_no_slot_left_empty,
    check_no_work_after_done,
    check_preemption,
    continuous_steps,
    ideal_flops,
    ideal_tokens,
    read_trace,
    request_errors,
    serve,
    shared_model,
    workloads,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 7])
CLOCK = "every call is one step; the clock skips steps only while nobody waits or runs"


@given(specs=workloads(), max_batch_size=BATCH_SIZES)
def test_continuous_tokens_equal_decoding_alone_on_the_clock(impl, specs, max_batch_size):
    requests = as_requests(impl, specs)
    out, log = serve(impl.continuous_batching, shared_model(), requests, max_batch_size)
    check_completions(out, specs)
    trace = read_trace(log, specs)
    steps = continuous_steps(trace)
    check_no_work_after_done(trace, steps)
    check_clock(trace, out, steps, CLOCK)


@given(specs=workloads(), max_batch_size=BATCH_SIZES)
def test_continuous_fills_free_slots_at_once_first_come_first_served(impl, specs, max_batch_size):
    requests = as_requests(impl, specs)
    out, log = serve(impl.continuous_batching, shared_model(), requests, max_batch_size)
    check_completions(out, specs)
    trace = read_trace(log, specs)
    steps, limits = continuous_steps(trace), Limits(max_batch_size)
    check_limits(trace, steps, limits)
    check_no_slot_left_empty(trace, steps, limits)
    check_first_come_first_served(trace, steps)
    check_preemption(trace, steps, limits)


# ----------------------------------------------------------------------------------------------
# The sandwich shop of the README: A, B and C order at once, C arrives a step late, D at step 2


def customers() -> list[WorkloadRequest]:
    """Each prompt starts with the customer's letter (A = 1, B = 2, ...), then the order."""
    orders = [("A", "Hello", 2, 0), ("B", "How are you today?", 6, 0), ("C", "Hi", 1, 1),
              ("D", "Hey there", 2, 2)]  # fmt: skip
    return [
        WorkloadRequest(i, [ord(name) % 64] + [ord(ch) % 64 for ch in text], new, arrival)
        for i, (name, text, new, arrival) in enumerate(orders)
    ]


SANDWICH_SHOP = {  # (first_token, finished) of A, B, C, D: the README's timeline
    "static_batching": ((1, 2), (1, 6), (1, 1), (7, 8)),
    "dynamic_batching": ((0, 1), (0, 5), (6, 6), (6, 7)),
    "continuous_batching": ((0, 1), (0, 5), (1, 1), (2, 3)),
}


@pytest.mark.parametrize("strategy", SANDWICH_SHOP)
def test_the_sandwich_shop_timeline(impl, strategy):
    specs = customers()
    run = getattr(impl, strategy)
    args = {"static_batching": (3,), "dynamic_batching": (3, 0), "continuous_batching": (3,)}
    out, _ = serve(run, shared_model(), as_requests(impl, specs), *args[strategy])
    check_completions(out, specs)
    got = tuple((c.first_token, c.finished) for c in out)
    assert got == SANDWICH_SHOP[strategy], (
        f"{strategy} on the README's four customers (batch size 3): (first_token, finished) of "
        f"A, B, C, D should be {SANDWICH_SHOP[strategy]}, got {got}"
    )


# ----------------------------------------------------------------------------------------------
# Throughput and latency on a workload like real chat traffic


def serving_figures(out, log, specs, batch_size):
    generated = sum(s.max_new_tokens for s in specs)
    latency = sorted(c.finished - c.arrival + 1 for c in out)
    ttft = sorted(c.first_token - c.arrival + 1 for c in out)
    rows = sum(len(call.rows) for call in log)

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))]

    return {
        "tokens per step": generated / len(log),
        "p50 latency": pct(latency, 0.5),
        "p99 latency": pct(latency, 0.99),
        "p50 time to first token": pct(ttft, 0.5),
        "idle slots": 1 - rows / (batch_size * len(log)),
        "tokens fed beyond the ideal": sum(call.new_tokens for call in log) - ideal_tokens(specs),
    }


WORKLOAD = dict(n_requests=40, rate=1.0, seed=0, scale=0.05)
BATCH = 8


def test_continuous_beats_static_on_a_chat_workload(impl, figures):
    specs = poisson_workload(**WORKLOAD)
    model = make_model(0, torch.float32)
    runs = {
        "static": (impl.static_batching, (BATCH,)),
        "dynamic": (impl.dynamic_batching, (BATCH, 4)),
        "continuous": (impl.continuous_batching, (BATCH,)),
    }
    seen = {}
    for name, (run, args) in runs.items():
        out, log = serve(run, model, as_requests(impl, specs), *args)
        seen[name] = serving_figures(out, log, specs, BATCH)
        for figure, value in seen[name].items():
            figures.record(f"{name}: {figure}", value, batch_size=BATCH, **WORKLOAD)
    static, continuous = seen["static"], seen["continuous"]
    ratio = continuous["tokens per step"] / static["tokens per step"]
    figures.record("continuous / static tokens per step", ratio, "x", batch_size=BATCH)
    assert ratio >= 2.0, (
        f"continuous batching made {continuous['tokens per step']:.2f} tokens per step, static "
        f"{static['tokens per step']:.2f}: expected at least 2x. A finished request's slot "
        "must go to a waiting request in the very next step"
    )
    assert continuous["p99 latency"] < static["p99 latency"], (
        f"p99 latency: continuous {continuous['p99 latency']} steps, static "
        f"{static['p99 latency']}: continuous batching should be lower"
    )
    assert continuous["tokens fed beyond the ideal"] == 0, (
        f"continuous batching fed {continuous['tokens fed beyond the ideal']} tokens more than "
        "each prompt token and each fed-back token once: no work on finished requests"
    )


def test_continuous_flops_within_the_ideal(impl, figures):
    specs = poisson_workload(6, rate=0.5, seed=1, scale=0.05)
    model = make_model(0, torch.float32)
    requests = as_requests(impl, specs)
    _, flops = count_flops(impl.continuous_batching, model, requests, 4)
    ideal = ideal_flops(model.config, specs)
    figures.record("continuous FLOPs / ideal", flops / ideal, "x", requests=len(specs))
    assert flops <= ideal, (
        f"continuous batching spent {flops:,} FLOPs; each prompt token and each fed-back token "
        f"through the model once costs {ideal:,}. Feed a running request only its newest "
        "token, and never a finished one"
    )


CONTINUOUS_ERRORS = request_errors(
    "continuous_batching(model, requests, 2)",
    lambda impl, requests: impl.continuous_batching(shared_model(), requests, 2),
) + [
    BadCall("continuous_batching(model, requests, 0)", "max_batch_size below 1",
            lambda impl: impl.continuous_batching(shared_model(), [impl.Request(1, [3], 1)], 0)),
    BadCall("continuous_batching(model, [], 0)", "max_batch_size below 1",
            lambda impl: impl.continuous_batching(shared_model(), [], 0)),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    **REQUEST_ERROR_NAMES,
    "max_batch_size below 1": "max_batch_size",
}


@pytest.mark.parametrize("bad", CONTINUOUS_ERRORS, ids=str)
def test_continuous_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])
