"""Bug: dynamic batching starts only when the oldest has waited more than max_wait steps.

`>` instead of `>=`: with max_wait = 0 a lone request waits a step for nothing, and every partial
batch starts one step late.
"""

CAUGHT_BY = ["test_dynamic_batches_start_when_full_or_after_max_wait"]
EDITS = [
    (
        "step - waiting[0].request.arrival >= max_wait",
        "step - waiting[0].request.arrival > max_wait",
    ),
]
