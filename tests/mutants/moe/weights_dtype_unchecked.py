"""Bug: expert weights in another float dtype than x are accepted.

The shapes are checked but not the dtypes; x @ w1 then fails inside torch with a RuntimeError
about mismatched dtypes instead of a ValueError naming the weight.
"""

CAUGHT_BY = ["test_bad_layer_input_raises_value_error"]
EDITS = [
    (
        "if w.dtype != x.dtype:",
        "if not w.dtype.is_floating_point:",
    ),
]
