"""Bug: the factor check is `factor <= 0`, so NaN and infinity pass.

Every comparison with NaN is False, so a check written as "raise if factor <= 0" never fires for
NaN; the frequencies come out NaN (or 0 for infinity) with no error.
"""

CAUGHT_BY = ["test_bad_stretch_arguments_raise_value_error"]
EDITS = [
    (
        "    if not 0 < value < math.inf:\n",
        "    if value <= 0:\n",
    ),
]
