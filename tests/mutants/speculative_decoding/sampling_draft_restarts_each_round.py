"""Bug: at temperature > 0 the draft starts each round from an empty cache.

A sampling loop that "resets the draft" to be safe after a rejection: the draft re-reads the
whole text every round. The samples keep the right distribution (q is still the draft's own);
the draft's work grows with the square of the length.
"""

CAUGHT_BY = ["test_sampling_calls_and_stats_follow_the_schedule"]
EDITS = [
    (
        "        k_round = min(k, total - n - 1)  # never propose a token that could not be kept\n",
        "        k_round = min(k, total - n - 1)  # never propose a token that could not be kept\n"
        "        if temperature > 0:\n"
        "            draft_cache.crop(0)\n",
    ),
]
