"""Bug: rope_inv_freq uses base ** (-i / d) for i = 0 .. d/2 - 1 instead of base ** (-2i / d).

Writing torch.arange(d // 2) / d where torch.arange(0, d, 2) / d was meant is an easy slip: the
slowest pair then turns sqrt(base) times too fast and the model's long-range pairs are wrong.
"""

CAUGHT_BY = ["test_rope_inv_freq_known_values", "test_rope_inv_freq_matches_oracle"]
EDITS = [
    (
        "exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim",
        "exponents = torch.arange(head_dim // 2, dtype=torch.float64) / head_dim",
    ),
]
