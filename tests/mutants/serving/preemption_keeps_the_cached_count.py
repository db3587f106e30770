"""Bug: a preempted request's blocks are freed but its count of cached tokens is kept.

The blocks go back to the pool, yet the sequence still believes its keys are stored: when it
rejoins it feeds only its newest token, and attends over fresh blocks that hold nothing of its
own (or another request's keys).
"""

CAUGHT_BY = [
    "test_a_preempted_request_rejoins_with_every_token_it_had",
    "test_serve_tokens_equal_naive_serve_within_every_budget",
]
EDITS = [
    (
        "seq.cached = seq.draft_cached = 0  # a preempted sequence recomputes what it had",
        "pass  # the blocks are back in the pool",
    ),
]
