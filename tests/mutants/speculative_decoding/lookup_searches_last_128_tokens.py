"""Bug: the lookup searches only the last 128 tokens of the context.

A window of 128 tokens looks generous (it holds any short repeat), and contexts of a few dozen
tokens never notice; but the README's lookup searches the whole context, and once the text is
longer a repeat of its opening goes unseen, or loses to a shorter, more recent match.
"""

CAUGHT_BY = ["test_lookup_draft_finds_a_match_however_far_back"]
EDITS = [
    (
        "        windows = ids[: L - 1].unfold(0, n, 1)",
        "        windows = ids[max(0, L - 129) : L - 1].unfold(0, n, 1)",
    ),
    (
        "            follow = int(starts[-1, 0]) + n  # just after",
        "            follow = int(starts[-1, 0]) + max(0, L - 129) + n  # just after",
    ),
]
