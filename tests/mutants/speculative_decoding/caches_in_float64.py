"""Bug: both caches are made in float64, the dtype of the tests' models.

It works while target and draft are float64; a float32 or bfloat16 draft then writes keys of
another dtype into its cache, and the cache refuses them (or, with a lenient cache, converts
every step).
"""

CAUGHT_BY = ["test_a_draft_in_another_dtype"]
EDITS = [
    (
        "c.n_layers, 1, c.n_kv_heads, c.head_dim, max_seq_len, weight.dtype, weight.device",
        "c.n_layers, 1, c.n_kv_heads, c.head_dim, max_seq_len, torch.float64, weight.device",
    ),
]
