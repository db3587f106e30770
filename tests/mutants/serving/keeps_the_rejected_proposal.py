"""Bug: after a rejection the rejected proposal is kept as well as the target's token.

Off by one in the slice: `proposed[:j + 1]` counts the proposal that failed the check among the
accepted ones, so every rejection adds a token the target did not choose.
"""

CAUGHT_BY = ["test_speculative_serve_tokens_equal_naive_serve_within_every_budget"]
EDITS = [
    (
        "            seq.tokens += proposed[seq][:j] + [best[j]]\n",
        "            seq.tokens += proposed[seq][: j + 1] + [best[j]]\n",
    ),
]
