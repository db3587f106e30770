"""Bug: position interpolation multiplies the frequencies by the factor instead of dividing.

"Scale by the factor" is ambiguous; multiplying squeezes the wavelengths, so positions turn
factor times faster and the model leaves its trained range even sooner.
"""

CAUGHT_BY = ["test_scaled_frequencies_known_values", "test_linear_scaled_inv_freq_matches_oracle"]
EDITS = [
    (
        "return (_inv_freq64(head_dim, base) / factor)",
        "return (_inv_freq64(head_dim, base) * factor)",
    ),
]
