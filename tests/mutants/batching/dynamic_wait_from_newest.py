"""Bug: dynamic batching measures the wait from the newest waiting request.

Resetting the timer on each arrival is what some network batchers do; under a steady stream the
oldest request then waits far longer than max_wait.
"""

CAUGHT_BY = ["test_dynamic_batches_start_when_full_or_after_max_wait"]
EDITS = [
    (
        "step - waiting[0].request.arrival >= max_wait",
        "step - waiting[-1].request.arrival >= max_wait",
    ),
]
