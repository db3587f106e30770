"""Bug: the size checks raise ValueError("bad input"), naming no argument.

The error is raised where it should be, but the learner who passed a zero or a float is left to
guess which of five sizes it was: the README promises a message that names the argument.
"""

CAUGHT_BY = ["test_bad_input_raises_value_error"]
EDITS = [
    (
        'raise ValueError(f"{name}: expected a positive int, got {value!r}")',
        'raise ValueError("bad input")',
    ),
]
