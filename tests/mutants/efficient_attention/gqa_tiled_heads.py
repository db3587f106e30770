"""Bug: grouped-query heads are tiled (head h reads kv head h % Hkv), not grouped (h // group).

`repeat` and `repeat_interleave` give tensors of the same shape; only the head order differs,
and with Hkv == 1 or Hkv == H both are right.
"""

CAUGHT_BY = [
    "test_sliding_window_matches_dense_band_attention",
    "test_block_sparse_matches_dense_masked_attention",
    "test_linear_attention_matches_quadratic_form",
]
EDITS = [
    (
        "    return x.repeat_interleave(H // x.shape[1], dim=1)\n",
        "    return x.repeat(1, H // x.shape[1], *([1] * (x.dim() - 2)))\n",
    ),
]
