"""Bug: crop checks `length` against the longest layer instead of seq_len (layer 0's length).

In the middle of a step the last layers may hold more tokens than layer 0; a bound taken from
them lets a crop past seq_len through, and layer 0 keeps a length it never had.
"""

CAUGHT_BY = ["test_bad_input_raises_value_error"]
EDITS = [
    (
        "            or not 0 <= length <= self.seq_len\n",
        "            or not 0 <= length <= max(self.lengths)\n",
    ),
]
