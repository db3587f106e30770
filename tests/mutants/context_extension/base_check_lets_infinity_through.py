"""Bug: the base check is `base > 1`, which lets an infinite base through.

inf > 1 is True, so base=inf yields inv_freq [1, 0, 0, ...]: every pair but the first stops
turning, silently. A finite base > 1 is the contract.
"""

CAUGHT_BY = [
    "test_bad_rope_input_raises_value_error",
    "test_bad_stretch_arguments_raise_value_error",
]
EDITS = [
    (
        "if not 1 < base < math.inf:",
        "if not base > 1:",
    ),
]
