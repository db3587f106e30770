"""Bug: generate makes a fresh KVCache for every decoding step.

Written as "cache = KVCache(...)" inside the loop: each new token is then placed at position 0
and sees only itself, so from the second new token on the output is wrong.
"""

CAUGHT_BY = [
    "test_generate_calls_the_model_once_per_token",
    "test_generate_matches_the_uncached_generator",
]
EDITS = [
    (
        "logits = model(out[:, i : i + 1], cache)  # (B, 1, vocab): one token at a time",
        "cache = KVCache(\n"
        "                c.n_layers, B, c.n_kv_heads, c.head_dim, T + max_new_tokens, "
        "weight.dtype\n"
        "            )\n"
        "            logits = model(out[:, i : i + 1], cache)",
    ),
]
