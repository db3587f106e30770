"""Bug: a joining request takes every cached full block of its tokens, the one holding its newest
token too.

The more blocks reused, the better, it seems. But a row must feed at least one token to give
logits for the next: when the whole prompt is cached in full blocks nothing is left to feed.
The block of the newest token is always fed again.
"""

CAUGHT_BY = ["test_the_same_prompt_again_feeds_only_its_last_block"]
EDITS = [
    (
        "        for i in range((len(seq.tokens) - 1) // bs):\n",
        "        for i in range(len(seq.tokens) // bs):  # every full block\n",
    ),
]
