"""Bug: the lookup searches only the last 32 tokens of the context.

A window keeps the search cheap, and short tests never notice; but the README's lookup searches
the whole context, and a repeat of the prompt's opening goes unseen once the text is longer.
"""

CAUGHT_BY = ["test_lookup_draft_on_long_contexts_of_any_token_ids"]
EDITS = [
    (
        "        windows = ids[: L - 1].unfold(0, n, 1)",
        "        windows = ids[max(0, L - 33) : L - 1].unfold(0, n, 1)",
    ),
    (
        "            follow = int(starts[-1, 0]) + n  # just after",
        "            follow = int(starts[-1, 0]) + max(0, L - 33) + n  # just after",
    ),
]
