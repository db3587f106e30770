"""Bug: generate makes its KVCache in the default dtype, float32, whatever the model's dtype.

With a float32 or float64 reference model in mind the dtype argument is left out; a float16 or
bfloat16 model then hands the cache keys it was not made for.
"""

CAUGHT_BY = ["test_generate_in_every_dtype"]
EDITS = [
    (
        "c.n_layers, B, c.n_kv_heads, c.head_dim, T + max_new_tokens, weight.dtype, weight.device",
        "c.n_layers, B, c.n_kv_heads, c.head_dim, T + max_new_tokens, device=weight.device",
    ),
]
