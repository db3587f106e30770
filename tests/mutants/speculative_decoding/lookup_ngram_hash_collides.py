"""Bug: n-grams are compared by a base-4 code, which two different n-grams can share.

Encoding each n-gram as one number makes the search a single comparison; but a base smaller
than the vocabulary maps [4, 0] and [0, 1] to the same code, and the lookup proposes the
continuation of an n-gram that never occurred.
"""

CAUGHT_BY = ["test_lookup_draft_on_long_contexts_of_any_token_ids"]
EDITS = [
    (
        "        starts = (windows == ids[L - n :]).all(dim=-1).nonzero()  # (hits, 1)\n",
        "        code = 4 ** torch.arange(n)  # (n,)\n"
        "        starts = ((windows * code).sum(-1) == (ids[L - n :] * code).sum()).nonzero()\n",
    ),
]
