"""Cheat: rope_cos_sin in Python, the integer positions read 256 at a time.

`.tolist()` of floating-point tensors is limited; positions are integers, and taken a slice at a
time they become Python numbers whose products with the frequencies, cosines and sines run where
no counter sees them. Caught because for rope_cos_sin integer positions count toward the limit
too, and the limit holds for the total a call turns into lists, in one piece or in many.
"""

KATA = "context_extension"
TESTS = ["test_rope_cos_sin_of_a_long_prompt"]
EXPECT = "integer or floating-point elements in this call (more than 256, in one piece or in many)"
REPLACE = {
    "rope_cos_sin": """
        def rope_cos_sin(positions, inv_freq):
            if positions.dim() != 1:
                raise ValueError(f"positions: expected a 1-D tensor [N], got {positions.dim()}-D")
            if inv_freq.dim() != 1:
                raise ValueError(f"inv_freq: expected a 1-D tensor [D/2], got {inv_freq.dim()}-D")
            freqs = inv_freq.tolist()  # D/2 floats: within the limit
            flat = positions.flatten()
            rows_cos, rows_sin = [], []
            for start in range(0, flat.numel(), 256):
                for p in flat[start : start + 256].tolist():
                    angles = [float(p) * f for f in freqs]
                    rows_cos.append([math.cos(a) for a in angles] * 2)
                    rows_sin.append([math.sin(a) for a in angles] * 2)
            shape = (len(rows_cos), 2 * len(freqs))
            cos = torch.tensor(rows_cos, dtype=torch.float32).reshape(shape)
            sin = torch.tensor(rows_sin, dtype=torch.float32).reshape(shape)
            return cos, sin
    """,
}
