"""Bug: YaRN's attention factor uses log10 instead of the natural log.

"0.1 * log(s) + 1" reads ambiguous on paper; math.log is the natural log, the paper's fit.
"""

CAUGHT_BY = ["test_yarn_known_values", "test_yarn_inv_freq_matches_oracle"]
EDITS = [
    (
        "attention_factor = 0.1 * math.log(factor)",
        "attention_factor = 0.1 * math.log10(factor)",
    ),
]
