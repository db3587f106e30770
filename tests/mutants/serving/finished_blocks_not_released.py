"""Bug: a finished request leaves the batch but its KV blocks are never given back.

Freeing blocks on preemption and forgetting the ordinary exit leaks them: with a limited pool,
the blocks run out while nothing is running and the waiting requests can never join.
"""

CAUGHT_BY = [
    "test_a_request_may_fill_the_whole_context",
    "test_serve_tokens_equal_naive_serve_within_every_budget",
]
EDITS = [
    (
        "            running.remove(seq)\n            engine.release(seq)\n",
        "            running.remove(seq)\n",
    ),
]
