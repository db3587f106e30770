"""Bug: kv_cache_bytes counts the keys but forgets the values.

The name says "KV", but the arithmetic is easy to write with one tensor in mind: every answer
comes out half the truth.
"""

CAUGHT_BY = ["test_kv_cache_bytes_of_real_models", "test_kv_cache_bytes_formula"]
EDITS = [
    (
        "per_token = 2 * n_layers * n_kv_heads * head_dim * dtype.itemsize",
        "per_token = n_layers * n_kv_heads * head_dim * dtype.itemsize",
    ),
]
