"""Bug: lookup_draft accepts negative token ids.

No token has a negative id: a context holding one is a bug upstream (a padding value, an
unconverted mask) that the lookup should refuse, not match against.
"""

CAUGHT_BY = ["test_lookup_bad_input_raises_value_error"]
EDITS = [
    (
        "    if (ids < 0).any():\n"
        '        raise ValueError(f"ids: token ids cannot be negative, got {ids}")\n',
        "",
    ),
]
