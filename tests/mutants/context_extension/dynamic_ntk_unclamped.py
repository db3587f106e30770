"""Bug: dynamic NTK uses L = seq_len without clamping it to at least original_max_len.

Short inputs then get a base below the trained one (or a negative one, hence NaN), so a model
that worked on short prompts changes behaviour on them. Transformers clamps for this reason.
"""

CAUGHT_BY = [
    "test_scaled_frequencies_known_values",
    "test_dynamic_ntk_is_plain_rope_within_the_trained_length",
]
EDITS = [
    (
        "length = max(seq_len, original_max_len)",
        "length = seq_len",
    ),
]
