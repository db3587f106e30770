"""Bug: max_tokens_per_step caps each row, not the whole call.

Each row takes min(pending, max_tokens_per_step), so no single prompt is fed at once; but the
rows of one call together feed far more than the budget, and a step with many joining prompts
is as long as before.
"""

CAUGHT_BY = [
    "test_chunked_tokens_equal_naive_serve_within_every_budget",
    "test_with_room_no_budget_is_left_unused",
]
EDITS = [
    ("                budget -= seq.feed + seq.propose\n", ""),
    ("            budget -= n\n", ""),
]
