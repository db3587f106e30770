"""Bug: generate feeds the whole sequence to the model at every step.

The tokens are right, so it looks finished; but the cache is never used and the work per step
grows with the length: quadratic generation, the very thing a KV cache exists to avoid.
"""

CAUGHT_BY = ["test_generate_flops_grow_linearly", "test_generate_calls_the_model_once_per_token"]
EDITS = [
    (
        "logits = model(out[:, i : i + 1], cache)  # (B, 1, vocab): one token at a time",
        "logits = model(out[:, : i + 1])  # the whole sequence again, no cache",
    ),
]
