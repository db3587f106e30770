"""Bug: prompt_lookup_decode does not check max_ngram itself, leaving it to lookup_draft.

max_ngram is only lookup_draft's business, and lookup_draft raises for a bad one, so checking
twice looks redundant; but a decoding whose rounds never look anything up (max_new_tokens = 1:
k_round is 0) never calls it, and max_ngram=0 then passes silently.
"""

CAUGHT_BY = ["test_lookup_bad_input_on_edge_paths_raises_value_error"]
EDITS = [
    (
        '    _check_int("k", k, 1)\n    _check_int("max_ngram", max_ngram, 1)\n    T = prompt_ids',
        '    _check_int("k", k, 1)\n    T = prompt_ids',
    ),
]
