"""Bug: the checks of base, factor and the lengths raise ValueError("bad input").

The error comes where it should, but a learner who passed a NaN factor or a float length is left
to guess which argument it was: the README promises a message that names the argument.
"""

CAUGHT_BY = ["test_bad_stretch_arguments_raise_value_error"]
EDITS = [
    (
        'raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")',
        'raise ValueError("bad input")',
    ),
    (
        'raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")',
        'raise ValueError("bad input")',
    ),
]
