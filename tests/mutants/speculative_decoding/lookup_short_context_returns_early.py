"""Bug: lookup_draft returns an empty proposal for a context of one token before checking k,
max_ngram and the ids' signs.

With L <= 1 there is nothing to search, so returning at once feels harmless; but the README's
errors hold whatever the context's length: lookup_draft([5], 2, max_ngram=0) or a lone negative
id is still bad input.
"""

CAUGHT_BY = ["test_lookup_bad_input_on_edge_paths_raises_value_error"]
EDITS = [
    (
        "    if (ids < 0).any():\n",
        "    if ids.shape[0] <= 1:\n        return ids[:0]\n    if (ids < 0).any():\n",
    ),
]
