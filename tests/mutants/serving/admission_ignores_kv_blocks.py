"""Bug: waiting requests join whenever the batch has a free row, without checking for blocks.

Checking memory only for the running requests, and trusting that a joining prompt fits,
over-commits the pool as soon as a long prompt joins a busy batch.
"""

CAUGHT_BY = [
    "test_a_request_may_fill_the_whole_context",
    "test_serve_tokens_equal_naive_serve_within_every_budget",
]
EDITS = [
    (
        "if self.needs(seq) > len(self.queue) - reused:",
        "if len(self.queue) == 0:  # a free block is room enough",
    ),
]
