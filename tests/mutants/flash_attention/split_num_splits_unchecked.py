"""Bug: split_kv_decode does not check num_splits, so 0 or a negative count fails somewhere inside.

Callers pass the default almost always; num_splits=0 then divides by zero in the launcher, and a
negative count yields a ZeroDivisionError or an empty grid instead of a ValueError that names it.
"""

CAUGHT_BY = ["test_split_kv_decode_refuses_bad_inputs"]
EDITS = [
    (
        """    if num_splits < 1:
        raise ValueError(f"num_splits must be at least 1, got {num_splits}")
""",
        "",
    ),
]
