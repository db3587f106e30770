"""Bug: block_sparse_attention accepts a float block_mask and treats every nonzero entry as allowed.

`nonzero()` works on any dtype, so a mask of probabilities or of 0/1 floats slips through; the
contract asks for bool so that a mask of scores is not mistaken for a pattern.
"""

CAUGHT_BY = [
    "test_block_sparse_bad_input_raises_value_error",
]
EDITS = [
    (
        "    if not isinstance(block_mask, torch.Tensor) or block_mask.dtype != torch.bool:\n",
        "    if not isinstance(block_mask, torch.Tensor):\n",
    ),
]
