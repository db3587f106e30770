"""Bug: lookup_draft searches only the last 4,096 tokens of the context.

A window of recent tokens is what many prompt-lookup implementations keep, to bound the search;
the kata's lookup searches the whole context, however long, and a tail that repeats only from
the start of a long document is missed.
"""

CAUGHT_BY = ["test_lookup_draft_searches_a_context_of_twenty_thousand_tokens"]
EDITS = [
    (
        "        windows = ids[: L - 1].unfold(0, n, 1)",
        "        off = max(0, L - 1 - 4096)\n        windows = ids[off : L - 1].unfold(0, n, 1)\n",
    ),
    (
        "            follow = int(starts[-1, 0]) + n  # just after the most recent occurrence\n",
        "            follow = int(starts[-1, 0]) + off + n\n",
    ),
]
