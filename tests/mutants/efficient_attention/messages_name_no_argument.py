"""Bug: the checks of window, block_size and the block counts raise ValueError("bad input").

The error comes where it should, but a learner who passed 2.5 or -1 is left to guess which
argument it was: the README promises a message that names the argument.
"""

CAUGHT_BY = ["test_sliding_window_bad_input_raises_value_error"]
EDITS = [
    (
        'raise ValueError(f"{name} must be an int {wanted}, got {value!r}")',
        'raise ValueError("bad input")',
    ),
]
