"""Bug: SpecStats.accepted counts the target's own token as accepted.

Every token kept in a round is "accepted" in everyday speech; but then accepted can exceed
proposed, and the acceptance rate, the figure that tells whether a draft is worth running,
comes out too high.
"""

CAUGHT_BY = ["test_greedy_output_is_the_targets_own_greedy_decoding"]
EDITS = [
    (
        "        stats.accepted += len(kept) - 1\n",
        "        stats.accepted += len(kept)\n",
    ),
]
