"""Bug: the draft is fed its last proposal too, one call more per round.

The natural loop "sample, feed it, sample, feed it" ends with a feed whose logits nobody uses:
a wasted draft call every round, and a cache that needs cropping even after a full acceptance.
"""

CAUGHT_BY = ["test_model_calls_follow_the_schedule", "test_a_copy_of_the_target_is_always_accepted"]
EDITS = [
    (
        "            stats.draft_calls += 1\n",
        (
            "            stats.draft_calls += 1\n"
            "            if i == k_round - 1:\n"
            "                draft(out[:, n + i : n + i + 1], draft_cache)\n"
            "                stats.draft_calls += 1\n"
        ),
    ),
]
