"""Level 1: static batching, and the input every strategy refuses."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from grading.errors import BadCall, assert_value_error
from grading.workload import WorkloadRequest
from katas.batching.cases import (
    LISTED_OUT_OF_ORDER,
    MAX_SEQ_LEN,
    REQUEST_ERROR_NAMES,
    as_requests,
    check_completions,
    check_fixed_batches,
    read_trace,
    request_errors,
    serve,
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


STATIC_ERRORS = request_errors(
    "static_batching(model, requests, 2)",
    lambda impl, requests: impl.static_batching(shared_model(), requests, 2),
) + [
    BadCall("static_batching(model, requests, 0)", "batch_size below 1",
            lambda impl: impl.static_batching(shared_model(), [impl.Request(1, [3], 1)], 0)),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    **REQUEST_ERROR_NAMES,
    "batch_size below 1": "batch_size",
}


@pytest.mark.parametrize("bad", STATIC_ERRORS, ids=str)
def test_static_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])
