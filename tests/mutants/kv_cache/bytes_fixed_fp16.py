"""Bug: kv_cache_bytes assumes two bytes per number whatever the dtype.

Most published KV-cache arithmetic is for fp16, so the 2 gets hard-coded; every float32, float64
or 8-bit cache is then mis-sized.
"""

CAUGHT_BY = ["test_kv_cache_bytes_formula", "test_kv_cache_bytes_every_dtype"]
EDITS = [
    (
        "per_token = 2 * n_layers * n_kv_heads * head_dim * dtype.itemsize",
        "per_token = 2 * n_layers * n_kv_heads * head_dim * 2",
    ),
]
