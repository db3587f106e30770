"""Bug: update accepts k and v with no token at all.

Nothing seems wrong with appending zero tokens, so the T >= 1 check is left out; the README asks
for a ValueError, because a step that feeds nothing is always a caller's bug.
"""

CAUGHT_BY = ["test_bad_input_raises_value_error"]
EDITS = [
    (
        "                or x.shape[2] < 1\n                or x.shape[3] != D",
        "                or x.shape[3] != D",
    ),
]
