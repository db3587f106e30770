"""Bug: the target's cached count moves past every token it was fed, rejected proposals too.

Counting "tokens fed" as "tokens cached" is right without a draft; with one, the keys of the
rejected proposals stay, the next round starts after them, and the committed tokens that
replaced them are never read.
"""

CAUGHT_BY = ["test_speculative_serve_tokens_equal_naive_serve_within_every_budget"]
EDITS = [
    (
        "            seq.cached = len(seq.tokens) - 1\n",
        "            seq.cached += len(out)\n",
    ),
]
