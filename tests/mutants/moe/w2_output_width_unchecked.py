"""Bug: w2's output width is never checked, only the widths the matrix products need.

x @ w1 needs w1's rows to be d and (..) @ w2 needs w2's rows to be h, so a w2 of [h, d'] with
d' != d runs without complaint and the layer returns d' columns instead of raising a ValueError
naming w2.
"""

CAUGHT_BY = ["test_bad_layer_input_raises_value_error"]
EDITS = [
    (
        "    if w3.shape != (d, h) or w2.shape != (h, d):",
        "    if w3.shape != (d, h) or w2.shape[0] != h:",
    ),
    ("    if w2.shape != (E, h, d):", "    if w2.shape[:2] != (E, h):"),
]
