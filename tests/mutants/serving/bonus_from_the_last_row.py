"""Bug: the target's own token is always read from the last row of its logits.

That row is the next token when every proposal is kept; after a rejection at j the target's
token is the one after the kept prefix, row j from the end's start, and the last row predicts
after proposals that were thrown away.
"""

CAUGHT_BY = ["test_speculative_serve_tokens_equal_naive_serve_within_every_budget"]
EDITS = [
    (
        "            seq.tokens += proposed[seq][:j] + [best[j]]\n",
        "            seq.tokens += proposed[seq][:j] + [best[-1]]\n",
    ),
]
