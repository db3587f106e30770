"""Bug: the attention functions accept q, k and v of different dtypes and silently convert them.

Everything is cast to float32 anyway, so it "works"; but a float16 k next to a float32 q is
almost always a caller's mistake, and the contract says it raises.
"""

CAUGHT_BY = [
    "test_sliding_window_bad_input_raises_value_error",
    "test_block_sparse_bad_input_raises_value_error",
    "test_linear_attention_bad_input_raises_value_error",
]
EDITS = [
    (
        "    _check_same_dtype_and_device(q=q, k=k, v=v)\n",
        "",
    ),
]
