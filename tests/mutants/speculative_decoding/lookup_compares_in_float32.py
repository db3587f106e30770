"""Bug: the n-grams are compared after converting the token ids to float32.

Floats feel like the natural dtype for `==` over a window (or for a matrix product of one-hot
rows); but float32 holds integers exactly only up to 2**24, so two different ids above it can
round to the same float and a tail "matches" where the context never repeated it.
"""

CAUGHT_BY = ["test_lookup_draft_tells_apart_ids_that_round_to_one_float"]
EDITS = [
    (
        "        starts = (windows == ids[L - n :]).all(dim=-1).nonzero()",
        "        starts = (windows.float() == ids[L - n :].float()).all(dim=-1).nonzero()",
    ),
]
