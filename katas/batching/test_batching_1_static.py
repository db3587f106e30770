"""Level 1: static batching, what every strategy serves, and the input every strategy refuses."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from grading.model import greedy_generate_no_cache, load_weights_in_place, make_model
from grading.model.workload import WorkloadRequest
from katas.batching.cases import (
    LISTED_OUT_OF_ORDER,
    MAX_SEQ_LEN,
    REQUEST_ERROR_NAMES,
    VOCAB,
    as_requests,
    check_completions,
    check_fixed_batches,
    near_tie_model,
    read_trace,
    request_errors,
    serve,
    serve_every_strategy,
    shared_model,
    static_plan,
    workloads,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 7])


@given(specs=workloads(), batch_size=BATCH_SIZES)
@example(specs=LISTED_OUT_OF_ORDER, batch_size=1)
@example(specs=LISTED_OUT_OF_ORDER, batch_size=2)
def test_static_groups_are_exactly_as_defined(impl, specs, batch_size):
    out, log = serve(impl.static_batching, shared_model(), as_requests(impl, specs), batch_size)
    check_completions(out, specs)
    check_fixed_batches(
        read_trace(log, specs), out, static_plan(specs, batch_size),
        rule="static: groups of batch_size in arrival order, each starting when its last member "
        "has arrived and the previous group is done",
    )  # fmt: skip


def test_a_request_may_fill_the_whole_context(impl):
    """len(prompt) + max_new_tokens - 1 == max_seq_len is allowed: the last token is never fed."""
    specs = [
        WorkloadRequest(1, [5] * MAX_SEQ_LEN, 1, 0),
        WorkloadRequest(2, [6] * (MAX_SEQ_LEN - 3), 4, 0),
    ]
    for strategy, args in (
        (impl.static_batching, (2,)),
        (impl.dynamic_batching, (2, 0)),
        (impl.continuous_batching, (2,)),
    ):
        try:
            out, _ = serve(strategy, shared_model(), as_requests(impl, specs), *args)
        except NotImplementedError:
            if strategy is impl.static_batching:
                raise
            continue  # a later level, not written yet
        check_completions(out, specs)


# ----------------------------------------------------------------------------------------------
# What every strategy serves (each one written so far: a later level not written yet is skipped)


def test_every_strategy_follows_weights_changed_in_place_between_calls(impl):
    """A model's weights may change in place between two calls (a checkpoint loaded into it):
    each call serves with the weights it finds; nothing derived from them is kept."""
    model = make_model(0, torch.float64, max_seq_len=MAX_SEQ_LEN, vocab_size=VOCAB)
    specs = [WorkloadRequest(1, [3, 1, 4, 1], 5, 0), WorkloadRequest(2, [5, 9], 4, 1)]
    runs = (
        (impl.static_batching, (2,)),
        (impl.dynamic_batching, (2, 0)),
        (impl.continuous_batching, (2,)),
    )
    for seed, (strategy, args) in enumerate(runs, start=1):
        try:
            serve(strategy, model, as_requests(impl, specs), *args)
        except NotImplementedError:
            if strategy is impl.static_batching:
                raise
            continue  # a later level, not written yet
        caller_changes(strategy, model)
        load_weights_in_place(model, seed)
        out, _ = serve(strategy, model, as_requests(impl, specs), *args)
        for got, spec in zip(out, specs, strict=True):
            ids = torch.tensor([spec.prompt])
            want = greedy_generate_no_cache(model, ids, spec.max_new_tokens)[0, len(spec.prompt) :]
            assert list(got.tokens) == want.tolist(), (
                f"{strategy.__name__}, request {spec.id}, after the model's weights changed in "
                f"place since the last call: expected {want.tolist()}, got {list(got.tokens)}. "
                "Serve with the weights the model has now; keep nothing from an earlier call"
            )


def test_an_empty_list_of_requests_is_served_with_no_model_call(impl):
    """No request is not an error: the answer is no Completion, and no step is run."""
    runs = (
        ("static_batching", (2,)),
        ("dynamic_batching", (2, 0)),
        ("continuous_batching", (2,)),
        ("continuous_batching", (2, 3, 4, 4)),  # a budget and a block pool
    )
    for strategy, args in runs:
        try:
            out, log = serve(getattr(impl, strategy), shared_model(), [], *args)
        except NotImplementedError:
            if strategy == "static_batching":
                raise
            continue  # a later level, not written yet
        except ValueError as exc:
            raise AssertionError(
                f"{strategy}(model, [], {', '.join(map(str, args))}) raised ValueError({exc}); "
                "an empty list of requests is served: the result is [], no model call made"
            ) from None
        assert out == [], f"{strategy} with no requests should return [], got {out!r:.200}"
        assert not log, (
            f"{strategy} with no requests made {len(log)} model call(s): there is nothing to feed"
        )


@st.composite
def large_vocabularies(draw):
    """A model with a vocabulary past 256 tokens (and past 2**16), and a workload whose tokens
    come from all of it."""
    vocab_size = draw(st.sampled_from([257, 1021, 70_001]), label="vocab_size")
    return vocab_size, draw(workloads(max_requests=4, max_new=5, vocab_size=vocab_size))


@given(case=large_vocabularies(), batch_size=BATCH_SIZES)
def test_every_strategy_serves_token_ids_of_a_large_vocabulary(impl, case, batch_size):
    vocab_size, specs = case
    serve_every_strategy(
        impl, specs, shared_model(torch.float64, vocab_size), batch_size,
        why=f"the model has {vocab_size} tokens, and every id in 0..{vocab_size - 1} must come "
        "through unchanged: an id kept in uint8 (0..255), int16 or uint16 wraps around; keep "
        "token ids as Python ints or int64 (LongTensor)",
    )  # fmt: skip


@given(specs=workloads(max_requests=4, max_new=5, vocab_size=2 * VOCAB), batch_size=BATCH_SIZES)
def test_every_strategy_takes_the_argmax_in_the_logits_dtype(impl, specs, batch_size):
    serve_every_strategy(
        impl, specs, near_tie_model(), batch_size,
        why=f"in this float64 model token {VOCAB} + i has a logit larger than token i's by about "
        "1e-9 of it, a difference float64 holds and float32 rounds away: the greedy token is "
        "the argmax of the logits in their own dtype, float64 here, never converted to float32",
    )  # fmt: skip


@st.composite
def far_arrivals(draw):
    """A workload some of whose requests arrive far into the clock: just below, at and past
    2**15 steps (the end of int16) and past 2**16 (the end of uint16)."""
    specs = draw(workloads(max_requests=4, max_new=5))
    far = draw(st.sampled_from([2**15 - 1, 2**15, 2**15 + 5, 2**16 + 3]), label="far step")
    others = len(specs) - 1
    late = [True] + draw(st.lists(st.booleans(), min_size=others, max_size=others), label="late")
    pairs = zip(specs, late, strict=True)
    return [replace(s, arrival=s.arrival + far) if is_late else s for s, is_late in pairs]


@given(specs=far_arrivals(), batch_size=BATCH_SIZES)
def test_every_strategy_serves_arrivals_far_into_the_clock(impl, specs, batch_size):
    serve_every_strategy(
        impl, specs, shared_model(), batch_size,
        why=f"requests arrive at steps up to {max(s.arrival for s in specs)}: an arrival or a "
        "step kept in int16 (up to 32767) or uint16 (up to 65535) wraps around; keep them as "
        "Python ints",
    )  # fmt: skip


STATIC_ERRORS = request_errors(
    "static_batching(model, requests, 2)",
    lambda impl, requests: impl.static_batching(shared_model(), requests, 2),
) + [
    BadCall("static_batching(model, requests, 0)", "batch_size below 1",
            lambda impl: impl.static_batching(shared_model(), [impl.Request(1, [3], 1)], 0)),
    BadCall("static_batching(model, [], 0)", "batch_size below 1",
            lambda impl: impl.static_batching(shared_model(), [], 0)),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    **REQUEST_ERROR_NAMES,
    "batch_size below 1": "batch_size",
}


@pytest.mark.parametrize("bad", STATIC_ERRORS, ids=str)
def test_static_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])
