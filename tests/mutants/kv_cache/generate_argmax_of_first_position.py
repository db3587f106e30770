"""Bug: generate picks the next token from the logits of the first position, not the last.

In the decoding steps the model returns one position, so first and last coincide; only the token
after the prefill, which must come from the prompt's last position, is wrong.
"""

CAUGHT_BY = ["test_generate_matches_the_uncached_generator"]
EDITS = [
    ("out[:, i] = logits[:, -1].argmax(dim=-1)", "out[:, i] = logits[:, 0].argmax(dim=-1)"),
]
