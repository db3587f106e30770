"""Bug: k, max_new_tokens and max_ngram are checked by value only, not by type.

`k=2.0` passes `k >= 1` and fails later with a TypeError from range(); `k=True` passes as 1.
The README asks for Python ints and a ValueError that names the argument.
"""

CAUGHT_BY = ["test_greedy_bad_input_raises_value_error"]
EDITS = [
    (
        "    if not isinstance(value, int) or isinstance(value, bool) or value < least:\n",
        "    if value < least:\n",
    ),
]
