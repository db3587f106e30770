"""Bug: the RoPE frequencies are computed in float32, 1 / base ** (arange(0, D, 2).float() / D).

That is how many model files write it, and at base 10^4 it looks right; but the power of a
float32 exponent is several float32 steps off the float64 value at large bases (10^6, 10^12).
"""

CAUGHT_BY = ["test_rope_inv_freq_is_the_float64_value_rounded_once"]
EDITS = [
    (
        "return _inv_freq64(head_dim, base).to(torch.float32)  # (D/2,)",
        "return 1.0 / (float(base) ** (torch.arange(0, head_dim, 2).float() / head_dim))",
    ),
]
