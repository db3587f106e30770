"""Bug: each cache is made with room for its model's config.max_seq_len tokens.

The model's limit is the obvious size to reserve, and the decoding never overflows it; but the
README sizes each cache to T + max_new_tokens, and a model with a long context then reserves
memory for thousands of tokens to decode a handful.
"""

CAUGHT_BY = ["test_caches_hold_room_for_this_decoding_only"]
EDITS = [
    (
        "c.n_layers, 1, c.n_kv_heads, c.head_dim, max_seq_len, weight.dtype, weight.device",
        "c.n_layers, 1, c.n_kv_heads, c.head_dim, c.max_seq_len, weight.dtype, weight.device",
    ),
]
