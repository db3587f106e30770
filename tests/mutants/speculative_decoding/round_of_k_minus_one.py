"""Bug: each round proposes k - 1 tokens, counting the target's own token among the k.

"k tokens per round" reads as k tokens in all; but k counts the proposals, and the target adds
one more. The output stays exact; every round is one token short, and with k = 1 the draft is
never asked at all.
"""

CAUGHT_BY = ["test_a_copy_of_the_target_is_always_accepted"]
EDITS = [
    (
        "k_round = min(k, total - n - 1)  # never propose",
        "k_round = min(k - 1, total - n - 1)  # never propose",
    ),
]
