"""Bug: YaRN's attention factor misses the factor <= 1 case: 0.1 * ln(factor) + 1 always.

For a factor below 1 this shrinks the logits below 1x, although nothing was stretched;
Transformers returns 1.0 there.
"""

CAUGHT_BY = ["test_yarn_known_values", "test_yarn_inv_freq_matches_oracle"]
EDITS = [
    (
        "attention_factor = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0",
        "attention_factor = 0.1 * math.log(factor) + 1.0",
    ),
]
