"""Bug: the size checks (batch_size, max_wait, kv_blocks, ...) raise ValueError("bad input").

The error comes where it should, but a learner who passed 0 is left to guess which of the
arguments it was: the README promises a message that names the argument.
"""

CAUGHT_BY = ["test_static_bad_input_raises_value_error"]
EDITS = [
    (
        'raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")',
        'raise ValueError("bad input")',
    ),
]
