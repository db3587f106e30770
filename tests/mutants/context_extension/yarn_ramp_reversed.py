"""Bug: the YaRN ramp is reversed: fast pairs get interpolated and slow pairs kept.

Transformers names the weight inv_freq_extrapolation_factor = 1 - ramp, and it is easy to put it
on the wrong term; the high-frequency pairs that encode word order are then blurred.
"""

CAUGHT_BY = ["test_yarn_known_values", "test_yarn_inv_freq_matches_oracle"]
EDITS = [
    (
        "inv_freq = original * (1 - ramp) + (original / factor) * ramp",
        "inv_freq = original * ramp + (original / factor) * (1 - ramp)",
    ),
]
