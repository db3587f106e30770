"""Bug: apply_rope accepts tables of one position and broadcasts them.

Checking only the head dim of cos and sin lets a [1, D] table through: every position is then
rotated by the angles of one position, and nothing says the tables were the wrong ones.
"""

CAUGHT_BY = ["test_bad_rope_input_raises_value_error"]
EDITS = [
    (
        "        if tuple(table.shape) != (N, D):\n",
        "        if table.dim() != 2 or table.shape[-1] != D or table.shape[0] not in (1, N):\n",
    )
]
