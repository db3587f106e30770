"""Bug: combine checks only that there is a weight for every token, not one row per token.

`weights.shape[0] < num_tokens` lets a table with extra rows through: the rows past the last token
are silently ignored, though they mean the caller passed the weights of another batch.
"""

CAUGHT_BY = ["test_bad_layer_input_raises_value_error"]
EDITS = [
    (
        "    if weights.ndim != 2 or weights.shape[0] != num_tokens:\n",
        "    if weights.ndim != 2 or weights.shape[0] < num_tokens:\n",
    )
]
