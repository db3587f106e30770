"""Bug: tiled_attention does not check block_size, so a negative one silently reads no key.

range(0, Nk, -16) is empty: the loop never runs and every query returns zeros, with no error.
"""

CAUGHT_BY = ["test_tiled_attention_refuses_bad_inputs"]
EDITS = [
    (
        """    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
""",
        "",
    ),
]
