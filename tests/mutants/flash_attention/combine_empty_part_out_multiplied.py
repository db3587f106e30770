"""Bug: combine_partials multiplies every part's out by its weight, empty parts included.

An empty part's weight exp(-inf - m) is exactly 0, so its out seems not to matter; but a kernel
that writes nothing for a range it never saw leaves NaN or inf there, and 0 * NaN is NaN.
"""

CAUGHT_BY = ["test_combine_partials_weighs_empty_parts_nothing"]
EDITS = [
    (
        """    outs = outs.masked_fill(torch.isneginf(lses)[..., None], 0.0)
""",
        "",
    ),
]
