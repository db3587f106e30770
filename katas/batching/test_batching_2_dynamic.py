"""Level 2: dynamic batching: a batch starts when it is full or its oldest request has waited."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from katas.batching.cases import (
    LISTED_OUT_OF_ORDER,
    REQUEST_ERROR_NAMES,
    as_requests,
    check_completions,
    check_fixed_batches,
    dynamic_plan,
    read_trace,
    request_errors,
    serve,
    shared_model,
    workloads,
)

BATCH_SIZES = st.sampled_from([1, 2, 3, 5, 7])
WAITS = st.sampled_from([0, 1, 2, 3, 5, 20])


@given(specs=workloads(), max_batch_size=BATCH_SIZES, max_wait=WAITS)
@example(specs=LISTED_OUT_OF_ORDER, max_batch_size=2, max_wait=2)
def test_dynamic_batches_start_when_full_or_after_max_wait(impl, specs, max_batch_size, max_wait):
    requests = as_requests(impl, specs)
    out, log = serve(impl.dynamic_batching, shared_model(), requests, max_batch_size, max_wait)
    check_completions(out, specs)
    check_fixed_batches(
        read_trace(log, specs), out, dynamic_plan(specs, max_batch_size, max_wait),
        rule=f"dynamic: a batch starts as soon as {max_batch_size} requests wait or the oldest "
        f"has waited {max_wait} steps, and never waits longer",
    )  # fmt: skip


DYNAMIC_ERRORS = request_errors(
    "dynamic_batching(model, requests, 2, 1)",
    lambda impl, requests: impl.dynamic_batching(shared_model(), requests, 2, 1),
) + [
    BadCall("dynamic_batching(model, requests, 0, 1)", "max_batch_size below 1",
            lambda impl: impl.dynamic_batching(shared_model(), [impl.Request(1, [3], 1)], 0, 1)),
    BadCall("dynamic_batching(model, requests, 2, -1)", "negative max_wait",
            lambda impl: impl.dynamic_batching(shared_model(), [impl.Request(1, [3], 1)], 2, -1)),
    BadCall("dynamic_batching(model, [], 0, 1)", "max_batch_size below 1",
            lambda impl: impl.dynamic_batching(shared_model(), [], 0, 1)),
    BadCall("dynamic_batching(model, [], 2, -1)", "negative max_wait",
            lambda impl: impl.dynamic_batching(shared_model(), [], 2, -1)),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    **REQUEST_ERROR_NAMES,
    "max_batch_size below 1": "max_batch_size",
    "negative max_wait": "max_wait",
}


@pytest.mark.parametrize("bad", DYNAMIC_ERRORS, ids=str)
def test_dynamic_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])
