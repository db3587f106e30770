"""Bug: the target's p ignores the temperature.

The draft is tempered and the target is not: the output then follows the target at temperature
1, whatever temperature was asked for.
"""

CAUGHT_BY = ["test_samples_follow_the_targets_own_distribution"]
EDITS = [
    (
        "        p = _probs(logits, temperature)\n",
        "        p = _probs(logits, 1.0 if temperature else 0.0)\n",
    ),
]
