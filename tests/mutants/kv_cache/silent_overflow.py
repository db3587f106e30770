"""Bug: an update past max_seq_len is silently truncated instead of refused.

Slicing past the end of a tensor does not raise in PyTorch, so the overflow goes unnoticed and
the tokens that did not fit are simply lost.
"""

CAUGHT_BY = ["test_bad_input_raises_value_error", "test_refused_update_changes_nothing"]
EDITS = [
    (
        '            raise ValueError(f"k: {T} new tokens after {start} cached '
        'would pass max_seq_len={S}")\n',
        "            T = S - start\n            k, v = k[:, :, :T], v[:, :, :T]\n",
    ),
]
